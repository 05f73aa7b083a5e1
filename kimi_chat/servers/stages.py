"""Server integrations: kimi_chat's parser inside vLLM and SGLang.

Both servers split parsing in two stages: a *reasoning* stage that sees the output first and hands
"the rest" over as raw text, then a *tool-call* stage that parses that rest into content and tool
calls. kimi_chat has one grammar for the whole turn (:mod:`kimi_chat.families.k2.format`); this module cuts it
at the same place for both servers:

* :class:`ReasoningStage` runs a :class:`~kimi_chat.output.StreamParser` over the output while the
  turn is in reasoning and finds, with the compiled grammar itself (the same state table the parser
  runs), the exact character where reasoning ends: after ``</think>``, or *before* a tool-call
  section / bare tool call / end of turn that closes it. Everything from there on is handed over
  raw, markers included.
* :class:`BodyStage` parses the handed-over rest (content and tool calls). When a reasoning stage ran
  before it, it first feeds an empty ``<think></think>`` so that its parser is in exactly the state
  the whole-turn grammar is in after reasoning (``<think>``/``</think>`` are then stray markers,
  dropped with a warning, as in :func:`kimi_chat.parse`). Without a reasoning stage ``<think>`` is
  plain text (the Instruct rule, and what the servers do when no reasoning parser is configured).

Both stages log what the parse reported (parse warnings, non-``ok`` call statuses) to the logger
they are given, and the body stage hands on only executable tool calls, renumbered without gaps (:mod:`kimi_chat.servers.diagnostics` says which, and at which level).

Kimi-K3 (``family="k3"``): the same two stages over the K3 grammar (:mod:`kimi_chat.families.k3.format`,
lexed into tags by :class:`~kimi_chat.families.k3.tags.TagLexer`): the reasoning stage ends at
``<|close|>think<|sep|>`` or before what closes the think channel instead (a response or tools channel,
the message close, ``<|end_of_msg|>``); the body stage is first fed an empty ``<|close|>think<|sep|>``
(or, thinking off, starts inside the response channel). :mod:`kimi_chat.servers.family` says
which family a server serves.

The framework adapters live in :mod:`kimi_chat.servers.vllm` and
:mod:`kimi_chat.servers.sglang`; this module imports neither framework.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import markers as M
from ..families.k2.format import TOKEN_CLASSES
from ..families.k2.format import machine as compile_machine
from ..families.k3.format import TAGS as K3_TAGS
from ..families.k3.format import machine as k3_machine
from ..output import Delta, MarkerLexer, ParsedMessage, ParsedToolCall, StreamParser
from ..output.ids import TokenMarkers
from ..families.k3.tags import TagLexer
from ..output.peg import TEXT, WS, Machine, State
from .diagnostics import LOGGER, CallGate, log_passed_calls, log_warnings

__all__ = [
    "REASONING_DIALECT",
    "PLAIN_DIALECT",
    "K3_DIALECT",
    "K3_RESPONSE_OPEN",
    "ReasoningStage",
    "BodyStage",
    "CallDelta",
    "merge_deltas",
    "PromptReasoning",
    "prompt_reasoning",
    "REASONING_END_IDS",
    "TOOL_CALL_OPENING_IDS",
]

REASONING_DIALECT = "kimi-k2-thinking"
"""Dialect used when ``<think>`` is a marker (what it changes is set explicitly anyway)."""
PLAIN_DIALECT = "kimi-k2-instruct"
K3_DIALECT = "kimi-k3"
"""The Kimi-K3 dialect (XTML output: the think, response and tools channels)."""

_THINK_BEGIN = M.THINK_BEGIN.text
_THINK_END = M.THINK_END.text
_K3_THINK_CLOSE = M.K3_CLOSE.text + "think" + M.K3_SEP.text
"""What the K3 body stage is fed first after a reasoning stage: the think channel closed (empty)."""
K3_RESPONSE_OPEN = M.K3_OPEN.text + "response" + M.K3_SEP.text
"""The response channel's open tag (what a K3 prompt with thinking off pre-fills)."""


def _reasoning_closers() -> tuple[frozenset[int], frozenset[int]]:
    """Read from the compiled grammar: the token ids that close reasoning (every terminal whose
    transition out of the reasoning text leaves the reasoning group), and those of them that open a
    tool-call section (or a bare call) and so belong to the body."""
    inside = compile_machine("message_prefilled", think=True).start.trans[TEXT].target
    closing: set[int] = set()
    opening: set[int] = set()
    for cls, tr in inside.trans.items():
        steps = {(kind, name) for kind, name, _ in tr.events}
        if cls not in TOKEN_CLASSES or ("exit", "reasoning") not in steps:
            continue
        ids = {m.id for m in TOKEN_CLASSES[cls] if m.id is not None}
        closing |= ids
        if ("enter", "section") in steps:
            opening |= ids
    return frozenset(closing), frozenset(opening)


REASONING_END_IDS, TOOL_CALL_OPENING_IDS = _reasoning_closers()
"""``REASONING_END_IDS``: token ids that close reasoning (the single-token spellings of what the
grammar's ``reasoning_close`` accepts: ``</think>``, a tool-call section or call begin, the end of
the turn, another message's header). ``TOOL_CALL_OPENING_IDS``: those of them that open a tool-call
section or call (they belong to what follows). Used where a server asks with token ids only."""


# --------------------------------------------------------------------------------------------------
# Reasoning stage


def _no_warning(kind: str, message: str, offset: int, text: str = "") -> None:
    """The splitter's warnings are the parser's (it sees the same text and ids): not repeated."""


class _Splitter:
    """Walks the compiled grammar over raw text (markers and text runs only) until the reasoning
    group is left; reports where, in the raw text, the reasoning stage ends.

    It lexes with the parser's own :class:`~kimi_chat.output.MarkerLexer` (only a trailing proper
    prefix of a marker is held back); before reasoning is entered, the text seen so far (whitespace
    only, else the body has started) is held as well.
    """

    def __init__(self, machine: Machine, *, inside: bool, lexer: MarkerLexer | TagLexer | None = None,
                 tokenizer: Any = None) -> None:
        self._m = machine
        self._state: State = machine.start
        self._lexer = MarkerLexer(machine.markers) if lexer is None else lexer
        self._ids = TokenMarkers(machine.markers, _no_warning, tokenizer)  # token ids make markers certain
        self._fed = 0  # characters fed so far
        self._pre = self._pre_states(machine)
        self._before = ""  # decided text seen before reasoning was entered (whitespace)
        self._pos = 0  # offset, in held + text, of the next piece the lexer reports
        self._result: tuple[int, int] | None = None
        self.entered = inside  # the output starts inside reasoning (prefilled)
        self.done = False
        self.closing_warnings: list[str] = []
        """Kinds of the warnings the closing transition raises inside reasoning (before leaving it)."""

    @staticmethod
    def _pre_states(m: Machine) -> frozenset[int]:
        """States reachable from the start through whitespace alone, with no group entered: the
        output may still open reasoning there (``message`` rule)."""
        seen = {m.start.id}
        st = m.start
        while True:
            tr = st.trans.get(WS)
            if tr is None or tr.events or tr.target.id in seen:
                break
            st = tr.target
            seen.add(st.id)
        return frozenset(seen)

    def feed(self, text: str, token_ids: Sequence[int] | None = None) -> tuple[int, int] | None:
        """Consume ``text`` (with its token ids, if known: then a marker spelled by ordinary tokens,
        e.g. a typed ``</think>``, is text, as :class:`~kimi_chat.output.StreamParser` reads it).
        Returns ``None`` while still in reasoning, else ``(split, token_end)``: offsets into
        ``held + text`` (``held`` as it was before this call, see :attr:`held`) where the rest starts
        and where the token that decided it ends."""
        at = self._fed  # offset of ``text`` in the output
        self._fed += len(text)
        if token_ids is not None:
            self._ids.add(text, token_ids, at)
        if self.entered and not self._before and not self._lexer.may_start(text) and self._loops():
            return None  # no marker can start here and text keeps the state: still reasoning
        self._pos = len(self._before)
        if token_ids is None:
            self._lexer.feed(text, self._on_text, self._on_marker)
        else:
            self._lexer.feed(text, self._on_text, self._on_marker, self._ids.real, at - len(self._lexer.pending))
        if self._result is not None:
            self.done = True
            self._before = ""
            self._lexer.flush()
            return self._result
        return None

    def _on_text(self, piece: str) -> None:
        if self._result is not None:
            return
        start = self._pos
        self._pos += len(piece)
        self._result = self._step(WS if piece.isspace() else TEXT, start, self._pos)
        if self._result is None and not self.entered:
            self._before += piece

    def _on_marker(self, cls: str, spelling: str) -> bool:
        if self._result is not None:  # decided by the text before it: stop the lexer
            return True
        start = self._pos
        self._pos += len(spelling)
        self._result = self._step(cls, start, self._pos)
        if self._result is None and not self.entered:
            self._before += spelling
        elif self.entered:
            self._before = ""
        return self._result is not None

    def _loops(self) -> bool:
        """Text and whitespace leave the current state as it is (no event: inside reasoning text)."""
        st = self._state
        for cls in (TEXT, WS):
            tr = st.trans.get(cls)
            if tr is None or tr.target is not st or tr.events:
                return False
        return True

    @property
    def held(self) -> str:
        """Raw text not released yet: the undecided suffix (and, before reasoning, all of it)."""
        return self._before + self._lexer.pending

    def _step(self, cls: str, start: int, end: int) -> tuple[int, int] | None:
        tr = self._state.trans.get(cls)
        if tr is None:  # a stray marker: dropped by the parser, the state stays
            return None
        warned = []
        for kind, name, arg in tr.events:
            if kind == "warn" and self.entered:
                warned.append(name)
            if name != "reasoning":
                continue
            if kind == "enter":
                self.entered = True
            elif kind == "exit":
                self.closing_warnings = warned
                return (end, end) if arg else (start, end)
        self._state = tr.target
        if not self.entered and tr.target.id not in self._pre:
            return (0, end)  # the body started: there is no reasoning
        return None


class ReasoningStage:
    """The reasoning part of a turn, streamed.

    ``prefilled``: the prompt already opened ``<think>`` (the output starts inside reasoning; a
    redundant ``<think>`` at its start is accepted). Otherwise the output may open with ``<think>``
    (after whitespace); if it opens with anything else there is no reasoning.

    :meth:`feed` returns ``(reasoning, rest)``: the reasoning decided by this chunk (``None`` if
    none) and, once reasoning has ended, the raw rest of the output (``rest`` is ``None`` before
    that; after it, every later chunk is returned whole as ``rest``).

    Token ids passed to :meth:`feed` make markers certain (a typed ``</think>`` stays reasoning);
    ``tokenizer`` (any decoder :func:`kimi_chat.output.ids.token_bytes` takes) makes that exact for
    chunks of several tokens too (see :mod:`kimi_chat.output.ids`).
    """

    def __init__(self, *, prefilled: bool, logger: logging.Logger | None = None, family: str = "k2",
                 tokenizer: Any = None) -> None:
        self._logger = LOGGER if logger is None else logger
        self.family = family
        if family == "k3":  # the prompt opened the think channel (K3 has no "may open" start)
            self.prefilled = prefilled = True
            self._parser = StreamParser(K3_DIALECT, thinking_prefilled=True, tokenizer=tokenizer)
            m = k3_machine("message")
            self._split = _Splitter(m, inside=True, lexer=TagLexer(m.markers, K3_TAGS), tokenizer=tokenizer)
        else:
            self.prefilled = prefilled
            self._parser = StreamParser(REASONING_DIALECT, thinking_prefilled=prefilled, reasoning=True,
                                        tokenizer=tokenizer)
            rule = "message_prefilled" if prefilled else "message"
            self._split = _Splitter(compile_machine(rule, think=True), inside=prefilled, tokenizer=tokenizer)
        self._finished = False
        self._fed = 0  # characters fed to the parser

    @property
    def ended(self) -> bool:
        """Reasoning has ended (the rest is being handed over)."""
        return self._split.done

    def feed(self, text: str, token_ids: Sequence[int] | None = None) -> tuple[str | None, str | None]:
        """Consume the next chunk: ``(reasoning, rest)`` as described above."""
        if self._split.done:
            return None, text
        held = self._split.held  # already fed to the parser (undecided there too)
        r = self._split.feed(text, token_ids)
        if r is None:
            self._fed += len(text)
            return _reasoning(self._parser.feed(text, token_ids)), None
        split, token_end = r
        # the parser sees the text up to the end of the token that closed reasoning (so a held
        # marker prefix before a closing marker is decided as text, as in the whole parse); only
        # its reasoning is used
        before = token_end - len(held)
        start = self._fed - len(held)  # offset of held + text in the output
        if token_ids is not None:  # the ids are the whole chunk's: the parser reads it all (with them,
            # its reasoning ends where the splitter's did; what follows is not reasoning)
            reasoning = _reasoning(self._parser.feed(text, token_ids))
        else:
            reasoning = _reasoning(self._parser.feed(text[:before])) if before > 0 else None
        self._log(start + split)
        return reasoning, (held + text)[split:]

    def _log(self, end: int | None) -> None:
        """Log the warnings of the reasoning (those before ``end``, where the rest starts, plus the
        closing token's own; ``None``: all, the output ended in reasoning)."""
        warnings = self._parser.message.warnings
        if end is not None:
            closing = list(self._split.closing_warnings)
            mine = []
            for w in warnings:
                if w.offset < end:
                    mine.append(w)
                elif w.offset == end and w.kind in closing:
                    closing.remove(w.kind)
                    mine.append(w)
            warnings = mine
        log_warnings(self._logger, warnings, "output")

    def finish(self) -> tuple[str | None, str | None]:
        """The stream ended: ``(reasoning, rest)``. ``reasoning``: the last reasoning, if the stream
        ended inside it. ``rest``: if the output never opened reasoning (only whitespace and an
        unfinished marker prefix came), that raw text, for the body stage. Both ``None`` if
        reasoning had already ended (the rest was handed over by :meth:`feed`)."""
        if self._split.done or self._finished:
            return None, None
        self._finished = True
        if not self._split.entered:
            held = self._split.held
            return None, (held or None)
        reasoning = _reasoning(self._parser.finish())
        self._log(None)
        return reasoning, None

    @classmethod
    def split(cls, text: str, *, prefilled: bool, logger: logging.Logger | None = None,
              family: str = "k2") -> tuple[str | None, str | None]:
        """Whole text: ``(reasoning, rest)`` (``rest`` is ``None`` if the text ended in reasoning)."""
        st = cls(prefilled=prefilled, logger=logger, family=family)
        reasoning, rest = st.feed(text)
        if rest is None:
            tail, rest = st.finish()
            reasoning = _join(reasoning, tail)
        return reasoning, rest


def _reasoning(deltas: Iterable[Delta]) -> str | None:
    parts = [d.reasoning_content for d in deltas if d.reasoning_content is not None]
    return "".join(parts) if parts else None


def _join(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


# --------------------------------------------------------------------------------------------------
# Body stage


@dataclass
class CallDelta:
    """One tool call's piece within a chunk (pieces of the same call merged)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class Merged:
    content: str | None = None
    reasoning: str | None = None
    calls: list[CallDelta] = field(default_factory=list)


def merge_deltas(deltas: Iterable[Delta]) -> Merged:
    """The deltas of one chunk as one piece: content and reasoning concatenated, tool-call pieces
    merged per call (in order of first appearance)."""
    out = Merged()
    by_index: dict[int, CallDelta] = {}
    for d in deltas:
        if d.content is not None:
            out.content = (out.content or "") + d.content
        if d.reasoning_content is not None:
            out.reasoning = (out.reasoning or "") + d.reasoning_content
        for t in d.tool_calls:
            c = by_index.get(t.index)
            if c is None:
                c = by_index[t.index] = CallDelta(t.index)
                out.calls.append(c)
            if t.id is not None:
                c.id = t.id
            if t.name is not None:
                c.name = t.name
            if t.arguments is not None:
                c.arguments += t.arguments
    return out


class BodyStage:
    """Content and tool calls of a turn, streamed (the text after reasoning, or the whole output).

    ``after_reasoning``: a reasoning stage handled (or the prompt closed) the reasoning, so
    ``<think>``/``</think>`` are markers here (stray ones are dropped with a warning); otherwise
    they are literal text.

    ``family="k3"`` (Kimi-K3 XTML): ``after_reasoning`` puts the parser after a closed think
    channel (the text handed over by the reasoning stage: ``<|open|>response<|sep|>...``);
    ``thinking=False`` (the prompt opened the response channel, no reasoning stage ran) starts
    inside the response channel; ``after_reasoning=False`` with thinking on parses the whole turn,
    the think channel included (its text is then not content: see :attr:`message`).

    The parser streams every call as written (``include_invalid=True``): the gate below decides.
    :meth:`feed` and :meth:`finish` return only the calls the client gets (executable ones,
    renumbered ``0, 1, ...``; see :mod:`~kimi_chat.servers.diagnostics`); :attr:`message` is the
    whole parse, every call included. :meth:`finish` logs the parse's warnings and the non-``ok``
    statuses of the calls handed on to ``logger``. ``tokenizer``: as for :class:`ReasoningStage`.
    """

    def __init__(self, *, tools: Sequence[Any] | None, after_reasoning: bool,
                 logger: logging.Logger | None = None, family: str = "k2", thinking: bool = True,
                 tokenizer: Any = None) -> None:
        self.after_reasoning = after_reasoning
        self.family = family
        self._logger = LOGGER if logger is None else logger
        self._gate = CallGate(self._logger)
        self._calls: list[ParsedToolCall] | None = None
        self._shift = 0
        self._handover = after_reasoning
        if family == "k3":
            self.parser = StreamParser(K3_DIALECT, tools=tools, thinking_prefilled=thinking, tokenizer=tokenizer,
                                       include_invalid=True)
            if thinking and after_reasoning:
                # decides nothing (an empty think channel is no reasoning); never inside an assert
                self.parser.feed(_K3_THINK_CLOSE)
                self._shift = len(_K3_THINK_CLOSE)
        elif after_reasoning:
            self.parser = StreamParser(REASONING_DIALECT, tools=tools, thinking_prefilled=False, reasoning=True,
                                       tokenizer=tokenizer, include_invalid=True)
            # put the machine where the whole-turn grammar is after a reasoning block: decides
            # nothing (empty reasoning is no reasoning). Never inside an assert: `python -O`
            # would strip the feed and leave `<think>` opening reasoning in the body.
            self.parser.feed(_THINK_BEGIN + _THINK_END)
            self._shift = len(_THINK_BEGIN + _THINK_END)
        else:
            self.parser = StreamParser(PLAIN_DIALECT, tools=tools, thinking_prefilled=False, reasoning=False,
                                       tokenizer=tokenizer, include_invalid=True)

    def feed(self, text: str, token_ids: Sequence[int] | None = None) -> Merged:
        """Consume the next chunk: what it decided, for the client.

        After a reasoning stage, the first chunk is the hand-over (the reasoning stage's held text
        plus the rest of its chunk): the server's ids for it are that chunk's, not the text's, so it
        is read by its text alone (ids would leave the held marker without its id, or credit an id
        to a later typed copy)."""
        if self._handover:
            self._handover = False
            token_ids = None
        return self._for_client(merge_deltas(self.parser.feed(text, token_ids)))

    def finish(self) -> Merged:
        """End of the output: the last pieces for the client; logs the turn's diagnostics."""
        if self._calls is not None:
            return Merged()
        out = self._for_client(merge_deltas(self.parser.finish()))
        msg = self.parser.message
        self._calls = self._gate.check_final(msg.tool_calls)
        log_warnings(self._logger, msg.warnings, "output after reasoning" if self.after_reasoning else "output",
                     self._shift)
        log_passed_calls(self._logger, self._calls)
        return out

    def _for_client(self, m: Merged) -> Merged:
        if not m.calls:
            return m
        calls = []
        for c in m.calls:
            if not self._gate.seen(c.index):  # a call's first piece: decide it (once per call)
                call = self.parser.tool_call(c.index)  # O(1): not a rebuild of the whole message
                if call is None:  # the parser does not list it as a call: nothing to hand on
                    self._gate.withhold(c.index)
                else:
                    self._gate.admit(call)
            k = self._gate.client_index(c.index)
            if k is not None:
                calls.append(CallDelta(k, c.id, c.name, c.arguments))
        m.calls = calls
        return m

    @property
    def message(self) -> ParsedMessage:
        """The whole parse so far (every call, executable or not; parser indices)."""
        return self.parser.message

    def client_index(self, call: ParsedToolCall) -> int | None:
        """The index the client sees for ``call`` (``None``: withheld, or not streamed yet)."""
        return self._gate.client_index(call.index)

    @property
    def calls(self) -> list[ParsedToolCall]:
        """After :meth:`finish`: the calls handed to the client, in order (client index = position)."""
        if self._calls is None:
            raise RuntimeError("BodyStage.calls before finish()")
        return self._calls

    @classmethod
    def run(cls, text: str, *, tools: Sequence[Any] | None, after_reasoning: bool,
            logger: logging.Logger | None = None, family: str = "k2", thinking: bool = True) -> BodyStage:
        """Parse a whole text (``feed`` then ``finish``): read :attr:`message` and :attr:`calls`."""
        st = cls(tools=tools, after_reasoning=after_reasoning, logger=logger, family=family, thinking=thinking)
        st.feed(text)
        st.finish()
        return st

    @classmethod
    def parse(cls, text: str, *, tools: Sequence[Any] | None, after_reasoning: bool,
              logger: logging.Logger | None = None, family: str = "k2", thinking: bool = True) -> ParsedMessage:
        """Parse a whole text: its :class:`ParsedMessage` (every call)."""
        return cls.run(text, tools=tools, after_reasoning=after_reasoning, logger=logger, family=family,
                       thinking=thinking).message


# --------------------------------------------------------------------------------------------------
# Prompt analysis (token ids)


@dataclass(frozen=True)
class PromptReasoning:
    """What the prompt says about reasoning in the output, read after the last ``<|im_assistant|>``."""

    open: bool
    """The prompt opened ``<think>`` and did not close it: the output starts inside reasoning."""
    closed: bool
    """The prompt opened and closed ``<think>`` (``<think></think>``, thinking off): no reasoning."""


def prompt_reasoning(ids: Sequence[int]) -> PromptReasoning:
    """Read the current assistant turn of a prompt (the ids after its last ``<|im_assistant|>``; the
    whole prompt if there is none). Earlier turns are never looked at: a ``</think>`` in the
    history says nothing about this turn."""
    begin, end, header = M.THINK_BEGIN.id, M.THINK_END.id, M.IM_ASSISTANT.id
    for i in range(len(ids) - 1, -1, -1):
        t = ids[i]
        if t == end:
            return PromptReasoning(open=False, closed=True)
        if t == begin:
            return PromptReasoning(open=True, closed=False)
        if t == header:
            break
    return PromptReasoning(open=False, closed=False)


def tools_as_dicts(tools: Iterable[Any] | None) -> list[Mapping[str, Any]] | None:
    """Framework tool objects (pydantic models) as plain OpenAI-shaped dicts."""
    if not tools:
        return None
    out = []
    for t in tools:
        if hasattr(t, "model_dump"):
            t = t.model_dump(exclude_none=True)
        out.append(t)
    return out


def track_streamed(parser: Any, index: int, name: str | None, arguments: str) -> None:
    """Keep a server tool parser's ``prev_tool_call_arr`` / ``streamed_args_for_tool`` equal to what
    was streamed (vLLM's and SGLang's base classes share these attributes), so their end-of-stream
    check for unstreamed arguments finds nothing to add."""
    streamed, prev = parser.streamed_args_for_tool, parser.prev_tool_call_arr
    while len(streamed) <= index:
        streamed.append("")
        prev.append({"name": None, "arguments": ""})
    streamed[index] += arguments
    entry = prev[index]
    if name is not None:
        entry["name"] = name
    entry["arguments"] = streamed[index]
    parser.current_tool_id = len(prev) - 1
    parser.current_tool_name_sent = prev[-1]["name"] is not None
