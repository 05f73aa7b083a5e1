"""kimi_chat as vLLM's tool-call parser and reasoning parser (registered as ``kimi_chat``).

Serve with::

    vllm serve MODEL --enable-auto-tool-choice \\
        --tool-parser-plugin kimi_chat.servers.vllm --tool-call-parser kimi_chat \\
        --reasoning-parser-plugin kimi_chat.servers.vllm --reasoning-parser kimi_chat

Importing this module registers both parsers (``--tool-parser-plugin`` imports it in the API server;
``--reasoning-parser-plugin`` in the engine process too, where structured outputs ask the reasoning
parser when reasoning ends). With the package installed (``pip install -e '.[vllm]'`` in the checkout),
the ``vllm.general_plugins`` entry point ``kimi_chat`` does the same in every vLLM process, and the two ``-plugin`` flags are optional.
To serve them under the built-in name as well (``--tool-call-parser kimi_k2 --reasoning-parser
kimi_k2``), set ``KIMI_CHAT_VLLM_NAMES=kimi_chat,kimi_k2`` (or call ``register(("kimi_k2",))``).

How the two halves meet (vLLM 0.33 ``DelegatingParser``): both classes declare
``engine_based_streaming``, so vLLM passes them deltas (not the accumulated text), asks the
reasoning parser ``has_engine_confirmed_reasoning_end()``, hands the raw rest of the output over to
the tool parser, and calls ``finish_streaming()`` at the end so nothing held back is lost. The
reasoning parser decides from the prompt where the output starts: it reads only the current
assistant turn (after the last ``<|im_assistant|>``), so a ``</think>`` in the history of a
multi-turn Kimi-K2-Thinking conversation does not end this turn's reasoning.

Tool-call ids are the model's own headers (``functions.NAME:IDX``), verbatim; names keep dots,
hyphens and inner colons; arguments are what the model wrote (never re-serialised, no size cap).
A call that is not executable (cut before its arguments) is not returned; it is logged instead.

Kimi-K3 (XTML) is served by the same two classes under the same names: the format family is chosen
per parser from the tokenizer, ``$KIMI_CHAT_DIALECT`` or the request's
``chat_template_kwargs["kimi_chat_dialect"]`` (:mod:`kimi_chat.servers.family`). For K3 the
prompt's last tag (by token ids) says whether the output starts in the think channel or, thinking off,
in the response channel; reasoning ends at ``<|close|>think<|sep|>`` (or a response/tools channel
opened instead); the tool parser asks vLLM's own ``kimi_k3`` structural tag for ``required``; call ids
are ``functions.NAME:IDX`` (IDX: the call's position in the turn).

A forced tool choice (``required`` or a named function) on K2 is constrained by kimi_chat's own
constraint (llguidance, through vLLM's structured outputs): :mod:`kimi_chat.servers.vllm.structured`.

Diagnostics go to the logger ``kimi_chat.integrations.vllm`` (levels: see
:mod:`kimi_chat.servers.diagnostics`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.reasoning import ReasoningParser, ReasoningParserManager
from vllm.tool_parsers import ToolParser, ToolParserManager

from ..stages import BodyStage, Merged, ReasoningStage, tools_as_dicts, track_streamed
from ..family import DIALECT_KWARG, choose_family, override
from ..hooks import ServingHooks, serving_of
from ..forced import thinking_off
from .structured import install

__all__ = ["NAME", "KimiChatToolParser", "KimiChatReasoningParser", "register"]

NAME = "kimi_chat"
NAMES_ENV = "KIMI_CHAT_VLLM_NAMES"

LOGGER = logging.getLogger("kimi_chat.integrations.vllm")
"""Where both parsers log parse warnings and withheld or non-``ok`` tool calls."""


def _reasons(serving: ServingHooks, tokenizer: Any, ctk: Any) -> bool:
    """A reasoning model (the family's hook: the overriding dialect says so, else the tokenizer)."""
    ov = override(ctk)
    return serving.reasons(tokenizer, ov[0] if ov is not None else None)


_thinking_off = thinking_off  # ``chat_template_kwargs`` turn thinking off (kimi_chat.servers.forced)


def _decoder(tokenizer: Any):
    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=False)
    return decode


class KimiChatReasoningParser(ReasoningParser):
    """Reasoning half: splits ``reasoning`` from the rest, which goes to the tool parser raw."""

    engine_based_streaming = True

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        ctk = kwargs.get("chat_template_kwargs") or {}
        self._thinking_off = _thinking_off(ctk)
        family = choose_family(tokenizer, ctk, LOGGER)
        self._family = family.name
        self._serving = serving_of(family)
        self._decode = _decoder(tokenizer)
        self._reasoning_model = self._serving.ALWAYS_REASONS or _reasons(self._serving, tokenizer, ctk)
        self._mode: str | None = None  # "none" | "prefilled" | "may_open", from the prompt
        self._stage: ReasoningStage | None = None
        self._ended = False

    # ---------------------------------------------------------------- prompt

    def _mode_for(self, prompt_ids: Sequence[int] | None) -> str:
        if not self._reasoning_model:
            return "none"
        # K2: <think> open, closed, or not yet; K3: the think channel open, or (thinking off) the response one
        return self._serving.prompt_mode(prompt_ids, self._thinking_off, self._decode)

    def _current_mode(self) -> str:
        if self._mode is None:
            self._mode = self._mode_for(None)
        return self._mode

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._mode = self._mode_for(prompt_token_ids)

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self._mode = self._mode_for(prompt_token_ids)

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Whether reasoning is over at the end of ``input_ids`` (a prompt, or a prompt plus output),
        judged from the current assistant turn only (after the last ``<|im_assistant|>``)."""
        if not self._reasoning_model:
            return True
        return self._serving.reasoning_ended(input_ids, self._decode)

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        """Whether reasoning ends within ``delta_ids`` (O(delta): the ids that close reasoning; K3: a tag
        ends it, looked back over the tag's span only)."""
        if not self._reasoning_model:
            return True
        return self._serving.reasoning_ends_in(input_ids, list(delta_ids), self._decode)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        """The ids after reasoning: after the first ``</think>``, or from the first tool-call
        section/call begin (which belong to the content); all of them if neither is there. K3: the
        ids after the first ``<|close|>think<|sep|>``, or from a response/tools channel's open tag."""
        return self._serving.content_ids(input_ids, self._decode)

    def adjust_request(self, request: Any) -> Any:
        request.skip_special_tokens = False  # the markers must reach the parser as text
        return request

    # ---------------------------------------------------------------- whole output

    def extract_reasoning(self, model_output: str, request: Any) -> tuple[str | None, str | None]:
        mode = self._current_mode()
        if mode == "none":
            return None, model_output
        return ReasoningStage.split(model_output, prefilled=mode == "prefilled", logger=LOGGER, family=self._family)

    # ---------------------------------------------------------------- streaming

    def extract_reasoning_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
    ) -> DeltaMessage | None:
        if self._ended:
            return DeltaMessage(content=delta_text) if delta_text else None
        if self._stage is None:
            mode = self._current_mode()
            if mode == "none":
                self._ended = True
                return DeltaMessage(content=delta_text)
            # the framework's tokenizer decodes the delta's ids: with several tokens per delta
            # (speculative decoding, stream_interval) a </think> typed as text still is text
            self._stage = ReasoningStage(prefilled=mode == "prefilled", logger=LOGGER, family=self._family,
                                         tokenizer=self.model_tokenizer)
        reasoning, rest = self._stage.feed(delta_text, delta_token_ids)
        if rest is not None:
            # the raw rest goes on as "content": vLLM hands it to the tool parser
            self._ended = True
            return DeltaMessage(reasoning=reasoning, content=rest)
        return DeltaMessage(reasoning=reasoning) if reasoning else None

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._ended

    def finish_streaming(self) -> DeltaMessage | None:
        """End of the stream while still in reasoning: the held-back tail. (Called by vLLM also at
        the hand-over, where there is nothing left: the rest went out with the last delta.)"""
        if self._ended or self._stage is None:
            return None
        reasoning, rest = self._stage.finish()
        content = None
        if rest is not None:  # the output never opened reasoning: a whitespace/marker-prefix tail
            content = BodyStage.parse(rest, tools=None, after_reasoning=True, logger=LOGGER,
                                      family=self._family).content
        if reasoning is None and content is None:
            return None
        return DeltaMessage(reasoning=reasoning, content=content)


class KimiChatToolParser(ToolParser):
    """Tool-call half: content and tool calls of the text after reasoning (or of the whole output)."""

    engine_based_streaming = True
    structural_tag_model = "kimi"  # as vLLM's kimi_k2: required/named tool choice in Kimi's format
    skip_reasoning_parsing = False
    """Set by vLLM when no reasoning parser is configured: ``<think>`` is then plain content."""

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._tools = tools_as_dicts(self.tools)
        self._stage: BodyStage | None = None
        self._set_family(choose_family(tokenizer, None, LOGGER))
        # K3: vLLM's own K3 XTML structural tag (tool_choice required / named)
        self.structural_tag_model = self._serving.VLLM_STRUCTURAL_TAG_MODEL

    def _set_family(self, family: Any) -> None:
        self._family = family.name
        self._serving = serving_of(family)

    def _family_for(self, request: Any) -> str:
        ctk = getattr(request, "chat_template_kwargs", None)
        if ctk and ctk.get(DIALECT_KWARG):
            self._set_family(choose_family(self.model_tokenizer, ctk, LOGGER))
        return self._family

    def _body(self, request: Any) -> dict[str, Any]:
        """How the body stage for ``request`` starts (family; after a reasoning stage; thinking)."""
        fam = self._family_for(request)
        ctk = getattr(request, "chat_template_kwargs", None)
        reasons = self._serving.ALWAYS_REASONS or _reasons(self._serving, self.model_tokenizer, ctk)
        return {"family": fam, "after_reasoning": not self.skip_reasoning_parsing and reasons,
                "thinking": not _thinking_off(ctk)}

    def _tools_for(self, request: Any) -> Any:
        if self._tools is None and request is not None:
            return tools_as_dicts(getattr(request, "tools", None))
        return self._tools

    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        request.skip_special_tokens = False  # the markers must reach the parser as text
        # a forced tool choice: kimi_chat's constraint in vLLM's structured outputs (.structured)
        ctk = getattr(request, "chat_template_kwargs", None)
        serving = serving_of(self._family_for(request))
        reasons = _reasons(serving, self.model_tokenizer, ctk)
        return install(request, tokenizer=self.model_tokenizer, serving=serving, reasons=reasons,
                       after_reasoning=reasons and not self.skip_reasoning_parsing, logger=LOGGER)

    # ---------------------------------------------------------------- whole output

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        st = BodyStage.run(model_output, tools=self._tools_for(request), logger=LOGGER, **self._body(request))
        calls = [
            ToolCall(
                id=c.id or _fresh_id(),
                function=FunctionCall(id=c.id or None, name=c.name or "", arguments=c.arguments),
            )
            for c in st.calls
        ]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=st.message.content)

    # ---------------------------------------------------------------- streaming

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        if self._stage is None:
            self._stage = BodyStage(tools=self._tools_for(request), logger=LOGGER, tokenizer=self.model_tokenizer,
                                    **self._body(request))
        return self._delta(self._stage.feed(delta_text, delta_token_ids))

    def finish_streaming(self) -> DeltaMessage | None:
        if self._stage is None:
            return None
        return self._delta(self._stage.finish())

    def _delta(self, m: Merged) -> DeltaMessage | None:
        if m.content is None and not m.calls:
            return None
        calls = []
        for c in m.calls:
            track_streamed(self, c.index, c.name, c.arguments)
            calls.append(
                DeltaToolCall(
                    index=c.index,
                    id=c.id if c.id is None or c.id else _fresh_id(),
                    type="function" if c.id is not None else None,
                    function=DeltaFunctionCall(name=c.name, arguments=c.arguments or None),
                )
            )
        return DeltaMessage(content=m.content, tool_calls=calls)


def _fresh_id() -> str:
    """An id for a call whose header is empty (the model wrote none)."""
    from vllm.entrypoints.generate.base.protocol import ToolCall as _TC

    return _TC.model_fields["id"].default_factory()  # vLLM's own id generator


def register(names: Iterable[str] | None = None) -> None:
    """Register both parsers under ``names`` (default: ``kimi_chat``, plus the comma-separated names in
    ``$KIMI_CHAT_VLLM_NAMES``, e.g. ``kimi_chat,kimi_k2`` to replace the built-in ``kimi_k2``).
    Idempotent; also the ``vllm.general_plugins`` entry point."""
    if names is None:
        env = os.environ.get(NAMES_ENV, "")
        names = [NAME] + [n.strip() for n in env.split(",") if n.strip() and n.strip() != NAME]
    for n in names:
        ToolParserManager.register_module(n, force=True, module=KimiChatToolParser)
        ReasoningParserManager.register_module(n, force=True, module=KimiChatReasoningParser)
    from .tokenizer import register_mode  # --tokenizer-mode kimi_chat (tokenizer + renderer)

    register_mode()


register()
