"""RL rollouts, token in token out: a conversation extended from the ids the engine sampled, kept exactly.

:func:`start_rollout` renders the first request; :func:`extend_rollout` appends what the engine sampled (a
completion cut before its end marker is closed with it) and the messages that follow, then the next generation
prompt. The sampled ids are never re-rendered: where the official rendering of the extended conversation
would write the history differently (a Thinking dialect drops earlier reasoning; a completion that is not how
the tokenizer encodes its text), the rollout keeps what was sampled and records a :class:`Divergence` naming
the position and the message. :func:`kimi_chat.extend_tokens` answers ``None`` in those cases instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import RenderError
from ..tokens.rendered import RenderedTokens, extend_tokens, render_tokens
from ..tokens.tokenizer import KimiTokenizer
from .samples import _PROBE_CALL, IGNORE_INDEX, generated_turn

__all__ = ["Divergence", "Rollout", "start_rollout", "extend_rollout", "end_marker"]


@dataclass(frozen=True)
class Divergence:
    """Where the official rendering of the rollout's conversation differs from its ids: from ``position`` on
    (the first differing id), in ``message_index``'s tokens (-1: scaffolding) of the request after the turn
    ``turn`` (the message index of the sampled assistant turn just appended)."""

    turn: int
    position: int
    message_index: int
    message: str


@dataclass
class Rollout:
    """A conversation being sampled: ``input_ids`` (every request and sampled turn so far, ending with the next
    generation prompt), ``labels`` (the sampled ids, -100 elsewhere), ``messages``, ``divergences``."""

    input_ids: list[int]
    labels: list[int]
    messages: list[Any]
    dialect: str
    tokenizer: KimiTokenizer
    tools: Sequence[Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    divergences: list[Divergence] = field(default_factory=list)
    prompt: RenderedTokens | None = None
    """The official rendering the ids are, while they are (None once they diverged)."""


def end_marker(dialect: str | Dialect, tokenizer: KimiTokenizer, **options: Any) -> list[int]:
    """The ids that close an assistant turn (``<|im_end|>``; Kimi-K3's ``<|close|>message<|sep|><|end_of_msg|>``),
    learnt from the rendering: what a turn with content and a turn with tool calls both end with, less the
    separator of the channel closed before it when both end with one (K3 closes its last channel first)."""
    d = get_dialect(dialect)
    ends = [generated_turn(m, dialect=d, tokenizer=tokenizer, **options) for m in (
        {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "a", "tool_calls": [_PROBE_CALL]})]
    common: list[int] = []
    for x, y in zip(reversed(ends[0]), reversed(ends[1])):
        if x != y:
            break
        common.insert(0, x)
    if len(common) > 2 and common[0] == common[-2]:
        common = common[1:]
    return common


def start_rollout(messages: Sequence[Any], *, dialect: str | Dialect, tokenizer: KimiTokenizer,
                  tools: Sequence[Any] | None = None, **options: Any) -> Rollout:
    """The first request: the official ids of ``messages`` plus the generation prompt."""
    d = get_dialect(dialect)
    r = render_tokens(messages, tokenizer=tokenizer, tools=tools, dialect=d, add_generation_prompt=True, **options)
    return Rollout(list(r.ids), [IGNORE_INDEX] * len(r.ids), list(messages), d.name, tokenizer, tools, dict(options),
                   [], r)


def extend_rollout(rollout: Rollout, completion_ids: Sequence[int], new_messages: Sequence[Any]) -> Rollout:
    """``rollout`` extended by the sampled ``completion_ids`` (kept exactly; closed with :func:`end_marker`
    when cut before it) and ``new_messages``: first the assistant message the completion stands for (as parsed
    from it), then what follows (tool results, the next user message); then the next generation prompt.

    The ids of the messages after the completion are the official rendering's. Where the official rendering of
    the whole extended conversation differs from the rollout's ids, the rollout keeps its ids and records a
    :class:`Divergence`. Returns a new :class:`Rollout`."""
    if not new_messages or not isinstance(new_messages[0], Mapping) or new_messages[0].get("role") != "assistant":
        raise RenderError("new_messages[0] must be the assistant message the completion stands for")
    tok = rollout.tokenizer
    d = get_dialect(rollout.dialect)
    end = end_marker(d, tok, **rollout.options)
    sampled = list(completion_ids)
    if sampled[-len(end):] != end:
        sampled += end  # a cut completion (max_tokens): closed, so the next message starts a new turn
    turn = len(rollout.messages)
    messages = [*rollout.messages, *new_messages]
    ids = rollout.input_ids + sampled
    labels = rollout.labels + sampled
    nxt = None
    if rollout.prompt is not None:
        nxt = extend_tokens(rollout.prompt, sampled, new_messages, tools=rollout.tools)
    divergences = list(rollout.divergences)
    if nxt is not None:
        return Rollout(list(nxt.ids), labels + [IGNORE_INDEX] * (len(nxt.ids) - len(labels)), messages, d.name, tok,
                       rollout.tools, rollout.options, divergences, nxt)
    official = render_tokens(messages, tokenizer=tok, tools=rollout.tools, dialect=d, add_generation_prompt=True,
                             **rollout.options)
    spans = [s for s in official.spans if s.message_index == turn]
    if not spans:
        raise RenderError(f"messages[{turn}]: the assistant message is not in the rendering")
    tail = official.ids[spans[-1].end:]
    at = next((k for k, (a, b) in enumerate(zip(ids, official.ids)) if a != b), min(len(ids), len(official.ids)))
    where = official.message_index[at] if at < len(official.ids) else -1
    if all(v.position != at for v in divergences):  # a divergence already reported is not repeated
        divergences.append(Divergence(
            turn, at, where,
            f"the official rendering after messages[{turn}] differs from the sampled ids at position {at} "
            f"(messages[{where}]): kept as sampled"))
    return Rollout(ids + tail, labels + [IGNORE_INDEX] * len(tail), messages, d.name, tok, rollout.tools,
                   rollout.options, divergences, None)
