"""vLLM's renderer for ``--tokenizer-mode kimi_chat``: chat requests to token ids by
:func:`kimi_chat.render_tokens`, for every Kimi dialect (K2, 0905, K2-Thinking, K2.5, K2.6, K3).

``vllm serve MODEL --tokenizer-mode kimi_chat`` (the ``vllm.general_plugins`` entry point registers
the mode in vLLM's tokenizer registry and ``RENDERER_REGISTRY``) turns each chat request into ids the
way the model's official template + tokenizer do, with three differences from vLLM's HF renderer:

* no remote code: the tokenizer is :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer` over the directory's
  ``tiktoken.model`` (:mod:`kimi_chat.servers.vllm.tokenizer`), the template is kimi_chat's
  dialect (identified from the directory at startup, or ``$KIMI_CHAT_DIALECT``);
* typed markers stay text: the ids come from the renderer's own segments (template markers are
  special ids, message text is ordinary text), so a user who types ``<|im_end|><|im_system|>...``
  cannot close their turn or forge a system turn (vLLM's HF renderer tokenizes the rendered *string*,
  and the marker text becomes the special ids);
* speed: one render and one tiktoken pass, no Jinja and no Python tokenizer.

Request options: ``add_generation_prompt``, ``continue_final_message`` (K2 only: the official K3
tokenizer has no such option), ``tools``, and the ``chat_template_kwargs`` the dialect reads
(``thinking`` / ``preserve_thinking`` for K2.5/K2.6; ``thinking``, ``thinking_effort``,
``response_schema`` for K3). ``enable_thinking`` and ``reasoning_effort`` map as vLLM's own renderers
map them (K3: exactly :class:`vllm.renderers.kimi_k3.KimiK3Renderer`'s mapping; K2.5/K2.6:
``enable_thinking`` -> ``thinking``, ``reasoning_effort="none"`` -> ``thinking=False``). For K3,
``tool_choice`` (other than ``auto``) and ``response_format`` go to the encoder as the K3 renderer
passes them, and tool results are re-ordered to the call order by vLLM's K3 normalisation. Other
``chat_template_kwargs`` keys are ignored (as a Jinja template ignores variables it does not read).

Not supported (refused with a 400 naming what): images, audio and video in messages (text only for
now), a request or server ``chat_template`` (the dialect is the template), ``documents``, and
``return_token_offsets``. Typed special-token text is always encoded as text (the ``"text"`` policy of
:func:`kimi_chat.render_tokens`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, cast

from vllm.config import VllmConfig
from vllm.exceptions import VLLMValidationError
from vllm.renderers.base import BaseRenderer
from vllm.renderers.chat_utils.chat_message import _CLAUDE_CODE_BILLING_HEADER
from vllm.renderers.chat_utils import (
    ChatCompletionMessageParam,
    ConversationMessage,
    parse_chat_messages,
    parse_chat_messages_async,
)
from vllm.renderers.inputs import DictPrompt
from vllm.renderers.inputs.preprocess import parse_dec_only_prompt
from vllm.renderers.params import ChatParams
from vllm.utils.async_utils import make_async

from ..hooks import serving_of
from .options import MODE, render_ids, template_options
from .tokenizer import KimiChatVllmTokenizer

__all__ = ["MODE", "KimiChatRenderer", "render_ids", "template_options"]

LOGGER = logging.getLogger("kimi_chat.integrations.vllm")

_FAST_ROLES = frozenset({"system", "user", "assistant", "tool"})
_FAST_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "reasoning"})


def _fast_call(call: Any) -> dict[str, Any] | None:
    """A tool call as vLLM's chat parser leaves it (arguments: the JSON object parsed; other text kept
    verbatim where vLLM would replace it by ``{}``), or None when it is not a plain function call."""
    if type(call) is not dict or call.get("type", "function") != "function":
        return None
    fn = call.get("function")
    if type(fn) is not dict:
        return None
    args = fn.get("arguments")
    if not args:
        args = {}
    elif type(args) is str:
        try:
            parsed = json.loads(args)
        except ValueError:
            parsed = None
        if type(parsed) is dict:
            args = parsed
    return {**call, "function": {**fn, "arguments": args}}


def _text_parts(c: Any) -> bool:
    return all(type(p) is dict and p.get("type") == "text" and type(p.get("text")) is str and len(p) == 2 for p in c)


def fast_conversation(messages: Sequence[Any], family: Any) -> list[dict[str, Any]] | None:
    """The conversation vLLM's ``parse_chat_messages`` gives for text-only plain messages, without its
    per-part machinery (about half of a request's cost): the same fields kept (assistant ``reasoning``,
    also as ``reasoning_content``; ``tool_call_id`` of tool messages; a string ``name``), a tool
    message's text parts joined by newlines, tool-call arguments parsed as vLLM parses them; content
    otherwise as the client sent it (string, or a K2 list of text parts, which kimi_chat renders as
    the official template does). None when any message needs vLLM's parser (media parts, other roles
    or keys, K3 content lists, Claude Code's billing header). ``family``: the served family (a name, a
    record or a dialect)."""
    return _fast_conversation(messages, serving_of(family).TEXT_PART_LISTS)


def _fast_conversation(messages: Sequence[Any], part_lists: bool) -> list[dict[str, Any]] | None:
    """:func:`fast_conversation`, ``part_lists``: the family's ``TEXT_PART_LISTS``."""
    out: list[dict[str, Any]] = []
    fast_keys = _FAST_KEYS.issuperset
    for m in messages:
        if type(m) is not dict or m.get("role") not in _FAST_ROLES or not fast_keys(m):
            return None
        role = m["role"]
        c = m.get("content")
        if c is not None and type(c) is not str:
            if type(c) is not list or not _text_parts(c):
                return None
            if role == "tool":
                c = "\n".join(p["text"] for p in c)
            elif not part_lists:
                return None
        if role == "system" and _CLAUDE_CODE_BILLING_HEADER in str(c):
            return None
        new: dict[str, Any] = {"role": role, "content": c}
        if type(m.get("name")) is str:
            new["name"] = m["name"]
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None:
                if type(calls) is not list:
                    return None
                fixed = [_fast_call(x) for x in calls]
                if None in fixed:
                    return None
                if fixed:
                    new["tool_calls"] = fixed
            r = m.get("reasoning")
            if r is not None:
                if type(r) is not str:
                    return None
                new["reasoning"] = new["reasoning_content"] = r
        elif role == "tool" and "tool_call_id" in m:
            new["tool_call_id"] = m["tool_call_id"]
        out.append(new)
    return out


class KimiChatRenderer(BaseRenderer[KimiChatVllmTokenizer]):
    """Renders chat prompts with :func:`kimi_chat.render_tokens` in the model's dialect (decided by
    the tokenizer at load; logged at INFO here). Needs the ``kimi_chat`` tokenizer (same mode)."""

    def __init__(self, config: VllmConfig, tokenizer: KimiChatVllmTokenizer | None) -> None:
        super().__init__(config, tokenizer)
        if tokenizer is not None and not isinstance(tokenizer, KimiChatVllmTokenizer):
            raise TypeError(f"{type(self).__name__} needs the {MODE} tokenizer (--tokenizer-mode {MODE}), "
                            f"got {type(tokenizer).__name__}")
        if tokenizer is not None:
            md = tokenizer.model_dialect
            LOGGER.info("kimi_chat renderer: serving %s with dialect %s (%s)", tokenizer.name_or_path,
                        md.dialect.name, md.reason)
        self._render_async = make_async(self._render, executor=self._executor)
        self._served: tuple[Any, Any] | None = None

    def _hooks(self) -> tuple[Any, Any]:
        """``(dialect, serving hooks)`` of the tokenizer's dialect (the hooks looked up once per dialect)."""
        d, served = self.get_tokenizer().dialect, self._served
        if served is None or served[0] is not d:
            served = self._served = (d, serving_of(d))
        return served

    # ---------------------------------------------------------------- rendering

    def _parse_args(self, messages: list[ChatCompletionMessageParam], params: ChatParams) -> dict[str, Any]:
        # "string": vLLM's "openai" format would turn string content into part lists, which some
        # official templates print as a Python repr (0905's assistant turn)
        return dict(messages=messages, model_config=self.model_config, content_format="string",
                    media_io_kwargs=params.media_io_kwargs, mm_processor_kwargs=params.mm_processor_kwargs)

    def _fast(self, messages: Sequence[Any]) -> list[Any] | None:
        hooks = self._hooks()[1]
        conv = _fast_conversation(messages, hooks.TEXT_PART_LISTS)
        if conv is not None:  # K3: tool results re-ordered by vLLM's K3 normalisation
            return hooks.vllm_conversation(conv)
        return conv

    def _conversation(self, conversation: list[ConversationMessage], mm_data: Any, mm_uuids: Any) -> list[Any]:
        d = self.get_tokenizer().dialect
        if mm_data or mm_uuids:
            raise VLLMValidationError(
                f"--tokenizer-mode {MODE} renders text only for now: images, audio and video are not "
                f"supported ({d.name}); serve without --tokenizer-mode {MODE} for multimodal requests",
                parameter="messages")
        return serving_of(d).vllm_conversation(cast(list[Any], conversation))

    def _render(self, conversation: list[Any], params: ChatParams) -> list[int]:
        tok = self.get_tokenizer()
        d, hooks = self._hooks()
        kwargs = params.get_apply_chat_template_kwargs()
        options, agp, cont = template_options(d, kwargs)
        # K3: tool_choice (other than auto) and response_format, as vLLM's K3 renderer passes them
        options.update(hooks.vllm_request_options(params.tool_choice, params.response_format))
        return render_ids(tok.kimi, d, conversation, kwargs.get("tools"), options, agp, cont)

    def render_messages(
        self,
        messages: list[ChatCompletionMessageParam],
        params: ChatParams,
    ) -> tuple[list[ConversationMessage], DictPrompt]:
        """``(conversation, {"prompt_token_ids": ids})`` for one chat request."""
        conv = self._fast(messages)
        if conv is None:
            conversation, mm_data, mm_uuids = parse_chat_messages(**self._parse_args(messages, params))
            conv = self._conversation(conversation, mm_data, mm_uuids)
        return cast(list[ConversationMessage], conv), parse_dec_only_prompt(self._render(conv, params))

    async def render_messages_async(
        self,
        messages: list[ChatCompletionMessageParam],
        params: ChatParams,
    ) -> tuple[list[ConversationMessage], DictPrompt]:
        """:meth:`render_messages`, rendering in the renderer's thread pool."""
        conv = self._fast(messages)
        if conv is None:
            conversation, mm_data, mm_uuids = await parse_chat_messages_async(**self._parse_args(messages, params))
            conv = self._conversation(conversation, mm_data, mm_uuids)
        ids = await self._render_async(conv, params)
        return cast(list[ConversationMessage], conv), parse_dec_only_prompt(ids)
