"""Conversation lints and normalize_tool_call_ids."""

from __future__ import annotations

import copy
import warnings

import pytest
from hypothesis import example, given, settings

from conftest import needs_reference
from kimi_chat import render
from kimi_chat.checks.lint import CANONICAL_TOOL_CALL_ID, LintWarning, lint, normalize_tool_call_ids
from kimi_chat.messages import InvalidMessagesError
from kimi_chat.testing.strategies import messages as messages_strategy


def call(call_id, name="get_weather", arguments='{"city": "Paris"}'):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_loop(*ids, reasoning=None):
    asst = {"role": "assistant", "content": "", "tool_calls": [call(i) for i in ids]}
    if reasoning is not None:
        asst["reasoning_content"] = reasoning
    return [{"role": "user", "content": "Weather?"}, asst] + [
        {"role": "tool", "tool_call_id": i, "content": "18 °C"} for i in ids]


def codes(warnings):
    return [w.code for w in warnings]


WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_clean_conversation_has_no_warnings():
    msgs = tool_loop("functions.get_weather:0", "functions.get_weather:1", reasoning="Look it up.")
    msgs += [{"role": "assistant", "content": "18 °C.", "reasoning_content": "Done."}]
    for dialect in ("kimi-k2-instruct-0905", "kimi-k2-thinking", "kimi-k2.5"):
        assert lint(msgs, dialect=dialect, tools=WEATHER) == []
        # 0905 leaves the last turn open without a generation prompt: its own finding
        expected = ["unterminated-last-turn"] if dialect == "kimi-k2-instruct-0905" else []
        assert codes(lint(msgs, dialect=dialect, tools=WEATHER, add_generation_prompt=False)) == expected


@pytest.mark.parametrize("role", ["user", "tool"])
def test_no_generation_prompt_after_user_or_tool_turn(role):
    msgs = tool_loop("functions.get_weather:0") if role == "tool" else [{"role": "user", "content": "Hi"}]
    warnings = lint(msgs, dialect="kimi-k2-instruct-0905", add_generation_prompt=False)
    assert codes(warnings) == ["no-generation-prompt"]
    w = warnings[0]
    assert w.message_index == len(msgs) - 1 and role in w.text
    assert str(w).startswith(f"no-generation-prompt: messages[{len(msgs) - 1}]: ")
    assert lint(msgs, dialect="kimi-k2-instruct-0905") == []


def test_unknown_tool_call_id():
    msgs = tool_loop("functions.get_weather:0") + [{"role": "tool", "tool_call_id": "functions.get_weather:7",
                                                    "content": "?"}]
    w = lint(msgs, dialect="kimi-k2-instruct-0905")
    assert [(x.code, x.message_index) for x in w] == [("unknown-tool-call-id", 3)]
    assert "'functions.get_weather:7'" in w[0].text
    # a result before its call does not count as answering it
    early = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a", "content": "?"}]
    assert codes(lint(early, dialect="kimi-k2-thinking")) == ["unknown-tool-call-id"]


def test_non_canonical_ids_point_at_normalize():
    msgs = tool_loop("call_abc", "functions.other:1")
    w = lint(msgs, dialect="kimi-k2-instruct-0905")
    assert codes(w) == ["non-canonical-tool-call-id", "non-canonical-tool-call-id"]
    assert "'call_abc'" in w[0].text and "normalize_tool_call_ids" in w[0].text
    assert "functions.get_weather:IDX" in w[1].text  # the name in the id must be the function's
    assert lint(normalize_tool_call_ids(msgs), dialect="kimi-k2-instruct-0905") == []


def test_duplicate_ids():
    msgs = tool_loop("functions.get_weather:0", "functions.get_weather:0")
    assert codes(lint(msgs, dialect="kimi-k2-instruct-0905")) == ["duplicate-tool-call-id"]


def test_rev2_rewrites_call_ids_but_not_result_ids():
    msgs = tool_loop("call_abc")
    w = lint(msgs, dialect="kimi-k2-instruct@rev2")
    assert [(x.code, x.message_index) for x in w] == [("tool-result-id-rewritten", 2)]
    assert "'functions.get_weather:0'" in w[0].text
    # what rev2 writes agrees with the lint
    prompt = render(msgs, dialect="kimi-k2-instruct@rev2")
    assert "<|tool_call_begin|>functions.get_weather:0" in prompt and "## Return of call_abc" in prompt
    assert lint(tool_loop("functions.get_weather:0"), dialect="kimi-k2-instruct@rev2") == []


def test_rev1_drops_tool_calls():
    w = lint(tool_loop("functions.get_weather:0"), dialect="kimi-k2-instruct@rev1")
    assert [(x.code, x.message_index) for x in w] == [("tool-calls-dropped", 1)]
    assert "<|tool_call_begin|>" not in render(tool_loop("functions.get_weather:0"), dialect="kimi-k2-instruct@rev1")


def test_undeclared_tool():
    msgs = tool_loop("functions.get_weather:0")
    other = [{"type": "function", "function": {"name": "search"}}]
    assert codes(lint(msgs, dialect="kimi-k2-instruct-0905", tools=other)) == ["undeclared-tool"]
    assert lint(msgs, dialect="kimi-k2-instruct-0905") == []  # no tools given: nothing to check against


def test_missing_reasoning_in_thinking_tool_loop():
    msgs = tool_loop("functions.get_weather:0")
    for dialect in ("kimi-k2-thinking", "kimi-k2.5", "kimi-k2.6"):
        assert [(x.code, x.message_index) for x in lint(msgs, dialect=dialect)] == [("missing-reasoning", 1)]
    assert lint(msgs, dialect="kimi-k2-instruct-0905") == []
    assert lint(tool_loop("functions.get_weather:0", reasoning="Look it up."), dialect="kimi-k2-thinking") == []
    # K2.5 / K2.6 with thinking off do not render the reasoning: nothing is missing
    assert lint(msgs, dialect="kimi-k2.5", thinking=False) == []
    assert lint(msgs, dialect="kimi-k2.6", thinking=False) == []
    # ... unless K2.6's preserve_thinking keeps it (K2.5's template does not read that flag)
    assert codes(lint(msgs, dialect="kimi-k2.6", thinking=False, preserve_thinking=True)) == ["missing-reasoning"]
    assert "missing-reasoning" not in codes(lint(msgs, dialect="kimi-k2.5", thinking=False, preserve_thinking=True))


def test_missing_reasoning_only_after_the_last_plain_assistant_turn():
    old = tool_loop("functions.get_weather:0")  # no reasoning, but in the history the template empties
    msgs = old + [{"role": "assistant", "content": "18 °C."}, {"role": "user", "content": "Thanks"}]
    assert lint(msgs, dialect="kimi-k2-thinking") == []
    # K2.6's preserve_thinking keeps every turn's reasoning; K2.5 does not read it
    assert [(x.code, x.message_index) for x in lint(msgs, dialect="kimi-k2.6", preserve_thinking=True)] == [
        ("missing-reasoning", 1)]
    assert "missing-reasoning" not in codes(lint(msgs, dialect="kimi-k2.5", preserve_thinking=True))


def test_lint_validates_messages():
    # what the official template cannot take raises; what it renders is reported
    with pytest.raises(InvalidMessagesError):
        lint([{"role": "tool", "content": 5}], dialect="kimi-k2.5")
    assert [(w.code, w.field) for w in lint([{"role": "tool", "content": "x"}], dialect="kimi-k2.5")] == [
        ("missing-tool-call-id", "tool_call_id")]
    assert isinstance(lint([{"role": "user", "content": "x"}], add_generation_prompt=False)[0], LintWarning)


# -- normalize_tool_call_ids --------------------------------------------------------------------------


def test_normalize_running_counter_across_turns():
    msgs = [
        {"role": "user", "content": "Weather in Paris, then Lyon and Nice?"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_a")]},
        {"role": "tool", "tool_call_id": "call_a", "content": "18"},
        {"role": "assistant", "content": "", "tool_calls": [call("call_b"), call("call_c", name="search")]},
        {"role": "tool", "tool_call_id": "call_c", "content": "found"},
        {"role": "tool", "tool_call_id": "call_b", "content": "20"},
    ]
    before = copy.deepcopy(msgs)
    out = normalize_tool_call_ids(msgs)
    assert msgs == before  # the input is not modified
    assert [c["id"] for m in out for c in m.get("tool_calls", [])] == [
        "functions.get_weather:0", "functions.get_weather:1", "functions.search:2"]
    assert [m["tool_call_id"] for m in out if m["role"] == "tool"] == [
        "functions.get_weather:0", "functions.search:2", "functions.get_weather:1"]
    assert out[1]["tool_calls"][0]["function"] == msgs[1]["tool_calls"][0]["function"]
    assert out[1] is not msgs[1] and out[1]["tool_calls"][0] is not msgs[1]["tool_calls"][0]


def test_normalize_ids_reused_across_turns_follow_the_latest_call():
    # rev2-style histories repeat functions.f:0 in every turn
    msgs = tool_loop("functions.get_weather:0") + [
        {"role": "assistant", "content": "", "tool_calls": [call("functions.get_weather:0")]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "19"},
    ]
    out = normalize_tool_call_ids(msgs)
    assert [m["tool_call_id"] for m in out if m["role"] == "tool"] == [
        "functions.get_weather:0", "functions.get_weather:1"]
    assert lint(out, dialect="kimi-k2-instruct-0905") == []


def test_normalize_one_id_for_several_calls_pairs_results_in_order():
    out = normalize_tool_call_ids(tool_loop("x", "x"))
    assert [m["tool_call_id"] for m in out if m["role"] == "tool"] == [
        "functions.get_weather:0", "functions.get_weather:1"]


def test_normalize_one_id_for_several_calls_pairs_named_results_with_their_function():
    """Two calls of one turn share an id; the result that names ``search`` answers the search call
    (the second, ``functions.search:1``), whatever its position among the results."""
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [call("call_0"), call("call_0", name="search")]},
            {"role": "tool", "tool_call_id": "call_0", "content": "found", "name": "search"},
            {"role": "tool", "tool_call_id": "call_0", "content": "18", "name": "get_weather"}]
    out = normalize_tool_call_ids(msgs)
    assert [c["id"] for c in out[1]["tool_calls"]] == ["functions.get_weather:0", "functions.search:1"]
    assert [m["tool_call_id"] for m in out[2:]] == ["functions.search:1", "functions.get_weather:0"]


def test_normalize_keeps_unknown_result_ids_and_numbers_calls_without_id():
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "orphan", "content": "?"}]
    out = normalize_tool_call_ids(msgs)
    assert out[1]["tool_calls"][0]["id"] == "functions.f:0" and out[2]["tool_call_id"] == "orphan"


@settings(max_examples=40)
@given(msgs=messages_strategy())
@example(msgs=[  # one id for two calls: the result naming the second answers the second
    {"role": "assistant", "tool_calls": [call("call_000000", arguments="{}"),
                                         call("call_000000", name="search", arguments="{}")]},
    {"role": "tool", "tool_call_id": "call_000000", "content": "", "name": "search"}])
def test_normalized_conversations_have_canonical_consistent_ids(msgs):
    before = copy.deepcopy(msgs)
    out = normalize_tool_call_ids(msgs)
    assert msgs == before
    ids = [c["id"] for m in out for c in m.get("tool_calls", [])]
    assert len(ids) == len(set(ids))
    assert [int(CANONICAL_TOOL_CALL_ID.fullmatch(i).group("index")) for i in ids] == list(range(len(ids)))
    names = {c["id"]: c["function"]["name"] for m in out for c in m.get("tool_calls", [])}
    for m in out:
        for c in m.get("tool_calls", []):
            assert CANONICAL_TOOL_CALL_ID.fullmatch(c["id"]).group("name") == c["function"]["name"]
    # the strategy answers calls with their ids: every result still names a call, of the same function
    for new in out:
        if new["role"] == "tool":
            assert new["tool_call_id"] in names
            if "name" in new:
                assert names[new["tool_call_id"]] == new["name"]
    warnings = codes(lint(out, dialect="kimi-k2-instruct-0905"))
    assert not {"non-canonical-tool-call-id", "unknown-tool-call-id", "duplicate-tool-call-id"} & set(warnings)


def test_normalize_tool_call_ids_validates_its_input():
    from kimi_chat import InvalidMessagesError, normalize_tool_call_ids

    with pytest.raises(InvalidMessagesError):
        normalize_tool_call_ids("hello")
    with pytest.raises(InvalidMessagesError, match=r"messages\[0\]\.role"):
        normalize_tool_call_ids([{"content": "x"}])


# ------------------------------------------------------------------ render options warn from Python


@pytest.mark.parametrize("call", ["render", "render_segments", "render_layout"])
def test_render_warns_for_an_unread_option_naming_the_closest_and_keeps_the_output(call):
    """A typo'd option (``thinkng``) renders what the template renders without it (it ignores it: parity),
    with a UserWarning naming it and the closest option the dialect reads: lint's finding, not a copy."""
    import kimi_chat.prompt

    fn = getattr(kimi_chat.prompt, call)
    msgs = [{"role": "user", "content": "hi"}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(msgs, dialect="kimi-k2.6", thinkng=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no option: no warning
        want = fn(msgs, dialect="kimi-k2.6")
    texts = [str(w.message) for w in caught if w.category is UserWarning]
    assert texts == [next(f"{w.code}: {w.text}" for w in lint(msgs, dialect="kimi-k2.6", thinkng=False)
                          if w.code == "unread-kwarg")]
    assert "'thinkng'" in texts[0] and "did you mean 'thinking'?" in texts[0]
    assert caught[0].filename == __file__  # pointed at the caller, not at kimi_chat
    assert (got.text if call == "render_layout" else got) == (want.text if call == "render_layout" else want)


def test_render_does_not_warn_for_apply_chat_template_arguments():
    """tokenize=False (what a port of apply_chat_template(..., tokenize=False) passes) is no template option."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render([{"role": "user", "content": "hi"}], dialect="kimi-k2.6", tokenize=False, return_dict=False)


@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k3"])
def test_render_warns_for_a_non_bool_switch(dialect):
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.warns(UserWarning, match=r"non-bool-option: .*'thinking' should be a bool, got 'false'"):
        render(msgs, dialect=dialect, thinking="false")


@needs_reference
def test_render_tokens_warns_for_an_unread_option():
    pytest.importorskip("tiktoken")
    import kimi_chat.prompt
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    msgs = [{"role": "user", "content": "hi"}]
    with pytest.warns(UserWarning, match="did you mean 'thinking'"):
        kimi_chat.render_tokens(msgs, tokenizer=KimiTokenizer.from_reference("k2.6"), dialect="kimi-k2.6",
                                thinkng=False)
