"""Samples as generated: a conversation's assistant turns as the token ids the model produced them, each
after the exact prompt a server rendered for that request (the semantics: :mod:`kimi_chat.data`).

Built on the public token API (:func:`kimi_chat.render_tokens`, :func:`kimi_chat.extend_tokens`): one
sample per stretch of turns the dialect's official rendering keeps as generated, the boundaries found by
prefix stability (``extend_tokens`` answers ``None`` where a later prompt re-renders an earlier turn), never
from a table of dialect names.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import markers as M
from ..dialects import Dialect, get_dialect
from ..errors import KimiChatError, UnsupportedOptionError
from ..tokens.rendered import RenderedTokens, extend_tokens, render_tokens
from ..tokens.tokenizer import KimiTokenizer

__all__ = [
    "IGNORE_INDEX", "REASONING_POLICIES", "ReasoningPolicy", "Sample", "ConversationSamples", "InvalidRowError",
    "conversation_samples", "trained_turns", "generated_turn", "reasoning_options",
]

IGNORE_INDEX = -100
"""The label of a position that is not trained (PyTorch's ``CrossEntropyLoss`` default)."""

ReasoningPolicy = Literal["as-sampled", "keep", "official"]
REASONING_POLICIES: tuple[str, ...] = ("as-sampled", "keep", "official")

_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
# a call added to a final answer so that a template that drops the reasoning of final answers writes the turn
# as it writes a turn it keeps (its tool-call section is then taken out again)
_PROBE_CALL = {"id": "functions.probe:0", "type": "function", "function": {"name": "probe", "arguments": "{}"}}


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
    messages marked ``"train": false`` or ``"weight": 0``)."""

    samples: list[Sample]
    reasoning_dropped: int = 0
    untrained: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _is_trained(m: Mapping[str, Any]) -> bool:
    return m.get("train", True) is not False and m.get("weight", 1) != 0


def trained_turns(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the assistant messages to train: every one, except those with ``"train": false`` or
    ``"weight": 0``."""
    return [i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "assistant"
            and _is_trained(m)]


def _has_reasoning(m: Mapping[str, Any]) -> bool:
    return any(isinstance(m.get(k), str) and m.get(k) for k in _REASONING_KEYS)


# --------------------------------------------------------------------------------------------------
# Per dialect facts, learnt from the rendering itself (probes, cached)
# --------------------------------------------------------------------------------------------------

_PROBES: dict[tuple[str, tuple[tuple[str, Any], ...], int], bool] = {}


def _options_key(options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in options.items() if isinstance(v, (bool, int, str, type(None)))))


def _section_ids(tok: KimiTokenizer) -> tuple[int, int] | None:
    try:
        return tok.token_to_id(M.TOOL_CALLS_SECTION_BEGIN.text), tok.token_to_id(M.TOOL_CALLS_SECTION_END.text)
    except (KeyError, ValueError):
        return None


def _without_section(body: list[int], tok: KimiTokenizer) -> list[int] | None:
    """``body`` without its (last) tool-call section, or ``None`` when it has none."""
    ids = _section_ids(tok)
    if ids is None or ids[0] not in body:
        return None
    begin = len(body) - 1 - body[::-1].index(ids[0])
    try:
        end = body.index(ids[1], begin)
    except ValueError:
        return None
    return body[:begin] + body[end + 1 :]


def _isolated(message: Mapping[str, Any], d: Dialect, tok: KimiTokenizer, options: Mapping[str, Any],
              special_tokens: str) -> tuple[list[int], list[int], list[int]]:
    """``(header, body, generation prompt)`` of ``message`` rendered alone (then a generation prompt): the
    untrained ids of its turn, its trained ids, the ids of the generation prompt after it."""
    r = render_tokens([message], tokenizer=tok, dialect=d, add_generation_prompt=True,
                      special_tokens=special_tokens, **options)  # type: ignore[arg-type]
    ids, mask, idx = r.ids, r.assistant_mask, r.message_index
    turn = [k for k, j in enumerate(idx) if j == 0]
    header = [ids[k] for k in turn if not mask[k]]
    body = [ids[k] for k in turn if mask[k]]
    gp_start = max(turn) + 1 if turn else len(ids)
    return header, body, ids[gp_start:]


def _keeps_final_reasoning(d: Dialect, tok: KimiTokenizer, options: Mapping[str, Any]) -> bool:
    """Whether the dialect, alone, writes a final answer (no tool calls) with its reasoning: the probe of
    :func:`generated_turn` (False: it writes it as a history turn, reasoning dropped)."""
    key = (d.name, _options_key(options), id(tok))
    hit = _PROBES.get(key)
    if hit is None:
        probe = {"role": "assistant", "content": "a", "reasoning_content": "r"}
        _, plain, _ = _isolated(probe, d, tok, options, "text")
        _, called, _ = _isolated({**probe, "tool_calls": [_PROBE_CALL]}, d, tok, options, "text")
        kept = _without_section(called, tok)
        hit = _PROBES[key] = kept is None or kept == plain
    return hit


def generated_turn(message: Mapping[str, Any], *, dialect: str | Dialect, tokenizer: KimiTokenizer,
                   generation_prompt: Sequence[int], special_tokens: str = "text",
                   **options: Any) -> list[int]:
    """The ids an assistant ``message`` is generated as after ``generation_prompt`` (the ids a server's
    generation prompt ends with): the turn as the dialect's template writes a turn whose reasoning it keeps
    (reasoning, content, tool calls, through its end-of-turn marker), less what the generation prompt
    already wrote (K2.5 / K2.6 / K3 open the reasoning there).

    The turn is rendered on its own (an assistant turn's text depends on the message alone). A template
    that writes a final answer (no tool calls) as history, its reasoning dropped (K2-Thinking, K2.5, K2.6
    without ``preserve_thinking``), is asked for it as it writes a turn with tool calls, whose reasoning it
    keeps, and the tool-call section is taken out: the same turn with its reasoning."""
    d = get_dialect(dialect)
    if not message.get("tool_calls") and not _keeps_final_reasoning(d, tokenizer, options):
        _, called, _ = _isolated({**message, "tool_calls": [_PROBE_CALL]}, d, tokenizer, options, special_tokens)
        body = _without_section(called, tokenizer)
        if body is None:  # pragma: no cover - the probe found a section
            raise RuntimeError(f"{d.name}: no tool-call section in the probe turn")
    else:
        _, body, _ = _isolated(message, d, tokenizer, options, special_tokens)
    return body[_overlap(generation_prompt, body):]


def _overlap(prompt: Sequence[int], body: Sequence[int]) -> int:
    """The longest ``k`` such that the prompt ends with ``body[:k]`` (what the generation prompt wrote of
    the turn: ``<think>``), shorter than the prompt."""
    for k in range(min(len(prompt) - 1, len(body), 8), 0, -1):
        if list(prompt[-k:]) == list(body[:k]):
            return k
    return 0


def _generation_prompt(r: RenderedTokens) -> list[int]:
    spans = r.spans
    if spans and spans[-1].message_index == -1:
        return r.ids[spans[-1].start:]
    return []  # pragma: no cover - every prompt rendered with add_generation_prompt ends with one


# --------------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------------

_KEEP: dict[tuple[str, tuple[tuple[str, Any], ...], int], bool] = {}


def reasoning_options(dialect: str | Dialect, reasoning: str, options: Mapping[str, Any] | None = None,
                      *, tokenizer: KimiTokenizer | None = None) -> dict[str, Any]:
    """The render options of a reasoning policy: ``"keep"`` adds ``preserve_thinking=True`` where the
    dialect reads it; :class:`~kimi_chat.errors.UnsupportedOptionError` when the policy is unknown, or
    ``"keep"`` on a dialect whose rendering drops earlier reasoning whatever the options (K2-Thinking,
    K2.5: checked on the rendering when a tokenizer is given)."""
    if reasoning not in REASONING_POLICIES:
        raise UnsupportedOptionError(
            f"reasoning={reasoning!r} is not a policy; choose one of {', '.join(REASONING_POLICIES)}",
            option="reasoning")
    d = get_dialect(dialect)
    opts = dict(options or {})
    if reasoning != "keep":
        return opts
    if "preserve_thinking" in d.options:
        opts["preserve_thinking"] = True
    if tokenizer is not None and not _keeps_everything(d, tokenizer, opts):
        raise UnsupportedOptionError(
            f"reasoning='keep': dialect {d.name} cannot keep every turn's reasoning (its template rewrites "
            "earlier assistant turns without it and has no preserve_thinking); use reasoning='as-sampled' "
            "(one sample per stretch the rendering keeps) or reasoning='official'", option="reasoning")
    return opts


def _keeps_everything(d: Dialect, tok: KimiTokenizer, options: Mapping[str, Any]) -> bool:
    """Whether one rendering keeps every assistant turn as generated: a probe conversation (an answer with
    reasoning, then a second request) is one sample."""
    key = (d.name, _options_key(options), id(tok))
    hit = _KEEP.get(key)
    if hit is None:
        probe = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"},
                 {"role": "user", "content": "q"}, {"role": "assistant", "content": "b", "reasoning_content": "s"}]
        hit = _KEEP[key] = len(_as_sampled(probe, None, d, tok, options, "text", [1, 3])) == 1
    return hit


def conversation_samples(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    reasoning: ReasoningPolicy = "as-sampled",
    special_tokens: str = "text",
    **options: Any,
) -> ConversationSamples:
    """The training samples of one conversation (:mod:`kimi_chat.data`: samples as generated).

    ``reasoning``: ``"as-sampled"`` (default: each trained assistant turn after the exact prompt of its
    request, as generated; one sample per stretch the dialect keeps), ``"keep"`` (the same with
    ``preserve_thinking`` where the dialect reads it: one sample; refused where the dialect cannot),
    ``"official"`` (one official rendering of the whole conversation, reasoning dropped where the template
    drops it). ``options`` are the dialect's render options (``thinking``...); ``special_tokens`` is
    :func:`~kimi_chat.render_tokens`'s policy for marker text typed in the input.

    Raises the :class:`~kimi_chat.errors.KimiChatError` of a message or option the dialect refuses.
    """
    d = get_dialect(dialect)
    opts = reasoning_options(d, reasoning, options, tokenizer=tokenizer if reasoning == "keep" else None)
    msgs = list(messages)
    turns = trained_turns(msgs)
    untrained = [i for i, m in enumerate(msgs) if isinstance(m, Mapping) and m.get("role") == "assistant"
                 and not _is_trained(m)]
    dropped = _dropped_reasoning(msgs, tools, d, tokenizer, opts, special_tokens)
    if reasoning == "official":
        samples = _official(msgs, tools, d, tokenizer, opts, special_tokens, turns)
    else:
        samples = _as_sampled(msgs, tools, d, tokenizer, opts, special_tokens, turns)
    return ConversationSamples(samples, dropped, untrained)


def _dropped_reasoning(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                       special_tokens: str) -> int:
    """How many assistant turns' reasoning the official rendering of the whole conversation drops."""
    with_reasoning = [i for i, m in enumerate(msgs) if isinstance(m, Mapping) and m.get("role") == "assistant"
                      and _has_reasoning(m)]
    if not with_reasoning:
        return 0
    from ..prompt import render_segments

    segments = render_segments(msgs, tools=tools, dialect=d, add_generation_prompt=False, **opts)
    text: dict[int, list[str]] = {}
    for s in segments:
        text.setdefault(s.message_index, []).append(s.text)
    n = 0
    for i in with_reasoning:
        m = msgs[i]
        reasoning = next(m[k] for k in _REASONING_KEYS if isinstance(m.get(k), str) and m.get(k))
        if reasoning not in "".join(text.get(i, ())):
            n += 1
    return n


def _official(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
              special_tokens: str, turns: list[int]) -> list[Sample]:
    if not turns:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped reasoning is counted, the open last turn is lint's finding
        r = render_tokens(msgs[: turns[-1] + 1], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=False,
                          special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
    trained = set(turns)
    mask = r.assistant_mask
    labels = [t if m and j in trained else IGNORE_INDEX for t, m, j in zip(r.ids, mask, r.message_index)]
    spans = []
    for i in turns:
        pos = [k for k in range(*r.span_of(i)) if mask[k]] if any(s.message_index == i for s in r.spans) else []
        spans.append((pos[0], pos[-1] + 1) if pos else (0, 0))
    return [Sample(list(r.ids), labels, list(turns), spans)]


def _as_sampled(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                special_tokens: str, turns: list[int]) -> list[Sample]:
    samples: list[Sample] = []
    cur: Sample | None = None
    prompt: RenderedTokens | None = None
    body: list[int] = []
    prev = -1
    for i in turns:
        nxt = None
        if prompt is not None:
            nxt = extend_tokens(prompt, body, msgs[prev:i], tools=tools, add_generation_prompt=True)
        if nxt is None or cur is None:
            if cur is not None:
                samples.append(cur)
            nxt = render_tokens(msgs[:i], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                                special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
            cur = Sample(list(nxt.ids), [IGNORE_INDEX] * len(nxt.ids))
        else:
            gap = nxt.ids[len(cur.input_ids):]
            cur.input_ids += gap
            cur.labels += [IGNORE_INDEX] * len(gap)
        body = generated_turn(msgs[i], dialect=d, tokenizer=tok, generation_prompt=_generation_prompt(nxt),
                              special_tokens=special_tokens, **opts)
        start = len(cur.input_ids)
        cur.input_ids += body
        cur.labels += body
        cur.turns.append(i)
        cur.spans.append((start, len(cur.input_ids)))
        prompt, prev = nxt, i
    if cur is not None:
        samples.append(cur)
    return samples
