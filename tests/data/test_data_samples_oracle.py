"""Samples as generated, against the official machinery: for generated multi-turn conversations (reasoning, tool
calls, tool results) and every dialect, every sample's ids before a trained turn are the official ids of that
request's prompt (``messages[:i]`` + generation prompt), the trained ids are the turn as the official template
writes a turn whose reasoning it keeps (less what the generation prompt wrote), and every assistant message is
trained in exactly one sample.

Expected values come from the official renderings: K2, the oracle template rendered by transformers
(:func:`kimi_chat.reference.oracle.render_official`) and encoded with markers special (``special_tokens="special"``
on our side, so typed marker text is a marker on both); Kimi-K3, the official tokenizer's segment-wise
``apply_chat_template(tokenize=True)`` (typed marker text stays text there, as with our default policy).

How the kept form of a turn is asked of a K2 template: its suffix branch writes an assistant turn with its
reasoning (``<think>`` + reasoning + ``</think>``), its history branch ``<think></think>``; a turn with tool calls
as the last message is always in the suffix. So a final answer's kept form is the official rendering of the same
message given one tool call, with that call's section (``<|tool_calls_section_begin|>`` ...
``<|tool_calls_section_end|>``, special tokens: no BPE merge across them) taken out of the text.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import needs_reference
from data_pipeline_support import reference_tokenizer

from kimi_chat import markers as M
from kimi_chat.data import IGNORE_INDEX, conversation_samples, trained_turns
from kimi_chat.dialects import K2_DIALECTS, get_dialect
from kimi_chat.errors import KimiChatError, RenderError
from kimi_chat.testing.strategies import requests
from kimi_chat.testing.strategies_k3 import k3_requests

pytestmark = [needs_reference, pytest.mark.oracle]
pytest.importorskip("transformers", reason="the official renderings need transformers (pip install -e '.[verify]' in the checkout)")

from kimi_chat.reference.oracle import render_official  # noqa: E402

K2_NAMES = sorted(K2_DIALECTS)
_CALL = {"id": "functions.probe:0", "type": "function", "function": {"name": "probe", "arguments": "{}"}}
_HEADER = M.IM_ASSISTANT.text + "assistant" + M.IM_MIDDLE.text

_tok = reference_tokenizer


def _runs(labels: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each maximal run of trained positions."""
    out = []
    start = None
    for k, x in enumerate([*labels, IGNORE_INDEX]):
        if x != IGNORE_INDEX and start is None:
            start = k
        elif x == IGNORE_INDEX and start is not None:
            out.append((start, k))
            start = None
    return out


def _check_structure(result, messages) -> None:
    """Every trained assistant message in exactly one sample; labels the ids at the trained spans, -100 elsewhere;
    each turn's trained ids one run."""
    trained = [i for s in result.samples for i in s.turns]
    assert sorted(trained) == trained_turns(messages)
    for s in result.samples:
        assert len(s.input_ids) == len(s.labels)
        assert _runs(s.labels) == s.spans
        assert all(s.labels[a:b] == s.input_ids[a:b] for a, b in s.spans)
        assert s.spans and s.spans[-1][1] == len(s.input_ids)  # a sample ends with its last trained turn


def _drops_final_reasoning(d, options) -> bool:
    """Whether the official template writes a final answer as history (reasoning dropped) while it writes a
    turn with tool calls with its reasoning: then a final answer's kept form is asked with a tool call."""
    user = {"role": "user", "content": "q"}
    final = {"role": "assistant", "content": "a", "reasoning_content": "REASONING"}
    plain = render_official([user, final], dialect=d, add_generation_prompt=True, **options)
    called = render_official([user, {**final, "tool_calls": [_CALL]}], dialect=d, add_generation_prompt=True,
                             **options)
    return "REASONING" not in plain and "REASONING" in called


def _k2_official_kept_turn(d, messages, i, tools, options) -> tuple[str, str | None, str]:
    """(prompt text, generated text, opened) of turn ``i``: the official prompt of ``messages[:i]``, the turn as
    the official template writes it with its reasoning kept, after that generation prompt (``None`` when the turn
    does not begin with what the generation prompt opened: the model cannot have generated it after that prompt),
    and what the generation prompt opened after the header (``<think>``)."""
    prompt = render_official(messages[:i], tools=tools, dialect=d, add_generation_prompt=True, **options)
    gp = prompt[prompt.rindex(_HEADER):]  # the generation prompt: the header, and what the template opens
    history = prompt[: len(prompt) - len(gp)]
    m = messages[i]
    probe = dict(m)
    asked = not m.get("tool_calls") and _drops_final_reasoning(d, options)
    if asked:
        probe["tool_calls"] = [_CALL]
    full = render_official([*messages[:i], probe], tools=tools, dialect=d, add_generation_prompt=True, **options)
    assert full.startswith(history) and full.endswith(gp)
    turn = full[len(history): len(full) - len(gp)]
    if asked:
        begin = turn.rindex(M.TOOL_CALLS_SECTION_BEGIN.text)
        end = turn.index(M.TOOL_CALLS_SECTION_END.text, begin) + len(M.TOOL_CALLS_SECTION_END.text)
        turn = turn[:begin] + turn[end:]
    assert turn.startswith(M.IM_ASSISTANT.text)
    body = turn[turn.index(M.IM_MIDDLE.text) + len(M.IM_MIDDLE.text):]  # after the header (name or role)
    opened = gp[len(_HEADER):]
    if not body.startswith(opened):
        return prompt, None, opened
    return prompt, body[len(opened):], opened  # what the generation prompt already wrote (<think>) is not generated


@needs_reference
@pytest.mark.parametrize("name", K2_NAMES)
@pytest.mark.parametrize("config", ["k2.6", "k2"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_k2_samples_are_the_official_ids_as_generated(name, config, data):
    d = get_dialect(name)
    tok = _tok(config)
    req = data.draw(requests(name))
    messages, tools, options = req["messages"], req["tools"], req["options"]
    # some assistant messages marked as context only (the templates do not read the field)
    for j in data.draw(st.sets(st.sampled_from([k for k, m in enumerate(messages) if m["role"] == "assistant"]
                                               or [None]), max_size=2)):
        if j is not None:
            messages[j] = {**messages[j], "train": False}
    note(repr(req))
    try:
        render_official(copy.deepcopy(messages), tools=copy.deepcopy(tools), dialect=d, add_generation_prompt=True,
                        **options)
    except Exception:  # noqa: BLE001 - the official template refused: so must we
        with pytest.raises(KimiChatError):
            conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, **options)
        return
    expected = {i: _k2_official_kept_turn(d, copy.deepcopy(messages), i, copy.deepcopy(tools), options)
                for i in trained_turns(messages)}
    if any(generated is None for _, generated, _ in expected.values()):
        # refused, naming the message: the turn cannot follow its prompt; with the July-2025 K2 tokenizer the
        # refusal may name the tokenizer first (it encodes the opened <think></think> as text, so the ids of
        # the turn cannot be cut after it either)
        reason = "does not begin with it" if config == "k2.6" else "does not begin with it|does not encode"
        with pytest.raises(RenderError, match=rf"messages\[\d+\]: .*({reason})"):
            conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, special_tokens="special", **options)
        return
    try:
        result = conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, special_tokens="special",
                                      **options)
    except RenderError as e:
        # the July-2025 K2 tokenizer encodes <think> as text: a turn after a prompt that opens it may not be cut
        # there (refused, naming the tokenizer); with the models' own tokenizer (k2.6) it always is
        assert config == "k2" and any(opened for _, _, opened in expected.values()), e
        assert "tokenizer" in str(e)
        return
    _check_structure(result, messages)
    for s in result.samples:
        for i, (a, b) in zip(s.turns, s.spans):
            prompt, generated, _ = expected[i]
            assert s.input_ids[:a] == tok.encode(prompt, allow_special=True), f"prompt of messages[{i}]"
            assert s.input_ids[a:b] == tok.encode(generated, allow_special=True), f"turn messages[{i}]"
    for before, after in zip(result.samples, result.samples[1:]):
        # as few samples as the rendering allows: a new one starts only where the next request's official prompt
        # does not extend the sample before (it re-renders something of it)
        nxt = tok.encode(expected[after.turns[0]][0], allow_special=True)
        assert nxt[: len(before.input_ids)] != before.input_ids, f"messages[{after.turns[0]}] could join"


@needs_reference
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(req=k3_requests(refusals=False))
def test_k3_samples_are_the_official_ids_as_generated(req):
    from kimi_chat.families.k3.oracle import official_k3_ids

    tok = _tok("k3")
    messages, tools = req["messages"], req["tools"]
    # image_prompts holds one entry per image of the whole conversation: no option of a dataset's prefixes
    options = {k: v for k, v in req["kwargs"].items() if k not in ("add_generation_prompt", "image_prompts")}
    note(repr(req))

    def official(msgs, agp, opts=options):
        return official_k3_ids(copy.deepcopy(msgs), copy.deepcopy(tools), add_generation_prompt=agp,
                               **copy.deepcopy(opts))

    # the request-level system blocks (response format, tool choice) are written after the conversation, before
    # the generation prompt: the turn itself is read where only the thinking options apply
    turn_options = {k: v for k, v in options.items() if k in ("thinking", "thinking_effort")}

    try:
        official(messages, True)
    except Exception:  # noqa: BLE001 - the official encoder refused: so must we
        with pytest.raises(KimiChatError):
            conversation_samples(messages, dialect="kimi-k3", tokenizer=tok, tools=tools, **options)
        return
    result = conversation_samples(messages, dialect="kimi-k3", tokenizer=tok, tools=tools, **options)
    _check_structure(result, messages)
    sep = tok.token_to_id(M.K3_SEP.text)
    for s in result.samples:
        for i, (a, b) in zip(s.turns, s.spans):
            prompt = official(messages[:i], True)
            assert s.input_ids[:a] == prompt, f"prompt of messages[{i}]"
            # the turn as the official encoder writes it: messages[:i + 1] with a generation prompt is the history
            # (messages[:i] without one), the turn, the generation prompt. A header closes at its first <|sep|>
            # (marker text typed in a name is text); the generation prompt opens the think channel after its
            # header, which the turn writes there too: the model generates what follows
            history = official(messages[:i], False, turn_options)
            gp = official(messages[:i], True, turn_options)[len(history):]
            after = official(messages[: i + 1], True, turn_options)
            assert after[: len(history)] == history and after[len(after) - len(gp):] == gp
            turn = after[len(history): len(after) - len(gp)]
            opened = gp[gp.index(sep) + 1:]
            head = turn.index(sep) + 1
            assert turn[head: head + len(opened)] == opened
            assert s.input_ids[a:b] == turn[head + len(opened):], f"turn messages[{i}]"
    for before, after in zip(result.samples, result.samples[1:]):  # as few samples as the rendering allows
        nxt = official(messages[: after.turns[0]], True)
        assert nxt[: len(before.input_ids)] != before.input_ids, f"messages[{after.turns[0]}] could join"


@needs_reference
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_k26_keep_is_one_sample_of_the_preserve_thinking_rendering(data):
    """reasoning="keep" on K2.6: every turn after the official prompt of its request rendered with
    preserve_thinking=True, all in one sample."""
    d = get_dialect("kimi-k2.6")
    tok = _tok("k2.6")
    req = data.draw(requests("kimi-k2.6"))
    messages, tools = req["messages"], req["tools"]
    options = {**req["options"], "preserve_thinking": True}
    note(repr(req))
    try:
        render_official(copy.deepcopy(messages), tools=copy.deepcopy(tools), dialect=d, add_generation_prompt=True,
                        **options)
    except Exception:  # noqa: BLE001 - the official template refused: so must we
        with pytest.raises(KimiChatError):
            conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, reasoning="keep", **req["options"])
        return
    expected = {i: _k2_official_kept_turn(d, copy.deepcopy(messages), i, copy.deepcopy(tools), options)
                for i in trained_turns(messages)}
    if any(generated is None for _, generated, _ in expected.values()):
        with pytest.raises(RenderError):
            conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, reasoning="keep",
                                 special_tokens="special", **req["options"])
        return
    result = conversation_samples(messages, dialect=d, tokenizer=tok, tools=tools, reasoning="keep",
                                  special_tokens="special", **req["options"])
    _check_structure(result, messages)
    if not any(m["role"] == "assistant" and "name" in m for m in messages):
        # (a named assistant's header is not the generation prompt's: the next request re-renders that turn)
        assert len(result.samples) <= 1
    for s in result.samples:
        for i, (a, b) in zip(s.turns, s.spans):
            prompt, generated, _ = expected[i]
            assert s.input_ids[:a] == tok.encode(prompt, allow_special=True), f"prompt of messages[{i}]"
            assert s.input_ids[a:b] == tok.encode(generated, allow_special=True), f"turn messages[{i}]"
