"""What the K2 renderer writes of a turn wherever the turn stands: the premises of the samples core's shortcuts
(:mod:`kimi_chat.data.samples`), reasoned from the template renderer
(:func:`kimi_chat.families.k2.render.render_k2`).

That renderer writes the blocks before the messages (tool declarations, default system prompt) from the tools
and the first message, then each message from the message, the options and one fact of where it stands: whether
it is at or before the *history split* (the last assistant message without tool calls: ``<think></think>`` in
place of its reasoning), in dialects with a ``<think>`` policy. Every message begins with a special token (its
header), where the encoder splits. So where the split is the same, a turn is written, and encoded, as when
alone, and a rendering holds each earlier request up to the turn's header. A message other than an assistant
one is written alike on both sides of the split, so one rendering also holds the requests of a history-split
dialect's stretches, each up to its first turn (:func:`split_rendering`). The shortcuts built on this are
checked against separate renderings in ``tests/data/test_data_samples_shortcuts.py``.

A family may say the same of its own pass (:attr:`~kimi_chat.families.TokenPolicy.turns_position_free`: Kimi-K3
without image prompts, reasoned beside its pass); :func:`turns_position_free` asks it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..errors import KimiChatError
from ..families.k2.spec import K2Spec
from ..tokens.rendered import render_tokens
from ..tokens.tokenizer import KimiTokenizer

__all__ = ["turns_position_free", "prefix_kept", "one_rendering", "split_rendering", "dropped_after_split"]


def _k2_template(d: Dialect) -> bool:
    """Whether ``d`` is rendered by the K2 template renderer (a K2 record: its spec a :class:`K2Spec`)."""
    return isinstance(d.spec, K2Spec) and not d.family_parts.tokens.segment_wise


def turns_position_free(d: Dialect, options: Mapping[str, Any] | None = None) -> bool:
    """Whether the dialect, with these render ``options``, writes an assistant turn from the message alone,
    wherever it stands: a K2 dialect with no ``<think>`` policy (0905, rev1, rev2: no history split, no prefill
    in the generation prompt), or one that keeps every turn's reasoning (no history split: K2.7-Code, K2.6 with
    ``preserve_thinking=True``; the generation prompt may open the think block); or what the family says of its
    own pass (Kimi-K3: without image prompts). Then every turn of one rendering is the turn as generated, and
    every request is that rendering up to the turn's header plus the generation prompt (:func:`one_rendering`)."""
    spec = d.spec
    own = d.family_parts.tokens.turns_position_free
    if own is not None:  # the family's pass says (module docstring)
        return own(d, options or {})
    if not _k2_template(d):
        return False
    if getattr(spec, "think", None) == "none":
        return not getattr(spec, "keeps_every_reasoning", False)
    # the renderer's own test of `preserve` (render_k2), taken only for a true bool
    return getattr(spec, "keeps_every_reasoning", False) is True or (
        d.reads_preserve_thinking and (options or {}).get("preserve_thinking") is True)


def prefix_kept(d: Dialect, msgs: list[Any], s: int, e: int) -> bool:
    """Whether the K2 renderer writes ``messages[:s]`` in the request of turn ``e`` exactly as in the request of
    turn ``s`` (``s < e``), and every assistant turn of ``messages[s:e]`` as when alone: the two requests have the
    same history split when no assistant message of ``messages[s:e]`` is a final answer (no tool calls), and the
    turns after the split are written as when alone (no split there either). Plain dict messages only (what the
    renderer reads of others is their normalized form: not reasoned about here)."""
    if not _k2_template(d):
        return False
    if getattr(d.spec, "think", None) == "none":
        return all(type(m) is dict for m in msgs[s:e])
    return all(type(m) is dict and (m.get("role") != "assistant" or m.get("tool_calls")) for m in msgs[s:e])


def one_rendering(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                  special_tokens: str, turns: list[int], gp: list[int], bodies: dict[int, list[int]],
                  prefill: int = 0) -> tuple[list[int], list[int], list[tuple[int, int]]] | None:
    """``(ids, trained positions' ids, spans)``: every turn of ``turns`` as one sample from one rendering of
    ``messages[:e + 1]`` (``e`` the last turn) with the generation prompt ``gp`` (its ids), in a dialect whose
    turns are position free (:func:`turns_position_free`): each request is that rendering up to the turn's
    header, then the generation prompt; each turn's ids after the generation prompt are the turn as generated.
    The second item is the labels with ``-100`` where not trained. ``prefill``: how many of the generation
    prompt's last ids open the turn (K2.6's ``<think>``: trainable in the rendering, written by the prompt, not
    trained). Checked: the rendering ends with the generation prompt, each assistant turn from the first trained
    one on begins with it and is trainable from its prefill on, and nothing but those messages lies between.
    ``None`` when a check fails or the rendering is refused (then the general path asks, and names what it
    refuses). Fills ``bodies`` (the turns as generated)."""
    e = turns[-1]
    try:
        r = render_tokens(msgs[: e + 1], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                          special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
    except KimiChatError:
        return None
    ids = r.ids
    n = len(gp)
    idxs, trains, counts = r._pieces
    if not n or trains is None or ids[len(ids) - n:] != gp:  # trains None: a token across pieces (see render_tokens)
        return None
    # per message from the first trained turn on: where it starts, where its trainable ids start and end, and
    # whether its pieces are one run of untrainable then trainable ids
    first = turns[0]
    spans: dict[int, list[int]] = {}  # message -> [start, trainable start, end, broken]
    pos = 0
    for j, train, c in zip(idxs, trains, counts):
        if c:
            if j >= first:
                sp = spans.get(j)
                if sp is None:
                    sp = spans[j] = [pos, -1, pos, 0]
                elif sp[2] != pos:  # not contiguous: another message's (or no message's) pieces in between
                    sp[3] = 1
                if train:
                    if sp[1] < 0:
                        sp[1] = pos
                elif sp[1] >= 0:  # untrainable ids after trainable ones
                    sp[3] = 1
                sp[2] = pos + c
            pos += c
    trained = set(turns)
    labels = [-100] * len(ids)
    out_spans: list[tuple[int, int]] = []
    for j, (start, a, end, broken) in spans.items():
        m = msgs[j]
        if not ((type(m) is dict or isinstance(m, Mapping)) and m.get("role") == "assistant"):
            continue
        # trainable from the generation prompt's last `prefill` ids on (written by the prompt: not trained)
        ok = not broken and a == start + n - prefill and end > start + n and ids[start:start + n] == gp
        a = start + n
        if j in trained:
            if not ok:
                return None
            labels[a:end] = ids[a:end]
            out_spans.append((a, end))
        if ok:
            bodies[j] = ids[a:end]
    if len(out_spans) != len(turns) or out_spans[-1][1] != len(ids) - n \
            or sum(sp[2] - sp[0] for sp in spans.values()) != len(ids) - n - out_spans[0][0] + n:
        return None  # something but the messages from the first trained turn on, then the generation prompt
    end = out_spans[-1][1]
    del labels[end:]
    return ids[:end], labels, out_spans


def dropped_after_split(d: Dialect, tok: KimiTokenizer, prefill: str, msgs: list[Any],
                        carried: Mapping[int, list[str]], bodies: Mapping[int, list[int]]) -> int | None:
    """How many messages carry reasoning that the official rendering of the whole conversation (no generation
    prompt) does not write in their turn, without rendering it, where every such message stands after the
    history split and its turn as generated is known (``bodies``; ``prefill``: the text the generation prompt
    writes before it): the turn is then written as when alone, the prefill and the turn as generated. ``None``
    elsewhere (a dialect without a split, a last turn left open, a message at or before the split)."""
    spec = d.spec
    if not _k2_template(d) or getattr(spec, "think", "none") == "none" \
            or getattr(spec, "last_turn_open_without_generation_prompt", True):
        return None
    if not all(type(m) is dict for m in msgs):
        return None
    split = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant" and not m.get("tool_calls")),
                default=-1)
    if any(j <= split or j not in bodies for j in carried):
        return None
    decode = tok.encoding.decode
    return sum(1 for j, c in carried.items() if not any(x in prefill + decode(bodies[j]) for x in c))


def _split_before(msgs: list[Any], i: int) -> int:
    """The history split of the request of ``messages[i]``: the last assistant message without tool calls
    before it (-1: none)."""
    for j in range(i - 1, -1, -1):
        m = msgs[j]
        if m.get("role") == "assistant" and not m.get("tool_calls"):
            return j
    return -1


def split_rendering(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                    special_tokens: str, stretches: list[list[int]], gp: list[int],
                    bodies: Mapping[int, list[int]]) -> tuple[list[tuple[list[int], list[int], list[int],
                                                                     list[tuple[int, int]]]], int] | None:
    """``(ids, labels, turns, spans)`` per stretch (``stretches``: the trained turns, cut after each final
    answer) from one rendering of the whole conversation without a generation prompt (the official one, whose
    ``reasoning_dropped`` is the second item), in a K2 dialect with a history split, where no stretch holds a final
    answer before its last turn (:func:`prefix_kept`); ``gp``: the generation prompt's ids.

    The renderer writes a message from the message, the options and whether it stands at or before the split
    (module docstring); a message other than an assistant one does not read even that. The request of a
    stretch's first turn ``s`` has its split at the last final answer before ``s``; the rendering has its own
    at or after it (the last final answer), so every message up to the request's split is written
    there as in the request; the messages between the request's split and ``s`` must then be no assistant ones
    (checked), and the request is the rendering up to message ``s``, then ``gp``. In the stretch's own request
    every message from ``s`` on is written after the split, as when alone: an assistant turn as ``gp`` then the
    turn as generated (``bodies``: every assistant message from the first stretch on, each from one rendering
    whose untrainable ids are ``gp``'s header, checked by the caller), any other message as in the rendering.
    ``None`` when a condition fails or the rendering is refused (the general path then asks)."""
    if not _k2_template(d) or getattr(d.spec, "think", "none") == "none" or not all(type(m) is dict for m in msgs):
        return None
    for st in stretches:
        s, e = st[0], st[-1]
        if not prefix_kept(d, msgs, s, e) or any(
                msgs[j].get("role") == "assistant" for j in range(_split_before(msgs, s) + 1, s)) or any(
                j not in bodies for j in range(s, e + 1) if msgs[j].get("role") == "assistant"):
            return None
    try:
        r = render_tokens(msgs, tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=False,
                          special_tokens=special_tokens, warn=False, **opts)  # type: ignore[arg-type]
    except KimiChatError:
        return None
    ids, n = r.ids, len(gp)
    spans = r.spans
    # the blocks before the messages (no message), then each message once and in order
    at = 1 if spans and spans[0].message_index == -1 else 0
    if r.reasoning_dropped is None or len(spans) != at + len(msgs) \
            or [sp.message_index for sp in spans[at:]] != list(range(len(msgs))):
        return None
    where = spans[at:]  # message j's tokens
    unlabelled = [-100] * n
    out = []
    for st in stretches:
        s, e = st[0], st[-1]
        trained = set(st)
        sample = ids[: where[s].start]
        labels = [-100] * len(sample)
        turn_spans = []
        for j in range(s, e + 1):
            if msgs[j].get("role") == "assistant":
                body = bodies[j]
                sample += gp
                labels += unlabelled
                a = len(sample)
                sample += body
                if j in trained:
                    labels += body
                    turn_spans.append((a, len(sample)))
                else:
                    labels += [-100] * len(body)
            else:
                piece = ids[where[j].start : where[j].end]
                sample += piece
                labels += [-100] * len(piece)
        out.append((sample, labels, list(st), turn_spans))
    return out, r.reasoning_dropped
