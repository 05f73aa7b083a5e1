"""What the server stages need of Kimi-K2 (the hooks :class:`kimi_chat.families.serving.ServingHooks` lists).

K2's reasoning is ``<think>`` … ``</think>``, a marker only in the reasoning dialects (K2-Thinking, K2.5,
K2.6: their tokenizers have ``<think>`` as a token; in Kimi-K2-Instruct it is plain text). Where reasoning
ends is read from the compiled grammar (:data:`REASONING_END_IDS`), the prompt by token ids after the
last ``<|im_assistant|>`` (:func:`prompt_reasoning`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import markers as M
from ...output import StreamParser
from ...output.peg import TEXT, Machine
from .format import TOKEN_CLASSES, machine

if TYPE_CHECKING:
    from ...dialect_records import DialectRecord as Dialect
    from ...output import MarkerLexer
    from ..serving import Decode, PromptMode

__all__ = [
    "REASONING_DIALECT",
    "PLAIN_DIALECT",
    "REASONING_END_IDS",
    "TOOL_CALL_OPENING_IDS",
    "PromptReasoning",
    "prompt_reasoning",
]

REASONING_DIALECT = "kimi-k2-thinking"
"""Dialect used when ``<think>`` is a marker (what it changes is set explicitly anyway)."""
PLAIN_DIALECT = "kimi-k2-instruct"
"""Dialect used when ``<think>`` is plain text."""

VOCABULARY: tuple[M.Marker, ...] = ()
"""K2 is the family of any tokenizer no other family recognises."""
END_OF_TURN = M.IM_END
MODEL_TYPES: tuple[str, ...] = ()
"""None of its own: K2 is the family of a model directory no other family claims."""
SERVED_DIALECT: str | None = None
"""K2 models differ by dialect: it is identified from the model's chat template."""
ALWAYS_REASONS = False
ANSWER_OPEN: str | None = None
TOOL_SECTION = (M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text)
MARKER_PATTERN = machine("message_plain", think=False).markers.pattern
"""Any Kimi marker (the parser's own marker table)."""

_THINK_BEGIN, _THINK_END = M.THINK_BEGIN.text, M.THINK_END.text


def _reasoning_closers() -> tuple[frozenset[int], frozenset[int]]:
    """Read from the compiled grammar: the token ids that close reasoning (every terminal whose
    transition out of the reasoning text leaves the reasoning group), and those of them that open a
    tool-call section (or a bare call) and so belong to the body."""
    inside = machine("message_prefilled", think=True).start.trans[TEXT].target
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


# ------------------------------------------------------------------------------------------ stages


def reasoning_stage(prefilled: bool, tokenizer: Any) -> tuple[bool, StreamParser, Machine, MarkerLexer | None]:
    """The parser and grammar of a reasoning stage (``prefilled``: the prompt opened ``<think>``)."""
    parser = StreamParser(REASONING_DIALECT, thinking_prefilled=prefilled, reasoning=True, tokenizer=tokenizer)
    return prefilled, parser, machine("message_prefilled" if prefilled else "message", think=True), None


def body_parser(tools: Sequence[Any] | None, *, after_reasoning: bool, thinking: bool,
                tokenizer: Any) -> tuple[StreamParser, str]:
    """After reasoning: ``<think>`` is a marker, and an empty ``<think></think>`` puts the machine where
    the whole-turn grammar is after a reasoning block (stray ones are then dropped with a warning).
    Otherwise ``<think>`` is plain text (the Instruct rule). ``thinking`` changes nothing for K2."""
    if after_reasoning:
        parser = StreamParser(REASONING_DIALECT, tools=tools, thinking_prefilled=False, reasoning=True,
                              tokenizer=tokenizer, include_invalid=True)
        return parser, _THINK_BEGIN + _THINK_END
    return StreamParser(PLAIN_DIALECT, tools=tools, thinking_prefilled=False, reasoning=False,
                        tokenizer=tokenizer, include_invalid=True), ""


# ----------------------------------------------------------------------------------- token ids


_THINK_KNOWN: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _has_think_token(tokenizer: Any) -> bool:
    """The tokenizer has ``<think>`` as a token: a reasoning model (K2-Thinking, K2.5, K2.6). The July-2025
    Kimi-K2-Instruct tokenizer does not, and there ``<think>`` is plain text. (Cached per tokenizer:
    vLLM builds parsers per request, and ``get_vocab()`` of a 163k vocabulary costs ~0.2 s.)"""
    try:
        return _THINK_KNOWN[tokenizer]
    except (KeyError, TypeError):
        pass
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is not None:
        known = convert(M.THINK_BEGIN.text) == M.THINK_BEGIN.id
    else:
        known = tokenizer.get_vocab().get(M.THINK_BEGIN.text) == M.THINK_BEGIN.id
    try:
        _THINK_KNOWN[tokenizer] = known
    except TypeError:  # not weak-referenceable
        pass
    return known


def reasons(tokenizer: Any, dialect: Dialect | None) -> bool:
    """A K2 reasoning model: the overriding dialect says so, else the tokenizer has ``<think>``."""
    return dialect.reasoning if dialect is not None else _has_think_token(tokenizer)


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


def prompt_mode(prompt_ids: Sequence[int] | None, thinking_off: bool, decode: Decode) -> PromptMode:
    """Closed ``<think></think>``: no reasoning; an open ``<think>``: inside it; else the output may
    open it. Without the prompt: by the request's thinking switch."""
    if prompt_ids is None:
        return "none" if thinking_off else "may_open"
    pr = prompt_reasoning(prompt_ids)
    if pr.closed:
        return "none"
    return "prefilled" if pr.open else "may_open"


def reasoning_ended(ids: Sequence[int], decode: Decode) -> bool:
    """Judged from the current assistant turn only (after the last ``<|im_assistant|>``): a ``</think>``
    or a tool-call opening ends reasoning, ``<think>`` or the header keeps it open."""
    header, begin, end = M.IM_ASSISTANT.id, M.THINK_BEGIN.id, M.THINK_END.id
    for i in range(len(ids) - 1, -1, -1):
        t = ids[i]
        if t == end or t in TOOL_CALL_OPENING_IDS:
            return True
        if t == begin or t == header:
            return False
    return False


def reasoning_ends_in(ids: Sequence[int], delta: Sequence[int], decode: Decode) -> bool:
    """An id of ``delta`` closes reasoning (:data:`REASONING_END_IDS`)."""
    return any(t in REASONING_END_IDS for t in delta)


def content_ids(ids: list[int], decode: Decode) -> list[int]:
    """The ids after the first ``</think>``, or from the first tool-call section/call begin (which
    belong to the content); all of them if neither is there."""
    end = M.THINK_END.id
    for i, t in enumerate(ids):
        if t == end:
            return ids[i + 1:]
        if t in TOOL_CALL_OPENING_IDS:
            return ids[i:]
    return ids


# ------------------------------------------------------------------------------------------- vLLM

VLLM_STRUCTURAL_TAG_MODEL = "kimi"
VLLM_KEEPS_ITS_CONSTRAINT = None
"""As vLLM's ``kimi_k2`` parser: required/named tool choice in Kimi's format."""
TEXT_PART_LISTS = True
"""kimi_chat renders a list of text parts as the official template does."""


def vllm_thinking_kwargs(dialect: Dialect, kwargs: dict[str, Any]) -> None:
    """K2.5/K2.6 (dialects reading ``thinking``): ``enable_thinking`` -> ``thinking``,
    ``reasoning_effort="none"`` -> ``thinking=False``."""
    if "thinking" not in dialect.options:
        return
    if kwargs.get("enable_thinking") is not None:
        kwargs.setdefault("thinking", bool(kwargs["enable_thinking"]))
    if kwargs.get("reasoning_effort") == "none":
        kwargs.setdefault("thinking", False)


def vllm_conversation(conversation: list[Any]) -> list[Any]:
    """As vLLM parsed it."""
    return conversation


def vllm_request_options(tool_choice: Any, response_format: Any) -> dict[str, Any]:
    """None: the K2 templates read neither."""
    return {}


# ----------------------------------------------------------------------------------------- SGLang

SGLANG_KEEPS_ITS_CONSTRAINT: str | None = None
"""kimi_chat's constraint for a forced tool choice (with ``--grammar-backend llguidance``)."""
SGLANG_STRUCTURAL_TAG_NAME: str | None = "kimi"
"""xgrammar's built-in structural tag for Kimi-K2's format."""


def sglang_think_end_ids(tokenizer: Any) -> list[int] | None:
    """SGLang's own: ``</think>`` (one token where the vocabulary has it) ends reasoning."""
    return None


def sglang_call_structure() -> Callable[[str], tuple[str, str, str]]:
    """One forced call of a tool name: the section and call begin with the call's id, the argument
    begin; the call and section end; triggered by the section begin."""
    begin = M.TOOL_CALLS_SECTION_BEGIN.text + M.TOOL_CALL_BEGIN.text
    arg, end = M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text + M.TOOL_CALLS_SECTION_END.text

    def call(name: str) -> tuple[str, str, str]:
        return begin + M.tool_call_id(name, 0) + arg, end, M.TOOL_CALLS_SECTION_BEGIN.text

    return call


def sglang_structural_tag(tools: Any, tool_choice: Any, thinking_mode: bool, parallel_tool_calls: bool) -> Any | None:
    """The detector's default (xgrammar's ``kimi``)."""
    return None


def sglang_auto_structural_tag(tools: Any, thinking_mode: bool, parallel_tool_calls: bool) -> Any | None:
    """The detector's default."""
    return None
