"""The warnings of one parse, in order, with repeats merged so that their memory stays bounded.

A hostile output can hold millions of stray markers (10 MB of ``[PAD]`` is two million); one
:class:`~kimi_chat.output.ParseWarning` each would retain ~50 times the input. For the kinds in
:data:`MERGED_KINDS`:

* consecutive identical warnings (same kind, message and text, no other warning between, and no
  :meth:`~WarningLog.cut`: the parser cuts at every marker it reads as structure; text between does
  not count) are one warning: ``count`` of them, ``offset`` the first one's, ``last_offset`` the last
  one's. So a merged warning never spans, e.g., the end of reasoning, where a server's stages split;
* a kind lists at most :data:`MAX_ENTRIES` entries; every further warning of that kind is merged
  into one overflow entry placed after them (``text`` ``""``, a message saying so, ``count``,
  ``offset``/``last_offset`` of the first and last merged).

Both depend only on the sequence of warnings, which is the same whole or streamed, so the merged
list is too. :meth:`WarningLog.list` costs a copy of the (short) list plus the entries whose count
grew since the last read.
"""

from __future__ import annotations

from .types import ParseWarning

__all__ = ["MERGED_KINDS", "MAX_ENTRIES", "WarningLog"]

MERGED_KINDS = frozenset({"stray_marker", "foreign_marker", "think_as_text"})
"""Warning kinds whose repeats are merged (those one input can hold without bound)."""

MAX_ENTRIES = 1000
"""Entries listed per merged kind before the rest of that kind goes into one overflow entry."""


class _Merge:
    """A listed warning that may still absorb repeats: where it is and what it counts."""

    __slots__ = ("pos", "kind", "message", "text", "offset", "count", "last")

    def __init__(self, pos: int, kind: str, message: str, text: str, offset: int) -> None:
        self.pos, self.kind, self.message, self.text = pos, kind, message, text
        self.offset, self.count, self.last = offset, 1, offset

    def warning(self) -> ParseWarning:
        return ParseWarning(self.kind, self.message, self.offset, self.text, self.count,
                            self.last if self.count > 1 else None)


class WarningLog:
    """The warnings of one parse (see the module docstring). :meth:`add` takes what the parser's
    ``warn(kind, message, offset, text="")`` callbacks get; :meth:`list` gives the warnings so far."""

    __slots__ = ("_items", "_run", "_entries", "_over", "_dirty")

    def __init__(self) -> None:
        self._items: list[ParseWarning] = []
        self._run: _Merge | None = None  # the last listed warning, if it is of a merged kind
        self._entries: dict[str, int] = {}  # merged kind -> entries listed
        self._over: dict[str, _Merge] = {}  # merged kind -> its overflow entry
        self._dirty: dict[int, _Merge] = {}  # position -> entry whose count grew since the list was updated

    def add(self, kind: str, message: str, offset: int, text: str = "") -> None:
        """One more warning (merged into a previous one where the module docstring says)."""
        items = self._items
        if kind not in MERGED_KINDS:
            self._run = None
            items.append(ParseWarning(kind, message, offset, text))
            return
        m = self._over.get(kind)
        if m is None:
            m = self._run
            if m is None or m.kind != kind or m.text != text or m.message != message:
                n = self._entries.get(kind, 0)
                if n < MAX_ENTRIES:
                    self._entries[kind] = n + 1
                    self._run = _Merge(len(items), kind, message, text, offset)
                    items.append(ParseWarning(kind, message, offset, text))
                    return
                self._run = None
                note = f"further {kind} warnings merged into one (after {MAX_ENTRIES} listed)"
                self._over[kind] = _Merge(len(items), kind, note, "", offset)
                items.append(ParseWarning(kind, note, offset))
                return
        self._dirty[m.pos] = m
        m.count += 1
        m.last = offset

    def cut(self) -> None:
        """The next warning is not merged into the last one (an overflow entry still takes its kind)."""
        self._run = None

    def list(self) -> list[ParseWarning]:
        """The warnings so far, as a new list."""
        if self._dirty:
            items = self._items
            for pos, m in self._dirty.items():
                items[pos] = m.warning()
            self._dirty = {}
        return self._items[:]
