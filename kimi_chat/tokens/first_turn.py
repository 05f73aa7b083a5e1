"""The ids of a K2-family prompt with its first turn's body cached per tokenizer (issue 22).

A server declares the same tools (or the same system prompt) on every request: the first turn's body,
between ``<|im_middle|>`` and ``<|im_end|>``, is the same text each time, and the biggest part of a
short request's encoding. :func:`encode_whole` encodes the prompt as the tokenizer does, with that
body's ids looked up by its exact text (a bounded LRU per tokenizer, :mod:`kimi_chat.caches`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import markers as M
from ..caches import LRUCache, PerTokenizer

if TYPE_CHECKING:
    from .tokenizer import KimiTokenizer

__all__ = ["encode_whole"]

_FIRST_BODIES: PerTokenizer[LRUCache[list[int]]] = PerTokenizer("tokens.first_turn_ids")
"""Per tokenizer: the ids of the first turn's body (the tools' declaration, or a system prompt: the
same on every request of a server), by its exact text (at most 16 per tokenizer)."""
_FIRST_BODY_MIN = 256
"""Shorter first-turn bodies are encoded with the rest (no lookup)."""
_FIRST_BODY_MAX = 1 << 16
"""Longer ones are not kept (each entry's memory bounded)."""
_IM_MIDDLE, _IM_END = M.IM_MIDDLE.text, M.IM_END.text


def encode_whole(tok: "KimiTokenizer", text: str) -> list[int]:
    """``tok.encoding.encode(text)`` with every special-token text special (``text`` has no long-input
    cut), the first turn's body from :data:`_FIRST_BODIES`. Exact: the body lies between two special
    tokens (``<|im_middle|>`` and ``<|im_end|>``), and the encoder encodes the text between special
    tokens piece by piece, so its ids do not depend on what surrounds it."""
    enc, names = tok.encoding, tok._special_names
    h = text.find(_IM_MIDDLE) + len(_IM_MIDDLE)
    end = text.find(_IM_END, h) if h >= len(_IM_MIDDLE) else -1
    if not _FIRST_BODY_MIN <= end - h <= _FIRST_BODY_MAX:
        return enc.encode(text, allowed_special=names, disallowed_special=())
    body = text[h:end]
    cache = _FIRST_BODIES.get(tok, _body_cache)
    body_ids = cache.get(body)
    if body_ids is None:
        body_ids = enc.encode(body, allowed_special=names, disallowed_special=())
        cache.put(body, body_ids)
    return [*enc.encode(text[:h], allowed_special=names, disallowed_special=()), *body_ids,
            *enc.encode(text[end:], allowed_special=names, disallowed_special=())]


def _body_cache(tok: "KimiTokenizer") -> LRUCache[list[int]]:
    return LRUCache(None, 16)
