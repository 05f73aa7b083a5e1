"""``tool_choice: "required"`` and named functions in vLLM: the Kimi-native constraint, installed through
vLLM's structured outputs.

vLLM's own handling of a forced tool choice either forces a JSON list of ``{"name", "parameters"}``
objects (a tool parser without a structural tag: out of distribution for a Kimi model) or, for the
``kimi``/``kimi_k3`` structural tags, builds an xgrammar grammar of Kimi's format whose arguments are
xgrammar's JSON schema translation. :func:`install` replaces that, for the K2 family, with
:func:`kimi_chat.grammar.constraint`: the Kimi format the parser runs, markers as special tokens (typed
marker text never satisfies them), the tools' schemas compiled by llguidance. It sets the request's
``structured_outputs`` to ``StructuredOutputsParams(grammar=<the constraint's Lark>)``: vLLM's ``auto``
backend tries xgrammar first, which refuses the grammar (named special tokens, ``%json``), and falls back
to ``guidance`` (llguidance), which compiles it.

When it applies (chat completions; otherwise the request keeps what vLLM built, and the reason is
logged once at INFO; the Responses API is left to vLLM):

* the K2 family (K3: the grammar would have to start after the think channel, where vLLM starts
  applying a grammar once the reasoning parser says reasoning ended; the constraint has no such start
  yet, so K3 keeps vLLM's ``kimi_k3`` structural tag);
* vLLM's guidance backend can serve the tokenizer: it needs a fast (``tokenizers``) tokenizer; with the
  remote-code ``TikTokenTokenizer`` or ``--tokenizer-mode kimi_chat`` it cannot, and xgrammar cannot
  compile the constraint.

With a reasoning parser the grammar starts after the reasoning (vLLM applies it from there: the
constraint is built with ``thinking=False, reasoning=False``); without one it is the whole output
(reasoning allowed where the dialect thinks). The dialect is the override's
(``chat_template_kwargs["kimi_chat_dialect"]`` / ``$KIMI_CHAT_DIALECT``), else ``kimi-k2.6`` for a
tokenizer with ``<think>``, else ``kimi-k2-instruct-0905``.
"""

from __future__ import annotations

import logging
from typing import Any

from ...dialects import Dialect, get_dialect
from ..stages import tools_as_dicts
from ..family import override
from ..hooks import ServingHooks

__all__ = ["forced", "kimi_grammar", "install"]

_LOGGED: set[str] = set()


def forced(tool_choice: Any) -> bool:
    """Whether ``tool_choice`` forces a call: ``"required"`` or a named function."""
    if tool_choice == "required":
        return True
    fn = getattr(tool_choice, "function", None)
    if fn is None and isinstance(tool_choice, dict):
        fn = tool_choice.get("function")
    return fn is not None


def _named(tool_choice: Any) -> Any:
    """``tool_choice`` as kimi_chat's constraint takes it (a dict for a named function)."""
    if tool_choice == "required":
        return tool_choice
    fn = getattr(tool_choice, "function", None)
    name = getattr(fn, "name", None) if fn is not None else tool_choice["function"]["name"]
    return {"type": "function", "function": {"name": name}}


def _dialect(tokenizer: Any, ctk: Any, reasons: bool) -> Dialect:
    ov = override(ctk)
    if ov is not None:
        return ov[0]
    return get_dialect("kimi-k2.6" if reasons else "kimi-k2-instruct-0905")


def _guidance_serves(tokenizer: Any) -> bool:
    from vllm.v1.structured_output.backend_guidance import GuidanceBackend

    return bool(GuidanceBackend.is_tokenizer_supported(tokenizer))


def _log_once(logger: logging.Logger, why: str) -> None:
    if why not in _LOGGED:
        _LOGGED.add(why)
        logger.info("kimi_chat: a forced tool choice keeps vLLM's own constraint (%s)", why)


def kimi_grammar(request: Any, *, dialect: Dialect, after_reasoning: bool) -> str:
    """The Lark grammar of ``request``'s forced tool choice (:func:`kimi_chat.grammar.constraint`)."""
    from ...grammar import constraint

    options: dict[str, Any] = {}
    ctk = getattr(request, "chat_template_kwargs", None) or {}
    if after_reasoning and dialect.reasoning:
        options = {"thinking": False, "reasoning": False}
    elif ctk.get("thinking") is False or ctk.get("enable_thinking") is False:
        options = {"thinking": False}
    c = constraint(tools_as_dicts(request.tools), dialect=dialect, tool_choice=_named(request.tool_choice),
                   parallel_tool_calls=request.parallel_tool_calls is not False, **options)
    return c.lark


def install(request: Any, *, tokenizer: Any, serving: ServingHooks, reasons: bool, after_reasoning: bool,
            logger: logging.Logger) -> Any:
    """``request`` with kimi_chat's constraint as its structured outputs when its tool choice is forced
    and the constraint applies (module docstring); unchanged otherwise. ``reasons``: the tokenizer has
    ``<think>``; ``after_reasoning``: a reasoning parser runs (the grammar starts after reasoning)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    if not isinstance(request, ChatCompletionRequest):  # the Responses API: left to vLLM
        return request
    if not request.tools or not forced(request.tool_choice):
        return request
    if serving.VLLM_KEEPS_ITS_CONSTRAINT is not None:
        _log_once(logger, serving.VLLM_KEEPS_ITS_CONSTRAINT)
        return request
    if not _guidance_serves(tokenizer):
        _log_once(logger, "vLLM's guidance backend needs a fast tokenizer; this one is "
                  f"{type(tokenizer).__name__}")
        return request
    from vllm.sampling_params import StructuredOutputsParams

    d = _dialect(tokenizer, getattr(request, "chat_template_kwargs", None), reasons)
    request.structured_outputs = StructuredOutputsParams(grammar=kimi_grammar(request, dialect=d,
                                                                              after_reasoning=after_reasoning))
    request.response_format = None
    return request
