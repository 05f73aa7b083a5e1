"""The switches of a Kimi-K2 dialect record (:class:`K2Spec`), each named by what it does to the prompt.

What differs between the K2 revisions is a handful of choices read off each oracle template: the default system
prompt, how tools are declared, role header names, the tool-call id policy, the tool result layout, how message
bodies and media are written, the ``<think>`` policy and the end-of-turn policy. One renderer
(:mod:`kimi_chat.families.k2.render`) serves them all; a dialect record (:class:`kimi_chat.dialects.Dialect`)
carries one :class:`K2Spec` as its ``spec``. This module imports nothing of kimi_chat: a record needs only it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["K2Spec"]


@dataclass(frozen=True, kw_only=True)
class K2Spec:
    """The rendering choices of one K2 revision (the defaults: the July-2025 K2-Instruct line with tool calls)."""

    default_system: str | None = None
    """System prompt inserted when the first message is not a system message (``None``: never)."""
    tools_prefix: str = ""
    """Text between ``<|im_middle|>`` and the tools JSON of the ``tool_declare`` block."""
    tools_separators: tuple[str, str] | None = None
    """``separators`` of the template's ``tojson`` (``None``: ``', '`` and ``': '``)."""
    tools_typescript: bool = False
    """The tokenizer passes a TypeScript-style declaration (``tools_ts_str``) in place of the JSON."""
    sort_tool_keys: bool = False
    """The official tokenizer sorts the keys of every dict in ``tools`` before rendering."""
    role_names: Literal["fixed", "name_or_role"] = "fixed"
    """``fixed``: headers say ``system/user/assistant/tool``; ``name_or_role``: ``message.name`` or role."""
    tool_calls: bool = True
    """The template renders ``assistant.tool_calls`` (rev1 silently drops them)."""
    tool_call_ids: Literal["given", "regenerate"] = "given"
    """``regenerate``: ids are rewritten as ``functions.NAME:INDEX`` (index within the message)."""
    string_arguments: Literal["raw", "json"] = "raw"
    """``raw``: string arguments are written as they are; ``json``: JSON-encoded again (double)."""
    tool_result_header: str | None = "\n"
    """Text between ``## Return of ID`` and the result (``None``: no ``## Return of`` header)."""
    bodies: Literal["content_only", "content_then_calls", "think_content_calls"] = "content_then_calls"
    """How message bodies are written. ``content_only``: the content alone (tool calls and results get nothing
    of their own: K2-Instruct rev1); ``content_then_calls``: the content, then an assistant turn's tool-call
    section, a tool result after its ``## Return of`` header; ``think_content_calls``: an assistant turn opens
    with its ``<think>`` block (reasoning, or empty before the history split), then the content, then its
    calls (K2-Thinking, K2.5, K2.6: their templates' ``render_content`` macro)."""
    media: Literal["image_placeholder", "typed_media"] = "image_placeholder"
    """Media parts of list content. ``image_placeholder``: a part of type ``image`` or with an ``image`` /
    ``image_url`` key is ``<|media_start|>image<|media_content|><|media_pad|><|media_end|>`` (plus a newline,
    except with ``content_only`` bodies); video parts render as nothing. ``typed_media``: parts are told by
    their type: images ``<|media_begin|>...`` and videos the K2.5 placeholder, each plus a newline."""
    think: Literal["none", "history_split", "history_split_prefilled"] = "none"
    """``<think>`` policy for assistant turns. ``history_split``: assistant turns up to the last one without
    tool calls get ``<think></think>``, later ones their reasoning. ``history_split_prefilled`` (K2.5, K2.6):
    the same, plus the generation prompt opens ``<think>`` (or ``<think></think>`` with ``thinking=False``) and
    later turns get ``<think></think>`` with ``thinking=False`` (K2.6: unless ``preserve_thinking``, which also
    drops the history split, when the dialect reads it)."""
    reasoning_key: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    """The key a kept turn's reasoning is read from first. ``reasoning_content``: the template reads only it,
    which transformers fills from ``reasoning_content``, ``thinking`` or ``reasoning`` (the first given);
    ``reasoning`` (K2.6): ``reasoning`` when the message has it, else the former."""
    last_turn_open_without_generation_prompt: bool = False
    """Without a generation prompt, the last message gets no ``<|im_end|>`` (prefill mode: K2-Instruct-0905)."""
    keeps_every_reasoning: bool = False
    """Every assistant turn keeps its reasoning, always, with no option to turn it off (Kimi-K2.7-Code: what
    Kimi-K2.6 does with ``preserve_thinking=True``; the generation prompt always opens ``<think>``)."""

    def __post_init__(self) -> None:
        if self.keeps_every_reasoning and self.think != "history_split_prefilled":
            raise ValueError("K2Spec: keeps_every_reasoning needs think='history_split_prefilled' (the K2.5 line)")

    @property
    def reasoning(self) -> bool:
        """Whether the model's output may carry ``<think>`` reasoning."""
        return self.think != "none"

    def prefills_think(self, reads_thinking: bool, options: Mapping[str, object]) -> bool:
        """Whether the generation prompt opens ``<think>`` (K2.5 and K2.6 with ``thinking`` on, K2.7-Code always);
        ``reads_thinking``: the dialect reads the ``thinking`` option."""
        if self.think != "history_split_prefilled":
            return False
        return not reads_thinking or options.get("thinking", True) is not False
