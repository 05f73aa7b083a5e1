"""Server integrations: kimi_chat's parser inside vLLM and SGLang.

Both servers split parsing in two stages: a *reasoning* stage that sees the output first and hands
"the rest" over as raw text, then a *tool-call* stage that parses that rest into content and tool
calls. kimi_chat has one grammar for the whole turn (:mod:`kimi_chat.format`); this module cuts it
at the same place for both servers:

* :class:`ReasoningStage` runs a :class:`~kimi_chat.parse.StreamParser` over the output while the
  turn is in reasoning and finds, with the compiled grammar itself (the same state table the parser
  runs), the exact character where reasoning ends: after ``</think>``, or *before* a tool-call
  section / bare tool call / end of turn that closes it. Everything from there on is handed over
  raw, markers included.
* :class:`BodyStage` parses the handed-over rest (content and tool calls). When a reasoning stage ran
  before it, it first feeds an empty ``<think></think>`` so that its parser is in exactly the state
  the whole-turn grammar is in after reasoning (``<think>``/``</think>`` are then stray markers,
  dropped with a warning, as in :func:`kimi_chat.parse`). Without a reasoning stage ``<think>`` is
  plain text (the Instruct rule, and what the servers do when no reasoning parser is configured).

The framework adapters live in :mod:`kimi_chat.integrations.vllm` and
:mod:`kimi_chat.integrations.sglang`; this module imports neither framework.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import markers as M
from ..formats.k2 import machine as compile_machine
from ..peg import TEXT, WS, Machine, State
from ..parse import Delta, ParsedMessage, StreamParser

__all__ = [
    "REASONING_DIALECT",
    "PLAIN_DIALECT",
    "ReasoningStage",
    "BodyStage",
    "CallDelta",
    "merge_deltas",
    "PromptReasoning",
    "prompt_reasoning",
    "REASONING_END_IDS",
]

REASONING_DIALECT = "kimi-k2-thinking"
"""Dialect used when ``<think>`` is a marker (what it changes is set explicitly anyway)."""
PLAIN_DIALECT = "kimi-k2-instruct"

_THINK_BEGIN = M.THINK_BEGIN.text
_THINK_END = M.THINK_END.text

REASONING_END_IDS: frozenset[int] = frozenset(
    m.id
    for m in (
        M.THINK_END,
        M.TOOL_CALLS_SECTION_BEGIN,
        M.TOOL_CALL_BEGIN,
        M.IM_END,
        M.EOS,
        M.IM_USER,
        M.IM_ASSISTANT,
        M.IM_SYSTEM,
    )
    if m.id is not None
)
"""Token ids that close reasoning (the single-token spellings of what the grammar's
``reasoning_close`` accepts). Used where a server asks with token ids only."""


# --------------------------------------------------------------------------------------------------
# Reasoning stage


class _Splitter:
    """Walks the compiled grammar over raw text (markers and text runs only) until the reasoning
    group is left; reports where, in the raw text, the reasoning stage ends.

    It lexes like the parser: only a trailing proper prefix of a marker is held back.
    """

    def __init__(self, machine: Machine, *, inside: bool) -> None:
        self._m = machine
        self._state: State = machine.start
        self._search = re.compile(
            "|".join(re.escape(s) for s in sorted(machine.classes, key=len, reverse=True))
        ).search
        self._pre = self._pre_states(machine)
        self._held = ""  # raw text not yet released: the undecided suffix (+ leading whitespace)
        self.entered = inside  # the output starts inside reasoning (prefilled)
        self.done = False

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

    def feed(self, text: str) -> tuple[int, int] | None:
        """Consume ``text``. Returns ``None`` while still in reasoning, else ``(split, token_end)``:
        offsets into ``held + text`` (``held`` as it was before this call, see :attr:`held`) where
        the rest starts and where the token that decided it ends."""
        s = self._held + text
        n = len(s)
        hold = n
        lo = max(0, n - (self._m.max_len - 1))
        for ch in self._m.start_chars:
            i = s.rfind(ch, lo)
            if 0 <= i < hold and s[i:] in self._m.prefixes:
                hold = i
        pos = 0
        while pos < hold:
            mt = self._search(s, pos, hold)
            end = hold if mt is None else mt.start()
            if end > pos:
                piece = s[pos:end]
                r = self._step(WS if piece.isspace() else TEXT, pos, end)
                if r is not None:
                    return self._stop(r)
            if mt is None:
                break
            cls = self._m.classes[mt.group()]
            r = self._step(cls, mt.start(), mt.end())
            if r is not None:
                return self._stop(r)
            pos = mt.end()
        # nothing decided the end: keep the undecided suffix, and everything while before reasoning
        self._held = s if not self.entered else s[hold:]
        return None

    def _stop(self, r: tuple[int, int]) -> tuple[int, int]:
        self.done = True
        self._held = ""
        return r

    @property
    def held(self) -> str:
        return self._held

    def _step(self, cls: str, start: int, end: int) -> tuple[int, int] | None:
        tr = self._state.trans.get(cls)
        if tr is None:  # a stray marker: dropped by the parser, the state stays
            return None
        for kind, name, arg in tr.events:
            if name != "reasoning":
                continue
            if kind == "enter":
                self.entered = True
            elif kind == "exit":
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
    """

    def __init__(self, *, prefilled: bool) -> None:
        self.prefilled = prefilled
        self._parser = StreamParser(REASONING_DIALECT, thinking_prefilled=prefilled, reasoning=True)
        rule = "message_prefilled" if prefilled else "message"
        self._split = _Splitter(compile_machine(rule, think=True), inside=prefilled)
        self._finished = False

    @property
    def ended(self) -> bool:
        """Reasoning has ended (the rest is being handed over)."""
        return self._split.done

    def feed(self, text: str, token_ids: Sequence[int] | None = None) -> tuple[str | None, str | None]:
        if self._split.done:
            return None, text
        held = self._split.held  # already fed to the parser (undecided there too)
        r = self._split.feed(text)
        if r is None:
            return _reasoning(self._parser.feed(text, token_ids)), None
        split, token_end = r
        # the parser sees the text up to the end of the token that closed reasoning (so a held
        # marker prefix before a closing marker is decided as text, as in the whole parse); only
        # its reasoning is used
        before = token_end - len(held)
        reasoning = _reasoning(self._parser.feed(text[:before])) if before > 0 else None
        return reasoning, (held + text)[split:]

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
        return _reasoning(self._parser.finish()), None

    @classmethod
    def split(cls, text: str, *, prefilled: bool) -> tuple[str | None, str | None]:
        """Whole text: ``(reasoning, rest)`` (``rest`` is ``None`` if the text ended in reasoning)."""
        st = cls(prefilled=prefilled)
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
    """

    def __init__(self, *, tools: Sequence[Any] | None, after_reasoning: bool) -> None:
        self.after_reasoning = after_reasoning
        if after_reasoning:
            self.parser = StreamParser(REASONING_DIALECT, tools=tools, thinking_prefilled=False, reasoning=True)
            # put the machine where the whole-turn grammar is after a reasoning block: decides
            # nothing (empty reasoning is no reasoning)
            assert not self.parser.feed(_THINK_BEGIN + _THINK_END)
        else:
            self.parser = StreamParser(PLAIN_DIALECT, tools=tools, thinking_prefilled=False, reasoning=False)

    def feed(self, text: str, token_ids: Sequence[int] | None = None) -> Merged:
        return merge_deltas(self.parser.feed(text, token_ids))

    def finish(self) -> Merged:
        return merge_deltas(self.parser.finish())

    @property
    def message(self) -> ParsedMessage:
        return self.parser.message

    @classmethod
    def parse(cls, text: str, *, tools: Sequence[Any] | None, after_reasoning: bool) -> ParsedMessage:
        st = cls(tools=tools, after_reasoning=after_reasoning)
        st.parser.feed(text)
        st.parser.finish()
        return st.parser.message


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
