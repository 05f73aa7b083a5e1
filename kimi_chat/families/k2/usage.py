"""Kimi-K2's ``usage.prompt_tokens`` rule (:func:`kimi_chat.servers.contract.prompt_tokens`): every id of
the rendered prompt counts (there is no Moonshot ground truth for K2 that says otherwise)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["pending_prompt_tokens"]


def pending_prompt_tokens(ids: Sequence[int]) -> int:
    """0: a K2 prompt has no pending tokens."""
    return 0
