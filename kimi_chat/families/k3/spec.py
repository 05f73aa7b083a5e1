"""The switches of a Kimi-K3 dialect record (:class:`K3Spec`). Kimi-K3's official encoder
(:mod:`kimi_chat.families.k3.render`) has one behaviour, read from the release: the spec states the facts the
family-agnostic stages ask of every dialect. This module imports nothing of kimi_chat: a record needs only it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["K3Spec"]


@dataclass(frozen=True, kw_only=True)
class K3Spec:
    """The choices of a K3 dialect (the release's encoder has no switches of its own)."""

    keeps_every_reasoning: bool = True
    """The encoder writes every assistant turn's reasoning, always (a request's ``thinking.keep="all"`` asks
    for nothing else)."""
    last_turn_open_without_generation_prompt: bool = False
    """Without a generation prompt the last turn is closed as every other (``<|end_of_msg|>``)."""

    @property
    def reasoning(self) -> bool:
        """Whether the output may carry ``<think>`` reasoning: no, K3 reasons in its XTML think channel."""
        return False

    def prefills_think(self, reads_thinking: bool, options: Mapping[str, object]) -> bool:
        """Whether the generation prompt opens ``<think>``: never (its channels are XTML tags)."""
        return False
