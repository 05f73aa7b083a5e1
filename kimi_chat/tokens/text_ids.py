"""The ids of ordinary text pieces, cached per tokenizer.

Token ids are built piece by piece: the text between two special tokens of a K2 prompt (tiktoken splits
at special tokens, so a piece's ids do not depend on its neighbours), each text segment of a K3 prompt.
A piece's ids are ``encoding.encode_ordinary(piece)``, a pure function of its text, so they are cached by
text: a conversation sent again with one more turn (what a chat client does on every request) encodes
only the new turn's pieces; its history is a dictionary lookup per piece.

Bounded and thread-safe (as every cache of :mod:`kimi_chat.caches`): pieces up to :data:`SHORT_CHARS`
characters in a dict of at most :data:`SHORT_ENTRIES` entries (emptied when full), longer ones up to
:data:`LONG_CHARS` in a least-recently-used map holding at most :data:`BUDGET_CHARS` characters of text
per tokenizer (about 10 MB with their ids); longer pieces are encoded every time.
"""

from __future__ import annotations

from typing import Any

from ..caches import LRUCache, PerTokenizer

__all__ = ["TextIds", "text_ids", "SHORT_CHARS", "SHORT_ENTRIES", "LONG_CHARS", "BUDGET_CHARS"]

SHORT_CHARS = 48
"""Pieces up to this length go in the short-piece dict (names, tag syntax, short answers)."""
SHORT_ENTRIES = 1 << 16
"""The short-piece dict is emptied when it holds this many pieces."""
LONG_CHARS = 25_000
"""Longer pieces are not cached (at most the official long-run cut: ``MAX_NO_WHITESPACES_CHARS``)."""
BUDGET_CHARS = 1 << 21
"""The characters of long pieces kept per tokenizer (the least recently used go first)."""


class TextIds:
    """``encode_ordinary`` of one tokenizer's encoding, cached by text (module docstring). The lists
    returned are shared with the cache: extend with them, never change them."""

    __slots__ = ("short", "long", "_encode")

    def __init__(self, tokenizer: Any) -> None:
        self.short: dict[str, list[int]] = {}
        """Short piece -> ids (read it directly in a hot loop; :meth:`ids` on a miss)."""
        self.long: LRUCache[list[int]] = LRUCache(None, SHORT_ENTRIES, max_weight=BUDGET_CHARS)
        """Long piece -> ids, weighed by length."""
        self._encode = tokenizer.encoding.encode_ordinary

    def ids(self, s: str) -> list[int]:
        """The ordinary-text ids of ``s`` (special-token text in it stays text)."""
        n = len(s)
        if n <= SHORT_CHARS:
            toks = self.short.get(s)
            if toks is None:
                toks = self._encode(s)
                short = self.short
                if len(short) >= SHORT_ENTRIES:
                    short.clear()
                short[s] = toks
            return toks
        if n > LONG_CHARS:
            return self._encode(s)  # type: ignore[no-any-return]
        toks = self.long.get(s)
        if toks is None:
            toks = self._encode(s)
            self.long.put(s, toks, n)
        return toks

    def __len__(self) -> int:
        return len(self.short) + len(self.long)


_TEXT_IDS: PerTokenizer[TextIds] = PerTokenizer("tokens.text_ids")


def text_ids(tokenizer: Any) -> TextIds:
    """The :class:`TextIds` of ``tokenizer`` (one per tokenizer, dropped with it)."""
    return _TEXT_IDS.get(tokenizer, TextIds)
