"""What every family's renderer writes into: the prompt as parts, with marks that attribute them.

A family's prompt writer (:mod:`kimi_chat.families.k2.render`, :mod:`kimi_chat.families.k3.render`; the
record's ``write_prompt``) gets a :class:`Writer` and calls

* ``emit(s)`` for template literals (markers, role headers, fixed scaffolding: text the template
  writes whatever the input says),
* ``emit_text(s)`` for text that comes from the input (message content, names, ids, arguments,
  the tool declaration), and
* ``mark(message_index, trainable)`` where the attribution of what follows changes.

In plain mode (:func:`~kimi_chat.prompt.render`) ``emit_text`` is ``emit`` and ``mark`` does nothing;
in marked mode the writer records which parts are input text and where each mark starts, from which
:class:`Segment` pieces (attribution) and :class:`Layout` (attribution + literal/text flags, what
:mod:`kimi_chat.tokens` builds token ids from) are made.

A writer that writes the same runs of parts again and again (the markers and tag syntax of every
message) may write by **items** instead (:meth:`Writer.items`): a list of strings, each an input text
(a ``str``), a constant :class:`Run` of parts or a one-off :class:`Literal`, with marks at item
positions. The items' join is the prompt; the :class:`Layout` is unfolded from them when it is read,
and :mod:`kimi_chat.tokens.segments` encodes them directly (a run's ids once per tokenizer). A family whose official tokenizer encodes the
prompt segment by segment (Kimi-K3) writes one part per encoder segment: the markers (and image prompts)
as literals, every other segment as text, its tag names and attribute syntax included (the encoder
encodes them as ordinary text; they hold no special-token text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

__all__ = ["Segment", "Piece", "Layout", "Run", "Literal", "Writer"]

_RUNS: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
"""Every :class:`Run` made, by its text: one split per text (so a run's text identifies its ids)."""


class Run(str):
    """A constant run of parts, written as one item (:meth:`Writer.items`): the string is the parts' join,
    ``pieces`` the parts and ``texts`` the offsets of the parts that are input-like text (encoded as
    ordinary text); every other piece is a template literal (a marker). Make runs once, as module
    constants: a text has one split (a second run of the same text with another split raises
    ``ValueError``), so a tokenizer encodes a run once by its text."""

    pieces: tuple[str, ...]
    texts: tuple[int, ...]

    def __new__(cls, pieces: tuple[str, ...], texts: tuple[int, ...]) -> Run:
        self = super().__new__(cls, "".join(pieces))
        split = (tuple(pieces), tuple(texts))
        known = _RUNS.setdefault(str(self), split)
        if known != split:
            raise ValueError(f"a run of text {str(self)!r} exists with another split: {known} (not {split})")
        self.pieces, self.texts = split
        return self


class Literal(str):
    """A template literal written as one item (:meth:`Writer.items`) whose text varies by request (an image
    prompt): encoded with special tokens allowed."""

    __slots__ = ()


class Segment(NamedTuple):
    """A piece of the prompt. ``message_index`` is -1 for scaffolding that belongs to no message
    (tool declarations, default system prompt, generation prompt); ``trainable`` marks text a model
    produced in an assistant turn (content, kept reasoning, tool-call section, closing ``<|im_end|>``),
    not role headers nor history ``<think></think>`` scaffolding."""

    text: str
    message_index: int
    trainable: bool


class Piece(NamedTuple):
    """One part the renderer wrote: its ``text``, the message it belongs to (-1: scaffolding of no
    message), whether a model produced it (``trainable``, as in :class:`Segment`) and whether it is a
    template ``literal`` (markers, headers, fixed scaffolding) rather than text from the input."""

    text: str
    message_index: int
    trainable: bool
    literal: bool


class Layout(NamedTuple):
    """The prompt as the renderer wrote it (:func:`~kimi_chat.prompt.render_layout`).

    * ``parts``: the prompt is ``"".join(parts)``; parts may be empty;
    * ``marks``: ``(start, message_index, trainable)``: ``parts[start:next start]`` (to the end for the
      last) has that attribution; the first mark starts at 0; neighbours may share an attribution;
    * ``texts``: the indices, ascending, of the parts that hold input text; every other part is a
      template literal, so special-token text in it is the template's own marker.
    """

    parts: list[str]
    marks: list[tuple[int, int, bool]]
    texts: list[int]

    @property
    def text(self) -> str:
        """The prompt text (what :func:`~kimi_chat.prompt.render` returns)."""
        return "".join(self.parts)

    def pieces(self) -> Iterator[Piece]:
        """Every non-empty part as a :class:`Piece`, in order."""
        parts = self.parts
        texts = set(self.texts)
        bounds = [*self.marks, (len(parts), -1, False)]
        for (start, idx, train), (end, _, _) in zip(bounds, bounds[1:]):
            for k in range(start, end):
                if parts[k]:
                    yield Piece(parts[k], idx, train, k not in texts)


class Writer:
    """Collects prompt text; in marked mode also records marks and which parts are input text."""

    __slots__ = ("parts", "marks", "texts", "emit", "emit_text", "_items", "_item_marks", "_folded")
    parts: list[str]
    marks: list[tuple[int, int, bool]] | None
    texts: list[int] | None
    emit: Callable[[str], None]
    emit_text: Callable[[str], None]
    _items: list[str] | None
    _item_marks: list[tuple[int, int, bool]] | None
    _folded: bool  # items written, not yet unfolded into parts

    def __init__(self, marked: bool) -> None:
        self._items = self._item_marks = self.marks = self.texts = None
        self._folded = False
        parts: list[str] = []
        self.parts = parts
        self.emit = self.emit_text = parts.append  # plain mode: every part as it comes
        if marked:
            self.marks = []
            texts: list[int] = []
            self.texts = texts

            def emit_text(s: str) -> None:
                texts.append(len(parts))
                parts.append(s)

            self.emit_text = emit_text

    def items(self) -> tuple[list[str], list[tuple[int, int, bool]] | None]:
        """Write by items from here on (module docstring): ``(items, marks)``, the list to append items to
        and, in marked mode, the list to append marks ``(item position, message_index, trainable)`` to (the
        first at 0). In plain mode the items are the parts and there are no marks (``None``)."""
        if self.marks is None:
            return self.parts, None
        if self.parts or self.marks or self._items is not None:
            raise RuntimeError("Writer.items() must come before anything is written")
        self._items, self._item_marks = [], []
        self._folded = True
        return self._items, self._item_marks

    def written_items(self) -> tuple[list[str], list[tuple[int, int, bool]]]:
        """``(items, marks)`` of a marked writer, marks at item positions with the first at 0: what
        :meth:`items` collected, or each part as an item (a literal part as a :class:`Literal`)."""
        if self._items is not None and self._item_marks is not None:
            return self._items, self._item_marks
        lay = self.layout()
        items = list(lay.parts)
        texts = set(lay.texts)
        for k, p in enumerate(items):
            if k not in texts:
                items[k] = Literal(p)
        return items, lay.marks

    def _unfold(self) -> None:
        """Write the collected items out as parts, text indices and marks (once)."""
        items, item_marks = self._items, self._item_marks
        if not self._folded or items is None or item_marks is None:
            return
        self._folded = False
        parts, texts, marks = self.parts, self.texts, self.marks
        assert texts is not None and marks is not None
        starts: dict[int, list[tuple[int, int, bool]]] = {}
        for m in item_marks:
            starts.setdefault(m[0], []).append(m)
        app, ext, add_text, add_texts = parts.append, parts.extend, texts.append, texts.extend
        for k, item in enumerate(items):
            if k in starts:
                n = len(parts)
                marks.extend((n, idx, train) for _, idx, train in starts[k])
            cls = type(item)
            if cls is Run:
                n = len(parts)
                ext(item.pieces)  # type: ignore[attr-defined]
                if item.texts:  # type: ignore[attr-defined]
                    add_texts(map(n.__add__, item.texts))  # type: ignore[attr-defined]
            elif cls is Literal:
                app(str(item))
            else:
                add_text(len(parts))
                app(item)
        n = len(parts)
        marks.extend((n, idx, train) for _, idx, train in starts.get(len(items), ()))

    def mark(self, message_index: int, trainable: bool) -> None:
        """What is written next belongs to ``message_index`` (-1: no message) and is / is not trainable."""
        if self.marks is not None:
            self.marks.append((len(self.parts), message_index, trainable))

    def cut(self, end: int) -> None:
        """Keep the first ``end`` characters of the prompt only (``continue_final_message``)."""
        self._unfold()
        self._items = self._item_marks = None
        parts = self.parts
        pos = 0
        for k, p in enumerate(parts):
            if pos + len(p) >= end:
                parts[k] = p[: end - pos]
                del parts[k + 1 :]
                break
            pos += len(p)
        n = len(parts)
        if self.marks is not None:
            self.marks[:] = [m for m in self.marks if m[0] < n] or [(0, -1, False)]
        if self.texts is not None:
            self.texts[:] = [t for t in self.texts if t < n]

    def layout(self) -> Layout:
        """The recorded :class:`Layout` (marked mode only)."""
        if self.marks is None or self.texts is None:
            raise RuntimeError("Writer.layout() needs a marked writer")
        self._unfold()
        return Layout(self.parts, self.marks, self.texts)

    def segments(self) -> list[Segment]:
        """The recorded parts as :class:`Segment` pieces: none empty, neighbours differ in attribution."""
        lay = self.layout()
        parts = lay.parts
        out: list[Segment] = []
        bounds = [*lay.marks, (len(parts), -1, False)]
        for (start, idx, train), (end, _, _) in zip(bounds, bounds[1:]):
            text = "".join(parts[start:end])
            if not text:
                continue
            if out and out[-1][1] == idx and out[-1][2] == train:
                out[-1] = Segment(out[-1][0] + text, idx, train)
            else:
                out.append(Segment(text, idx, train))
        return out
