"""A forced tool choice (``"required"`` or a named function) as kimi_chat's constraint: what the vLLM
(:mod:`kimi_chat.servers.vllm.structured`) and SGLang (:mod:`kimi_chat.servers.sglang.constraint`) plugins
share. Importable without either framework.

The constraint is :func:`kimi_chat.grammar.constraint` of the request: the Kimi format the parser runs,
markers as special tokens (typed marker text never satisfies them), the tools' schemas compiled by
llguidance. Where the server applies the grammar only after the reasoning (a reasoning parser runs and
the framework starts the grammar where it says reasoning ended), the grammar starts there
(``constraint(..., after_reasoning=True)``: K2, the body; K3, right after the think channel's close tag);
otherwise it is the whole output.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..dialect_records import DialectRecord as Dialect, get_dialect
from .family import override
from .hooks import ServingHooks

__all__ = ["forced", "named", "forced_dialect", "forced_grammar", "thinking_off", "log_kept", "KEPT",
           "REASONING_DIALECT", "PLAIN_DIALECT"]

REASONING_DIALECT = "kimi-k2.6"
"""The dialect of a K2-family tokenizer with ``<think>`` (no override): the latest reasoning K2."""
PLAIN_DIALECT = "kimi-k2-instruct-0905"
"""The dialect of a K2-family tokenizer without ``<think>`` (no override)."""


KEPT: set[str] = set()
"""The reasons logged by :func:`log_kept` so far (each once per process)."""


def log_kept(logger: logging.Logger, what: str, framework: str, why: str) -> None:
    """Say once, at INFO, that ``what`` keeps ``framework``'s own constraint instead of kimi_chat's, and ``why``."""
    if why not in KEPT:
        KEPT.add(why)
        logger.info("kimi_chat: %s keeps %s's own constraint (%s)", what, framework, why)


def forced(tool_choice: Any) -> bool:
    """Whether ``tool_choice`` forces a call: ``"required"`` or a named function (a dict or a framework's
    object with a ``function``)."""
    if tool_choice == "required":
        return True
    fn = getattr(tool_choice, "function", None)
    if fn is None and isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function")
    return fn is not None


def named(tool_choice: Any) -> Any:
    """``tool_choice`` as :func:`kimi_chat.grammar.constraint` takes it (a dict for a named function)."""
    if isinstance(tool_choice, str):
        return tool_choice
    fn = getattr(tool_choice, "function", None)
    name = getattr(fn, "name", None) if fn is not None else tool_choice["function"]["name"]
    return {"type": "function", "function": {"name": name}}


def forced_dialect(chat_template_kwargs: Mapping[str, Any] | None, reasons: bool, serving: ServingHooks) -> Dialect:
    """The dialect of the constraint: the override's (``chat_template_kwargs["kimi_chat_dialect"]`` /
    ``$KIMI_CHAT_DIALECT``), else the family's one dialect (``serving.SERVED_DIALECT``: Kimi-K3), else
    :data:`REASONING_DIALECT` for a tokenizer with ``<think>`` (``reasons``), else :data:`PLAIN_DIALECT`."""
    ov = override(chat_template_kwargs)
    if ov is not None:
        return ov[0]
    if serving.SERVED_DIALECT is not None:
        return get_dialect(serving.SERVED_DIALECT)
    return get_dialect(REASONING_DIALECT if reasons else PLAIN_DIALECT)


def thinking_off(chat_template_kwargs: Mapping[str, Any] | None) -> bool:
    """Whether the request's ``chat_template_kwargs`` switch thinking off (``thinking`` or
    ``enable_thinking`` false)."""
    ctk = chat_template_kwargs or {}
    return ctk.get("thinking") is False or ctk.get("enable_thinking") is False


def forced_grammar(tools: Sequence[Any] | None, tool_choice: Any, parallel_tool_calls: bool, *, dialect: Dialect,
                   after_reasoning: bool, thinking: bool = True, response_format: Any = None) -> str:
    """The Lark grammar (llguidance) of a forced tool choice: the body alone when ``after_reasoning``
    (the server applies it from where reasoning ended) or the whole output (``thinking``: the request's
    thinking switch, for a dialect that takes the ``thinking`` option; the others ignore it).
    ``response_format`` (a dict, as :func:`kimi_chat.grammar.constraint` takes it) constrains the reply
    too (SGLang's ``response_format`` path, where ``tool_choice`` may be ``auto``)."""
    from ..grammar.request import constraint

    options: dict[str, Any] = {}
    if not thinking and "thinking" in dialect.options:
        # the output the prompt leaves starts after any reasoning (K3: inside the response channel)
        options = {"thinking": False} | ({"reasoning": False} if after_reasoning and dialect.reasoning else {})
    elif after_reasoning:
        options = {"after_reasoning": True}  # the family's start (K3: after the think channel's close)
    if response_format is not None:
        options["response_format"] = response_format
    return constraint(tools, dialect=dialect, tool_choice=named(tool_choice or "auto"),
                      parallel_tool_calls=parallel_tool_calls is not False, **options).lark
