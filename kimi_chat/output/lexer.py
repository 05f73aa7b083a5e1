"""A streaming marker lexer: text in chunks -> marker tokens and text runs, with hold-back.

The markers come from a format's terminal data (a :class:`kimi_chat.output.peg.MarkerTable`, e.g.
``machine.markers`` of a compiled :class:`~kimi_chat.output.peg.Machine`); this module names none.

Only the undecided suffix of a chunk (a proper prefix of some marker, at most ``max_len - 1``
characters) is held back, until the next chunk decides it or :meth:`MarkerLexer.flush` gives it up
as text. It is never lost and decided text is never looked at again: per :meth:`~MarkerLexer.feed`
the work is proportional to the chunk plus the longest marker.

API (used by :class:`kimi_chat.output.StreamParser` and by the server integrations)::

    lx = MarkerLexer(machine.markers)
    lx.feed(chunk, on_text, on_marker)  # calls on_text(piece) / on_marker(cls, spelling) in order
    lx.tokens(chunk)                    # the same, as a list of (cls or None for text, piece)
    lx.pending                          # the held-back suffix (text not decided yet)
    lx.flush()                          # the input ended: return the held-back suffix, as text

``on_marker`` may return ``True`` to stop: :meth:`~MarkerLexer.feed` then returns the rest of the
input after that marker, unscanned (the held-back suffix included), and holds nothing back.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from ..caches import LRUCache
from .peg import MarkerTable

__all__ = ["MarkerLexer", "Token", "Utf8Chunks"]

Token = tuple["str | None", str]
"""``(terminal class, spelling)`` of a marker, or ``(None, text)`` of a text run."""

OnText = Callable[[str], object]
OnMarker = Callable[[str, str], "bool | None"]
Real = Callable[[str, int], bool]
_COMPOUND: LRUCache[re.Pattern[str]] = LRUCache("output.compound_patterns", 16)
"""A compound regex joined with the markers of its start character, compiled (per the two regexes)."""
Compound = tuple[str, str, Callable[["re.Match[str]"], "int | None"]]
"""``(start character, regex, handler)``: tokens made of several markers and the text between them (K3's
tags), which a long scan finds in one search (see :class:`MarkerLexer`)."""


class MarkerLexer:
    """Cuts the markers of ``table`` out of a stream of text chunks (see the module docstring).

    ``pending`` (read-only) is the held-back suffix; ``start0`` / ``start1`` are characters a chunk
    must contain for a marker to start in it (a caller's fast path: a chunk with neither, while
    nothing is pending, is plain text).

    ``compound`` (optional): ``(start, regex, handler)``. In a long text (the scan that searches per start
    character) ``regex`` is tried before the markers that start with ``start`` (``regex|markers``: each of
    its alternatives should begin with literal text, so that the search stays a literal-prefix scan); a
    match of it (which must start with a marker and be no marker spelling) goes to ``handler(match)``
    instead of ``on_marker``: it makes the calls its markers and text would have made, and returns
    ``None``, or the offset where :meth:`feed` stops (as ``on_marker`` returning ``True`` there would).
    """

    __slots__ = ("table", "pending", "start0", "start1", "_classes", "_prefixes", "_window", "_starts",
                 "_search", "_by_start", "_compound")

    def __init__(self, table: MarkerTable, compound: Compound | None = None) -> None:
        self.table = table
        self.pending = ""
        self._classes = table.classes
        self._prefixes = table.prefixes
        self._window = table.max_len - 1
        self._starts = table.start_chars
        # with more than two start characters, "" (always found) sends every chunk through the scan
        self.start0 = table.start_chars[0] if len(table.start_chars) <= 2 else ""
        self.start1 = table.start_chars[-1]
        self._search = table.pattern.search
        self._by_start = [p.search for p in table.by_start]
        self._compound: Callable[[re.Match[str]], int | None] | None = None
        if compound is not None:  # its alternatives tried first where a marker of its start character is
            start, source, handler = compound
            k = table.start_chars.index(start)
            markers = table.by_start[k].pattern
            self._by_start[k] = _COMPOUND.get_or_compute((source, markers),
                                                         lambda: re.compile(f"{source}|{markers}")).search
            self._compound = handler

    def may_start(self, text: str) -> bool:
        """Whether ``text`` must be scanned (something is pending, or a marker may start in it)."""
        return bool(self.pending) or self.start0 in text or self.start1 in text

    def flush(self) -> str:
        """Give up the held-back suffix as text (the input ended, or the caller decided it)."""
        p, self.pending = self.pending, ""
        return p

    def flush_into(self, on_text: OnText, on_marker: OnMarker) -> None:
        """The input ended: the held-back suffix is text (``on_text``; ``on_marker`` is for lexers
        that hold markers back, :class:`kimi_chat.families.k3.tags.TagLexer`)."""
        p = self.flush()
        if p:
            on_text(p)

    def tokens(self, text: str) -> list[Token]:
        """The tokens ``text`` decides (after what was pending), in order; holds back the rest."""
        out: list[Token] = []
        append = out.append
        self.feed(text, lambda piece: append((None, piece)), lambda cls, spelling: append((cls, spelling)))
        return out

    def feed(self, text: str, on_text: OnText, on_marker: OnMarker, real: Real | None = None,
             base: int = 0) -> str | None:
        """Lex ``pending + text``: call ``on_text`` / ``on_marker`` for what is decided, hold back the
        undecided suffix. Returns ``None``, or the unscanned rest if ``on_marker`` returned ``True``.

        ``real(spelling, offset)`` (token ids known, :class:`kimi_chat.output.ids.TokenMarkers`)
        says whether the occurrence at ``offset`` (``base``: the offset of ``pending + text``) is a
        marker; if not, it is text."""
        if self.pending:
            text = self.pending + text
            self.pending = ""
        n = len(text)
        # the undecided suffix: the last marker-start character, if what follows it is a proper
        # prefix of a marker (no marker contains a start character after its first)
        hold = n
        lo = n - self._window
        if lo < 0:
            lo = 0
        for ch in self._starts:
            i = text.rfind(ch, lo)
            if i >= 0 and i < hold and text[i:] in self._prefixes:
                hold = i
        if real is not None:
            pos = self._scan_ids(text, hold, on_text, on_marker, real, base)
        elif hold > 256:
            pos = self._scan_long(text, hold, on_text, on_marker)
        else:
            pos = self._scan_dense(text, hold, on_text, on_marker)
        if pos < 0:  # stopped after the marker ending at -pos - 1
            return text[-pos - 1:]
        if pos < hold:
            on_text(text[pos:hold])
        if hold < n:
            self.pending = text[hold:]
        return None

    def _scan_dense(self, text: str, hold: int, on_text: OnText, on_marker: OnMarker) -> int:
        """Tokens of ``text[:hold]`` found by one regex (markers, or marker start characters, are
        frequent); returns where the trailing text starts (``-end - 1`` if stopped at ``end``)."""
        search = self._search
        classes = self._classes
        m = search(text, 0, hold)
        pos = 0
        while m is not None:
            s = m.start()
            if s > pos:
                on_text(text[pos:s])
            spelling = m.group()
            pos = m.end()
            if on_marker(classes[spelling], spelling):
                return -pos - 1
            m = search(text, pos, hold)
        return pos

    def _scan_ids(self, text: str, hold: int, on_text: OnText, on_marker: OnMarker, real: Real, base: int) -> int:
        """The tokens of ``text[:hold]`` when ``real`` decides which occurrences are markers (as
        :meth:`_scan_dense`; an occurrence that is not real stays in the text run)."""
        search = self._search
        classes = self._classes
        m = search(text, 0, hold)
        pos = 0
        while m is not None:
            s = m.start()
            spelling = m.group()
            if real(spelling, base + s):
                if s > pos:
                    on_text(text[pos:s])
                pos = m.end()
                if on_marker(classes[spelling], spelling):
                    return -pos - 1
            m = search(text, m.end(), hold)
        return pos

    def _scan_long(self, text: str, hold: int, on_text: OnText, on_marker: OnMarker) -> int:
        """The same tokens as :meth:`_scan_dense`, for a long text: one search per start character
        (``table.by_start``, each a C-speed literal-prefix scan, so plain text costs no Python work
        however many start characters it holds), the leftmost match taken at each step. A start
        character absent from the text (``str.find``: a ``memchr``) costs no search; a search that
        found nothing is not repeated (it would find nothing after), so once one start character is
        left the loop is a single search's."""
        searches = []
        found = []
        for ch, search in zip(self._starts, self._by_start):
            if text.find(ch, 0, hold) >= 0:
                f = search(text, 0, hold)
                if f is not None:
                    searches.append(search)
                    found.append(f)
        classes = self._classes
        compound = self._compound
        pos = 0
        while found:
            if len(found) == 1:
                return self._scan_one(text, hold, on_text, on_marker, searches[0], found[0], pos)
            m = found[0]
            for f in found:
                if f.start() < m.start():
                    m = f
            s = m.start()
            if s > pos:
                on_text(text[pos:s])
            spelling = m.group()
            pos = m.end()
            cls = classes.get(spelling)
            if cls is None:  # a compound token (no spelling is one)
                stop = compound(m)  # type: ignore[misc]
                if stop is not None:
                    return -stop - 1
            elif on_marker(cls, spelling):
                return -pos - 1
            k = 0
            while k < len(found):
                if found[k].start() < pos:
                    f = searches[k](text, pos, hold)
                    if f is None:
                        del found[k], searches[k]
                        continue
                    found[k] = f
                k += 1
        return pos

    def _scan_one(self, text: str, hold: int, on_text: OnText, on_marker: OnMarker,
                  search: Callable[..., "re.Match[str] | None"], m: "re.Match[str] | None", pos: int) -> int:
        """:meth:`_scan_long` from ``pos`` on, once one start character's search is left (``m``: its next match)."""
        classes = self._classes
        compound = self._compound
        while m is not None:
            s, end = m.span()
            if s > pos:
                on_text(text[pos:s])
            spelling = m.group()
            pos = end
            cls = classes.get(spelling)
            if cls is None:  # a compound token (no spelling is one)
                stop = compound(m)  # type: ignore[misc]
                if stop is not None:
                    return -stop - 1
            elif on_marker(cls, spelling):
                return -pos - 1
            m = search(text, pos, hold)
        return pos


class Utf8Chunks:
    """``bytes`` chunks decoded as UTF-8 across chunk boundaries (invalid bytes: U+FFFD)."""

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def decode(self, data: bytes) -> str:
        """The text of ``data``; an incomplete character at its end is kept for the next chunk."""
        return self._decoder.decode(data)

    def end(self) -> tuple[str, bytes]:
        """End the pending character, if any: ``(its text, U+FFFD, or "", the pending bytes)``."""
        pending = self._decoder.getstate()[0]
        if not pending:
            return "", b""
        rest = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return rest, pending
