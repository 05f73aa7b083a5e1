"""What the parser produces as it goes: text fields (content, reasoning) and the delta buffer."""

from __future__ import annotations

from typing import Any

from .types import Delta, ParsedToolCall, ToolCallDelta, ToolCallStatus, Warn

__all__ = ["DeltaBuffer", "DecidedCalls", "HeldWhitespace", "TextField", "TextRun", "joined", "CallSnapshot",
           "CallAssembler"]

# delta entry kinds
_C, _R, _T, _I = 0, 1, 2, 3


_GROW_FROM = 1024
"""The length from which :func:`joined` grows the first part in place (below it, three parts or more are
joined at once: growing would copy the rest twice, joined and then appended; this costs the short first part)."""


def joined(parts: list[str]) -> str:
    """``"".join(parts)``, kept joined: ``parts`` becomes ``[result]``. Amortised O(new pieces)
    when nobody else holds the previous result (CPython then grows that string in place; see
    :data:`_GROW_FROM`)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return ""
    s = parts[0]
    if len(s) < _GROW_FROM and len(parts) > 2:
        s = "".join(parts)
        parts.clear()
        parts.append(s)
        return s
    rest = "".join(parts[1:]) if len(parts) > 2 else parts[1]
    parts.clear()  # the list's reference goes: ``s += rest`` may then resize in place
    s += rest
    parts.append(s)
    return s


class CallSnapshot:
    """What a call being parsed (either family's) reports of itself: :meth:`snapshot`, its
    :class:`~kimi_chat.output.types.ParsedToolCall` so far, and its status once it closed (:meth:`settle`).
    A subclass has the slots ``index``, ``id``, ``name``, ``unknown`` (its tool is not a declared one),
    ``status``, ``raw`` and ``args`` (text pieces), ``_snap`` and ``_key`` (``None`` and ``()`` at first),
    and says the id it reports (:meth:`reported_id`)."""

    __slots__ = ()
    index: int
    id: str | None
    name: str | None
    unknown: bool
    status: ToolCallStatus
    raw: list[str]
    args: list[str]
    _snap: ParsedToolCall | None
    _key: tuple[Any, ...]

    def reported_id(self) -> str:
        """The id the snapshot reports (``id``, unless the family derives it otherwise)."""
        return self.id or ""

    def snapshot(self) -> ParsedToolCall:
        """The call so far (rebuilt only when it changed since the last snapshot)."""
        key = (len(self.raw), len(self.args), self.name, self.status, self.id)
        if self._snap is None or key != self._key:
            call_id = self.reported_id()
            self._snap = None  # drop its references first: joined() may then grow the strings in place
            self._snap = ParsedToolCall(self.index, call_id, self.name, joined(self.args), self.status,
                                        joined(self.raw))
            self._key = (len(self.raw), len(self.args), self.name, self.status, self.id)
        return self._snap

    def settle(self, invalid: bool) -> None:
        """The call closed with its arguments (either family's rule): ``unknown_tool`` if its tool is not
        a declared one, else ``invalid_json`` if ``invalid`` (its arguments are not a JSON object), else ``ok``."""
        if self.unknown:
            self.status = ToolCallStatus.UNKNOWN_TOOL
        elif invalid:
            self.status = ToolCallStatus.INVALID_JSON
        else:
            self.status = ToolCallStatus.OK


class CallAssembler:
    """What either family's call assembler shares: ``calls`` (the turn's calls, in order), ``current``
    (the open one, if any); ``prefix``: the call id prefix (``functions.``); ``out``: where deltas go;
    ``warn(kind, message, offset, text="")``: where warnings go. A subclass closes a call in ``_end``."""

    def __init__(self, prefix: str, out: Any, warn: Warn) -> None:
        self.prefix = prefix
        self.out = out
        self.warn = warn
        self._streams = not isinstance(out, DecidedCalls)  # DecidedCalls holds the pieces: none is passed to it
        self.calls: list[Any] = []
        self.current: Any = None

    def end(self, spelling: str | None, at_eof: bool) -> None:
        """The current call ends (``spelling``: its closing marker, if it consumed one); its status is
        then decided (unless ``_end`` dropped it)."""
        c = self.current
        self._end(spelling, at_eof)
        if c is not None and self.calls and self.calls[-1] is c:
            self.out.decided(c.snapshot())

    def _end(self, spelling: str | None, at_eof: bool) -> None:
        raise NotImplementedError

    def stray(self, spelling: str) -> None:
        """A stray marker (or tag) inside the current call (if any) is part of its raw text."""
        if self.current is not None:
            self.current.raw.append(spelling)

    def _emit(self, c: Any, s: str) -> None:
        """An argument fragment of call ``c``: kept, and streamed."""
        c.args.append(s)
        if self._streams:
            self.out.args(c.index, s)


class DeltaBuffer:
    """The deltas decided since the last :meth:`take`, merged where they are adjacent pieces of the
    same field or the same call."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[list[Any]] = []

    def args(self, index: int, s: str) -> None:
        """An argument fragment of call ``index``."""
        out = self.entries
        if out and out[-1][0] == _T and out[-1][1] == index:
            e = out[-1]
            if e[4] is None:
                e[4] = [s]
            else:
                e[4].append(s)
        else:
            out.append([_T, index, None, None, [s]])

    def call(self, index: int, id: str | None, name: str | None) -> None:
        """The id and/or name of call ``index``."""
        out = self.entries
        if out and out[-1][0] == _T and out[-1][1] == index:
            e = out[-1]
            if id is not None:
                e[2] = id
            if name is not None:
                e[3] = name
        else:
            out.append([_T, index, id, name, None])

    def decided(self, call: ParsedToolCall) -> None:
        """Call ``call.index`` has its final status (the pieces already went out: nothing to do)."""

    def invalid(self, call: ParsedToolCall) -> None:
        """A call that is not to be executed, reported whole (:attr:`Delta.invalid_tool_calls`)."""
        self.entries.append([_I, call])

    def take(self) -> list[Delta]:
        """The deltas decided so far, in order; the buffer is then empty."""
        out = self.entries
        if not out:
            return []
        self.entries = []
        if len(out) == 1 and out[0][0] == _C and len(out[0][1]) == 1:
            return [Delta(out[0][1][0])]
        res = []
        for e in out:
            k = e[0]
            if k == _C:
                p = e[1]
                res.append(Delta(content=p[0] if len(p) == 1 else "".join(p)))
            elif k == _R:
                p = e[1]
                res.append(Delta(reasoning_content=p[0] if len(p) == 1 else "".join(p)))
            elif k == _I:
                res.append(Delta(invalid_tool_calls=[e[1]]))
            else:
                a = e[4]
                res.append(Delta(tool_calls=[ToolCallDelta(e[1], e[2], e[3], None if a is None else "".join(a))]))
        return res


class DecidedCalls:
    """The call deltas of a parse without ``include_invalid``: a call's pieces are not streamed as
    written; when its status is decided, an ``ok`` call goes out whole (id, name, arguments) under
    the next client index (``0, 1, ...``: its position in ``ParsedMessage.to_openai()``), any other
    as an ``invalid_tool_calls`` entry. The same interface as :class:`DeltaBuffer` for the call
    assemblers (``call``, ``args``, ``decided``)."""

    __slots__ = ("out", "ok")

    def __init__(self, out: DeltaBuffer) -> None:
        self.out = out
        self.ok = 0

    def call(self, index: int, id: str | None, name: str | None) -> None:
        """Held (the decided call carries it)."""

    def args(self, index: int, s: str) -> None:
        """Held (the decided call carries it)."""

    def decided(self, call: ParsedToolCall) -> None:
        """Call ``call`` has its final status: release it or report it."""
        if call.status is ToolCallStatus.OK:
            self.out.call(self.ok, call.id, call.name)
            self.out.args(self.ok, call.arguments)
            self.ok += 1
        else:
            self.out.invalid(call)


class HeldWhitespace:
    """Whitespace held before a run of text whose start may still be dropped: released in front of
    the run's first non-space piece. ``held`` is ``None`` once that piece came."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: list[str] | None = []

    def take(self, piece: str) -> str | None:
        """``piece`` to pass on (with what was held before it), or ``None`` while only whitespace."""
        held = self.held
        if held is None:
            return piece
        if piece.isspace():
            held.append(piece)
            return None
        self.held = None
        return "".join(held) + piece if held else piece


class TextField:
    """One text field of the message (``content`` or ``reasoning_content``): ``None`` until a
    non-whitespace character comes, its leading whitespace held until then (it may still be dropped,
    e.g. whitespace before ``<think>``). Its pieces also go to the delta buffer.

    :meth:`value` is amortised cheap: the pieces are joined once and kept joined.
    """

    __slots__ = ("parts", "lead", "kind", "out")

    CONTENT = _C
    REASONING = _R

    def __init__(self, kind: int, out: DeltaBuffer) -> None:
        self.parts: list[str] = []
        self.lead = HeldWhitespace()
        self.kind = kind
        self.out = out

    def add(self, piece: str) -> None:
        """A piece of the field's text (whitespace at its start held, see the class docstring)."""
        self.parts.append(piece)
        if self.lead.held is not None:
            piece = self.lead.take(piece)  # type: ignore[assignment]
            if piece is None:
                return
        out = self.out.entries
        if out and out[-1][0] == self.kind:
            out[-1][1].append(piece)
        else:
            out.append([self.kind, [piece]])

    def reset(self) -> None:
        """Forget the field if it holds only whitespace so far."""
        if self.lead.held is not None:
            self.parts = []
            self.lead = HeldWhitespace()

    def value(self) -> str | None:
        """The field's text (``None`` if empty or whitespace-only)."""
        if self.lead.held is not None:
            return None
        return joined(self.parts)


class TextRun:
    """A run of text that is dropped unless it is whitespace (text in a tool-call section outside
    any call, ...): collected with its offset, reported when it ends."""

    __slots__ = ("parts", "offset")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.offset = 0

    def add(self, piece: str, offset: int) -> None:
        if not self.parts:
            self.offset = offset
        self.parts.append(piece)

    def end(self) -> str | None:
        """The run's text if it is not whitespace-only (``None`` otherwise); the run is then empty."""
        if not self.parts:
            return None
        text = "".join(self.parts)
        self.parts = []
        return None if text.isspace() else text
