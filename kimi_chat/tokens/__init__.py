"""Token ids: :class:`~.tokenizer.KimiTokenizer` (tiktoken with the official rules and special-token policy)
and :mod:`.rendered` (:func:`render_tokens`, :func:`render_ids`, :func:`extend_tokens`: ids built from the
renderer's own segments, spans, training masks). How a family's text is encoded (K2: the whole text with
markers special; K3: segment by segment) is the family's (:mod:`kimi_chat.families`)."""
