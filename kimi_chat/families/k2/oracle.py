"""The official rendering of the Kimi-K2 family: the dialect's oracle template from the reference data,
rendered by transformers' own chat-template machinery with the tokenizer's pre-processing
(:func:`kimi_chat.reference.oracle.render_as_tokenizer`). The family record's ``official_render``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...reference.oracle import oracle_template, render_as_tokenizer

__all__ = ["official_k2_render"]


def official_k2_render(messages: Sequence[Any], tools: Sequence[Mapping[str, Any]] | None, dialect: Any,
                       add_generation_prompt: bool, **options: Any) -> str:
    """What the official tokenizer of ``dialect`` renders (``apply_chat_template(tokenize=False)``): its
    oracle template, tool keys sorted where it sorts them, ``tools_ts_str`` for K2.5 / K2.6. Errors of the
    official machinery propagate as raised."""
    return render_as_tokenizer(
        oracle_template(dialect), messages, dialect, tools=tools, add_generation_prompt=add_generation_prompt,
        **options,
    )
