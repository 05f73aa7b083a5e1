"""Samples as generated: a conversation's assistant turns as the token ids the model produced them, each
after the exact prompt a server rendered for that request (the semantics: :mod:`kimi_chat.data`).

Built on the public token API (:func:`kimi_chat.render_tokens`, :func:`kimi_chat.extend_tokens`): one
sample per stretch of turns the dialect's official rendering keeps as generated, the boundaries found by
prefix stability (a request whose official prompt does not extend the sample so far starts a new one), never
from a table of dialect names. What the rendering does is learnt from it by probes, once per dialect, options
and tokenizer (:data:`_FACTS`); every stretch built from one rendering is checked turn by turn, except what the K2
renderer writes of a turn wherever it stands (:mod:`kimi_chat.data.positions`: taken from the rendering, not
rendered again).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from itertools import compress
from typing import Any, Literal

from .. import markers as M
from ..caches import PerTokenizer
from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import KimiChatError, RenderError, UnsupportedOptionError
from ..messages import InvalidMessagesError
from ..prompt import render, render_layout
from ..tokens.prompt_ids import remember_prompt
from ..tokens.reasoning import carried_reasoning, reasoning_dropped, trained_texts
from ..tokens.rendered import RenderedTokens, extend_tokens, render_ids, render_tokens
from ..tokens.text_ids import text_ids
from ..tokens.tokenizer import KimiTokenizer
from .official import official_samples
from .positions import dropped_after_split as _dropped_after_split, one_rendering
from .positions import prefix_kept as _prefix_kept, split_rendering as _split_rendering
from .positions import turns_position_free as _turns_position_free
from .sample import IGNORE_INDEX, ConversationSamples, InvalidRowError, Sample

__all__ = [
    "IGNORE_INDEX", "REASONING_POLICIES", "ReasoningPolicy", "Sample", "ConversationSamples", "InvalidRowError",
    "conversation_samples", "trained_turns", "generated_turn", "reasoning_options",
]


ReasoningPolicy = Literal["as-sampled", "keep", "official"]
REASONING_POLICIES: tuple[str, ...] = ("as-sampled", "keep", "official")

# a call added to a final answer so that a template that drops the reasoning of final answers writes the turn
# as it writes a turn it keeps (its tool-call section is then taken out again)
_PROBE_CALL = {"id": "functions.probe:0", "type": "function", "function": {"name": "probe", "arguments": "{}"}}


def _is_trained(m: Mapping[str, Any], i: int) -> bool:
    train, weight = m.get("train", True), m.get("weight", 1)
    if train is not True and train is not False and train is not None:  # "no", 0: not a yes or no to guess at
        raise InvalidRowError(f"messages[{i}].train: must be true or false, got {train!r}")
    if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
        raise InvalidRowError(f"messages[{i}].weight: must be a number (0: not trained), got {weight!r}")
    return train is not False and weight != 0


def trained_turns(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the assistant messages to train: every one, except those with ``"train": false`` or
    ``"weight": 0``, and a first message (no request before it: there is no prompt to generate it after).
    Raises :class:`InvalidRowError` naming ``messages[i].train`` / ``.weight`` when ``train`` is not a boolean
    or ``weight`` not a number (``"no"`` or ``"0"`` would otherwise be trained)."""
    return _assistant_turns(messages)[0]


def _assistant_turns(messages: Sequence[Any]) -> tuple[list[int], list[int], dict[int, list[str]]]:
    """``(trained turns, untrained assistant messages, reasoning carried)`` in one pass over the messages: the
    indices :func:`trained_turns` gives, those of the other assistant messages, and per message the reasoning
    texts it carries (:func:`~kimi_chat.tokens.reasoning.carried_reasoning`: only assistant messages carry
    any)."""
    turns: list[int] = []
    untrained: list[int] = []
    carried: dict[int, list[str]] = {}
    for i, m in enumerate(messages):
        if type(m) is dict or isinstance(m, Mapping):
            if m.get("role") != "assistant":
                continue
            (turns if i and _is_trained(m, i) else untrained).append(i)
        c = carried_reasoning(m)
        if c:
            carried[i] = c
    return turns, untrained, carried


# --------------------------------------------------------------------------------------------------
# Per dialect facts, learnt from the rendering itself (probes, cached)
# --------------------------------------------------------------------------------------------------


def _options_key(options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, repr(v)) for k, v in options.items())) if options else ()


_FACTS: PerTokenizer[dict[tuple[str, str, tuple[tuple[str, Any], ...]], Any]] = PerTokenizer("data.dialect_facts")
"""Per tokenizer: what the probes learnt of a dialect's rendering, by (fact, dialect, options)."""


def _facts(tok: KimiTokenizer) -> dict[tuple[str, str, tuple[tuple[str, Any], ...]], Any]:
    return _FACTS.get(tok, lambda _: {})


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
    facts, key = _facts(tok), ("keeps_final", d.name, _options_key(options))
    hit = facts.get(key)
    if hit is None:
        probe = {"role": "assistant", "content": "a", "reasoning_content": "r"}
        _, plain, _ = _isolated(probe, d, tok, options, "text")
        _, called, _ = _isolated({**probe, "tool_calls": [_PROBE_CALL]}, d, tok, options, "text")
        kept = _without_section(called, tok)
        hit = facts[key] = kept is None or kept == plain
    return hit


def _prefill(d: Dialect, tok: KimiTokenizer,
             options: Mapping[str, Any]) -> tuple[list[int], str, list[int], str]:
    """``(ids, text, generation prompt, its text)``: what the generation prompt writes after an assistant turn's header
    (K2.5 / K2.6: ``<think>``; ``<think></think>`` with ``thinking=False``), the generation prompt less the
    untrained head of a probe turn, and the generation prompt's ids; learnt from the rendering once per
    dialect and options."""
    facts, key = _facts(tok), ("prefill", d.name, _options_key(options))
    hit = facts.get(key)
    if hit is None:
        # a turn with tool calls: kept in every template (a final answer may be written as history)
        header, _, gp = _isolated({"role": "assistant", "content": "a", "tool_calls": [_PROBE_CALL]}, d, tok,
                                  options, "text")
        ids = gp[len(header):] if gp[: len(header)] == header else []
        hit = facts[key] = (ids, tok.decode(ids), gp, tok.decode(gp))
    return hit


def generated_turn(message: Mapping[str, Any], *, dialect: str | Dialect, tokenizer: KimiTokenizer,
                   special_tokens: str = "text", index: int | None = None, **options: Any) -> list[int]:
    """The ids an assistant ``message`` is generated as after the dialect's generation prompt: the turn as the
    template writes a turn whose reasoning it keeps (reasoning, content, tool calls, through its end-of-turn
    marker), less what the generation prompt already wrote (K2.5 / K2.6 open ``<think>`` there).

    The turn is rendered on its own (an assistant turn's text depends on the message alone). A template
    that writes a final answer (no tool calls) as history, its reasoning dropped (K2-Thinking, K2.5, K2.6
    without ``preserve_thinking``), is asked for it as it writes a turn with tool calls, whose reasoning it
    keeps, and the tool-call section is taken out: the same turn with its reasoning.

    Raises :class:`~kimi_chat.errors.RenderError` (naming ``messages[index]``) when the turn does not begin
    with what the generation prompt wrote: reasoning under ``thinking=False`` with ``preserve_thinking`` (the
    prompt closed the think block: the model cannot have written it), or a tokenizer that encodes the opened
    ``<think>`` as text (not the model's own)."""
    d = get_dialect(dialect)
    try:
        if not message.get("tool_calls") and not _keeps_final_reasoning(d, tokenizer, options):
            _, called, _ = _isolated({**message, "tool_calls": [_PROBE_CALL]}, d, tokenizer, options, special_tokens)
            body = _without_section(called, tokenizer)
            if body is None:  # pragma: no cover - the probe found a section
                raise RuntimeError(f"{d.name}: no tool-call section in the probe turn")
        else:
            _, body, _ = _isolated(message, d, tokenizer, options, special_tokens)
    except KimiChatError as e:
        if index is None or index == 0:
            raise
        raise _at_index(e, index) from e
    prefill, text, _, _ = _prefill(d, tokenizer, options)
    if body[: len(prefill)] != prefill:
        where = f"messages[{index}]" if index is not None else "the assistant message"
        if tokenizer.decode(body).startswith(text):
            raise RenderError(
                f"{where}: the {d.name} generation prompt ends with {text!r}, which this tokenizer does not encode "
                "as its own token, so the turn cannot be cut after it: use the model's tokenizer "
                "(KimiTokenizer.from_reference('k2.6') for K2.5 / K2.6)")
        raise RenderError(
            f"{where}: the {d.name} generation prompt writes {text!r} (options {dict(options)}), but the turn as "
            "kept does not begin with it (reasoning with thinking=False?): the model cannot have generated it "
            "after that prompt; drop its reasoning or render with the options it was generated with")
    return body[len(prefill):]


def _at_index(e: KimiChatError, index: int) -> KimiChatError:
    """The error ``e`` of the message rendered alone (``messages[0]``), naming it where it is in its
    conversation: ``messages[index]``."""
    if isinstance(e, InvalidMessagesError) and e.what == "messages":
        return InvalidMessagesError([(index if i == 0 else i, f, p) for i, f, p in e.errors], e.what, e.codes)
    if isinstance(e, RenderError) and e.message_index == 0:
        return type(e)(e.reason, message_index=index, field=e.field)
    text = str(e)
    if text.startswith("messages[0]"):  # the index written in the text only: same class and text, re-indexed
        try:
            return type(e)(f"messages[{index}]" + text[len("messages[0]"):])
        except TypeError:  # pragma: no cover - an error class with required keywords: kept as it is
            return e
    return e


# --------------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------------


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
    facts, key = _facts(tok), ("keeps_all", d.name, _options_key(options))
    hit = facts.get(key)
    if hit is None:
        probe = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"},
                 {"role": "user", "content": "q"}, {"role": "assistant", "content": "b", "reasoning_content": "s"}]
        try:
            _as_sampled(probe, None, d, tok, options, "text", [1, 3])
        except RenderError:  # turns with reasoning cannot follow this generation prompt (thinking=False): none
            probe = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in probe]
        hit = facts[key] = len(_as_sampled(probe, None, d, tok, options, "text", [1, 3])) == 1
    return hit


def conversation_samples(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    reasoning: ReasoningPolicy = "as-sampled",
    special_tokens: str = "text",
    warn: bool = True,
    **options: Any,
) -> ConversationSamples:
    """The training samples of one conversation (:mod:`kimi_chat.data`: samples as generated).

    ``reasoning``: ``"as-sampled"`` (default: each trained assistant turn after the exact prompt of its
    request, as generated; one sample per stretch the dialect keeps), ``"keep"`` (the same with
    ``preserve_thinking`` where the dialect reads it: one sample; refused where the dialect cannot),
    ``"official"`` (one official rendering of the whole conversation, reasoning dropped where the template
    drops it). ``options`` are the dialect's render options (``thinking``...); ``special_tokens`` is
    :func:`~kimi_chat.render_tokens`'s policy for marker text typed in the input. With ``"official"``, a
    ``UserWarning`` names how many reasoning blocks the rendering drops (``warn=False``: only counted, in
    ``reasoning_dropped``, as the batch core reports it).

    Raises the :class:`~kimi_chat.errors.KimiChatError` of a message or option the dialect refuses.
    """
    d = get_dialect(dialect)
    opts = reasoning_options(d, reasoning, options, tokenizer=tokenizer if reasoning == "keep" else None)
    msgs = list(messages)
    turns, untrained, carried = _assistant_turns(msgs)
    if reasoning == "official":
        samples, dropped = official_samples(msgs, tools, d, tokenizer, opts, special_tokens, turns, carried)
        if dropped and warn:
            warnings.warn(
                f"reasoning='official': the {d.name} rendering drops the reasoning of {dropped} assistant message(s) "
                "of this conversation, so these samples train answers without it; reasoning='as-sampled' keeps it",
                UserWarning, stacklevel=2)
        return ConversationSamples(samples, dropped, untrained)
    bodies: dict[int, list[int]] = {}
    counted: list[int] = []
    samples = _as_sampled(msgs, tools, d, tokenizer, opts, special_tokens, turns, bodies, counted)
    if not carried:
        dropped = 0
    elif counted:  # the official rendering of the whole conversation was made: its count
        dropped = counted[0]
    elif len(samples) == 1 and _keeps_final_reasoning(d, tokenizer, opts) and carried.keys() <= bodies.keys():
        # one sample of a dialect that writes no turn as history: the official rendering writes every turn as it
        # is in the sample (each checked there)
        decode = tokenizer.encoding.decode  # C speed
        dropped = sum(1 for j, c in carried.items() if not any(x in decode(bodies[j]) for x in c))
    else:
        dropped = _dropped_after_split(d, tokenizer, _prefill(d, tokenizer, opts)[1], msgs, carried, bodies)
        if dropped is None:
            dropped = _dropped_reasoning(msgs, tools, d, opts)
    return ConversationSamples(samples, dropped, untrained)


def _dropped_reasoning(msgs: list[Any], tools: Any, d: Dialect, opts: Mapping[str, Any]) -> int:
    """How many assistant messages carry reasoning the official rendering of the whole conversation (no
    generation prompt) does not write in their turn: what its ``reasoning_dropped`` counts, from its layout."""
    return reasoning_dropped(msgs, None, render_layout(msgs, tools=tools, dialect=d, add_generation_prompt=False,
                                                       **opts))


def _turn_bodies(r: RenderedTokens, n: int, header: list[int] | None = None) -> list[list[int]] | None:
    """The trained ids of each of the ``n`` messages of ``r`` (one run each), or ``None``: also when ``header``
    is given and a message's untrained ids are not ``header``."""
    out: list[list[int]] = [[] for _ in range(n)]
    heads: list[list[int]] = [[] for _ in range(n)]
    ids = r.ids
    idxs, trains, counts = r._pieces
    if trains is None:  # a token across pieces: by the mask
        mask = r.assistant_mask
        for sp in r.spans:
            if sp.message_index >= 0:
                out[sp.message_index] += compress(ids[sp.start : sp.end], mask[sp.start : sp.end])
                if header is not None:
                    heads[sp.message_index] += [x for x, k in zip(ids[sp.start : sp.end], mask[sp.start : sp.end])
                                                if not k]
    else:  # by the pieces: a trainable piece's ids are trained, any other's untrained
        pos = 0
        for j, train, c in zip(idxs, trains, counts):
            if c and j >= 0:
                (out if train else heads)[j] += ids[pos : pos + c]
            pos += c
    return None if header is not None and any(h != header for h in heads) else out


def _called(m: Any) -> Any:
    """``m`` with the probe call added when it has no tool calls (see :func:`generated_turn`)."""
    return m if m.get("tool_calls") else {**m, "tool_calls": [_PROBE_CALL]}


def _batch_keeps(d: Dialect, tok: KimiTokenizer, options: Mapping[str, Any], called: bool = False) -> bool:
    """Whether assistant turns rendered one after the other are each written as when rendered alone (no
    history rewriting among them): the condition of :func:`_batch_bodies` and :func:`_batch_texts`, probed once per dialect.
    ``called``: every turn with a tool call (the probe's added to the others), as :func:`generated_turn`
    asks a dialect that writes a final answer as history."""
    facts, key = _facts(tok), ("batch-called" if called else "batch", d.name, _options_key(options))
    hit = facts.get(key)
    if hit is None:
        probe = [{"role": "assistant", "content": "a", "reasoning_content": "r"},
                 {"role": "assistant", "content": "b", "reasoning_content": "s", "tool_calls": [_PROBE_CALL]},
                 {"role": "assistant", "content": "c", "reasoning_content": "t"}]
        if called:
            probe = [_called(m) for m in probe]
        try:
            r = render_tokens(probe, tokenizer=tok, dialect=d, add_generation_prompt=True, **options)
            together = _turn_bodies(r, len(probe))
        except KimiChatError:
            together = None
        alone = [_isolated(m, d, tok, options, "text")[1] for m in probe]
        hit = facts[key] = together == alone
    return hit


def _batch_bodies(msgs: list[Any], d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                  special_tokens: str, called: bool = False, only: Any = None,
                  header: list[int] | None = None) -> dict[int, list[int]] | None:
    """The generated ids (:func:`generated_turn`) of every assistant message, from one rendering of the
    assistant messages alone, one after the other (where :func:`_batch_keeps`), or ``None`` when that
    rendering is refused or a turn does not begin with the generation prompt's prefill (then each turn is
    asked alone, and :func:`generated_turn` names the message). ``called``: the probe call added to the
    turns without tool calls and its section taken out again (:func:`generated_turn`). ``only``: these messages'
    (assistant messages) alone. ``header``: ``None`` also when a turn's untrained ids are not these."""
    index = [j for j, m in enumerate(msgs) if (type(m) is dict or isinstance(m, Mapping))
             and m.get("role") == "assistant" and (only is None or j in only)]
    turns = [_called(msgs[j]) for j in index] if called else [msgs[j] for j in index]
    try:
        r = render_tokens(turns, tokenizer=tok, dialect=d, add_generation_prompt=True,
                          special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
    except KimiChatError:
        return None
    bodies = _turn_bodies(r, len(index), header)
    if bodies is None:
        return None
    if called:
        for k, j in enumerate(index):
            if turns[k] is not msgs[j]:  # the probe's section taken out
                kept = _without_section(bodies[k], tok)
                if kept is None:
                    return None
                bodies[k] = kept
    prefill = _prefill(d, tok, opts)[0]
    if any(b[: len(prefill)] != prefill for b in bodies):
        return None
    return {j: b[len(prefill):] for j, b in zip(index, bodies)}


def _batch_texts(msgs: list[Any], d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any]) -> dict[int, str]:
    """The text of each assistant message's turn as generated (:func:`generated_turn`, as text: its trainable
    text less the generation prompt's prefill), from one layout of the assistant messages alone, one after the
    other (where :func:`_batch_keeps`). Empty when that rendering is refused. :func:`_stretch` checks a turn of its rendering against it."""
    index = [j for j, m in enumerate(msgs) if (type(m) is dict or isinstance(m, Mapping))
             and m.get("role") == "assistant"]
    if not index:
        return {}
    try:
        lay = render_layout([msgs[j] for j in index], dialect=d, add_generation_prompt=True, **opts)
    except KimiChatError:
        return {}
    text = trained_texts(lay)
    prefill = _prefill(d, tok, opts)[1]
    out = {}
    for k, j in enumerate(index):
        t = text.get(k, "")
        if t.startswith(prefill):
            out[j] = t[len(prefill):]
    return out


def _same_turn(tok: KimiTokenizer, ids: list[int], a: int, b: int, text: str) -> bool:
    """Whether ``ids[a:b]`` are the ids of ``text`` as generated: their text is ``text``, a special token
    comes right before them and ends them (the encoder splits there: equal texts between special tokens are
    equal ids) and every special-token name in ``text`` is a special id in them (none typed as text)."""
    if a >= b or ids[a - 1] not in tok.special_ids or ids[b - 1] not in tok.special_ids:
        return False
    got = ids[a:b]
    if tok.encoding.decode(got) != text:
        return False
    specials = tok.special_tokens
    names = sum(map(specials.__contains__, text_ids(tok).shape.findall(text)))  # the shape has no group
    return names == sum(map(tok.special_ids.__contains__, got))


def _as_sampled(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                special_tokens: str, turns: list[int], bodies: dict[int, list[int]] | None = None,
                counted: list[int] | None = None) -> list[Sample]:
    """The samples of ``turns``, stretch by stretch: a stretch (every turn, or, in a dialect that writes a final
    answer as history, the turns up to each final answer) is first tried as one sample from one rendering
    (:func:`_stretch`, verified turn by turn); where that fails, turn by turn (:func:`_turn_by_turn`).
    ``counted``: given the official rendering's count of dropped reasoning where one was made (appended)."""
    if not turns:
        return []
    if bodies is None:
        bodies = {}
    if _turns_position_free(d, opts):
        prefill, _, gp, _ = _prefill(d, tok, opts)
        one = one_rendering(msgs, tools, d, tok, opts, special_tokens, turns, gp, bodies, len(prefill))
        if one is not None:
            return [Sample(one[0], one[1], list(turns), one[2])]

    def body(j: int) -> list[int]:
        if j not in bodies:
            bodies[j] = generated_turn(msgs[j], dialect=d, tokenizer=tok, special_tokens=special_tokens, index=j,
                                       **opts)
        return bodies[j]

    texts: dict[int, str] = {}
    if _keeps_final_reasoning(d, tok, opts):
        stretches = [turns]
        if len(turns) > 1 and _batch_keeps(d, tok, opts):
            if d.family_parts.tokens.segment_wise:  # ids encoded segment by segment, not the text's: compared as ids
                bodies.update(_batch_bodies(msgs, d, tok, opts, special_tokens) or {})
            else:  # one stretch: only its last turn's ids are wanted alone, the others checked by their text
                texts = _batch_texts(msgs, d, tok, opts)
    else:  # a final answer is re-rendered by the next request: try a stretch per final answer
        stretches, cur = [], []
        for i in turns:
            cur.append(i)
            m = msgs[i]
            if not (isinstance(m, Mapping) and m.get("tool_calls")):
                stretches.append(cur)
                cur = []
        if cur:
            stretches.append(cur)
        ends = {st[-1] for st in stretches}
        if len(ends) > 1 and _batch_keeps(d, tok, opts, called=True):
            # every final answer ends a stretch: every turn's ids from one rendering of the assistant messages,
            # the stretches from one rendering of the conversation (_split_rendering); where that is not taken,
            # the last turns' ids (a turn before them in its stretch is its rendering's own where _prefix_kept)
            prefill, _, gp, _ = _prefill(d, tok, opts)
            got = _batch_bodies(msgs, d, tok, opts, special_tokens, called=True,
                                only=range(turns[0], turns[-1] + 1), header=gp[: len(gp) - len(prefill)])
            made = _split_rendering(msgs, tools, d, tok, opts, special_tokens, stretches, gp, got) if got else None
            if made is not None:
                bodies.update(got or {})
                if counted is not None:
                    counted.append(made[1])
                return _merged([Sample(*one)] for one in made[0])
            # the stretches checked one by one: only the last turns' ids taken from that rendering, as before
            bodies.update({j: got[j] for j in ends if j in got} if got else
                          _batch_bodies(msgs, d, tok, opts, special_tokens, called=True, only=ends) or {})
    return _merged(_stretch_samples(msgs, tools, d, tok, opts, special_tokens, st, body, texts, bodies,
                                    st is not stretches[-1]) for st in stretches)


def _stretch_samples(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                     special_tokens: str, turns: list[int], body: Any, texts: Any, bodies: Any,
                     remember: bool) -> list[Sample]:
    one = _stretch(msgs, tools, d, tok, opts, special_tokens, turns, body, texts, bodies, remember)
    return [one] if one is not None else _turn_by_turn(msgs, tools, d, tok, opts, special_tokens, turns, body)


def _merged(stretches: Any) -> list[Sample]:
    """The samples of the stretches (a list of samples each), a sample that the next one extends merged into
    it: the next request did not re-render it (a final answer without reasoning)."""
    samples: list[Sample] = []
    for one in stretches:
        for sample in one:
            prev = samples[-1] if samples else None
            if prev is not None and sample.input_ids[: len(prev.input_ids)] == prev.input_ids:
                n = len(prev.input_ids)
                prev.input_ids = sample.input_ids
                prev.labels = prev.labels + sample.labels[n:]
                prev.turns += sample.turns
                prev.spans += sample.spans
            else:
                samples.append(sample)
    return samples


def _stretch(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
             special_tokens: str, turns: list[int], body: Any, texts: Mapping[int, str] | None = None,
             bodies: dict[int, list[int]] | None = None, remember: bool = True) -> Sample | None:
    """``turns`` as one sample from one rendering of the last turn's prompt, or ``None`` when that rendering is
    not every turn's request as generated. Checked: it begins with the first turn's prompt (rendered too), every
    assistant message from the first turn on is written as the generation prompt then its turn as generated,
    nothing but messages follows the first turn (a request-level block written before the generation prompt
    would move), and it ends with the generation prompt. ``remember``: keep the first turn's request among the
    prompts encoded (a next stretch's request starts with it)."""
    s, e = turns[0], turns[-1]
    gp = _prefill(d, tok, opts)[2]
    m = msgs[e]
    # a last turn with tool calls, in a stretch without a final answer: written after the history split, as
    # generated (_prefix_kept), so rendered with the others, the generation prompt after it (not kept)
    tail = type(m) is dict and bool(m.get("tool_calls")) and _prefix_kept(d, msgs, s, e + 1)
    if s == e and not tail:  # the rendering is the turn's request: its ids alone (no attribution)
        ids = render_ids(msgs[:e], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                         special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
        last = body(e)
        return Sample(ids + last, [IGNORE_INDEX] * len(ids) + last, [e], [(len(ids), len(ids) + len(last))])
    r = render_tokens(msgs[: e + 1] if tail else msgs[:e], tokenizer=tok, tools=tools, dialect=d,
                      add_generation_prompt=True, special_tokens=special_tokens, **opts)  # type: ignore[arg-type]
    ids = r.ids
    last = [] if tail else body(e)
    spans = r.spans
    if not spans or spans[-1].message_index != -1 or ids[spans[-1].start:] != gp:
        return None
    # the first turn's request: its prompt text rendered (no tokens), the sample so far up to that turn's span
    # decoded; equal texts ending with a special token before the generation prompt are equal ids (the encoder
    # splits at special tokens), so the rendering's ids are the request's own
    head = next((sp.start for sp in spans if sp.message_index >= s), -1)
    if head <= 0 or spans[0].message_index >= s or ids[head - 1] not in tok.special_ids:
        return None
    kept = tail or _prefix_kept(d, msgs, s, e)
    if remember or not kept:
        prefix, gp_text = tok.encoding.decode(ids[:head]), _prefill(d, tok, opts)[3]
        if kept:  # the K2 renderer writes messages[:s] here as in the first turn's request
            first_text = prefix + gp_text
        else:
            first_text = render(msgs[:s], tools=tools, dialect=d, add_generation_prompt=True, **opts)
            if not (len(first_text) == len(prefix) + len(gp_text) and first_text.startswith(prefix)
                    and first_text.endswith(gp_text)):
                return None
        if remember:
            remember_prompt(tok, first_text, ids[:head] + gp)  # the next stretch's request starts with it
    labels = [IGNORE_INDEX] * len(ids)
    out_spans = []
    trained = set(turns)
    for sp in spans[:-1]:
        j = sp.message_index
        if sp.end <= head:
            continue
        if j < 0:
            return None
        m = msgs[j]
        if (type(m) is dict or isinstance(m, Mapping)) and m.get("role") == "assistant":
            a = sp.start + len(gp)
            if ids[sp.start:a] != gp:
                return None
            if kept:
                # written from the message alone, after the history split (no final answer from the first turn
                # on: _prefix_kept) as when alone, between the same special tokens: the turn as generated
                want = ids[a:sp.end]
                if bodies is not None:
                    bodies[j] = want
            elif texts and bodies is not None and j not in bodies and j in texts \
                    and _same_turn(tok, ids, a, sp.end, texts[j]):
                want = bodies[j] = ids[a:sp.end]  # the turn as generated, checked by its text
            else:
                try:
                    want = body(j) if j in trained else generated_turn(m, dialect=d, tokenizer=tok,
                                                                       special_tokens=special_tokens, index=j, **opts)
                except RenderError:
                    if j in trained:
                        raise
                    return None  # a context-only turn the model cannot have generated: checked request by request
                if ids[a:sp.end] != want:
                    return None
            if j in trained:
                labels[a:sp.end] = want
                out_spans.append((a, sp.end))
    if tail:  # the last turn's ids are the rendering's, up to the generation prompt after it
        end = spans[-1].start
        if not out_spans or out_spans[-1][1] != end or len(out_spans) != len(turns):
            return None
        return Sample(ids[:end], labels[:end], list(turns), out_spans)
    start = len(ids)
    return Sample(ids + last, labels + last, list(turns), out_spans + [(start, start + len(last))])


def _turn_by_turn(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                  special_tokens: str, turns: list[int], body: Any) -> list[Sample]:
    """The samples of ``turns`` one turn after the other: each next request's prompt extends the sample
    (:func:`~kimi_chat.extend_tokens`: only the new messages tokenized) or starts a new one."""
    samples: list[Sample] = []
    cur: Sample | None = None
    prompt: RenderedTokens | None = None
    last: list[int] = []
    prev = -1
    for i in turns:
        nxt = None
        if prompt is not None:
            nxt = extend_tokens(prompt, last, msgs[prev:i], tools=tools, add_generation_prompt=True)
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
        last = body(i)
        start = len(cur.input_ids)
        cur.input_ids += last
        cur.labels += last
        cur.turns.append(i)
        cur.spans.append((start, len(cur.input_ids)))
        prompt, prev = nxt, i
    if cur is not None:
        samples.append(cur)
    return samples
