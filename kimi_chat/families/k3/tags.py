"""A streaming tag lexer (Kimi-K3 XTML): markers -> tags ``<|open|>NAME attrs<|sep|>``, ``<|close|>NAME<|sep|>``.

It runs a :class:`~kimi_chat.output.lexer.MarkerLexer` over the chunks and builds tag tokens out of
its markers, with the interface of the marker lexer (``feed``, ``pending``, ``flush``,
``flush_into``, ``start0``/``start1``), so :class:`~kimi_chat.output.StreamParser` drives either.

* An opening (or closing) marker is held back with the text after it until its ``<|sep|>``; the tag
  is then one token: ``on_marker(class, whole tag text)``, its attributes in :attr:`TagLexer.attrs`.
  In a long chunk a complete tag (no marker start character in its body) is found by one search (the
  marker lexer's ``compound`` token), with the same calls; a tag's reading is cached (tags repeat).
* Bounded: a tag body longer than ``TagSet.max_len`` characters, a marker other than ``<|sep|>``
  before the ``<|sep|>``, or the end of the input, release the held tag (nothing is lost: every
  character goes to ``on_text`` or ``on_marker``). Its *head* (the tag name, and for an opening tag
  its complete attributes) never becomes text: a known tag whose ``<|sep|>`` is missing
  (``<|close|>think<|open|>response<|sep|>``; an opening tag's name run into the text after it,
  ``<|open|>responseHello``, too) is that tag, warned ``tag_without_sep``; another head
  goes with the marker as one stray (``<|close|>thx``; a name is at most 32 characters); only the
  text after the head is text.
* The end of the input inside a prefix of a tag (``<|close|>thi``, ``<|open|>call tool="f``,
  ``<|close|>think<|se``) is a tag cut short: ``on_marker(CUT, text)`` (the parser drops it and the
  turn is truncated).
* A tag with an unknown name or malformed attributes, and a ``<|sep|>`` outside a tag, are stray
  (``on_marker(STRAY, text)``: the parser drops them with a warning that carries their text).
* ``on_marker`` or ``on_text`` may return ``True`` (the turn ended there): the lexer stops, and
  :meth:`TagLexer.feed` returns the rest unlexed, a held tag's text included (so nothing after the
  end is read as a tag, nor warned as a repaired one, however the input is chunked).
* Attribute values are unescaped (``&quot;`` -> ``"``, ``&amp;`` -> ``&``), as ``encoding_k3`` escapes them.
"""

from __future__ import annotations

import re
from typing import Any

from collections.abc import Callable

from ...caches import LRUCache
from ...output.peg import CUT, STRAY, MarkerTable
from ...output.lexer import MarkerLexer, OnMarker, OnText, Real

__all__ = ["TagLexer", "parse_attributes", "unescape"]

_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_OPEN_BODY = re.compile(rf"\A({_NAME})((?:\s+{_NAME}=\"[^\"]*\")*)\s*\Z")
_OPEN_HEAD = re.compile(rf"({_NAME})((?:\s+{_NAME}=\"[^\"]*\")*)")
"""The head of an opening tag: its name and its complete attributes."""
_CLOSE_HEAD = re.compile(_NAME)
_NAME_RUN = re.compile(r"[A-Za-z0-9_.\-]*")
_ATTRS_PREFIX = re.compile(rf"(?:\s+{_NAME}=\"[^\"]*\")*(?:\s+(?:{_NAME}(?:=(?:\"[^\"]*)?)?)?)?\Z")
"""A prefix of an opening tag's attributes (after its name), up to the end of the text."""
_MAX_NAME = 32
"""The longest run of name characters after a tag marker read as a (malformed) tag name."""
_ATTR = re.compile(rf"({_NAME})=\"([^\"]*)\"")
_ENTITY = re.compile(r"&(quot|amp);")


def unescape(value: str) -> str:
    """An attribute value as written by ``encoding_k3``, unescaped (one pass: ``&amp;quot;`` is ``&quot;``)."""
    return _ENTITY.sub(lambda m: '"' if m.group(1) == "quot" else "&", value) if "&" in value else value


def parse_attributes(text: str) -> dict[str, str]:
    """``key="value"`` pairs of a tag body after its name, values unescaped (the first of a repeated key wins)."""
    out: dict[str, str] = {}
    for m in _ATTR.finditer(text):
        out.setdefault(m.group(1), unescape(m.group(2)))
    return out


class TagLexer:
    """Tags out of a stream of text chunks (see the module docstring).

    ``table``: the marker table (``machine.markers``); ``tags``: the format's
    :class:`~kimi_chat.families.k3.format.TagSet`. After ``on_marker`` was called for a tag, ``name`` and
    ``attrs`` are its name and attributes.
    """

    def __init__(self, table: MarkerTable, tags: Any,
                 warn: Callable[[str, str, str], None] | None = None) -> None:
        key = (table.start_chars, tags.open, tags.close, tags.sep, tags.max_len)
        self._inner = MarkerLexer(table, (tags.open[0], _WHOLE_TAGS.get_or_compute(key, lambda: _whole_tags(*key)),
                                          self._whole_tag))
        self._classes = table.classes
        self.warn = _none if warn is None else warn
        """``warn(kind, message, text)``: called just before ``on_marker`` of a repaired tag."""
        self.table = table
        self.tags = tags
        self.start0 = self._inner.start0
        self.start1 = self._inner.start1
        self.name = ""
        self.attrs: dict[str, str] = {}
        self._opener: str | None = None  # the held tag marker, if a tag is open
        self._body = ""  # the held tag's text after its marker (at most max_len + a piece: joined as it comes)
        self._on_text: OnText = _none
        self._on_marker: OnMarker = _none
        self._after: list[str] | None = None  # a released tag stopped the parser: the rest, collected
        known = _READINGS.get(key)
        if known is None or known[0] is not tags:
            known = (tags, {})
            _READINGS.put(key, known)
        self._known: dict[str, Any] = known[1]  # this tag set's tags by their text, classified (_classify_shared)

    @property
    def pending(self) -> str:
        """Everything held back: an open tag's marker and text, and the marker lexer's suffix."""
        if self._opener is None:
            return self._inner.pending
        return self._opener + self._body + self._inner.pending

    def may_start(self, text: str) -> bool:
        """Whether ``text`` must be scanned."""
        return self._opener is not None or self._inner.may_start(text)

    def feed(self, text: str, on_text: OnText, on_marker: OnMarker, real: Real | None = None,
             base: int = 0) -> str | None:
        """Lex ``pending + text`` (as :meth:`MarkerLexer.feed`, ``real`` and ``base`` included):
        returns ``None``, or the unscanned rest (the held tag included) if ``on_marker`` returned ``True``."""
        self._on_text, self._on_marker = on_text, on_marker
        inner = self._inner
        if self._opener is not None and real is None and not inner.pending and text and self.start0 not in text \
                and self.start1 not in text:  # the text of an open tag, no marker in it: what the scan would say
            self._text(text)
            rest = None
        else:
            if real is not None and self._opener is not None:
                base += len(self._opener) + len(self._body)
            rest = inner.feed(text, self._text, self._marker, real, base)
        if self._after is not None:  # a released tag ended the turn: what came after it is the rest
            after, self._after = self._after, None
            rest = "".join(after) + (rest if rest is not None else self._inner.flush())
        elif rest is not None and self._opener is not None:  # cannot happen: a tag stops only when it ends
            rest = self.flush() + rest
        return rest

    def flush(self) -> str:
        """Give up everything held as raw text (the parser is ignoring the rest)."""
        p = self.pending
        self._opener, self._body = None, ""
        self._inner.flush()
        return p

    def flush_into(self, on_text: OnText, on_marker: OnMarker) -> None:
        """The input ended: the marker lexer's suffix is text; a tag still open is either cut short
        (a prefix of a tag: ``on_marker(CUT, its text)``) or released by its head (see the module
        docstring)."""
        self._on_text, self._on_marker = on_text, on_marker
        p = self._inner.flush()
        if self._opener is not None and self._cut(self._opener, self._body, p):
            whole = self._opener + self._body + p
            self._opener, self._body = None, ""
            on_marker(CUT, whole)
            return
        if p:
            self._text(p)
        if self._opener is not None:
            self._release()
        if self._after is not None:  # the released tag ended the turn: the parser ignores the rest
            after, self._after = "".join(self._after), None
            if after:
                on_text(after)

    # ------------------------------------------------------------------------------ internals

    def _text(self, piece: str) -> None:
        if self._after is not None:
            self._after.append(piece)
            return
        if self._opener is None:
            if self._on_text(piece):  # the turn ended in this text: the rest is not lexed
                self._after = []
            return
        self._body += piece
        if len(self._body) > self.tags.max_len:
            self._release()

    def _cut(self, opener: str, body: str, pending: str) -> bool:
        """Whether ``opener + body + pending`` (the input ended there) is a proper prefix of a tag."""
        tags = self.tags
        if pending:  # a marker prefix after the body: the tag's <|sep|> was being written
            return tags.sep.startswith(pending) and self._classify(opener, body) is not None
        names = tags.open_classes if opener == tags.open else tags.close_classes
        run = _NAME_RUN.match(body).end()  # type: ignore[union-attr]
        if run == len(body):
            return any(n.startswith(body) for n in names)
        return opener == tags.open and body[:run] in names and _ATTRS_PREFIX.match(body, run) is not None

    def _release(self) -> None:
        """The held tag cannot be completed: its head is the tag (repaired) or a stray, the rest text."""
        opener, body = self._opener, self._body
        self._opener, self._body = None, ""
        tags = self.tags
        is_open = opener == tags.open
        classes = tags.open_classes if is_open else tags.close_classes
        m = (_OPEN_HEAD if is_open else _CLOSE_HEAD).match(body, 0, tags.max_len)
        name = "" if m is None else m.group(1) if is_open else m.group()
        head, attrs = ("", "") if m is None else (m.group(), m.group(2) if is_open else "")
        cls = classes.get(name)
        if cls is None and is_open:  # the text ran into the name: <|open|>responseHello
            known = next((n for n in classes if name.startswith(n)), None)
            if known is not None:
                name, head, attrs, cls = known, known, "", classes[known]
        if cls is not None:
            self.name, self.attrs = name, parse_attributes(attrs)
            self.warn("tag_without_sep", f"tag {opener}{head} without its {tags.sep}: read as that tag",
                      opener + head)  # type: ignore[operator]
        elif len(name) > _MAX_NAME:  # not a tag name: the marker alone is stray, the text after it text
            head = ""
        if self._on_marker(STRAY if cls is None else cls, opener + head):  # type: ignore[operator]
            self._after = [body[len(head):]]  # the turn ended: the rest is not lexed (feed returns it)
        elif len(body) > len(head) and self._on_text(body[len(head):]):
            self._after = []

    def _classify(self, opener: str, body: str) -> tuple[str, str, dict[str, str]] | None:
        """``(class, name, attributes)`` of the tag ``opener + body + sep``, or ``None`` (stray); the
        attributes are a new dict each time. Tags repeat: the answer is cached per ``(opener, body)``
        (for this lexer's tag set: an entry made for another is computed again)."""
        found = self._classify_shared(opener, body)
        return None if found is None else (found[0], found[1], dict(found[2]))

    def _classify_shared(self, opener: str, body: str, whole: str | None = None) -> tuple[str, str, dict[str, str]] | None:
        """:meth:`_classify`'s answer as cached: its attributes dict is shared (the caller copies it). The
        cache key is the tag's text, ``whole`` (``opener + body + sep``; the tag set fixes the three markers)."""
        key = opener + body + self.tags.sep if whole is None else whole
        known = self._known
        found = known.get(key, _none)
        if found is _none:
            found = self._classify_new(opener, body)
            if len(known) < _MAX_KNOWN:
                known[key] = found  # a plain dict: a racing thread stores the same answer
        return found  # type: ignore[no-any-return]

    def _classify_new(self, opener: str, body: str) -> tuple[str, str, dict[str, str]] | None:
        tags = self.tags
        if opener == tags.open:
            m = _OPEN_BODY.match(body)
            if m is not None:
                cls = tags.open_classes.get(m.group(1))
                if cls is not None:
                    return cls, m.group(1), parse_attributes(m.group(2))
            return None
        cls = tags.close_classes.get(body)
        return None if cls is None else (cls, body, {})

    def _marker(self, cls: str, spelling: str) -> bool | None:
        tags = self.tags
        if self._after is not None:
            self._after.append(spelling)
            return True
        if self._opener is not None:
            if spelling == tags.sep:
                return self._tag(spelling)
            self._release()
            if self._after is not None:
                self._after.append(spelling)
                return True
        if spelling == tags.open or spelling == tags.close:
            self._opener = spelling
            return None
        return self._on_marker(cls, spelling)

    def _whole_tag(self, m: re.Match[str]) -> int | None:
        """A complete tag found by one search of the marker lexer (its ``compound``): the calls its marker,
        body and ``<|sep|>`` make, one by one (while nothing is held: the tag at once). Returns where the
        lexer stops (after the marker that stopped it), or ``None``."""
        if self._opener is None and self._after is None:  # the tag at once: what _tag does, read from the match
            whole = m.group()
            found = self._known.get(whole, _none)  # a tag read before: its text is the cache key
            if found is _none:
                body, close_body = m.group("open_body", "close_body")
                found = (self._classify_shared(self.tags.open, body, whole) if body is not None
                         else self._classify_shared(self.tags.close, close_body, whole))
            if found is None:
                stop = self._on_marker(STRAY, whole)
            else:
                cls, self.name, attrs = found
                self.attrs = dict(attrs)
                stop = self._on_marker(cls, whole)
            return m.end() if stop else None
        body, close_body = m.group("open_body", "close_body")
        opener, sep = self.tags.open, self.tags.sep
        if body is None:
            opener, body = self.tags.close, close_body
        if self._marker(self._classes[opener], opener):
            return m.start() + len(opener)
        if body:
            self._text(body)
        return m.end() if self._marker(self._classes[sep], sep) else None

    def _tag(self, sep: str) -> bool | None:
        opener = self._opener
        body = self._body
        self._opener, self._body = None, ""
        whole = opener + body + sep  # type: ignore[operator]
        found = self._classify(opener, body)  # type: ignore[arg-type]
        if found is None:
            return self._on_marker(STRAY, whole)
        cls, self.name, self.attrs = found
        return self._on_marker(cls, whole)


_READINGS: LRUCache[tuple[Any, dict[str, Any]]] = LRUCache("k3.tag_readings", 16)
"""Per tag set: ``(tag set, {tag text: what _classify says})``, shared by its lexers (one cache look-up
per parse, not one per tag: tags repeat within a turn and across requests), at most :data:`_MAX_KNOWN` tags each."""
_MAX_KNOWN = 512
_WHOLE_TAGS: LRUCache[str] = LRUCache("k3.whole_tag_patterns", 16)
"""The regex of a complete tag (:func:`_whole_tags`), per tag set and marker start characters."""


def _whole_tags(start_chars: str, open_: str, close: str, sep: str, max_len: int) -> str:
    """A complete tag, as the marker lexer's compound token: the marker, a body without a marker start
    character (so no marker is in it) of at most ``max_len`` characters (a longer one is released), the
    ``<|sep|>``; one alternative per marker, each beginning with its literal text."""
    body = "[^" + re.escape(start_chars) + "]{0," + str(max_len) + "}"
    o, c, s = re.escape(open_), re.escape(close), re.escape(sep)
    return f"{o}(?P<open_body>{body}){s}|{c}(?P<close_body>{body}){s}"


def _none(*args: object) -> None:
    return None
