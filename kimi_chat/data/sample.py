"""What the samples core gives: :class:`Sample` (one training sample: ids, labels, the turns it trains and
their spans), :class:`ConversationSamples` (a conversation's samples and what was seen building them),
:data:`IGNORE_INDEX` and :class:`InvalidRowError` (an input row that is not a conversation). Built by
:mod:`kimi_chat.data.samples`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import KimiChatError

__all__ = ["IGNORE_INDEX", "InvalidRowError", "Sample", "ConversationSamples"]

IGNORE_INDEX = -100
"""The label of a position that is not trained (PyTorch's ``CrossEntropyLoss`` default)."""


class InvalidRowError(KimiChatError, ValueError):
    """An input row that is not a conversation (not a mapping, ``messages`` missing or not a list...)."""


@dataclass
class Sample:
    """One training sample: ``input_ids`` and ``labels`` (the id where trained, :data:`IGNORE_INDEX`
    elsewhere), ``turns`` the indices of the assistant messages it trains, ``spans`` the ``(start, end)`` of
    each one's trained ids (in ``turns`` order)."""

    input_ids: list[int]
    labels: list[int]
    turns: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def assistant_masks(self) -> list[int]:
        """Per position, 1 where trained, else 0."""
        return [0 if x == IGNORE_INDEX else 1 for x in self.labels]

    def __len__(self) -> int:
        return len(self.input_ids)

    def truncated(self, max_length: int) -> "Sample | None":
        """This sample cut after the last trained turn whose end fits in ``max_length`` ids (a turn boundary:
        never inside a turn), or ``None`` when even its first turn does not fit."""
        keep = [k for k, (_, end) in enumerate(self.spans) if end <= max_length]
        if not keep:
            return None
        end = self.spans[keep[-1]][1]
        return Sample(self.input_ids[:end], self.labels[:end], self.turns[: len(keep)], self.spans[: len(keep)])


@dataclass
class ConversationSamples:
    """The samples of one conversation and what was seen building them: ``reasoning_dropped`` (assistant
    turns whose reasoning the official rendering of the whole conversation drops), ``untrained`` (assistant
    messages not trained: marked ``"train": false`` or ``"weight": 0``, or first in the conversation)."""

    samples: list[Sample]
    reasoning_dropped: int = 0
    """Assistant turns whose reasoning the official rendering of the whole conversation drops."""
    untrained: list[int] = field(default_factory=list)
