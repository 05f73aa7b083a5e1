"""Tool calls: the one tools normaliser, calls that never began their arguments
and dangling call begins (item 9), and the errors of item 19 for ``parse``."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parse_helpers import AB, CB, CE, END, IM_USER, SB, SE, call, feed_chunks, merge, section

from kimi_chat.output import StopReason, StreamParser, ToolCallStatus, normalise_tools, parse
from kimi_chat.messages import InvalidToolsError

INCOMPLETE = ToolCallStatus.INCOMPLETE


def fn(name: str, **props: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()}}}}


# ------------------------------------------------------------------------------- the normaliser


def test_duplicate_names_are_an_error_naming_both_positions():
    tools = [fn("f", a="string"), fn("g"), fn("f", b="integer")]
    with pytest.raises(InvalidToolsError, match=r"tools\[2\]\.function\.name: duplicate function name 'f' "
                       r"\(also tools\[0\]\)"):
        normalise_tools(tools)
    with pytest.raises(ValueError, match=r"tools\[2\].*tools\[0\]"):
        parse("x", tools=tools)  # it used to keep the second silently
    with pytest.raises(ValueError, match=r"tools\[2\].*tools\[0\]"):
        StreamParser(tools=tools)


def test_the_error_class_is_the_callers():
    class Mine(ValueError):
        pass

    with pytest.raises(Mine, match=r"tools\[1\]"):
        normalise_tools([fn("f"), fn("f")], error=Mine)
    with pytest.raises(Mine, match=r"tools\[0\]: no function name"):
        normalise_tools([{"type": "function", "function": {"name": ""}}], error=Mine)


@pytest.mark.parametrize("tools, field", [
    ([{"type": "function"}], "function"),                            # rendered (parity), linted, refused here
    ([{"type": "function", "function": {"name": 5}}], "function.name"),  # refused by render and lint too
    ([{"type": "function", "function": {"name": ""}}], "function.name"),
    ([{"type": "function", "function": {"name": "f", "description": 5}}], "function.description"),
])
def test_a_bad_tool_is_the_same_error_class_as_for_render(tools, field):
    """parse refuses a bad tool with InvalidToolsError naming its index and field, as render does: the
    shape check is render's own (messages.normalize_tools), not a copy."""
    from kimi_chat import lint, render

    with pytest.raises(InvalidToolsError) as info:
        parse("x", tools=tools)
    assert info.value.errors[0][:2] == (0, field)
    with pytest.raises(InvalidToolsError):
        StreamParser("kimi-k3", tools=tools)
    msgs = [{"role": "user", "content": "x"}]
    if field == "function":  # the official templates render it as given: so does render, lint says it
        text, findings = render(msgs, tools=tools), lint(msgs, tools=tools)
        assert "tool_declare" in text
        assert [w.code for w in findings] == ["tool-without-function"]
        with pytest.raises(ValueError, match="tool-without-function"):
            render(msgs, tools=tools, strict=True)
    elif field != "function.name" or tools[0]["function"]["name"] != "":
        for call in (render, lint):
            with pytest.raises(InvalidToolsError) as info:
                call(msgs, tools=tools)
            assert info.value.errors[0][:2] == (0, field)


def test_normaliser_reads_every_shape():
    @dataclasses.dataclass
    class Fn:
        name: str
        parameters: dict

    class Model:  # what a pydantic tool object looks like to the normaliser
        def model_dump(self, **kw):
            return fn("m")

    tools = [fn("a"), {"name": "b", "parameters": {}}, {"type": "function", "function": Fn("c", {})},
             Model(), {"type": "retrieval"}]
    out = normalise_tools(tools)
    assert list(out) == ["a", "b", "c", "m"]
    assert out["c"] == {"name": "c", "parameters": {}}
    assert normalise_tools(None) == {} and normalise_tools([]) == {}


@pytest.mark.parametrize("bad", [fn("f"), "f", 3])
def test_tools_must_be_a_list(bad):
    with pytest.raises(TypeError, match="tools: expected a list of tool declarations"):
        parse("x", tools=bad)


def test_one_dict_says_to_wrap_it():
    with pytest.raises(TypeError, match="wrap it in a list"):
        parse("x", tools=fn("f"))


@pytest.mark.parametrize("bad", [None, 5, ["a"]])
def test_parse_names_what_it_takes(bad):
    with pytest.raises(TypeError, match=r"parse\(\) takes the model's output as str or bytes, not "):
        parse(bad)


# --------------------------------------------------------------------- calls without arguments


@pytest.mark.parametrize(
    "text, closer",
    [
        (section(CB + "functions.f:0", call("functions.g:1", "{}")), "next call"),
        (SB + CB + "functions.f:0" + SE, "section end"),
        (SB + CB + "functions.f:0" + END, "end of turn"),
        (SB + CB + "functions.f:0" + IM_USER, "another message"),
        (section(CB + "functions.f:0" + CE), "call end"),
    ],
)
def test_a_call_that_never_began_its_arguments_is_incomplete(text, closer):
    msg = parse(text)
    first = msg.tool_calls[0]
    assert (first.name, first.arguments, first.status) == ("f", "{}", INCOMPLETE), closer
    assert "missing_argument_begin" in [w.kind for w in msg.warnings]
    assert all(c.status is ToolCallStatus.OK for c in msg.tool_calls[1:])


def test_incomplete_is_the_same_streamed():
    text = section(CB + "functions.f:0", call("functions.g:1", '{"a": 1}')) + END
    for size in (1, 2, 5):
        deltas, p = feed_chunks([text[i:i + size] for i in range(0, len(text), size)])
        assert p.message == parse(text)
        assert [c.status for c in p.message.tool_calls] == [INCOMPLETE, ToolCallStatus.OK]
        assert merge(deltas).calls[0]["arguments"] == "{}"


def test_text_ending_in_a_header_is_unclosed_not_incomplete():
    msg = parse(SB + CB + "functions.f:0")
    assert msg.tool_calls[0].status is ToolCallStatus.UNCLOSED
    assert msg.stop_reason is StopReason.TRUNCATED


@pytest.mark.parametrize("text", [SB + CB, CB, "Hi" + CB, SB + CB + " \n",
                                  section(call("functions.f:0", "{}"))[: -len(SE)] + CB])
def test_a_dangling_call_begin_at_the_end_is_not_a_call(text):
    deltas, p = feed_chunks([text])
    msg = parse(text)
    assert p.message == msg
    assert [c.id for c in msg.tool_calls] == (["functions.f:0"] if "functions" in text else [])
    assert not [t for d in deltas for t in d.tool_calls if t.index == len(msg.tool_calls)]
    assert msg.warnings[-1].kind == "dangling_call_begin" and msg.warnings[-1].text.startswith(CB)
    assert msg.stop_reason is StopReason.TRUNCATED


def test_a_call_begin_with_a_header_at_the_end_is_still_a_call():
    assert [c.id for c in parse(SB + CB + "call_0").tool_calls] == ["call_0"]
    assert [c.arguments for c in parse(SB + CB + AB).tool_calls] == ["{}"]


# ------------------------------------------------------------- malformed tool schemas

K3_CALL = ("<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
           "<|open|>argument key=\"a\" type=\"string\"<|sep|>x<|close|>argument<|sep|>"
           "<|open|>argument key=\"n\" type=\"number\"<|sep|>1<|close|>argument<|sep|>"
           "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>")
K2_CALLS = section(call("functions.f:0", '{"a": "x", "n": 1}'), call("opaque", '{"a": "x"}')) + END


def _both_families(params: object) -> None:
    """Both families parse a call of ``f`` declared with ``params``, whole and one character at a
    time, to the same result, without raising."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    for dialect, text in (("kimi-k3", K3_CALL), ("kimi-k2-instruct-0905", K2_CALLS)):
        whole = parse(text, dialect=dialect, tools=tools)
        assert whole.tool_calls[0].name == "f"
        _, sp = feed_chunks(list(text), dialect=dialect, tools=tools)
        assert sp.message == whole


@pytest.mark.parametrize("params", [
    {"type": "object", "properties": {"a": {"type": ["string", {"x": 1}]}}},
    {"properties": {"a": {"type": [["string"]]}}},
    {"properties": {"a": {}}, "required": 5},
    {"properties": {"a": {}}, "required": "a"},
    {"properties": 5},
    {"properties": [1, 2]},
    {"properties": {5: {"type": "string"}, "a": 5}},
    {"required": [{"a": 1}, None]},
    5, "object", [],
])
def test_a_malformed_schema_is_unknown_typing_never_an_exception(params):
    _both_families(params)


json_like = st.recursive(st.none() | st.booleans() | st.integers(-2, 5) | st.sampled_from(
    ["string", "number", "object", "a", "n", ""]), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["type", "properties", "required", "a", "n", "additionalProperties"]), inner, max_size=4),
    max_leaves=8)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_like, st.dictionaries(st.sampled_from(["type", "properties", "required",
                                                            "additionalProperties"]), json_like, max_size=4)))
def test_any_schema_shape_parses(params):
    _both_families(params)


# ------------------------------------------------- calls that must not run are not handed out

WEATHER = [fn("get_weather", city="string")]
K3_OPEN_CALLS = "<|close|>think<|sep|><|open|>tools<|sep|>"


def k3_call(tool: str, index: int, body: str, close: bool = True) -> str:
    return (f'<|open|>call tool="{tool}" index="{index}"<|sep|>' + body + ("<|close|>call<|sep|>" if close else ""))


def k3_arg(key: str, typ: str, value: str) -> str:
    return f'<|open|>argument key="{key}" type="{typ}"<|sep|>' + value + "<|close|>argument<|sep|>"


BAD_CALLS = {
    "kimi-k2-instruct-0905": (section(call("functions.send_money:0", '{"to": "x"}'),  # undeclared tool
                                      call("functions.get_weather:1", '{"city": '),  # arguments not JSON
                                      CB + "functions.get_weather:2" + CE,  # closed before its arguments
                                      call("functions.get_weather:3", '{"city": "Paris"}'))
                              + CB + "functions.get_weather:4" + AB + '{"city": "Ro'),  # cut
    "kimi-k3": (K3_OPEN_CALLS + k3_call("send_money", 1, k3_arg("to", "string", "x"))
                + k3_call("get_weather", 2, k3_arg("city", "number", "Paris"))
                + k3_call("get_weather", 3, "", close=False)  # closed by the next call before any element
                + k3_call("get_weather", 4, k3_arg("city", "string", "Paris"))
                + k3_call("get_weather", 5, k3_arg("city", "string", "Ro"), close=False)),
}


@pytest.mark.parametrize("dialect", BAD_CALLS)
def test_calls_that_must_not_run_are_left_out_and_reported(dialect):
    text = BAD_CALLS[dialect]
    msg = parse(text, dialect=dialect, tools=WEATHER)
    statuses = [c.status.value for c in msg.tool_calls]  # the statuses stay available
    assert statuses == ["unknown_tool", "invalid_json", "incomplete", "ok", "unclosed"]
    out = msg.to_openai()
    assert [c["id"] for c in out["tool_calls"]] == [msg.tool_calls[3].id]
    assert [(c["index"], c["id"], c["status"]) for c in out["invalid_tool_calls"]] == [
        (c.index, c.id, c.status.value) for c in msg.tool_calls if c.status is not ToolCallStatus.OK]
    assert msg.to_openai(include_invalid=True)["tool_calls"] == [c.to_openai() for c in msg.tool_calls]
    assert "invalid_tool_calls" not in msg.to_openai(include_invalid=True)
    assert msg.finish_reason() == "length"  # cut inside the last call
    # streamed, the default: only the ok call, whole, as client index 0; the others reported
    p = StreamParser(dialect, tools=WEATHER)
    deltas = [d for ch in text for d in p.feed(ch)] + p.finish()
    calls = [t.to_openai() for d in deltas for t in d.tool_calls]
    assert calls == [{"index": 0, **msg.tool_calls[3].to_openai()}]
    assert [e for d in deltas for e in d.to_openai().get("invalid_tool_calls", [])] == out["invalid_tool_calls"]


@pytest.mark.parametrize("dialect, text", [
    ("kimi-k2-instruct-0905", section(call("functions.send_money:0", "{}")) + END),
    ("kimi-k3", K3_OPEN_CALLS + k3_call("send_money", 1, "") + "<|close|>tools<|sep|><|close|>message<|sep|>"),
])
def test_no_call_left_to_run_finishes_with_stop(dialect, text):
    msg = parse(text, dialect=dialect, tools=WEATHER)
    assert msg.stop_reason is StopReason.TOOL_CALLS and "tool_calls" not in msg.to_openai()
    assert msg.finish_reason() == "stop" and msg.finish_reason(include_invalid=True) == "tool_calls"


EXEC_AND_PROCESS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
    for n in ("exec", "process")]


@pytest.mark.parametrize("header", ["functionsexec5", "functions.exec5"])
def test_an_id_with_its_punctuation_dropped_names_the_declared_tool(header):
    # Kimi-K2.5 has been seen writing `functionsexec5` for `functions.exec:5`: the declared name is
    # spelled out in the id, so the call is `exec`, even where the arguments fit two tools
    text = SB + call(header, '{"command": "ls"}') + SE + END
    msg = parse(text, dialect="kimi-k2.5", thinking_prefilled=False, tools=EXEC_AND_PROCESS)
    calls = [(c.id, c.name, c.arguments, c.status) for c in msg.tool_calls]
    assert calls == [(header, "exec", '{"command": "ls"}', ToolCallStatus.OK)]
    assert [w.kind for w in msg.warnings] == ["name_inferred"]
    deltas, sp = feed_chunks(list(text), dialect="kimi-k2.5", thinking_prefilled=False, tools=EXEC_AND_PROCESS)
    assert sp.message == msg


@pytest.mark.parametrize("header, tools", [
    ("functionsexec5", None),                                                       # nothing to check against
    ("functionsexec55", EXEC_AND_PROCESS + [{"type": "function", "function": {"name": "exec5"}}]),  # exec:55 or exec5:5
    ("functionsexec", EXEC_AND_PROCESS),                                            # no index
    ("functions.exec5x", EXEC_AND_PROCESS),
])
def test_an_id_with_its_punctuation_dropped_is_read_only_when_one_declared_tool_fits(header, tools):
    msg = parse(SB + call(header, '{"command": "ls"}') + SE + END, dialect="kimi-k2-instruct", tools=tools)
    assert msg.tool_calls[0].status is ToolCallStatus.UNKNOWN_TOOL
    assert msg.tool_calls[0].name != "exec"
