"""Kimi-K3's ``usage.prompt_tokens`` rule (:func:`kimi_chat.servers.contract.prompt_tokens`): the channel
the generation prompt opens (``<|open|>response<|sep|>`` with thinking off, ``<|open|>think<|sep|>`` with
it on) is pending, not prompt, as Moonshot's production tokenizer counts it (KVV ground truths 36 / 119
where ``apply_chat_template(tokenize=True)`` gives 39 / 122; measured with thinking off only)."""

from __future__ import annotations

from collections.abc import Sequence

from ... import markers as M

__all__ = ["pending_prompt_tokens"]

_TAG_MARKERS = frozenset({M.K3_OPEN.id, M.K3_CLOSE.id, M.K3_SEP.id, M.K3_END_OF_MSG.id})


def pending_prompt_tokens(ids: Sequence[int]) -> int:
    """How many of the prompt's last ids are the channel tag the generation prompt opens
    (``<|open|>NAME<|sep|>`` at the very end, NAME without markers); 0 when it ends otherwise."""
    if len(ids) < 3 or ids[-1] != M.K3_SEP.id:
        return 0
    for j in range(len(ids) - 2, -1, -1):
        if ids[j] == M.K3_OPEN.id:
            return len(ids) - j if j < len(ids) - 2 else 0
        if ids[j] in _TAG_MARKERS:
            return 0
    return 0
