"""The samples core's shortcuts, against the path that checks everything by rendering.

Two shortcuts take ids from one rendering without rendering again to check them, reasoned from the K2 renderer:

* position-free turns (K2 dialects without a ``<think>`` policy: 0905, rev1, rev2; those that keep every turn's
  reasoning; Kimi-K3 without image prompts): every request is the rendering of the conversation up to the turn's
  header plus the generation prompt, and every turn is as generated;
* a kept prefix (``prefix_kept``: no final answer from a stretch's first turn on): the stretch's rendering holds
  the first turn's request and writes the stretch's turns as when alone (after the history split), its last turn
  too when it has tool calls;
* one rendering for every stretch of a history-split dialect (``split_rendering``: no final answer inside a
  stretch, no assistant message between a stretch's request split and its first turn): each stretch is that
  rendering up to its first turn, then the turns as generated and the other messages as rendered there;
* the count of dropped reasoning from the turns as generated, where every message carrying reasoning stands after
  the history split of the whole conversation (``dropped_after_split``).

Each test fails if a shortcut is taken where its premise is wrong: the premise itself is checked on generated
conversations against separate renderings (the request rendered on its own, the turn rendered alone by
:func:`kimi_chat.data.generated_turn`), and whole results are compared with the same core with the shortcuts turned
off (each request and turn then rendered and compared, as before the shortcuts).
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import needs_reference
from data_pipeline_support import reference_tokenizer

from kimi_chat.data import conversation_samples, generated_turn
from kimi_chat.data import samples as S
from kimi_chat.dialects import K2_DIALECTS, get_dialect
from kimi_chat.errors import KimiChatError, RenderError
from kimi_chat.prompt import render, render_layout
from kimi_chat.testing.strategies import requests
from kimi_chat.testing.strategies_k3 import k3_requests
from kimi_chat.tokens.rendered import render_ids, render_tokens

pytestmark = needs_reference

K2_NAMES = sorted(K2_DIALECTS)
_tok = reference_tokenizer


def _assistants(messages: list) -> list[int]:
    return [j for j, m in enumerate(messages) if j and m.get("role") == "assistant"]


def _outcome(messages, d, tok, tools, options, policy):
    """What conversation_samples gives (samples, dropped count, untrained) or the error it raises."""
    try:
        r = conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, special_tokens=policy, **options)
    except KimiChatError as e:
        return type(e).__name__
    return [(s.input_ids, s.labels, s.turns, s.spans) for s in r.samples], r.reasoning_dropped, r.untrained


def _without_shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S, "_turns_position_free", lambda *args: False)
    monkeypatch.setattr(S, "_prefix_kept", lambda d, msgs, s, e: False)
    monkeypatch.setattr(S, "_dropped_after_split", lambda *args: None)
    monkeypatch.setattr(S, "_split_rendering", lambda *args: None)


def _checked_outcome(monkeypatch: pytest.MonkeyPatch, *args):
    """:func:`_outcome` of the same core with every shortcut turned off."""
    with monkeypatch.context() as m:
        _without_shortcuts(m)
        return _outcome(*args)


@pytest.mark.parametrize("name", K2_NAMES)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_kept_prefix_premise_holds_where_the_shortcut_is_taken(name, data):
    """Where ``_prefix_kept(s, e)``: the rendering of ``messages[:e]`` up to message ``s``, then the generation
    prompt, is the text of the request of ``s`` rendered on its own; and each assistant turn in between is, after
    the generation prompt, the turn as generated (or, where the model cannot have generated it, does not begin
    with the generation prompt, so the core does not take it)."""
    d = get_dialect(name)
    tok = _tok("k2.6")
    req = data.draw(requests(name))
    messages, tools, options = req["messages"], req["tools"], req["options"]
    note(repr(req))
    assistants = _assistants(messages)
    for e in range(1, len(messages) + 1):  # every request (the last turn of a stretch kept with the others too)
        try:
            lay = render_layout(messages[:e], tools=tools, dialect=d, add_generation_prompt=True, **options)
            r = render_tokens(messages[:e], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                              **options)
        except KimiChatError:
            continue
        gp = S._prefill(d, tok, options)[2]
        offsets = [0]
        for p in lay.parts:
            offsets.append(offsets[-1] + len(p))
        gp_at = max(mk[0] for mk in lay.marks if mk[1] == -1)
        gp_text = lay.text[offsets[gp_at]:]
        for s in [j for j in assistants if j < e]:
            if not S._prefix_kept(d, messages, s, e):
                continue
            at = min(mk[0] for mk in lay.marks if mk[1] == s)
            own = render(messages[:s], tools=tools, dialect=d, add_generation_prompt=True, **options)
            assert own == lay.text[: offsets[at]] + gp_text, f"request of messages[{s}] inside that of [{e}]"
            for j in [k for k in assistants if s <= k < e]:
                a, b = r.span_of(j)
                written = r.ids[a + len(gp) : b]
                starts = r.ids[a : a + len(gp)] == gp
                try:
                    alone = generated_turn(messages[j], dialect=d, tokenizer=tok, index=j, **options)
                except RenderError:
                    assert not starts, f"messages[{j}] taken, though the model cannot have generated it"
                    continue
                if starts:  # taken (where not, the core turns to the checked path)
                    assert written == alone, f"messages[{j}] in the request of messages[{e}]"


_POSITION_FREE = sorted(n for n in K2_NAMES if S._turns_position_free(get_dialect(n))
                        or S._turns_position_free(get_dialect(n), {"preserve_thinking": True}))


def test_position_free_dialects_are_those_without_a_history_split():
    """0905, rev1 and rev2 (no ``<think>`` policy) always; K2.6 (and the dialects after it) with
    ``preserve_thinking=True``; K2.7-Code, which keeps every turn's reasoning, always; never K2-Thinking or K2.5."""
    assert {"kimi-k2-instruct-0905", "kimi-k2.6", "kimi-k2.7-code"} <= set(_POSITION_FREE)
    assert not {"kimi-k2-thinking", "kimi-k2-thinking@rev1", "kimi-k2.5"} & set(_POSITION_FREE)
    assert not S._turns_position_free(get_dialect("kimi-k2.6"))
    assert not S._turns_position_free(get_dialect("kimi-k2.6"), {"preserve_thinking": "true"})  # not a bool


@pytest.mark.parametrize("name", _POSITION_FREE)
@pytest.mark.parametrize("policy", ["text", "special"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_position_free_premise_holds(name, policy, data):
    """A position-free dialect: the rendering of ``messages[:e + 1]`` up to each assistant turn's header, then the
    generation prompt, is the turn's request (its ids rendered on their own), and the turn after the generation
    prompt is the turn as generated."""
    d = get_dialect(name)
    req = data.draw(requests(name))
    options = req["options"]
    if d.reads_preserve_thinking and data.draw(st.booleans()):
        options["preserve_thinking"] = True
    note(repr(req))
    _check_position_free_premise(d, _tok("k2.6"), req["messages"], req["tools"], options, policy)


# the options a K3 turn is read with (a request-level block stands after the conversation, before the generation
# prompt: the ids _prefill learns as the generation prompt's then hold it, which no turn's header does, so
# one_rendering declines: test_k3_request_level_block_is_in_every_request)
_K3_TURN_OPTIONS = ("thinking", "thinking_effort")


@pytest.mark.parametrize("policy", ["text", "special"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(req=k3_requests(refusals=False))
def test_k3_position_free_premise_holds(policy, req):
    """Kimi-K3 without image prompts: the same premise as the K2 dialects without a history split."""
    note(repr(req))
    options = {k: v for k, v in req["kwargs"].items() if k in _K3_TURN_OPTIONS}
    d = get_dialect("kimi-k3")
    assert S._turns_position_free(d, options)
    _check_position_free_premise(d, _tok("k3"), req["messages"], req["tools"], options, policy)


def test_k3_with_image_prompts_is_not_position_free():
    """A prefix of the conversation cannot take every image prompt (the encoder refuses it): not taken."""
    d = get_dialect("kimi-k3")
    assert S._turns_position_free(d, {"thinking": True})
    assert not S._turns_position_free(d, {"image_prompts": ["[IMG]"]})


@pytest.mark.parametrize("options", [{"tool_choice": "required"}, {"response_format": {"type": "json_object"}}])
def test_k3_request_level_block_is_in_every_request(options, monkeypatch):
    """A block the K3 pass writes after the last message (tool choice, response format) stands before every
    request's generation prompt: each turn's sample starts with its own request's ids, block included, so no two
    turns share a sample, and the result is the checked path's."""
    d = get_dialect("kimi-k3")
    tok = _tok("k3")
    msgs = _tool_loop(2)
    result = conversation_samples(msgs, dialect=d, tokenizer=tok, **options)
    assert [s.turns for s in result.samples] == [[2], [4], [6], [8]]
    for s in result.samples:
        (i,), ((a, _),) = s.turns, s.spans
        own = render_ids(msgs[:i], tokenizer=tok, dialect=d, add_generation_prompt=True, **options)
        assert s.input_ids[:a] == own, f"request of messages[{i}]"
    assert _outcome(msgs, d, tok, None, options, "text") == _checked_outcome(monkeypatch, msgs, d, tok, None,
                                                                              options, "text")


def _check_position_free_premise(d, tok, messages, tools, options, policy) -> None:
    if not S._turns_position_free(d, options):
        return
    assistants = _assistants(messages)
    if not assistants:
        return
    e = assistants[-1]
    try:
        r = render_tokens(messages[: e + 1], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                          special_tokens=policy, **options)
    except KimiChatError:
        return
    gp = S._prefill(d, tok, options)[2]
    for j in assistants:
        a, b = r.span_of(j)
        if r.ids[a : a + len(gp)] != gp:  # a named assistant's header: not taken (the checked path asks)
            continue
        own = render_ids(messages[:j], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                         special_tokens=policy, **options)
        assert own == r.ids[:a] + gp, f"request of messages[{j}]"
        alone = generated_turn(messages[j], dialect=d, tokenizer=tok, special_tokens=policy, index=j, **options)
        assert r.ids[a + len(gp) : b] == alone, f"messages[{j}]"


@pytest.mark.parametrize("name", sorted(n for n in K2_NAMES if not S._turns_position_free(get_dialect(n))))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=100)
@given(data=st.data())
def test_split_rendering_gives_each_turn_after_its_own_request(name, data, monkeypatch):
    """Where one rendering gives the stretches of a history-split dialect: in every sample, each trained turn
    comes right after its own request (rendered on its own, then the generation prompt), its ids are the turn
    as generated, and only they are labelled; and the count of dropped reasoning it gives is that of the
    official rendering's layout."""
    d = get_dialect(name)
    tok = _tok("k2.6")
    req = data.draw(requests(name, max_turns=14))  # long enough for several final answers
    messages, tools, options = req["messages"], req["tools"], req["options"]
    policy = data.draw(st.sampled_from(["text", "special"]))
    note(repr(req))
    made: list = []
    real = S._split_rendering
    monkeypatch.setattr(S, "_split_rendering", lambda *args: made.append(copy.deepcopy(out := real(*args))) or out)
    try:
        conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, special_tokens=policy, **options)
    except KimiChatError:
        return
    for out in made:
        if out is not None:
            assert out[1] == S._dropped_reasoning(messages, tools, d, options)
    for ids, labels, turns, spans in [x for out in made if out is not None for x in out[0]]:
        assert len(turns) == len(spans) and len(labels) == len(ids) == spans[-1][1]
        for j, (a, b) in zip(turns, spans):
            own = render_ids(messages[:j], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=True,
                             special_tokens=policy, **options)
            assert ids[:a] == own, f"the request of messages[{j}]"
            alone = generated_turn(messages[j], dialect=d, tokenizer=tok, special_tokens=policy, index=j, **options)
            assert ids[a:b] == alone, f"messages[{j}] as generated"
        inside = {k for a, b in spans for k in range(a, b)}
        assert [x for k, x in enumerate(labels) if k not in inside] == [S.IGNORE_INDEX] * (len(ids) - len(inside))
        assert [labels[k] for k in sorted(inside)] == [ids[k] for k in sorted(inside)]


@pytest.mark.parametrize("name", K2_NAMES)
@pytest.mark.parametrize("config", ["k2.6", "k2"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=40)
@given(data=st.data())
def test_samples_are_those_of_the_checked_path(name, config, data, monkeypatch):
    """Whole results (samples, dropped count, untrained messages, or the error) with the shortcuts equal those of
    the same core with them turned off."""
    req = data.draw(requests(name))
    note(repr(req))
    _check_fast_is_checked(data, monkeypatch, req["messages"], get_dialect(name), _tok(config), req["tools"],
                           req["options"])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=60)
@given(req=k3_requests(refusals=False), data=st.data())
def test_k3_samples_are_those_of_the_checked_path(req, data, monkeypatch):
    """Kimi-K3, every option but the image prompts (request-level blocks included): whole results with the
    shortcut equal those of the same core with it turned off."""
    note(repr(req))
    options = {k: v for k, v in req["kwargs"].items() if k not in ("add_generation_prompt", "image_prompts")}
    _check_fast_is_checked(data, monkeypatch, req["messages"], get_dialect("kimi-k3"), _tok("k3"), req["tools"],
                           options)


def _check_fast_is_checked(data, monkeypatch, messages, d, tok, tools, options) -> None:
    """Up to two assistant messages drawn untrained and a special-token policy drawn: the result with the
    shortcuts equals that of the core with them off."""
    for j in data.draw(st.sets(st.sampled_from(_assistants(messages) or [None]), max_size=2)):
        if j is not None:
            messages[j] = {**messages[j], "train": False}
    policy = data.draw(st.sampled_from(["text", "special"]))
    fast = _outcome(messages, d, tok, tools, options, policy)
    checked = _checked_outcome(monkeypatch, messages, d, tok, tools, options, policy)
    assert fast == checked


def _tool_loop(n: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "Use tools."}]
    for i in range(n):
        cid = f"functions.get_weather:{i}"
        msgs += [
            {"role": "user", "content": f"Weather in city {i}?"},
            {"role": "assistant", "content": "", "reasoning_content": f"call it {i}",
             "tool_calls": [{"id": cid, "type": "function",
                             "function": {"name": "get_weather", "arguments": f'{{"city": "c{i}"}}'}}]},
            {"role": "tool", "tool_call_id": cid, "content": f'{{"temp": {i}}}'},
            {"role": "assistant", "content": f"It is {i} degrees.", "reasoning_content": f"summarise {i}"},
        ]
    return msgs


@pytest.mark.parametrize("name, taken, options", [("kimi-k2-instruct-0905", "one_rendering", {}),
                                                  ("kimi-k2-thinking@rev1", "_split_rendering", {}),
                                                  ("kimi-k2.6", "_split_rendering", {}),
                                                  ("kimi-k2.6", "one_rendering", {"preserve_thinking": True}),
                                                  ("kimi-k2.7-code", "one_rendering", {}),
                                                  ("kimi-k3", "one_rendering", {}),
                                                  ("kimi-k3", "one_rendering", {"thinking": False})])
def test_agent_loop_takes_the_shortcut_and_gives_the_checked_samples(name, taken, options, monkeypatch):
    """On a tool loop (the benchmark's shape) the shortcut is taken, and the samples are those of the checked path."""
    tok = _tok("k3" if get_dialect(name).family == "k3" else "k2.6")
    msgs = _tool_loop(4)
    hits: list[bool] = []
    real = getattr(S, taken)

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        hits.append(out is not None and out is not False)
        return out

    with monkeypatch.context() as m:
        m.setattr(S, taken, spy)
        fast = _outcome(msgs, get_dialect(name), tok, None, options, "text")
    checked = _checked_outcome(monkeypatch, msgs, get_dialect(name), tok, None, options, "text")
    assert any(hits)
    assert fast == checked
    assert isinstance(fast, tuple) and len(fast[0]) == (1 if taken == "one_rendering" else 4)


def _untrained_call_between(msgs: list[dict]) -> list[dict]:
    """The loop with its second tool-call turn not trained: it stands between a final answer and the next
    trained turn, written with its reasoning in that turn's request, without it in later ones."""
    out = [dict(m) for m in msgs]
    calls = [j for j, m in enumerate(out) if m.get("tool_calls")]
    out[calls[1]]["train"] = False
    return out


def _opening_call(msgs: list[dict]) -> list[dict]:
    """The loop opened by an assistant tool-call turn with reasoning (never trained: no request before it)."""
    first = {"role": "assistant", "content": "", "reasoning_content": "open with a call",
             "tool_calls": [{"id": "functions.get_weather:9", "type": "function",
                             "function": {"name": "get_weather", "arguments": '{"city": "c9"}'}}]}
    return [first, {"role": "tool", "tool_call_id": "functions.get_weather:9", "content": "{}"}, *msgs[1:]]


@pytest.mark.parametrize("name", ["kimi-k2-thinking@rev1", "kimi-k2.6"])
@pytest.mark.parametrize("variant", [_untrained_call_between, _opening_call])
def test_assistant_turn_before_a_stretch_is_written_as_its_request_writes_it(name, variant, monkeypatch):
    """An assistant turn between a request's history split and its first trained turn is written after the
    split (its reasoning kept) in that request, though the rendering of a later request writes it before its
    own split: the samples are those of the checked path."""
    tok = _tok("k2.6")
    msgs = variant(_tool_loop(3))
    fast = _outcome(msgs, get_dialect(name), tok, None, {}, "text")
    checked = _checked_outcome(monkeypatch, msgs, get_dialect(name), tok, None, {}, "text")
    assert fast == checked
