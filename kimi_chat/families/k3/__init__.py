"""The Kimi-K3 family: XTML, ``<|open|>TAG attrs<|sep|>`` … ``<|close|>TAG<|sep|>``, turns ended by ``<|end_of_msg|>``.

Dialect: Kimi-K3 (its record in :mod:`.dialects`, with a :class:`~.spec.K3Spec`). Modules: :mod:`.family` (the
family's record, ``FAMILY``), :mod:`.spec`, :mod:`.dialects` (``KIMI_K3``, ``RECORDS``), :mod:`.inputs` (the
encoder's input handling), :mod:`.render` (the official encoder's segments), :mod:`.tokens` (segment-wise ids), :mod:`.format` (the output format as data),
:mod:`.tags` (the tag lexer), :mod:`.calls` (typed arguments), :mod:`.grammar`, :mod:`.lint`, :mod:`.oracle`
(the release's encoder).

This ``__init__`` imports nothing: the record (:mod:`.dialects`) imports :mod:`.spec` and the record class
without loading the family's stages.
"""
