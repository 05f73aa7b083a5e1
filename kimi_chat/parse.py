"""Incremental parser of Kimi-K2 assistant output: reasoning, content and tool calls, whole or streamed.

The engine is a small state machine over an input buffer, in the style of CPython's ``tokenize`` and
openai-harmony's streamable parser:

* a **lexer** splits the input into marker tokens and text runs. Only the undecided suffix of a
  chunk (a proper prefix of some marker, at most ``len(longest marker) - 1`` characters) is held
  back; decided text is never looked at again. Per ``feed()`` the work is proportional to the
  chunk plus the longest marker.
* a **state table** compiled from the grammar of :mod:`kimi_chat.format` decides what each token
  means; it is the grammar, not regexes over the accumulated text, that drives the parse.
* **sinks** route text to the result fields and produce OpenAI-style deltas as soon as a piece of
  text is decided (leading/trailing whitespace that may still turn out to be dropped is held).

``parse(text)`` is ``StreamParser().feed(text)`` + ``finish()``: for any split of a text into
chunks the merged deltas equal ``parse(text)`` exactly, and ``StreamParser.message`` after
``finish()`` equals it too (warnings included).

See ``docs/format.md`` for the format, the grammar and every rule with an example.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

from . import markers as M
from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .format import EOF, END_OF_TURN_IDS, TEXT, WS, Machine, State, Transition, compile_machine

__all__ = [
    "StopReason",
    "ToolCallStatus",
    "ParseWarning",
    "ParsedToolCall",
    "ParsedMessage",
    "ToolCallDelta",
    "Delta",
    "StreamParser",
    "parse",
]


class StopReason(str, Enum):
    """Why the assistant turn ended."""

    END_TURN = "end_turn"
    """An end-of-turn marker (``<|im_end|>``, ``[EOS]``) or another message's header was seen, and
    there are no tool calls."""
    TOOL_CALLS = "tool_calls"
    """The turn has tool calls, all of them complete (closed, or the turn ended after them)."""
    TRUNCATED = "truncated"
    """The text ended inside reasoning, inside a tool call or inside a tool-call section."""
    END_OF_TEXT = "end_of_text"
    """The text ended in content without an end-of-turn marker: what a server that strips its stop
    token sends for a complete answer (it cannot be told from an answer cut at a token limit)."""

    @property
    def finish_reason(self) -> str:
        """The OpenAI ``finish_reason`` (``stop``, ``tool_calls``, ``length``)."""
        return {"tool_calls": "tool_calls", "truncated": "length"}.get(self.value, "stop")


class ToolCallStatus(str, Enum):
    """How trustworthy a parsed tool call is. When several apply, the first listed wins."""

    OK = "ok"
    UNCLOSED = "unclosed"
    """The text ended inside the call; its arguments are what was emitted (usually incomplete)."""
    UNKNOWN_TOOL = "unknown_tool"
    """The name is not a declared tool, or could not be read from the header nor inferred."""
    INVALID_JSON = "invalid_json"
    """The arguments are not a JSON object (kept verbatim)."""


@dataclass(frozen=True)
class ParseWarning:
    """Something the parser repaired, dropped or inferred. ``offset`` is the character offset in the
    input where it happened; ``text`` is the input text dropped or concerned (a stray marker, text
    after the end of the turn, text inside a tool-call section outside any call, ...)."""

    kind: str
    message: str
    offset: int
    text: str = ""

    def __str__(self) -> str:
        return f"{self.message} (at offset {self.offset})"


@dataclass
class ParsedToolCall:
    """One tool call of the assistant turn."""

    index: int
    """Position among the turn's tool calls (0-based, across sections)."""
    id: str
    """The call header, trimmed, verbatim (normally ``functions.NAME:IDX``)."""
    name: str | None
    """The function name (``None`` when it could not be determined; see ``status``)."""
    arguments: str
    """The arguments as the model wrote them, trimmed (``{}`` if empty; a double-encoded JSON
    string holding an object is unwrapped once)."""
    status: ToolCallStatus
    raw: str
    """The exact input text of the call, from ``<|tool_call_begin|>`` to ``<|tool_call_end|>``."""

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChatCompletionMessageToolCall``-shaped dict (a missing name is ``""``)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name or "", "arguments": self.arguments},
        }


@dataclass
class ParsedMessage:
    """A parsed assistant turn."""

    content: str | None
    """The text for the user (verbatim; ``None`` if empty or whitespace-only)."""
    reasoning_content: str | None
    """The reasoning (verbatim; ``None`` if there is none or it is whitespace-only)."""
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    stop_reason: StopReason | None = None
    """``None`` while a stream is still open and its turn has not ended."""
    warnings: list[ParseWarning] = field(default_factory=list)

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChatCompletionMessage``-shaped dict: ``role``, ``content``, then
        ``reasoning_content`` if any and ``tool_calls`` if any."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return out


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of one tool call: ``id`` and ``name`` are sent once, when known; ``arguments`` are
    fragments to concatenate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChoiceDeltaToolCall``-shaped dict."""
        out: dict[str, Any] = {"index": self.index}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
        fn: dict[str, str] = {}
        if self.name is not None:
            fn["name"] = self.name
        if self.arguments is not None:
            fn["arguments"] = self.arguments
        if fn:
            out["function"] = fn
        return out


@dataclass(slots=True)
class Delta:
    """What one ``feed()`` decided, in order (a ``feed()`` returns a list of these)."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChoiceDelta``-shaped dict (only the fields that are set)."""
        out: dict[str, Any] = {}
        if self.content is not None:
            out["content"] = self.content
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [t.to_openai() for t in self.tool_calls]
        return out


# --------------------------------------------------------------------------------------------------

_FUNCTIONS = M.TOOL_CALL_ID_PREFIX
_ARG_BEGIN = M.TOOL_CALL_ARGUMENT_BEGIN.text
_INDEX_SUFFIX = re.compile(r":\d+\Z")
_REGEX_CACHE: dict[int, re.Pattern[str]] = {}


def _marker_regex(m: Machine) -> re.Pattern[str]:
    r = _REGEX_CACHE.get(id(m))
    if r is None:
        r = re.compile("|".join(re.escape(s) for s in sorted(m.classes, key=len, reverse=True)))
        _REGEX_CACHE[id(m)] = r
    return r


_ToolIndex = dict[str, tuple[frozenset[str], frozenset[str]]]


def _index_tools(tools: Iterable[Any] | None) -> _ToolIndex | None:
    """Declared tools (OpenAI ``{"type": "function", "function": {...}}`` or bare ``{name,
    parameters}``) -> name -> (property names, required names). ``None`` if no tools."""
    if not tools:
        return None
    out: _ToolIndex = {}
    for i, t in enumerate(tools):
        if hasattr(t, "model_dump"):
            t = t.model_dump()
        if not isinstance(t, Mapping):
            raise TypeError(f"tools[{i}]: expected a mapping, got {type(t).__name__}")
        if t.get("type", "function") != "function":
            continue
        fn = t.get("function", t)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ValueError(f"tools[{i}]: no function name")
        params = fn.get("parameters") or {}
        props = params.get("properties") or {} if isinstance(params, Mapping) else {}
        req = params.get("required") or [] if isinstance(params, Mapping) else []
        out[fn["name"]] = (frozenset(props), frozenset(r for r in req if isinstance(r, str)))
    return out


def _json_object(s: str) -> Any:
    """The value of ``s`` as JSON, or ``_INVALID``."""
    try:
        return json.loads(s)
    except ValueError:
        return _INVALID
    except RecursionError:  # absurdly deep nesting: valid JSON we cannot check
        return _INVALID


_INVALID = object()

# delta entry kinds
_C, _R, _T = 0, 1, 2


class _Call:
    """A tool call being parsed."""

    __slots__ = ("index", "offset", "header", "raw", "id", "name", "resolved", "infer", "unknown",
                 "args", "held", "mode", "has_args", "status")

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

    def snapshot(self) -> ParsedToolCall:
        hid = self.id if self.id is not None else "".join(self.header).strip()
        return ParsedToolCall(self.index, hid, self.name, "".join(self.args), self.status, "".join(self.raw))


class StreamParser:
    """Parse an assistant turn incrementally.

    >>> p = StreamParser()
    >>> deltas = p.feed("Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0")
    >>> deltas += p.feed("<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>")
    >>> deltas += p.finish()
    >>> p.message.tool_calls[0].name, p.message.stop_reason.value
    ('f', 'tool_calls')

    ``feed(text)`` takes the next chunk (``str``, or ``bytes`` decoded as UTF-8 across chunk
    boundaries) and returns the :class:`Delta` objects it decided; ``finish()`` ends the input.
    ``message`` is the :class:`ParsedMessage` so far (built on demand: O(size)).

    Options:

    * ``dialect``: a dialect name or :class:`~kimi_chat.dialects.Dialect`. Its ``reasoning`` says
      whether ``<think>`` is a marker (else it is literal text) and its ``prefills_think(**options)``
      whether the output starts inside reasoning.
    * ``tools``: the declared tools (OpenAI shape); used to check names and to infer the name of a
      call whose header is opaque (``0``, ``call_x``) from its argument keys.
    * ``thinking_prefilled``: the prompt ended with ``<think>``, the output starts inside reasoning
      (``None``: the dialect decides, from ``options`` such as ``thinking=False``).
    * ``reasoning``: treat ``<think>``/``</think>`` as markers (``None``: the dialect decides; an
      Instruct dialect says no). ``thinking_prefilled=True`` implies it.
    * ``content_after_tool_calls``: text after a tool-call section is content (default); if False
      it is dropped with a warning.
    * ``**options``: render options of the prompt (e.g. ``thinking=False``), passed to
      ``dialect.prefills_think``; an option the dialect does not take is a ``TypeError``.
    """

    def __init__(
        self,
        dialect: str | Dialect = DEFAULT_DIALECT,
        *,
        tools: Sequence[Any] | None = None,
        thinking_prefilled: bool | None = None,
        reasoning: bool | None = None,
        content_after_tool_calls: bool = True,
        **options: Any,
    ) -> None:
        d = get_dialect(dialect)
        for key in options:
            if key not in d.options:
                takes = ", ".join(d.options) if d.options else "none"
                raise TypeError(f"dialect {d.name} takes no render option {key!r} (its options: {takes})")
        prefilled = d.prefills_think(**options) if thinking_prefilled is None else bool(thinking_prefilled)
        think = prefilled or (d.reasoning if reasoning is None else bool(reasoning))
        rule = "message_prefilled" if prefilled else ("message" if think else "message_plain")
        m = compile_machine(rule, think=think)
        self.dialect = d
        self.machine = m
        self._classes = m.classes
        self._prefixes = m.prefixes
        self._window = m.max_len - 1
        self._starts = m.start_chars
        # the fast path of feed() tests the start characters of marker spellings ('<' and '['); with
        # more than two, "" (always found) sends every chunk through the lexer
        self._start0 = m.start_chars[0] if len(m.start_chars) <= 2 else ""
        self._start1 = m.start_chars[-1]
        self._search = _marker_regex(m).search
        self._match = _marker_regex(m).match
        self._tools = _index_tools(tools)
        self._content_after = content_after_tool_calls

        self._state: State = m.start
        self._sink: Callable[[str], None] | None = None
        self._pending = ""
        self._pos = 0  # offset of the first character not yet decided (the start of _pending)
        self._decoder: codecs.IncrementalDecoder | None = None

        self._content: list[str] = []
        self._content_held: list[str] | None = []  # None once content has a non-space character
        self._reasoning: list[str] = []
        self._reasoning_held: list[str] | None = []
        self._after_held: list[str] | None = []  # None once the current after-section run is live
        self._run: list[str] = []
        self._run_offset = 0
        self._calls: list[_Call] = []
        self._call: _Call | None = None
        self._section_implicit = False
        self._warnings: list[ParseWarning] = []
        self._ended = False
        self._raw = False  # after the end of the turn: everything is ignored text
        self._trailing: list[str] = []
        self._trailing_offset = 0
        self._truncated = False
        self._finished = False
        self._final: ParsedMessage | None = None
        self._out: list[list[Any]] = []

        self._sinks: dict[str | None, Callable[[str], None] | None] = {
            None: None,
            "content": self._content_text,
            "reasoning": self._reasoning_text,
            "header": self._header_text,
            "arguments": self._arguments_text,
            "between": self._run_text,
            "after": self._after_text if content_after_tool_calls else self._run_text,
            "ignored": None,
        }
        self._handlers: dict[tuple[str, str], Callable[[bool, str, str, int], None]] = {
            ("enter", "reasoning"): self._enter_reasoning,
            ("exit", "reasoning"): self._exit_reasoning,
            ("enter", "section"): self._enter_section,
            ("exit", "section"): self._exit_section,
            ("enter", "call"): self._enter_call,
            ("exit", "call"): self._exit_call,
            ("enter", "header"): self._nothing,
            ("exit", "header"): self._exit_header,
            ("enter", "arguments"): self._enter_arguments,
            ("exit", "arguments"): self._nothing,
            ("enter", "end"): self._enter_end,
            ("exit", "end"): self._nothing,
        }

    # ---------------------------------------------------------------------------- public interface

    @property
    def state(self) -> str:
        """The current state of the machine, readable (e.g. ``TEXT:arguments in
        section/call/arguments``), plus ``ended``/``finished`` when they apply."""
        s = self._state.name
        if self._finished:
            return s + " (finished)"
        if self._raw:
            return "ended (ignoring the rest)"
        return s

    @property
    def offset(self) -> int:
        """Number of input characters decided so far (the undecided held-back suffix excluded)."""
        return self._pos

    def feed(self, text: str | bytes, token_ids: Sequence[int] | None = None) -> list[Delta]:
        """Parse the next chunk; return the deltas it decided (possibly none).

        ``token_ids`` (optional) are the ids of the chunk's tokens. They are only used to see an
        end-of-turn token that a relay stripped from the text (``<|im_end|>``, ``[EOS]``); the text
        alone is always enough otherwise.
        """
        if self._finished:
            raise RuntimeError("StreamParser.feed() after finish()")
        if not isinstance(text, str):
            if not isinstance(text, (bytes, bytearray, memoryview)):
                raise TypeError(f"StreamParser.feed() takes str or bytes, not {type(text).__name__}")
            if self._decoder is None:
                self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            text = self._decoder.decode(bytes(text))
        if self._raw:
            self._ignore(text)
        elif text:
            if self._pending or self._start0 in text or self._start1 in text:
                self._lex(text)
            else:  # the fast path: no marker can start in this chunk
                st = self._state
                if st.loop:
                    self._sink(text)  # type: ignore[misc]
                    self._pos += len(text)
                else:
                    self._text(text)
        if token_ids is not None and not self._ended and not END_OF_TURN_IDS.isdisjoint(token_ids):
            # the end-of-turn token came after this chunk's text, and its spelling was stripped
            self._flush_pending()
            if not self._raw:
                tr = self._state.trans.get("END_TURN")
                if tr is not None:
                    self._go(tr, "END_TURN", "", self._pos)
        return self._take()

    def finish(self) -> list[Delta]:
        """End the input: close what is open (a call left open is ``unclosed``) and return the
        last deltas. Calling it again returns ``[]``."""
        if self._finished:
            return []
        if self._decoder is not None:
            rest = self._decoder.decode(b"", final=True)
            if rest:
                self.feed(rest)
        self._flush_pending()
        if self._raw:
            if self._trailing:
                self._warnings.append(self._trailing_warning())
        else:
            self._go(self._state.trans[EOF], EOF, "", self._pos)
        self._finished = True
        self._final = None
        return self._take()

    @property
    def message(self) -> ParsedMessage:
        """The :class:`ParsedMessage` so far (final after :meth:`finish`)."""
        if self._final is not None:
            return self._final
        warnings = list(self._warnings)
        if self._raw and self._trailing and not self._finished:
            warnings.append(self._trailing_warning())
        msg = ParsedMessage(
            content=None if self._content_held is not None else "".join(self._content),
            reasoning_content=None if self._reasoning_held is not None else "".join(self._reasoning),
            tool_calls=[c.snapshot() for c in self._calls],
            stop_reason=self._stop_reason(),
            warnings=warnings,
        )
        if self._finished:
            self._final = msg
        return msg

    def __repr__(self) -> str:
        return f"<StreamParser {self.dialect.name} at {self._pos}: {self.state}>"

    # ---------------------------------------------------------------------------- lexer

    def _lex(self, text: str) -> None:
        if self._pending:
            text = self._pending + text
            self._pending = ""
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
        s0, s1 = self._start0, self._start1
        if hold > 256 and (text.count(s0, 0, hold) + text.count(s1, 0, hold)) * 128 < hold:
            pos = self._scan_sparse(text, hold)
        else:
            pos = self._scan_dense(text, hold)
        if pos < 0:  # the turn ended: the rest was ignored
            return
        if pos < hold:
            self._text(text[pos:hold])
        if hold < n:
            self._pending = text[hold:]

    def _scan_dense(self, text: str, hold: int) -> int:
        """Tokens of ``text[:hold]`` found by one regex (markers, or marker start characters, are
        frequent); returns where the trailing text starts (-1 if the turn ended)."""
        search = self._search
        m = search(text, 0, hold)
        pos = 0
        classes = self._classes
        while m is not None:
            s = m.start()
            if s > pos:
                self._text(text[pos:s])
            spelling = m.group()
            self._marker(classes[spelling], spelling)
            pos = m.end()
            if self._raw:
                self._ignore(text[pos:])
                return -1
            m = search(text, pos, hold)
        return pos

    def _scan_sparse(self, text: str, hold: int) -> int:
        """The same tokens, found by ``str.find`` of the start characters and an anchored match at
        each (marker start characters are rare: a long chunk is skipped at memchr speed)."""
        s0, s1 = self._start0, self._start1
        match = self._match
        classes = self._classes
        find = text.find
        i = find(s0, 0, hold)
        j = find(s1, 0, hold)
        pos = 0
        while i >= 0 or j >= 0:
            k = i if j < 0 or 0 <= i < j else j
            m = match(text, k, hold)
            if m is None:
                nxt = k + 1
            else:
                if k > pos:
                    self._text(text[pos:k])
                spelling = m.group()
                self._marker(classes[spelling], spelling)
                pos = nxt = m.end()
                if self._raw:
                    self._ignore(text[pos:])
                    return -1
            if 0 <= i < nxt:
                i = find(s0, nxt, hold)
            if 0 <= j < nxt:
                j = find(s1, nxt, hold)
        return pos

    def _flush_pending(self) -> None:
        """The held-back suffix is text after all (the input ended, or an end token came)."""
        if self._pending:
            p, self._pending = self._pending, ""
            if self._raw:
                self._ignore(p)
            else:
                self._text(p)

    def _text(self, piece: str) -> None:
        st = self._state
        if not st.loop:
            tr = st.trans[WS if piece.isspace() else TEXT]
            if tr.target is not st or tr.events:
                self._go(tr, TEXT, "", self._pos)
        self._sink(piece)  # type: ignore[misc]
        self._pos += len(piece)

    def _marker(self, cls: str, spelling: str) -> None:
        tr = self._state.trans.get(cls)
        if tr is None:
            self._stray(spelling)
        else:
            self._go(tr, cls, spelling, self._pos)
        self._pos += len(spelling)

    def _ignore(self, text: str) -> None:
        if text:
            if not self._trailing:
                self._trailing_offset = self._pos
            self._trailing.append(text)
            self._pos += len(text)

    def _stray(self, spelling: str) -> None:
        self._warn("stray_marker", f"stray marker {spelling} dropped", self._pos, spelling)
        if self._call is not None:
            self._call.raw.append(spelling)

    # ---------------------------------------------------------------------------- transitions

    def _go(self, tr: Transition, tok: str, spelling: str, offset: int) -> None:
        st = self._state
        if st.field == "between" or (st.field == "after" and not self._content_after):
            self._end_run(st.field)
        elif st.field == "after":
            self._after_held = []
        for kind, name, arg in tr.events:
            if kind == "warn":
                self._warn(name, arg, offset, spelling)  # type: ignore[arg-type]
            else:
                self._handlers[kind, name](arg, tok, spelling, offset)  # type: ignore[arg-type]
        self._state = tr.target
        self._sink = self._sinks[tr.target.field]

    def _nothing(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        pass

    def _enter_reasoning(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        if self._content_held is not None:  # whitespace before <think> is not content
            self._content = []
            self._content_held = []

    def _exit_reasoning(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        if tok == EOF:
            self._truncated = True

    def _enter_section(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        self._section_implicit = tok != "SECTION_BEGIN"

    def _exit_section(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        if tok == EOF and not self._section_implicit:
            self._truncated = True

    def _enter_call(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        c = _Call(len(self._calls), offset, spelling)
        self._calls.append(c)
        self._call = c

    def _exit_header(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        self._resolve_header(self._call)  # type: ignore[arg-type]

    def _enter_arguments(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        c = self._call
        assert c is not None
        self._resolve_header(c)
        c.has_args = True
        c.raw.append(spelling)

    def _exit_call(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        c = self._call
        assert c is not None
        self._call = None
        if consumed:
            c.raw.append(spelling)
        self._resolve_header(c)
        eof = tok == EOF
        if not c.has_args and not eof:
            self._warn("missing_argument_begin", f"tool call without {_ARG_BEGIN}: empty arguments", c.offset)
        # arguments: what is held is decided now
        value: Any = _INVALID
        if c.mode == 2:
            s = "".join(c.held).rstrip()
            value = _json_object(s)
            if isinstance(value, str):
                inner = _json_object(value)
                if isinstance(inner, dict):
                    s, value = value.strip(), inner
                    self._warn("double_encoded_arguments", "double-encoded arguments unwrapped "
                               "(a JSON string holding an object)", c.offset)
            self._emit_args(c, s)
            args = s
        else:
            if c.mode == 0:
                self._emit_args(c, "{}")
            args = "".join(c.args)
            value = _json_object(args)
        c.held = []
        if c.infer:
            name = self._infer_name(c, value)
            if name is not None:
                c.name = name
                c.unknown = False
                self._emit_call(c.index, None, name, None)
        if eof:
            c.status = ToolCallStatus.UNCLOSED
            self._truncated = True
        elif c.unknown:
            c.status = ToolCallStatus.UNKNOWN_TOOL
        elif not isinstance(value, dict):
            c.status = ToolCallStatus.INVALID_JSON
        else:
            c.status = ToolCallStatus.OK

    def _enter_end(self, consumed: bool, tok: str, spelling: str, offset: int) -> None:
        self._ended = True
        self._raw = True

    # ---------------------------------------------------------------------------- tool calls

    def _resolve_header(self, c: _Call) -> None:
        if c.resolved:
            return
        c.resolved = True
        hid = "".join(c.header).strip()
        c.id = hid
        prefixed = hid.startswith(_FUNCTIONS)
        base = _INDEX_SUFFIX.sub("", hid[len(_FUNCTIONS):] if prefixed else hid)
        tools = self._tools
        if prefixed:
            c.name = base or None
            c.unknown = c.name is None or (tools is not None and c.name not in tools)
        elif tools is not None and base in tools:
            c.name = base
        elif tools is not None:
            c.infer = True
            c.unknown = True
        else:
            # no tools to check against: NAME:IDX gives a guess, an opaque id gives nothing
            c.name = base if base and base != hid else None
            c.unknown = True
        self._emit_call(c.index, hid, c.name, None)

    def _infer_name(self, c: _Call, value: Any) -> str | None:
        tools = self._tools
        assert tools is not None
        if not isinstance(value, dict):
            return None
        keys = frozenset(value)
        cands = [n for n, (props, req) in tools.items() if req <= keys and keys <= props]
        if len(cands) > 1:
            exact = [n for n in cands if tools[n][0] == keys]
            if len(exact) == 1:
                cands = exact
        if len(cands) == 1:
            self._warn("name_inferred", f"tool name {cands[0]!r} inferred from the argument keys "
                       f"(opaque call id {c.id!r})", c.offset)
            return cands[0]
        if cands:
            self._warn("name_ambiguous", f"opaque call id {c.id!r}: arguments fit several tools "
                       f"({', '.join(sorted(cands))})", c.offset)
        return None

    # ---------------------------------------------------------------------------- sinks

    def _content_text(self, piece: str) -> None:
        self._content.append(piece)
        held = self._content_held
        if held is not None:
            if piece.isspace():
                held.append(piece)
                return
            self._content_held = None
            if held:
                piece = "".join(held) + piece
        out = self._out
        if out and out[-1][0] == _C:
            out[-1][1].append(piece)
        else:
            out.append([_C, [piece]])

    def _reasoning_text(self, piece: str) -> None:
        self._reasoning.append(piece)
        held = self._reasoning_held
        if held is not None:
            if piece.isspace():
                held.append(piece)
                return
            self._reasoning_held = None
            if held:
                piece = "".join(held) + piece
        out = self._out
        if out and out[-1][0] == _R:
            out[-1][1].append(piece)
        else:
            out.append([_R, [piece]])

    def _after_text(self, piece: str) -> None:
        held = self._after_held
        if held is not None:
            if piece.isspace():
                held.append(piece)
                return
            self._after_held = None
            if held:
                piece = "".join(held) + piece
        self._content_text(piece)

    def _header_text(self, piece: str) -> None:
        c = self._call
        c.header.append(piece)  # type: ignore[union-attr]
        c.raw.append(piece)  # type: ignore[union-attr]

    def _arguments_text(self, piece: str) -> None:
        c = self._call
        assert c is not None
        c.raw.append(piece)
        mode = c.mode
        if mode == 0:
            piece = piece.lstrip()
            if not piece:
                return
            if piece[0] == '"':
                c.mode = 2
                c.held.append(piece)
                return
            c.mode = 1
        elif mode == 2:
            c.held.append(piece)
            return
        if piece[-1].isspace():  # trailing whitespace may end the arguments: hold it
            body = piece.rstrip()
            if body:
                tail = piece[len(body):]
                if c.held:
                    body = "".join(c.held) + body
                    c.held = []
                self._emit_args(c, body)
                c.held.append(tail)
            else:
                c.held.append(piece)
        else:
            if c.held:
                piece = "".join(c.held) + piece
                c.held = []
            self._emit_args(c, piece)

    def _run_text(self, piece: str) -> None:
        if not self._run:
            self._run_offset = self._pos
        self._run.append(piece)

    def _end_run(self, fld: str) -> None:
        if self._run:
            text = "".join(self._run)
            self._run = []
            if not text.isspace():
                if fld == "between":
                    self._warn("text_in_section", "text inside a tool-call section, outside any "
                               "call, dropped", self._run_offset, text)
                else:
                    self._warn("text_after_tool_calls", "text after a tool-call section dropped "
                               "(content_after_tool_calls=False)", self._run_offset, text)

    # ---------------------------------------------------------------------------- output

    def _emit_args(self, c: _Call, s: str) -> None:
        c.args.append(s)
        out = self._out
        if out and out[-1][0] == _T and out[-1][1] == c.index:
            e = out[-1]
            if e[4] is None:
                e[4] = [s]
            else:
                e[4].append(s)
        else:
            out.append([_T, c.index, None, None, [s]])

    def _emit_call(self, index: int, id: str | None, name: str | None, args: str | None) -> None:
        out = self._out
        if out and out[-1][0] == _T and out[-1][1] == index:
            e = out[-1]
            if id is not None:
                e[2] = id
            if name is not None:
                e[3] = name
        else:
            out.append([_T, index, id, name, None])

    def _take(self) -> list[Delta]:
        out = self._out
        if not out:
            return []
        self._out = []
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
            else:
                a = e[4]
                res.append(Delta(tool_calls=[ToolCallDelta(e[1], e[2], e[3], None if a is None else "".join(a))]))
        return res

    def _warn(self, kind: str, message: str, offset: int, text: str = "") -> None:
        self._warnings.append(ParseWarning(kind, message, offset, text))

    def _trailing_warning(self) -> ParseWarning:
        return ParseWarning("text_after_end", "text after the end of the turn ignored",
                            self._trailing_offset, "".join(self._trailing))

    def _stop_reason(self) -> StopReason | None:
        if self._ended:
            return StopReason.TOOL_CALLS if self._calls else StopReason.END_TURN
        if not self._finished:
            return None
        if self._truncated:
            return StopReason.TRUNCATED
        return StopReason.TOOL_CALLS if self._calls else StopReason.END_OF_TEXT


def parse(
    text: str,
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Sequence[Any] | None = None,
    thinking_prefilled: bool | None = None,
    **options: Any,
) -> ParsedMessage:
    """Parse a whole assistant turn (the text the model generated after the generation prompt).

    Same options as :class:`StreamParser` (``reasoning``, ``content_after_tool_calls`` and render
    options such as ``thinking=False`` go in ``options``). Never raises on any text.
    """
    p = StreamParser(dialect, tools=tools, thinking_prefilled=thinking_prefilled, **options)
    p.feed(text)
    p.finish()
    return p.message
