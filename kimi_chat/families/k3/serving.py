"""What the server stages need of Kimi-K3 (the hooks :class:`kimi_chat.families.serving.ServingHooks` lists).

Every K3 model reasons in the think channel. The prompt opens it (``<|open|>think<|sep|>``), or, with
thinking off, the response channel. Prompts and outputs are read by token ids: a tag is ``<|open|>`` /
``<|close|>`` … ``<|sep|>`` by their special ids, so marker text spelled by ordinary tokens (a user typing
``<|close|>think<|sep|>``) is never taken for a tag. :func:`tag_name` is the one reader of a tag by ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ... import markers as M
from ...output import StreamParser
from ...output.peg import Machine
from .format import TAGS, machine
from .tags import TagLexer

if TYPE_CHECKING:
    from ...dialect_records import DialectRecord as Dialect
    from ..serving import Decode, PromptMode

__all__ = ["DIALECT", "tag_name", "prompt_channel", "reasoning_ended", "tag_ends_reasoning", "content_ids"]

DIALECT = "kimi-k3"
"""The Kimi-K3 dialect (XTML output: the think, response and tools channels)."""

VOCABULARY = (M.K3_OPEN, M.K3_END_OF_MSG)
"""K3's vocabulary has ``<|open|>`` and ``<|end_of_msg|>`` at these ids (where K2 has ``<|im_end|>`` /
``<|im_user|>``)."""
END_OF_TURN = M.K3_END_OF_MSG
MODEL_TYPES = ("kimi_k3",)
"""A K3 model directory's ``config.json`` says ``model_type: kimi_k3`` (or a variant of it)."""
SERVED_DIALECT: str | None = DIALECT
"""Every model with K3's vocabulary is served as Kimi-K3."""
ALWAYS_REASONS = True
ANSWER_OPEN: str | None = M.K3_OPEN.text + "response" + M.K3_SEP.text
"""The response channel's open tag (what a K3 prompt with thinking off pre-fills)."""
TOOL_SECTION = (M.K3_OPEN.text + "tools" + M.K3_SEP.text, M.K3_CLOSE.text + "tools" + M.K3_SEP.text)
MARKER_PATTERN = machine("message").markers.pattern
"""Any Kimi-K3 marker (the K3 parser's marker table)."""

_THINK_CLOSE = M.K3_CLOSE.text + "think" + M.K3_SEP.text
"""What the body stage is fed first after a reasoning stage: the think channel closed (empty)."""

_OPEN, _CLOSE, _SEP, _END = M.K3_OPEN.id, M.K3_CLOSE.id, M.K3_SEP.id, M.K3_END_OF_MSG.id
_TAG_SPAN = 64
"""How many tokens a tag name and its attributes may take (``<|open|>call tool="..." index="1"<|sep|>``)."""


# ------------------------------------------------------------------------------------------ stages


def reasons(tokenizer: Any, dialect: Dialect | None) -> bool:
    """Always: every K3 model thinks (thinking off is the prompt's business)."""
    return True


def reasoning_stage(prefilled: bool, tokenizer: Any) -> tuple[bool, StreamParser, Machine, TagLexer]:
    """The prompt opened the think channel (K3 has no "may open" start): always prefilled."""
    m = machine("message")
    parser = StreamParser(DIALECT, thinking_prefilled=True, tokenizer=tokenizer)
    return True, parser, m, TagLexer(m.markers, TAGS)


def body_parser(tools: Sequence[Any] | None, *, after_reasoning: bool, thinking: bool,
                tokenizer: Any) -> tuple[StreamParser, str]:
    """``after_reasoning`` (thinking on): after a closed think channel, the text handed over being
    ``<|open|>response<|sep|>...``; ``thinking=False`` (the prompt opened the response channel) starts
    inside the response channel; ``after_reasoning=False`` with thinking on parses the whole turn."""
    parser = StreamParser(DIALECT, tools=tools, thinking_prefilled=thinking, tokenizer=tokenizer,
                          include_invalid=True)
    return parser, (_THINK_CLOSE if thinking and after_reasoning else "")


# ----------------------------------------------------------------------------------- token ids


def tag_name(ids: Sequence[int], i: int, decode: Decode) -> tuple[str, int] | None:
    """``(name, sep)`` of the tag whose ``<|open|>``/``<|close|>`` is at ``i``: its name (the first word
    of its body) and the index of its ``<|sep|>``. ``None``: no ``<|sep|>`` within reach, or another
    tag marker or ``<|end_of_msg|>`` before it."""
    end = min(len(ids), i + 1 + _TAG_SPAN)
    for j in range(i + 1, end):
        t = ids[j]
        if t == _SEP:
            body = decode(ids[i + 1:j]).strip()
            return (body.split(None, 1)[0] if body else ""), j
        if t in (_OPEN, _CLOSE, _END):
            return None
    return None


def _last_tags(ids: Sequence[int], decode: Decode) -> Iterator[tuple[str, str]]:
    """The tags of ``ids`` from the last one backwards: ``(kind, name)``, ``kind`` ``"open"``/``"close"``."""
    for i in range(len(ids) - 1, -1, -1):
        t = ids[i]
        if t == _OPEN or t == _CLOSE:
            tag = tag_name(ids, i, decode)
            if tag is not None:
                yield ("open" if t == _OPEN else "close"), tag[0]


def _ends_reasoning(opening: bool, name: str) -> bool:
    """``<|close|>think<|sep|>``, or a response/tools channel opened instead."""
    return name in ("response", "tools") if opening else name == "think"


def prompt_channel(ids: Sequence[int], decode: Decode) -> str | None:
    """The channel a K3 prompt leaves open for the output, read from its last tag (only the current
    assistant message is looked at): ``"think"`` (thinking on), ``"response"`` (thinking off), or
    ``None`` (the prompt ends with no channel open: the output may open one; treated as ``think``
    pre-filled by the parsers, whose grammar accepts a redundant ``<|open|>think<|sep|>``)."""
    for kind, name in _last_tags(ids, decode):
        if kind == "open" and name in ("think", "response"):
            return name
        return None
    return None


def prompt_mode(prompt_ids: Sequence[int] | None, thinking_off: bool, decode: Decode) -> PromptMode:
    """The response channel opened (thinking off): no reasoning; otherwise inside the think channel."""
    if prompt_ids is None:
        return "none" if thinking_off else "prefilled"
    return "none" if prompt_channel(prompt_ids, decode) == "response" else "prefilled"


def reasoning_ended(ids: Sequence[int], decode: Decode) -> bool:
    """Whether reasoning is over at the end of ``ids`` (a prompt, or prompt + output): judged by the
    last channel tag of the current assistant message. ``<|close|>think<|sep|>`` or an opened
    response/tools channel ends it; ``<|open|>think<|sep|>`` (or the message header, think then being
    pre-filled) keeps it open. History before the last ``<|open|>message ...<|sep|>`` is never read."""
    for kind, name in _last_tags(ids, decode):
        if _ends_reasoning(kind == "open", name):
            return True
        if name in ("think", "message"):
            return False
    return False


def tag_ends_reasoning(context: Sequence[int], delta: Sequence[int], decode: Decode) -> bool:
    """Whether a tag that ends reasoning (see :func:`reasoning_ended`) is completed by a ``<|sep|>`` in
    ``delta`` (``context``: the ids before it, of which only the tail is read)."""
    if _SEP not in delta:
        return False
    window = list(context[-_TAG_SPAN:]) + list(delta)
    base = len(window) - len(delta)
    for k in range(len(delta)):
        if window[base + k] != _SEP:
            continue
        for i in range(base + k - 1, -1, -1):
            t = window[i]
            if t == _OPEN or t == _CLOSE:
                tag = tag_name(window, i, decode)
                if tag is not None and _ends_reasoning(t == _OPEN, tag[0]):
                    return True
                break
            if t == _SEP or t == _END:
                break
    return False


def reasoning_ends_in(ids: Sequence[int], delta: Sequence[int], decode: Decode) -> bool:
    """:func:`tag_ends_reasoning` over the tag's span before ``delta`` only (``ids`` ends with it)."""
    delta = list(delta)
    head = len(ids) - len(delta)
    return tag_ends_reasoning(ids[max(0, head - _TAG_SPAN):max(0, head)], delta, decode)


def content_ids(ids: list[int], decode: Decode) -> list[int]:
    """The ids after the first ``<|close|>think<|sep|>``, or from the first response/tools open tag
    (it belongs to the content); all of them if neither is there."""
    for i, t in enumerate(ids):
        if t != _CLOSE and t != _OPEN:
            continue
        tag = tag_name(ids, i, decode)
        if tag is None or not _ends_reasoning(t == _OPEN, tag[0]):
            continue
        return ids[i:] if t == _OPEN else ids[tag[1] + 1:]
    return ids


# ------------------------------------------------------------------------------------------- vLLM

VLLM_STRUCTURAL_TAG_MODEL = "kimi_k3"
VLLM_KEEPS_ITS_CONSTRAINT: str | None = None
"""kimi_chat's constraint for a forced tool choice, as for K2: with a reasoning parser it starts right after the
think channel's close tag (where the reasoning parser says reasoning ended and vLLM starts applying it)."""
TEXT_PART_LISTS = False
"""K3 content lists go through vLLM's chat parser."""


def vllm_thinking_kwargs(dialect: Dialect, kwargs: dict[str, Any]) -> None:
    """Exactly :class:`vllm.renderers.kimi_k3.KimiK3Renderer`'s mapping (and its ``thinking_effort``
    validation)."""
    from vllm.renderers.kimi_k3 import _apply_k3_thinking_kwargs

    extra = {k: v for k, v in kwargs.items() if k in ("enable_thinking", "reasoning_effort")}
    _apply_k3_thinking_kwargs(extra)
    for k, v in extra.items():
        kwargs.setdefault(k, v)


def vllm_conversation(conversation: list[Any]) -> list[Any]:
    """Tool results re-ordered to the call order, by vLLM's K3 normalisation."""
    from vllm.renderers.kimi_k3 import _normalize_k3_tool_messages

    return _normalize_k3_tool_messages(conversation)  # type: ignore[no-any-return]


def vllm_request_options(tool_choice: Any, response_format: Any) -> dict[str, Any]:
    """``tool_choice`` (other than ``auto``) and ``response_format`` as the K3 renderer passes them to
    the encoder."""
    from vllm.renderers.kimi_k3 import _dump_k3_template_value

    options: dict[str, Any] = {}
    if tool_choice not in (None, "auto"):
        options["tool_choice"] = _dump_k3_template_value(tool_choice)
    if response_format is not None:
        options["response_format"] = _dump_k3_template_value(response_format)
    return options


# ----------------------------------------------------------------------------------------- SGLang

SGLANG_KEEPS_ITS_CONSTRAINT: str | None = None
"""kimi_chat's constraint: SGLang's reasoning gate waits for :func:`sglang_think_end_ids`, the think
channel's close tag, and the grammar starts right after it."""
SGLANG_STRUCTURAL_TAG_NAME: str | None = None
"""None: SGLang's own K3 structural tag (:func:`sglang_structural_tag`)."""


def sglang_think_end_ids(tokenizer: Any) -> list[int] | None:
    """The think channel's close tag by its ids, ``<|close|>`` ``think`` ``<|sep|>`` (the name by the
    tokenizer): SGLang's gate (``TokenSequenceMatcher``) then starts the grammar right after it, and
    the tag spelled by ordinary tokens does not match."""
    return [_CLOSE, *tokenizer.encode("think", add_special_tokens=False), _SEP]


def sglang_call_structure() -> Callable[[str], tuple[str, str, str]]:
    """As SGLang's ``KimiK3Detector``: only its model-native structural tag."""
    raise NotImplementedError("Kimi K3 uses its model-native structural tag implementation")


def sglang_structural_tag(tools: Any, tool_choice: Any, thinking_mode: bool, parallel_tool_calls: bool) -> Any | None:
    """SGLang's own K3 XTML structural tag (``kimik3_structural_tag``)."""
    from sglang.srt.function_call.kimik3_structural_tag import get_kimik3_structural_tag

    return get_kimik3_structural_tag(tools=tools or [], tool_choice=tool_choice, thinking_mode=thinking_mode,
                                     parallel_tool_calls=parallel_tool_calls)


def sglang_auto_structural_tag(tools: Any, thinking_mode: bool, parallel_tool_calls: bool) -> Any | None:
    """SGLang's own K3 structural tag for ``auto``."""
    from sglang.srt.function_call.kimik3_structural_tag import get_kimik3_auto_tool_call_structural_tag

    return get_kimik3_auto_tool_call_structural_tag(tools or [], thinking_mode=thinking_mode,
                                                    parallel_tool_calls=parallel_tool_calls)
