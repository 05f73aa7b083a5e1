"""The ids of ordinary text pieces, cached per tokenizer.

Token ids are built piece by piece: the text between two special tokens of a K2 prompt (tiktoken splits
at special tokens, so a piece's ids do not depend on its neighbours), each text segment of a K3 prompt.
A piece's ids are ``encoding.encode_ordinary(piece)``, a pure function of its text, so they are cached by
text: a conversation sent again with one more turn (what a chat client does on every request) encodes
only the new turn's pieces; its history is a dictionary lookup per piece (a long piece from its third
encoding on: below).

Bounded and thread-safe (as every cache of :mod:`kimi_chat.caches`): pieces up to :data:`SHORT_CHARS`
characters in a dict of at most :data:`SHORT_ENTRIES` entries (emptied when full; at most about 10 MB),
longer ones up to :data:`LONG_CHARS` in a :class:`~kimi_chat.caches.Generations` (an approximate
least-recently-used map in two generations, whose ``put`` is one dict store) holding at most
:data:`BUDGET_CHARS` characters of text per tokenizer (about 10 MB with their ids: a token is about 4
characters and an id in a list about 36 bytes); longer pieces are encoded every time.

A long piece is kept from its second encoding on: the first only records its hash (in a set of at most
:data:`SEEN_ENTRIES`, emptied when full). A data pipeline renders conversations never seen before: nearly
every long piece is new and never comes back, and keeping each one (its ids held, the map churning through
its budget) cost more than the lookups ever saved; a piece that comes back (a system prompt, the tools, a
conversation sent again) is kept on its second encoding and found from its third. The hash only decides
whether to keep a piece: the ids are always ``encode_ordinary`` of the piece or those stored under that very
text.
"""

from __future__ import annotations

import re
from typing import Any

from ..caches import Generations, PerTokenizer

__all__ = ["TextIds", "text_ids", "name_shape", "SHORT_CHARS", "SHORT_ENTRIES", "LONG_CHARS", "BUDGET_CHARS",
           "SEEN_ENTRIES"]

SHORT_CHARS = 48
"""Pieces up to this length go in the short-piece dict (names, tag syntax, short answers)."""
SHORT_ENTRIES = 1 << 16
"""The short-piece dict is emptied when it holds this many pieces."""
LONG_CHARS = 25_000
"""Longer pieces are not cached (at most the official long-run cut: ``MAX_NO_WHITESPACES_CHARS``)."""
BUDGET_CHARS = 1 << 20
"""The characters of long pieces kept per tokenizer (those not used for a generation, half of it, go)."""
SEEN_ENTRIES = 1 << 15
"""Hashes of long pieces encoded once (not kept yet), per tokenizer: the set is emptied when it holds this
many (about 2 MB)."""


# Every Kimi special-token name has one of these shapes. None holds a "<" or "[" after its first char,
# so no name can start inside a match: the names are exactly the matches that are names (leftmost,
# non-overlapping, as tiktoken finds them). Configs with other names fall back to a literal alternation.
_SHAPE = re.compile(r"<\|[^|<>\[\]\s]{1,100}\|>|\[[^\[\]<>|\s]{1,32}\]|</?[A-Za-z_]{1,32}>")


def name_shape(names: Any) -> re.Pattern[str]:
    """A pattern whose matches that are special-token ``names`` are exactly the names in a text, as
    tiktoken finds them (leftmost, non-overlapping): the Kimi shape, or the names' alternation."""
    if all(_SHAPE.fullmatch(n) for n in names):
        return _SHAPE
    return re.compile("|".join(map(re.escape, sorted(names, key=len, reverse=True))))


class TextIds:
    """``encode_ordinary`` of one tokenizer's encoding, cached by text (module docstring). The lists
    returned are shared with the cache: extend with them, never change them."""

    __slots__ = ("short", "long", "seen", "shape", "prefix_free", "id_to_name", "_encode", "_split", "_specials")

    def __init__(self, tokenizer: Any) -> None:
        self.short: dict[str, list[int]] = {}
        """Short piece -> ids (read it directly in a hot loop; :meth:`ids` on a miss)."""
        self.long: Generations[list[int]] = Generations(None, BUDGET_CHARS)
        """Long piece -> ids, weighed by length."""
        self.seen: set[int] = set()
        """Hashes of the long pieces encoded once and not kept (module docstring)."""
        self._encode = tokenizer.encoding.encode_ordinary
        self._specials: dict[str, int] = tokenizer.special_tokens
        self.shape = name_shape(self._specials)
        """Where special-token names can be (:func:`name_shape`)."""
        ordered = sorted(self._specials)  # a prefix sorts right before the names it starts
        self.prefix_free = not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))
        """No special-token name starts another (then a name ending where a text ends is matched there in
        any longer text, and the names the shape finds are the ones tiktoken finds)."""
        self.id_to_name = {i: n for n, i in self._specials.items()}
        """Special id -> its name."""
        self._split = re.compile(f"({self.shape.pattern})").split

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
            h = hash(s)  # computed by the lookup: cached in the str
            seen = self.seen
            if h in seen:  # encoded before: keep it
                self.long.put(s, toks)
            else:
                if len(seen) >= SEEN_ENTRIES:
                    seen.clear()
                seen.add(h)
        return toks

    def with_specials(self, s: str) -> list[int]:
        """``encoding.encode(s)`` with every special-token name in ``s`` special: the text between the names
        by :meth:`ids` (cached), so no per-call set of allowed names (tiktoken converts that set on every
        call: about 20 µs). A new list."""
        pieces = self._split(s)
        ids = self.ids
        short = self.short.get  # most pieces: names, roles, tag syntax (a long piece's hash, computed here, is kept)
        get = self._specials.get
        out: list[int] = []
        carry = ""  # text before a match that is no name: it joins the text after it
        for k in range(1, len(pieces), 2):
            m = pieces[k]
            i = get(m)
            if i is None:
                carry += pieces[k - 1] + m
                continue
            t = carry + pieces[k - 1] if carry else pieces[k - 1]
            carry = ""
            if t:
                toks = short(t)
                out += ids(t) if toks is None else toks
            out.append(i)
        t = carry + pieces[-1] if carry else pieces[-1]
        if t:
            out += ids(t)
        return out

    def __len__(self) -> int:
        return len(self.short) + len(self.long)


_TEXT_IDS: PerTokenizer[TextIds] = PerTokenizer("tokens.text_ids")


def text_ids(tokenizer: Any) -> TextIds:
    """The :class:`TextIds` of ``tokenizer`` (one per tokenizer, dropped with it)."""
    return _TEXT_IDS.get(tokenizer, TextIds)
