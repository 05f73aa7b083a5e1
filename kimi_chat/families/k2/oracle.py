"""The official rendering of the Kimi-K2 family: the dialect's oracle template from the reference data,
rendered by transformers' own chat-template machinery with the tokenizer's pre-processing
(:func:`kimi_chat.reference.oracle.render_as_tokenizer`). The family record's ``official_render``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...dialect_records import get_dialect
from ...reference.oracle import oracle_template, render_as_tokenizer

__all__ = ["official_k2_render"]


def official_k2_render(messages: Sequence[Any], tools: Sequence[Mapping[str, Any]] | None, dialect: Any,
                       add_generation_prompt: bool, **options: Any) -> str:
    """What the official tokenizer of ``dialect`` renders (``apply_chat_template(tokenize=False)``): its
    oracle template, tool keys sorted where it sorts them, ``tools_ts_str`` for K2.5 / K2.6, and the dialect's
    ``oracle_options`` over the request's (Kimi-K2.7-Code: K2.6's template with ``thinking`` and
    ``preserve_thinking`` true, whatever the request says). Errors of the official machinery propagate as raised."""
    d = get_dialect(dialect)
    if d.oracle_options:
        options = {**options, **dict(d.oracle_options)}
    return render_as_tokenizer(
        oracle_template(d), messages, d, tools=tools, add_generation_prompt=add_generation_prompt, **options,
    )
