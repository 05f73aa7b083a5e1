"""The streaming stages of kimi_chat's parser inside a server (vLLM, SGLang), for every format family.

Both servers split parsing in two stages: a *reasoning* stage that sees the output first and hands
"the rest" over as raw text, then a *tool-call* stage that parses that rest into content and tool
calls. kimi_chat has one grammar for the whole turn (the family's output format,
:attr:`kimi_chat.families.Family.output_format`); this module cuts it at the same place for both servers.
What differs per family (which grammar and parser, what the body stage is fed first) comes from the
family's server hooks (:mod:`kimi_chat.servers.hooks`); Kimi-K2 reads as follows:

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

Kimi-K3 (``family="k3"``, :mod:`kimi_chat.families.k3.serving`): the same two stages over the K3 grammar
(:mod:`kimi_chat.families.k3.format`, lexed into tags by :class:`~kimi_chat.families.k3.tags.TagLexer`): the
reasoning stage ends at ``<|close|>think<|sep|>`` or before what closes the think channel instead (a
response or tools channel, the message close, ``<|end_of_msg|>``); the body stage is first fed an empty
``<|close|>think<|sep|>`` (or, thinking off, starts inside the response channel).
:mod:`kimi_chat.servers.family` says which family a server serves.

The framework adapters live in :mod:`kimi_chat.servers.vllm` and
:mod:`kimi_chat.servers.sglang`; this module imports neither framework.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..families import Family
from ..messages import to_plain
from ..output import Delta, MarkerLexer, ParsedMessage, ParsedToolCall
from ..output.ids import TokenMarkers
from ..output.peg import TEXT, WS, Machine, State
from ..families.k2.format import THINK_CLASSES as _THINK_CLASSES
from .diagnostics import LOGGER, CallGate, log_passed_calls, log_warnings
from .hooks import serving_of

# names this module exported before the family records held them (their one definition is the family's)
from ..families.k2.serving import (  # noqa: E402,F401
    PLAIN_DIALECT,
    REASONING_DIALECT,
    REASONING_END_IDS,
    TOOL_CALL_OPENING_IDS,
    PromptReasoning,
    prompt_reasoning,
)
from ..families.k3.serving import ANSWER_OPEN as K3_RESPONSE_OPEN  # noqa: E402
from ..families.k3.serving import DIALECT as K3_DIALECT  # noqa: E402

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

    def __init__(self, machine: Machine, *, inside: bool, lexer: MarkerLexer | None = None,
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
        if tr is None and cls in _THINK_CLASSES:  # a reasoning marker where none is: text, as the parser keeps it
            tr = self._state.trans.get(TEXT)
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

    def __init__(self, *, prefilled: bool, logger: logging.Logger | None = None, family: str | Family = "k2",
                 tokenizer: Any = None) -> None:
        self._logger = LOGGER if logger is None else logger
        self.family = _name(family)
        # the family may start inside reasoning whatever the caller says (K3: the prompt opened the think
        # channel; there is no "may open" start)
        self.prefilled, self._parser, m, lexer = serving_of(family).reasoning_stage(prefilled, tokenizer)
        self._split = _Splitter(m, inside=self.prefilled, lexer=lexer, tokenizer=tokenizer)
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
              family: str | Family = "k2") -> tuple[str | None, str | None]:
        """Whole text: ``(reasoning, rest)`` (``rest`` is ``None`` if the text ended in reasoning)."""
        st = cls(prefilled=prefilled, logger=logger, family=family)
        reasoning, rest = st.feed(text)
        if rest is None:
            tail, rest = st.finish()
            reasoning = _join(reasoning, tail)
        return reasoning, rest


def _name(family: str | Family) -> str:
    """A family's name (``family``: a name or a :class:`~kimi_chat.families.Family`)."""
    return family if isinstance(family, str) else family.name


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
                 logger: logging.Logger | None = None, family: str | Family = "k2", thinking: bool = True,
                 tokenizer: Any = None) -> None:
        self.after_reasoning = after_reasoning
        self.family = _name(family)
        self._logger = LOGGER if logger is None else logger
        self._gate = CallGate(self._logger)
        self._calls: list[ParsedToolCall] | None = None
        self._handover = after_reasoning
        self.parser, lead = serving_of(family).body_parser(tools, after_reasoning=after_reasoning,
                                                           thinking=thinking, tokenizer=tokenizer)
        # the lead (K2: an empty <think></think>; K3: an empty think channel closed) puts the machine
        # where the whole-turn grammar is after a reasoning block: it decides nothing (empty reasoning is
        # no reasoning). Never inside an assert: `python -O` would strip the feed and leave `<think>`
        # opening reasoning in the body.
        if lead:
            self.parser.feed(lead)
        self._shift = len(lead)

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
            logger: logging.Logger | None = None, family: str | Family = "k2", thinking: bool = True) -> BodyStage:
        """Parse a whole text (``feed`` then ``finish``): read :attr:`message` and :attr:`calls`."""
        st = cls(tools=tools, after_reasoning=after_reasoning, logger=logger, family=family, thinking=thinking)
        st.feed(text)
        st.finish()
        return st

    @classmethod
    def parse(cls, text: str, *, tools: Sequence[Any] | None, after_reasoning: bool,
              logger: logging.Logger | None = None, family: str | Family = "k2",
              thinking: bool = True) -> ParsedMessage:
        """Parse a whole text: its :class:`ParsedMessage` (every call)."""
        return cls.run(text, tools=tools, after_reasoning=after_reasoning, logger=logger, family=family,
                       thinking=thinking).message


def tools_as_dicts(tools: Iterable[Any] | None) -> list[Mapping[str, Any]] | None:
    """Framework tool objects (pydantic models, their ``None`` fields left out) as plain OpenAI-shaped
    dicts (:func:`kimi_chat.messages.to_plain`); ``None`` for no tools."""
    if not tools:
        return None
    return [t if type(t) is dict else to_plain(t, index=i, what="tools", exclude_none=True)
            for i, t in enumerate(tools)]


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
