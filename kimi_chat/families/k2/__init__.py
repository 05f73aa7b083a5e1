"""The Kimi-K2 family: ``<|im_*|>`` turns, ``<think>`` reasoning, ``<|tool_calls_section_begin|>`` call sections.

Dialects: Kimi-K2-Instruct (rev1, rev2), -0905, -Thinking, Kimi-K2.5, Kimi-K2.6, Kimi-K2.7-Code
(their records in :mod:`.dialects`, each with a :class:`~.spec.K2Spec`). Modules: :mod:`.family` (the family's
record, ``FAMILY``), :mod:`.spec` (the switches a K2 dialect record sets), :mod:`.dialects` (the records,
``RECORDS``, which the registry registers), :mod:`.render` (the prompt, as the Jinja
templates write it), :mod:`.tools_ts` (K2.5/K2.6's TypeScript tool declarations), :mod:`.format` (the output
format as data), :mod:`.calls` (call headers, arguments), :mod:`.grammar` (GBNF of one request).

This ``__init__`` imports nothing: the records (:mod:`.dialects`) import :mod:`.spec` and the record class
without loading the family's stages.
"""
