"""Checks over prompts and templates: :mod:`.lint` (questionable input; ``strict=True`` refuses its errors),
:mod:`.verification` (identify / verify a chat template against the official renderings), :mod:`.inspection`
(``inspect_path``: what a model directory or GGUF holds), :mod:`.known_problems` (problems of other servers,
by name)."""
