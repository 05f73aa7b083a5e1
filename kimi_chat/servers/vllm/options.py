"""What ``--tokenizer-mode kimi_chat`` makes of one chat request: the render options of vLLM's
``chat_template_kwargs`` (:func:`template_options`) and the prompt ids (:func:`render_ids`).

Shared by the renderer (:mod:`kimi_chat.servers.vllm.renderer`, vLLM's chat path) and the tokenizer's
``apply_chat_template`` (:mod:`kimi_chat.servers.vllm.tokenizer`); what differs per family (how
``enable_thinking`` / ``reasoning_effort`` map) is the family's server hook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm.exceptions import VLLMValidationError

from ...dialect_records import DialectRecord as Dialect
from ...errors import KimiChatError
from ...tokens.rendered import render_ids as _render_ids
from ...tokens.tokenizer import KimiTokenizer
from ..hooks import serving_of

__all__ = ["MODE", "template_options", "render_ids"]

MODE = "kimi_chat"
"""The ``--tokenizer-mode`` name."""

_VLLM_KEYS = frozenset({"tokenize", "return_dict", "chat_template", "tools", "add_generation_prompt",
                        "continue_final_message", "documents", "reasoning_effort", "enable_thinking"})
"""Keys vLLM itself puts in ``chat_template_kwargs`` (the rest come from the request / server)."""


def template_options(d: Dialect, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None, bool]:
    """``(options, add_generation_prompt, continue_final_message)`` for :func:`render_tokens` from
    vLLM's ``chat_template_kwargs`` (the mapping: :mod:`kimi_chat.servers.vllm.renderer`). Raises
    ``VLLMValidationError`` for what this renderer does not support."""
    kw = dict(kwargs)
    if kw.get("chat_template") is not None:
        raise VLLMValidationError(
            f"--tokenizer-mode {MODE} renders the {d.name} dialect; a chat_template (request or "
            "--chat-template) is not used: drop it, or serve without --tokenizer-mode kimi_chat",
            parameter="chat_template")
    if kw.get("documents"):
        raise VLLMValidationError(f"documents are not supported by {d.name}", parameter="documents")
    agp = kw.get("add_generation_prompt")
    cont = bool(kw.get("continue_final_message") or False)
    # vLLM's own mapping of enable_thinking / reasoning_effort for the family (K3: its K3 renderer's)
    serving_of(d).vllm_thinking_kwargs(d, kw)
    options = {k: v for k, v in kw.items() if k in d.options and k not in _VLLM_KEYS and v is not None}
    return options, agp, cont


def render_ids(
    tok: KimiTokenizer,
    d: Dialect,
    messages: list[Any],
    tools: Sequence[Any] | None,
    options: Mapping[str, Any],
    add_generation_prompt: bool | None,
    continue_final_message: bool,
) -> list[int]:
    """The prompt ids (:func:`kimi_chat.tokens.rendered.render_ids`: ``render_tokens(...).ids``, typed special-token
    text as text); a render error
    becomes a ``VLLMValidationError`` (a 400) keeping kimi_chat's message (index and field)."""
    try:
        return _render_ids(messages, tokenizer=tok, tools=tools or None, dialect=d,
                           add_generation_prompt=add_generation_prompt,
                           continue_final_message=continue_final_message, **options)
    except (KimiChatError, ValueError, TypeError) as e:
        raise VLLMValidationError(f"{d.name}: {e}") from e
