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
:mod:`kimi_chat.tokens` builds token ids from) are made. A family whose official tokenizer encodes the
prompt segment by segment (Kimi-K3) writes one part per encoder segment: the markers (and image prompts)
as literals, every other segment as text, its tag names and attribute syntax included (the encoder
encodes them as ordinary text; they hold no special-token text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

__all__ = ["Segment", "Piece", "Layout", "Writer"]


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

    __slots__ = ("parts", "marks", "texts", "emit", "emit_text")

    def __init__(self, marked: bool) -> None:
        self.parts: list[str] = []
        self.emit: Callable[[str], None] = self.parts.append
        self.marks: list[tuple[int, int, bool]] | None = None
        self.texts: list[int] | None = None
        self.emit_text: Callable[[str], None] = self.parts.append
        if marked:
            self.marks = []
            texts: list[int] = []
            self.texts = texts
            parts = self.parts

            def emit_text(s: str) -> None:
                texts.append(len(parts))
                parts.append(s)

            self.emit_text = emit_text

    def mark(self, message_index: int, trainable: bool) -> None:
        """What is written next belongs to ``message_index`` (-1: no message) and is / is not trainable."""
        if self.marks is not None:
            self.marks.append((len(self.parts), message_index, trainable))

    def cut(self, end: int) -> None:
        """Keep the first ``end`` characters of the prompt only (``continue_final_message``)."""
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
        return Layout(self.parts, self.marks, self.texts)

    def segments(self) -> list[Segment]:
        """The recorded parts as :class:`Segment` pieces: none empty, neighbours differ in attribution."""
        parts = self.parts
        out: list[Segment] = []
        bounds = [*self.layout().marks, (len(parts), -1, False)]
        for (start, idx, train), (end, _, _) in zip(bounds, bounds[1:]):
            text = "".join(parts[start:end])
            if not text:
                continue
            if out and out[-1][1] == idx and out[-1][2] == train:
                out[-1] = Segment(out[-1][0] + text, idx, train)
            else:
                out.append(Segment(text, idx, train))
        return out
