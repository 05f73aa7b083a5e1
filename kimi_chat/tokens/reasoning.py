"""Reasoning the rendering drops: which assistant messages carry reasoning their rendered turn does not hold, and
the warning :func:`~kimi_chat.tokens.rendered.render_tokens` gives for it (the training-data trap), with the other
warning it gives a training example (:func:`warn_training_example`: a last turn left open)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..checks.lint import unterminated_last_turn
from ..dialect_records import DialectRecord as Dialect
from ..messages import normalize_messages
from ..prompt import Layout

__all__ = ["carried_reasoning", "dropped_reasoning", "trained_texts", "warn_dropped_reasoning",
           "warn_training_example"]


_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


def carried_reasoning(m: Any) -> list[str]:
    """The non-empty reasoning texts an assistant message carries (any key a template reads it from)."""
    if isinstance(m, dict):
        get = m.get
    else:
        def get(k: str, _m: Any = m) -> Any:
            return getattr(_m, k, None)
    if get("role") != "assistant":
        return []
    return [v for v in map(get, _REASONING_KEYS) if isinstance(v, str) and v]


def dropped_reasoning(messages: Sequence[Any], trained_text: Any) -> int:
    """How many assistant messages carry reasoning that ``trained_text(i)`` (the trainable text of message
    ``i`` in a rendering) does not hold."""
    n = 0
    for i, m in enumerate(messages):
        carried = carried_reasoning(m)
        if carried:
            text = trained_text(i)
            if not any(r in text for r in carried):
                n += 1
    return n


def warn_dropped_reasoning(messages: Sequence[Any], d: Dialect, r: Any, *, stacklevel: int,
                           lay: Layout | None = None) -> None:
    """The training-data trap, as a warning: a rendering ``r`` (a RenderedTokens) without a generation prompt whose
    assistant turns lose the reasoning their messages carry (once per call, with the count and how to keep it).
    K2: by the trainable text of each message in the layout; segment-wise (K3, whose turns keep their
    reasoning): by the prompt text."""
    if r.add_generation_prompt or r.continue_final_message or not any(carried_reasoning(m) for m in messages):
        return
    if lay is None:
        n = dropped_reasoning(messages, lambda i: r.text)
    else:
        texts = trained_texts(lay)
        n = dropped_reasoning(messages, lambda i: texts.get(i, ""))
    _warn_count(n, d, stacklevel + 1)


def warn_training_example(messages: Sequence[Any], d: Dialect, r: Any, *, stacklevel: int,
                          lay: Layout | None = None) -> None:
    """The warnings of a rendering ``r`` (a RenderedTokens; ``lay``: its layout, a K2 one) that may be a training
    example: a last assistant turn never closed (lint's ``unterminated-last-turn``, in a dialect that leaves the
    last turn open without a generation prompt) and the dropped reasoning (:func:`warn_dropped_reasoning`)."""
    if lay is not None and not (r.add_generation_prompt or r.continue_final_message) \
            and d.spec.last_turn_open_without_generation_prompt:
        finding = unterminated_last_turn(d, normalize_messages(messages), False)
        if finding is not None:
            warnings.warn(str(finding), UserWarning, stacklevel=stacklevel)
    warn_dropped_reasoning(messages, d, r, stacklevel=stacklevel + 1, lay=lay)


def trained_texts(lay: Layout) -> dict[int, str]:
    """Per message index, the trainable text the layout ``lay`` writes of it (its trainable pieces, in order);
    one pass over the pieces."""
    parts, marks = lay.parts, lay.marks
    out: dict[int, list[str]] = {}
    for mk, b in zip(marks, [mk[0] for mk in marks[1:]] + [len(parts)]):
        if mk[2]:
            out.setdefault(mk[1], []).extend(parts[mk[0]:b])
    return {i: "".join(p) for i, p in out.items()}


def _warn_count(n: int, d: Dialect, stacklevel: int) -> None:
    if n:
        warnings.warn(
            f"render_tokens: {n} assistant message(s) carry reasoning that the {d.name} rendering drops (written "
            "without it, as the official template does for earlier turns): trained on as is, the model learns to "
            "answer without reasoning. Keep it with kimi_chat.data (samples as generated: each turn after its own "
            "request, reasoning kept), or render with preserve_thinking=True where the dialect reads it "
            "(kimi_chat.data's reasoning='keep')", UserWarning, stacklevel=stacklevel)
