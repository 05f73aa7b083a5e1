"""Token ids: :class:`~.tokenizer.KimiTokenizer` (tiktoken with the official rules and special-token policy)
and :mod:`.rendered` (:func:`render_tokens`, :func:`render_ids`, :func:`extend_tokens`: ids built from the
renderer's own layout, spans, training masks). How a family's text is encoded is the family record's
``segment_wise`` (K2: the whole text with markers special, :mod:`.rendered`; K3: segment by segment,
:mod:`.segments`); :mod:`.vocabulary` refuses a tokenizer without the family's special tokens."""

from .rendered import RenderedTokens, Span, extend_tokens, render_ids, render_tokens
from .tokenizer import KimiTokenizer

__all__ = ["render_tokens", "render_ids", "extend_tokens", "RenderedTokens", "Span", "KimiTokenizer"]
