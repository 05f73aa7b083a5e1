"""Tool calls of the K2 family: call headers, name resolution and inference, arguments.

* :func:`index_tools`: the declared tools (read by :func:`kimi_chat.output.tools.normalise_tools`, the one
  reading of ``tools`` every family shares) as the parser needs them;
* :class:`ToolCalls` assembles the calls of one turn as the parser's state machine enters and
  leaves their parts: it resolves the header (``PREFIX NAME:IDX``, an opaque id, or a bare name),
  infers the name of an opaquely named call from its argument keys, and streams the arguments
  (JSON is passed through as written; a JSON string is held to the end, to unwrap double encoding).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...output.tools import normalise_tools, schema_keys
from ...output.arguments import arguments_end, arguments_piece
from ...output.buffers import CallAssembler, CallSnapshot, DeltaBuffer
from ...output.lexer import MarkerLexer
from ...output.peg import Machine
from ...output.types import ParsedToolCall, ToolCallStatus, Warn

__all__ = ["normalise_tools", "ToolIndex", "index_tools", "schema_keys", "ToolCall", "ToolCalls", "reader",
           "sanitised", "read_sanitised_id", "read_stripped_id"]

_INDEX_SUFFIX = re.compile(r":\d+\Z")
_SANITISED_ID = re.compile(r"(.+)_(\d+)\Z")
"""``NAME_INDEX``: the rest of a call id ``functions.NAME:INDEX`` whose ``.`` and ``:`` a client rewrote as ``_``
(``functions_get_weather_1``), which a model copies from such a history (Kimi-K2.7-Code)."""
_UNSAFE_ID_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_ASCII_DIGITS = re.compile(r"[0-9]+")


def sanitised(name: str) -> str:
    """``name`` as a client that allows only ``[A-Za-z0-9_-]`` in call ids writes it (other characters ``_``)."""
    return _UNSAFE_ID_CHAR.sub("_", name)

ToolIndex = dict[str, tuple[frozenset[str], frozenset[str]]]
"""Function name -> (its parameters' property names, its required names)."""


def read_sanitised_id(call_id: str, prefix: str, tools: Iterable[str] | None) -> tuple[str | None, bool]:
    """``(name, sure)`` read off a sanitised call id, ``PREFIX`` with ``_`` for ``.`` then ``NAME_INDEX``
    (``functions_get_weather_1``: ``get_weather``), or ``(None, False)`` for an id of another form.

    With declared ``tools`` the name is the declared one whose :func:`sanitised` spelling is followed by
    ``_INDEX`` (``sure``; a name with underscores and digits of its own is told apart by the declared names:
    ``functions_get_weather_1_0`` is ``get_weather_1`` where that is declared). Where several declared names
    sanitise alike, the one written as given wins; ``None`` when none or still several fit. Without tools, the
    best reading: everything before the last ``_INDEX`` (not ``sure``)."""
    head = sanitised(prefix)
    if not head or not call_id.startswith(head) or call_id.startswith(prefix):
        return None, False
    rest = call_id[len(head):]
    m = _SANITISED_ID.match(rest)
    if m is None:
        return None, False
    if tools is None:
        return m.group(1), False
    fits = [t for t in tools if rest.startswith(sanitised(t) + "_") and rest[len(sanitised(t)) + 1:].isdigit()]
    if len(fits) > 1:
        fits = [t for t in fits if t == sanitised(t)]
    return (fits[0], True) if len(fits) == 1 else (None, False)


def read_stripped_id(call_id: str, prefix: str, tools: Iterable[str] | None) -> str | None:
    """The declared tool a call id names with its punctuation dropped: ``PREFIX`` with or without its
    ``.``, then ``NAME``, then the index without its ``:`` (``functionsexec5``, ``functions.exec5``:
    ``exec``, as Kimi-K2.5 has been seen to write ids). ``None`` without declared ``tools``, for an id of
    another form, or when several declared names fit (``exec`` and ``exec5`` for ``functionsexec55``)."""
    if tools is None:
        return None
    head = "".join(ch for ch in prefix if ch.isalnum())
    if prefix and call_id.startswith(prefix):
        rest = call_id[len(prefix):]
    elif head and head != prefix and call_id.startswith(head):
        rest = call_id[len(head):]
    else:
        return None
    fits = {t for t in tools for spelling in {t, sanitised(t)}
            if rest.startswith(spelling) and _ASCII_DIGITS.fullmatch(rest, len(spelling))}
    return fits.pop() if len(fits) == 1 else None


def index_tools(tools: Iterable[Any] | None) -> ToolIndex | None:
    """:func:`normalise_tools`, as the parser needs it: name -> (property names, required names);
    ``None`` when no function is declared (names are then not checked)."""
    fns = normalise_tools(tools)
    if not fns:
        return None
    out: ToolIndex = {}
    for name, fn in fns.items():
        props, req = schema_keys(fn.get("parameters"))
        out[name] = (frozenset(props), frozenset(req))
    return out



class ToolCall(CallSnapshot):
    """A tool call being parsed."""

    __slots__ = ("index", "offset", "header", "raw", "id", "name", "resolved", "infer", "unknown",
                 "args", "held", "mode", "has_args", "status", "_snap", "_key")

    def __init__(self, index: int, offset: int, begin: str) -> None:
        self.index = index
        self.offset = offset
        self.header: list[str] = []
        self.raw: list[str] = [begin]
        self.id: str | None = None
        self.name: str | None = None
        self.resolved = False
        self.infer = False
        self.unknown = False
        self.args: list[str] = []  # emitted argument fragments
        self.held: list[str] = []  # trailing whitespace held back (mode 1) / everything (mode 2)
        self.mode = 0  # 0: nothing but whitespace yet, 1: streaming, 2: a JSON string, held
        self.has_args = False
        self.status = ToolCallStatus.UNCLOSED
        self._snap: ParsedToolCall | None = None
        self._key: tuple[Any, ...] = ()

    def reported_id(self) -> str:
        """The id written in the header (``functions.NAME:IDX``), else the header text as it stands."""
        return self.id if self.id is not None else "".join(self.header).strip()


class ToolCalls(CallAssembler):
    """The tool calls of one turn, assembled from the parser's group events and text.

    ``tools``: :func:`index_tools` of the declared tools (``None``: names are not checked);
    ``prefix``: the header prefix that names the function (K2: ``functions.``); ``out``: where
    deltas go; ``warn(kind, message, offset, text="")``: where warnings go.
    """

    def __init__(self, tools: ToolIndex | None, prefix: str, out: DeltaBuffer, warn: Warn) -> None:
        super().__init__(prefix, out, warn)
        self.tools = tools
        self.calls: list[ToolCall] = []
        self.current: ToolCall | None = None

    def add_events(self, sinks: dict[Any, Any], handlers: dict[Any, Any], turn: Any, runs: Any, truncates: Any) -> None:
        """Add this family's fields to the parser's tables (:func:`kimi_chat.output.fields.event_tables`):
        the call header's and the arguments' text."""
        sinks.update(header=self.header_text, arguments=self.arguments_text)

    def begin(self, offset: int, spelling: str) -> None:
        c = ToolCall(len(self.calls), offset, spelling)
        self.calls.append(c)
        self.current = c

    def header_text(self, piece: str) -> None:
        c = self.current
        c.header.append(piece)  # type: ignore[union-attr]
        c.raw.append(piece)  # type: ignore[union-attr]

    def header_end(self, at_eof: bool) -> None:
        c = self.current
        if c is not None and not (at_eof and self._dangling(c)):
            self.resolve(c)

    def arguments_begin(self, spelling: str) -> None:
        c = self.current
        if c is None:
            raise RuntimeError("arguments outside a tool call")  # the grammar makes this impossible
        self.resolve(c)
        c.has_args = True
        c.raw.append(spelling)

    @staticmethod
    def _dangling(c: ToolCall) -> bool:
        return not c.has_args and not "".join(c.header).strip()

    def _end(self, spelling: str | None, at_eof: bool) -> None:
        c = self.current
        if c is None:
            raise RuntimeError("end of a tool call outside one")  # the grammar makes this impossible
        self.current = None
        if spelling:
            c.raw.append(spelling)
        if at_eof and self._dangling(c):  # a call begin and nothing else: not a call
            self.calls.pop()
            self.warn("dangling_call_begin", "a tool-call begin at the end of the text, with neither "
                      "header nor arguments, dropped", c.offset, "".join(c.raw))
            return
        self.resolve(c)
        if not c.has_args and not at_eof:
            self.warn("missing_argument_begin", "tool call closed before its arguments began: "
                      f"status {ToolCallStatus.INCOMPLETE.value}, empty arguments", c.offset)
        value = arguments_end(c, lambda s: self._emit(c, s), self.warn)
        if c.infer:
            name = self._infer_name(c, value)
            if name is not None:
                c.name = name
                c.unknown = False
                self.out.call(c.index, None, name)
        if at_eof:
            c.status = ToolCallStatus.UNCLOSED
        elif not c.has_args:
            c.status = ToolCallStatus.INCOMPLETE
        else:
            c.settle(not isinstance(value, dict))

    # ------------------------------------------------------------------------------ headers, names

    def resolve(self, c: ToolCall) -> None:
        """Read the header once: id, name (or whether to infer it), and send the call's first delta."""
        if c.resolved:
            return
        c.resolved = True
        hid = "".join(c.header).strip()
        c.id = hid
        prefix = self.prefix
        prefixed = bool(prefix) and hid.startswith(prefix)
        base = _INDEX_SUFFIX.sub("", hid[len(prefix):] if prefixed else hid)
        tools = self.tools
        recovered, sure = (None, False) if prefixed else read_sanitised_id(hid, prefix, tools)
        if recovered is None and (not prefixed or (tools is not None and base not in tools)):
            recovered = read_stripped_id(hid, prefix, tools)
            sure = recovered is not None
            if sure:
                self.warn("name_inferred", f"tool name {recovered!r} read off the call id {hid!r}: "
                          "its punctuation dropped, the index run into the declared name", c.offset)
        if prefixed and recovered is not None:  # functions.NAMEINDEX: the declared NAME
            c.name = recovered
        elif prefixed:
            c.name = base or None
            c.unknown = c.name is None or (tools is not None and c.name not in tools)
        elif tools is not None and base in tools:
            c.name = base
        elif recovered is not None:  # functions_NAME_INDEX: the name read off a sanitised id
            c.name = recovered
            if not sure:
                self.warn("name_inferred", f"tool name {recovered!r} read off the call id {hid!r} "
                          f"({sanitised(prefix)}NAME_INDEX) with no declared tools to check it against", c.offset)
        elif tools is not None:
            c.infer = True
            c.unknown = True
        else:
            # no tools to check against: NAME:IDX gives a guess, an opaque id gives nothing
            c.name = base if base and base != hid else None
            c.unknown = True
        self.out.call(c.index, hid, c.name)

    def _infer_name(self, c: ToolCall, value: Any) -> str | None:
        tools = self.tools
        if tools is None or not isinstance(value, dict):
            return None
        keys = frozenset(value)
        cands = [n for n, (props, req) in tools.items() if req <= keys and keys <= props]
        if len(cands) > 1:
            exact = [n for n in cands if tools[n][0] == keys]
            if len(exact) == 1:
                cands = exact
        if len(cands) == 1:
            self.warn("name_inferred", f"tool name {cands[0]!r} inferred from the argument keys "
                      f"(opaque call id {c.id!r})", c.offset)
            return cands[0]
        if cands:
            self.warn("name_ambiguous", f"opaque call id {c.id!r}: arguments fit several tools "
                      f"({', '.join(sorted(cands))})", c.offset)
        return None

    # ------------------------------------------------------------------------------ arguments

    def arguments_text(self, piece: str) -> None:
        """Argument text: streamed as :func:`arguments_piece` says."""
        c = self.current
        c.raw.append(piece)  # type: ignore[union-attr]
        arguments_piece(c, piece, lambda s: self._emit(c, s))  # type: ignore[arg-type]


def reader(
    fmt: Any, d: Any, tools: Any, out: Any, warn: Warn, thinking_prefilled: bool | None, reasoning: bool | None,
    options: Mapping[str, Any], where: Callable[[], int],
) -> tuple[Machine, MarkerLexer, ToolCalls]:
    """The K2 format's ``reader`` (:attr:`kimi_chat.output.format.OutputFormat.reader`): markers;
    ``<think>`` a marker as the dialect or ``reasoning`` says, reasoning pre-filled as the dialect's
    ``prefills_think(**options)`` or ``thinking_prefilled`` says."""
    prefilled = d.prefills_think(**options) if thinking_prefilled is None else bool(thinking_prefilled)
    think = d.reasoning if reasoning is None else bool(reasoning)
    m = fmt.machine(prefilled=prefilled, think=think)
    return m, MarkerLexer(fmt.parse_table(m)), ToolCalls(index_tools(tools), fmt.tool_call_id_prefix, out, warn)
