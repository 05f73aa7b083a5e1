"""``tool_choice: "required"`` and named functions in vLLM: the Kimi-native constraint, installed through
vLLM's structured outputs.

vLLM's own handling of a forced tool choice either forces a JSON list of ``{"name", "parameters"}``
objects (a tool parser without a structural tag: out of distribution for a Kimi model) or, for the
``kimi``/``kimi_k3`` structural tags, builds an xgrammar grammar of Kimi's format whose arguments are
xgrammar's JSON schema translation. :func:`install` replaces that, in both families, with
:func:`kimi_chat.grammar.constraint` (:mod:`kimi_chat.servers.forced`): the Kimi format the parser runs,
markers as special tokens (typed marker text never satisfies them), the tools' schemas compiled by
llguidance. It sets the request's ``structured_outputs`` to ``StructuredOutputsParams(grammar=<the
constraint's Lark>)``: vLLM's ``auto`` backend tries xgrammar first, which refuses the grammar (named
special tokens, ``%json``), and falls back to ``guidance`` (llguidance), which compiles it.

When it applies (chat completions; otherwise the request keeps what vLLM built, and the reason is
logged once at INFO; the Responses API is left to vLLM):

* the family's serving hooks do not keep vLLM's own constraint (``VLLM_KEEPS_ITS_CONSTRAINT``: no
  family does now);
* vLLM's guidance backend can serve the tokenizer: it needs a fast (``tokenizers``) tokenizer; with the
  remote-code ``TikTokenTokenizer`` or ``--tokenizer-mode kimi_chat`` it cannot, and xgrammar cannot
  compile the constraint.

With a reasoning parser the grammar starts where the reasoning ended (vLLM applies it from there: the
constraint is built with ``after_reasoning=True``: K2, the body; K3, right after the think channel's
close tag, the tag whose ``<|sep|>`` makes the reasoning parser's ``is_reasoning_end`` true); with
thinking off it is what the prompt leaves (K3: inside the response channel); without a reasoning parser
it is the whole output (reasoning allowed where the dialect thinks). The dialect is the override's
(``chat_template_kwargs["kimi_chat_dialect"]`` / ``$KIMI_CHAT_DIALECT``), else the family's one dialect
(``kimi-k3``), else ``kimi-k2.6`` for a tokenizer with ``<think>``, else ``kimi-k2-instruct-0905``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..forced import forced, forced_dialect, forced_grammar, log_kept, thinking_off
from ..hooks import ServingHooks
from ..stages import tools_as_dicts

__all__ = ["forced", "kimi_grammar", "install"]



def _guidance_serves(tokenizer: Any) -> bool:
    from vllm.v1.structured_output.backend_guidance import GuidanceBackend

    return bool(GuidanceBackend.is_tokenizer_supported(tokenizer))


def _log_once(logger: logging.Logger, why: str) -> None:
    log_kept(logger, "a forced tool choice", "vLLM", why)


def kimi_grammar(request: Any, *, dialect: Any, after_reasoning: bool) -> str:
    """The Lark grammar of ``request``'s forced tool choice (:func:`kimi_chat.servers.forced.forced_grammar`)."""
    ctk = getattr(request, "chat_template_kwargs", None)
    return forced_grammar(tools_as_dicts(request.tools), request.tool_choice, request.parallel_tool_calls,
                          dialect=dialect, after_reasoning=after_reasoning, thinking=not thinking_off(ctk))


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

    d = forced_dialect(getattr(request, "chat_template_kwargs", None), reasons, serving)
    request.structured_outputs = StructuredOutputsParams(grammar=kimi_grammar(request, dialect=d,
                                                                              after_reasoning=after_reasoning))
    request.response_format = None
    return request
