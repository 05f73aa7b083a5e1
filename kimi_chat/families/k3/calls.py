"""Tool calls written as tags (Kimi-K3): ``<|open|>call tool="NAME" index="N"<|sep|>`` with typed
``argument`` elements or one ``json`` element.

:class:`TagCalls` assembles them as the parser enters and leaves the ``call``, ``argument`` and
``json`` groups, with the interface of K2's call assembler where the groups mean the same (``begin``,
``end``, ``stray``, ``calls``: :class:`~kimi_chat.output.buffers.CallAssembler`):

* ``name`` is the ``tool`` attribute; ``id`` is ``PREFIX NAME:IDX`` with ``IDX`` the 0-based position
  in the turn; an ``index`` attribute other than the 1-based position (what ``encoding_k3`` writes)
  is a warning.
* ``arguments`` is a compact JSON object text built from the argument elements in order, streamed
  as it comes: a ``string`` value is its raw text as a JSON string (the encoder writes strings raw,
  so nothing is unescaped); any other type is its text verbatim. A value that is not JSON, or
  contradicts its ``type``, makes the call ``invalid_json`` (the text is kept). A repeated key is
  kept in the text as written, with a warning: JSON readers take the last one. A ``json`` element's
  text is the arguments, read as K2's (:func:`~kimi_chat.output.arguments.arguments_piece`: trimmed,
  empty is ``{}``, a double-encoded object unwrapped once with a warning).
* Statuses as for K2: ``unclosed`` (the text ended in the call), ``incomplete`` (the call was closed
  by something else than its close tag before any element), ``unknown_tool``, ``invalid_json``, ``ok``.
* With declared tools, each argument is checked against the function's schema: an undeclared key,
  a value of another type than the schema's, a missing required key: a warning each, nothing changed.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from collections.abc import Callable, Mapping
from typing import Any

from ...output.arguments import arguments_end, arguments_piece
from ...output.jsonvalue import INVALID, json_value
from ...output.buffers import CallAssembler, CallSnapshot, DeltaBuffer, joined
from ...output.tools import normalise_tools, schema_keys
from ...output.types import ParsedToolCall, ToolCallStatus, Warn
from ...output.fields import nothing
from ...output.peg import EOF, Machine
from .tags import TagLexer

__all__ = ["TagCall", "TagCalls", "reader"]


_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
"""XTML / JSON-schema type name -> whether a JSON value is of it."""


_ESCAPES: dict[str, str] = {ch: json.dumps(ch)[1:-1] for ch in map(chr, [*range(0x20), 0x22, 0x5C])}
"""What ``json.dumps(ensure_ascii=False)`` escapes in a string (control characters, ``"``, ``\\``), as it
writes them."""
_ESCAPE = re.compile("[" + re.escape("".join(_ESCAPES)) + "]")
_ESCAPE_TABLE = bytes(0 if chr(b) in _ESCAPES else 1 for b in range(256))
"""A byte table: 0 for the bytes of the escaped characters (all ASCII), 1 for every other byte (a 0 after
:meth:`bytes.translate` of an ASCII string's bytes marks an escaped character)."""


def _quote(s: str) -> str:
    """``s`` as the inside of a JSON string, as ``json.dumps(s, ensure_ascii=False)[1:-1]`` writes it
    (escaping is per character: pieces concatenate). A string with nothing to escape is itself, found so
    at C speed: a short one by a search for ``"`` and ``\\`` and :meth:`str.isprintable` (``False`` for
    control characters, and for some others, which then take the slower path), a long one by the same
    searches (``memchr``) and then, for control characters, an ASCII one by mapping its bytes through a table
    that marks the escaped ones, any other by the JSON decoder's C string scanner (``scanstring`` of ``s`` and a
    closing ``"``: it refuses a control character; faster than encoding a string of 2- or 4-byte characters)."""
    if len(s) < 64:
        clean = '"' not in s and "\\" not in s and s.isprintable()
    elif '"' in s or "\\" in s:
        clean = False
    elif s.isascii():
        clean = 0 not in s.encode("ascii").translate(_ESCAPE_TABLE)
    else:
        try:
            scanstring(s + '"', 0, True)
            clean = True
        except ValueError:  # a control character (strict)
            clean = False
    return s if clean else _ESCAPE.sub(lambda m: _ESCAPES[m.group()], s)


class TagCall(CallSnapshot):
    """A tool call being parsed."""

    __slots__ = ("index", "offset", "raw", "id", "name", "unknown", "args", "elements", "keys",
                 "bad", "json", "key", "type", "value", "value_offset", "status", "mode", "held", "_snap", "_key")

    def __init__(self, index: int, offset: int, begin: str, name: str | None, prefix: str) -> None:
        self.index = index
        self.offset = offset
        self.raw: list[str] = [begin]
        self.name = name
        self.id = f"{prefix}{name or ''}:{index}"
        self.unknown = name is None
        self.args: list[str] = []  # emitted argument fragments
        self.elements = 0
        self.keys: dict[str, Any] = {}
        self.bad = False
        self.json = False
        self.key = ""
        self.type = "string"
        self.value: list[str] = []  # the current non-string value's text
        self.value_offset = 0
        self.status = ToolCallStatus.UNCLOSED
        self.mode = 0  # a json element's text, as K2's arguments (output.arguments.arguments_piece)
        self.held: list[str] = []
        self._snap: ParsedToolCall | None = None
        self._key: tuple[Any, ...] = ()


class TagCalls(CallAssembler):
    """The tag-written tool calls of one turn (see the module docstring).

    ``tools``: the declared tools (as given to the parser); ``prefix``: the id prefix (``functions.``);
    ``out``: where deltas go; ``warn(kind, message, offset, text="")``: where warnings go; ``lexer``:
    the :class:`~kimi_chat.families.k3.tags.TagLexer` whose ``attrs`` are the current tag's attributes.
    """

    def __init__(self, tools: Any, prefix: str, out: DeltaBuffer, warn: Warn, lexer: Any) -> None:
        super().__init__(prefix, out, warn)
        self.tools = normalise_tools(tools) or None
        self.lexer = lexer
        self.calls: list[TagCall] = []
        self.current: TagCall | None = None

    def add_events(self, sinks: dict[Any, Any], handlers: dict[Any, Any], turn: Any, runs: Any, truncates: Any) -> None:
        """Add this family's fields and groups to the parser's tables
        (:func:`kimi_chat.output.fields.event_tables`): text outside channels and between a call's elements,
        typed argument values, JSON arguments; the response and tools channels, the message close and
        what trails it."""
        sinks.update(outside=runs.outside_text, call_between=runs.call_between, value=self.value_text,
                     json=self.json_text)

        def exit_tools(c: bool, tok: str, s: str, o: int) -> None:
            runs.after_tools = True
            truncates(c, tok, s, o)

        def enter_close(c: bool, tok: str, s: str, o: int) -> None:
            turn.ended = True  # the message is closed; its end-of-message marker may follow

        def enter_trailing(c: bool, tok: str, s: str, o: int) -> None:
            turn.raw = True
            if s:
                turn.ignore(s, o)

        handlers.update({
            ("enter", "response"): nothing,
            ("exit", "response"): truncates,
            ("enter", "tools"): nothing,
            ("exit", "tools"): exit_tools,
            ("enter", "argument"): lambda c, tok, s, o: self.argument_begin(s, o),
            ("exit", "argument"): lambda c, tok, s, o: self.argument_end(s if c else None, tok == EOF),
            ("enter", "json"): lambda c, tok, s, o: self.json_begin(s),
            ("exit", "json"): lambda c, tok, s, o: self.json_end(s if c else None),
            ("enter", "close"): enter_close,
            ("exit", "close"): nothing,
            ("enter", "trailing"): enter_trailing,
            ("exit", "trailing"): nothing,
        })

    # ------------------------------------------------------------------------------ calls

    def begin(self, offset: int, spelling: str) -> None:
        """A call tag opened (``spelling``: the whole tag)."""
        attrs = self.lexer.attrs
        name = attrs.get("tool") or None
        c = TagCall(len(self.calls), offset, spelling, name, self.prefix)
        self.calls.append(c)
        self.current = c
        if name is None:
            self.warn("call_without_tool", f"tool call {c.index} has no tool attribute", offset, spelling)
        elif self.tools is not None and name not in self.tools:
            c.unknown = True
        index = attrs.get("index")
        if index is not None and index != str(c.index + 1):
            self.warn("call_index", f"tool call {c.index}: index attribute {index!r}, expected "
                      f"{str(c.index + 1)!r} (its 1-based position)", offset, spelling)
        self.out.call(c.index, c.id, name)

    def _end(self, spelling: str | None, at_eof: bool) -> None:
        c = self.current
        if c is None:
            raise RuntimeError("end of a tool call outside one")  # the grammar makes this impossible
        self.current = None
        if spelling:
            c.raw.append(spelling)
        if at_eof:  # cut before any element: empty arguments, {} (as K2's cut call)
            if c.elements == 0:
                self._emit(c, "{}")
            c.status = ToolCallStatus.UNCLOSED
            return
        if c.elements == 0:
            self._emit(c, "{}")
            if spelling is None:
                self.warn("call_without_arguments", f"tool call {c.index} closed before any argument "
                          f"element: status {ToolCallStatus.INCOMPLETE.value}, empty arguments", c.offset)
                c.status = ToolCallStatus.INCOMPLETE
                return
        elif c.json:
            pass  # decided when the element ended (json_end)
        else:
            self._emit(c, "}")
            self._check_required(c)
        c.settle(c.bad)

    def raw_text(self, piece: str) -> None:
        """Text inside the call outside its elements (only kept in ``raw``)."""
        c = self.current
        if c is not None:
            c.raw.append(piece)

    # ------------------------------------------------------------------------------ elements

    def argument_begin(self, spelling: str, offset: int) -> None:
        """An ``argument`` tag opened: its key and type come from the tag's attributes."""
        c = self.current
        if c is None:
            raise RuntimeError("argument outside a tool call")  # the grammar makes this impossible
        attrs = self.lexer.attrs
        c.raw.append(spelling)
        key = attrs.get("key")
        if key is None:
            self.warn("argument_without_key", f"tool call {c.index}: argument element without a key "
                      "attribute (key \"\", arguments invalid)", offset, spelling)
            key, c.bad = "", True
        typ = attrs.get("type")
        if typ is None:
            self.warn("argument_without_type", f"tool call {c.index}, argument {key!r}: no type "
                      "attribute, read as a string", offset, spelling)
            typ = "string"
        elif typ not in _TYPES:
            self.warn("argument_type_unknown", f"tool call {c.index}, argument {key!r}: unknown type "
                      f"{typ!r}, value read as JSON", offset, spelling)
        if key in c.keys:
            self.warn("duplicate_argument", f"tool call {c.index}: argument {key!r} repeated (both kept "
                      "in the arguments text; JSON readers take the last)", offset, spelling)
        c.key, c.type, c.value, c.value_offset = key, typ, [], offset
        self._emit(c, ("{" if c.elements == 0 else ",") + '"' + _quote(key) + '":'
                   + ('"' if typ == "string" else ""))
        c.elements += 1

    def value_text(self, piece: str) -> None:
        """Text of the current argument's value."""
        c = self.current
        c.raw.append(piece)  # type: ignore[union-attr]
        c.value.append(piece)  # type: ignore[union-attr]
        self._emit(c, _quote(piece) if c.type == "string" else piece)  # type: ignore[union-attr, arg-type]

    def argument_end(self, spelling: str | None, at_eof: bool) -> None:
        """The current argument ends (``spelling``: its close tag, if it consumed one)."""
        c = self.current
        if c is None:
            raise RuntimeError("argument outside a tool call")  # the grammar makes this impossible
        if spelling:
            c.raw.append(spelling)
        if at_eof:
            return
        if c.type == "string":
            self._emit(c, '"')
            value: Any = joined(c.value)
        else:
            text = joined(c.value)
            value = json_value(text)
            check = _TYPES.get(c.type)
            if value is INVALID or (check is not None and not check(value)):
                c.bad = True
                self.warn("argument_invalid", f"tool call {c.index}, argument {c.key!r}: {text!r} is not "
                          f"a JSON {c.type}: arguments invalid", c.value_offset, text)
                value = INVALID
        c.keys[c.key] = value
        if self.tools is not None:  # else no schema to check against
            self._check_schema(c, c.key, value)

    def json_begin(self, spelling: str) -> None:
        """A ``json`` element opened: its text is the arguments."""
        c = self.current
        if c is None:
            raise RuntimeError("json outside a tool call")  # the grammar makes this impossible
        c.raw.append(spelling)
        c.json = True
        c.elements += 1

    def json_text(self, piece: str) -> None:
        """Text of the ``json`` element: the arguments, read as K2's (:func:`arguments_piece`:
        surrounding whitespace trimmed, a double-encoded object unwrapped once)."""
        c = self.current
        c.raw.append(piece)  # type: ignore[union-attr]
        arguments_piece(c, piece, lambda s: self._emit(c, s))  # type: ignore[arg-type]

    def json_end(self, spelling: str | None) -> None:
        """The ``json`` element ends: its arguments are decided (not a JSON object: invalid)."""
        c = self.current
        if c is None:
            return
        if spelling:
            c.raw.append(spelling)
        if not isinstance(arguments_end(c, lambda s: self._emit(c, s), self.warn), dict):
            c.bad = True

    # ------------------------------------------------------------------------------ schema

    def _params(self, c: TagCall) -> Mapping[str, Any] | None:
        if self.tools is None or c.name not in self.tools:
            return None
        params = self.tools[c.name].get("parameters") or {}
        return params if isinstance(params, Mapping) else None

    def _check_schema(self, c: TagCall, key: str, value: Any) -> None:
        params = self._params(c)
        if params is None:
            return
        props, _ = schema_keys(params)
        if not props and params.get("additionalProperties", True) is not False:
            return  # a free-form object (no properties declared): any key is allowed
        if key not in props:
            self.warn("argument_undeclared", f"tool call {c.index} ({c.name}): argument {key!r} is not "
                      "a declared parameter", c.value_offset)
            return
        want = props[key].get("type") if isinstance(props[key], Mapping) else None
        names = [want] if isinstance(want, str) else list(want) if isinstance(want, list) else []
        checks = [_TYPES[n] for n in names if isinstance(n, str) and n in _TYPES]
        if value is not INVALID and checks and not any(f(value) for f in checks):
            self.warn("argument_schema_type", f"tool call {c.index} ({c.name}): argument {key!r} is not "
                      f"of the declared type {want!r}", c.value_offset)

    def _check_required(self, c: TagCall) -> None:
        params = self._params(c)
        if params is None:
            return
        missing = [r for r in schema_keys(params)[1] if r not in c.keys]
        if missing:
            self.warn("argument_missing", f"tool call {c.index} ({c.name}): required argument(s) "
                      f"{', '.join(map(repr, missing))} missing", c.offset)


def reader(
    fmt: Any, d: Any, tools: Any, out: Any, warn: Warn, thinking_prefilled: bool | None, reasoning: bool | None,
    options: Mapping[str, Any], where: Callable[[], int],
) -> tuple[Machine, TagLexer, TagCalls]:
    """The K3 format's ``reader`` (:attr:`kimi_chat.output.format.OutputFormat.reader`): tags; the think
    channel pre-filled unless ``thinking=False``, then the response one; its think tags are always markup
    (``reasoning=True`` is what it does, ``reasoning=False`` a ``TypeError``). ``where()``: the parser's
    offset (where the tag lexer's repairs are warned)."""
    if reasoning is not None and not reasoning:  # K2's reasoning=False: <think> is text. K3 has no such reading
        raise TypeError(f"dialect {d.name}: reasoning=False has no meaning for the {fmt.name} format (its think "
                        "channel is always markup); for output with thinking off pass thinking=False "
                        "(or thinking_prefilled=False): the response channel is pre-filled")
    think = (options.get("thinking", True) is not False if thinking_prefilled is None else bool(thinking_prefilled))
    m = fmt.machine(prefilled=think, think=think)
    lexer = TagLexer(fmt.parse_table(m), fmt.tags, lambda kind, message, text: warn(kind, message, where(), text))
    return m, lexer, TagCalls(tools, fmt.tool_call_id_prefix, out, warn, lexer)
