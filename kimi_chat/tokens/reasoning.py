"""Reasoning the rendering drops: which assistant messages carry reasoning their rendered turn does not hold
(:func:`reasoning_dropped`, a rendering's ``reasoning_dropped``), and the warning
:func:`~kimi_chat.tokens.rendered.render_tokens` gives for it (the training-data trap), with the other warning it
gives a training example (:func:`warn_training_example`: a last turn left open)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..checks.lint import unterminated_last_turn
from ..dialect_records import DialectRecord as Dialect
from ..messages import normalize_messages
from ..prompt import Layout

__all__ = ["carried_reasoning", "dropped_reasoning", "reasoning_dropped", "trained_texts", "warn_training_example"]


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


def reasoning_dropped(messages: Sequence[Any], r: Any, lay: Layout | None = None) -> int:
    """How many assistant messages carry reasoning that a rendering ``r`` (a RenderedTokens) does not write: K2,
    by the trainable text of each message in its layout ``lay``; segment-wise (K3, whose turns keep their
    reasoning; ``lay`` None): by the prompt text."""
    if not any(carried_reasoning(m) for m in messages):
        return 0
    if lay is None:
        return dropped_reasoning(messages, lambda i: r.text)
    texts = trained_texts(lay)
    return dropped_reasoning(messages, lambda i: texts.get(i, ""))


def warn_training_example(messages: Sequence[Any], d: Dialect, r: Any, *, stacklevel: int,
                          lay: Layout | None = None) -> None:
    """The warnings of a rendering ``r`` without a generation prompt (a RenderedTokens, its
    ``reasoning_dropped`` counted; ``lay``: its layout, a K2 one), which may be a training example: a last
    assistant turn never closed (lint's ``unterminated-last-turn``, in a dialect that leaves the last turn open
    without a generation prompt) and, once per call, the training-data trap: assistant turns that lose the
    reasoning their messages carry (with the count and how to keep it)."""
    if lay is not None and d.spec.last_turn_open_without_generation_prompt:
        finding = unterminated_last_turn(d, normalize_messages(messages), False)
        if finding is not None:
            warnings.warn(str(finding), UserWarning, stacklevel=stacklevel)
    _warn_count(r.reasoning_dropped, d, stacklevel + 1)


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
