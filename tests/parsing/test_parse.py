"""The rules of the output parser, one test (or a few) per rule.

Expected values are read off the format: ``[<think>R</think>] C [SECTION (CALL)+ SECTION_END] [<|im_end|>]``.
Every parse is also checked streamed one character at a time (merged deltas == parse) by ``P``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from kimi_chat.dialects import get_dialect
from kimi_chat.output import Delta, ParsedMessage, StopReason, StreamParser, ToolCallDelta, ToolCallStatus, parse
from parse_helpers import (
    AB,
    CB,
    CE,
    END,
    EOS,
    EOT,
    IM_ASSISTANT,
    IM_MIDDLE,
    IM_USER,
    MEDIA_PAD,
    SB,
    SB1,
    SE,
    SE1,
    THINK,
    UNTHINK,
    call,
    expected,
    feed_chunks,
    merge,
    section,
)

OK = ToolCallStatus.OK
THINKING = "kimi-k2-thinking"
K25 = replace(get_dialect("kimi-k2-thinking@rev1"), name="test-k25", options=("thinking",),
              spec=replace(get_dialect("kimi-k2-thinking@rev1").spec, think="history_split_prefilled"))
"""A stand-in for the coming kimi-k2.5 dialect: the generation prompt opens ``<think>``."""
WEATHER = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
]


def P(text: str, **kw: Any) -> ParsedMessage:
    """``parse(text)``, checked against the same text streamed one character at a time."""
    msg = parse(text, **kw)
    deltas, sp = feed_chunks(list(text), **kw)
    assert merge(deltas).as_tuple() == expected(msg)
    assert sp.message == msg
    return msg


def kinds(msg: ParsedMessage) -> list[str]:
    return [w.kind for w in msg.warnings]


def calls(msg: ParsedMessage) -> list[tuple[str, str | None, str, ToolCallStatus]]:
    return [(c.id, c.name, c.arguments, c.status) for c in msg.tool_calls]


# ------------------------------------------------------------------------------------------ basics


def test_plain_content_without_end_marker():
    msg = P("Hello, world!")
    assert (msg.content, msg.reasoning_content, msg.tool_calls) == ("Hello, world!", None, [])
    assert msg.stop_reason is StopReason.END_OF_TEXT
    assert msg.warnings == []


def test_content_with_end_of_turn():
    msg = P("Hello" + END)
    assert msg.content == "Hello"
    assert msg.stop_reason is StopReason.END_TURN
    assert msg.warnings == []


def test_empty_output():
    msg = P("")
    assert (msg.content, msg.reasoning_content, msg.tool_calls, msg.warnings) == (None, None, [], [])
    assert msg.stop_reason is StopReason.END_OF_TEXT
    assert P(END).stop_reason is StopReason.END_TURN


def test_full_turn_with_two_calls():
    text = ("Let me look." + SB + call("functions.get_weather:0", '{"city": "Paris"}')
            + call("functions.search:1", '{"query": "louvre hours"}') + SE + END)
    msg = P(text)
    assert msg.content == "Let me look."
    assert calls(msg) == [
        ("functions.get_weather:0", "get_weather", '{"city": "Paris"}', OK),
        ("functions.search:1", "search", '{"query": "louvre hours"}', OK),
    ]
    assert [c.index for c in msg.tool_calls] == [0, 1]
    assert msg.tool_calls[0].raw == call("functions.get_weather:0", '{"city": "Paris"}')
    assert msg.stop_reason is StopReason.TOOL_CALLS
    assert msg.warnings == []


def test_whitespace_only_content_is_none():
    assert P("  \n\t ").content is None
    assert P("\n\n" + section(call("functions.f:0", "{}")) + END).content is None


def test_content_is_verbatim():
    assert P("\n  Hi there \n" + END).content == "\n  Hi there \n"


# --------------------------------------------------------------------------------------- reasoning


def test_reasoning_then_content():
    msg = P(THINK + "Let me think." + UNTHINK + "The answer is 4." + END, dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == ("Let me think.", "The answer is 4.")
    assert msg.stop_reason is StopReason.END_TURN
    assert msg.warnings == []


def test_reasoning_may_follow_leading_whitespace():
    msg = P("\n " + THINK + "r" + UNTHINK + "c", dialect=THINKING)
    assert (msg.reasoning_content, msg.content, msg.warnings) == ("r", "c", [])


def test_reasoning_output_may_have_no_think():
    msg = P("Just an answer." + END, dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == (None, "Just an answer.")


def test_whitespace_only_reasoning_is_none():
    msg = P(THINK + " \n " + UNTHINK + "Hi", dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == (None, "Hi")


def test_reasoning_and_content_verbatim_around_think_end():
    msg = P(THINK + "\nstep 1\n" + UNTHINK + "\n\nAnswer", dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == ("\nstep 1\n", "\n\nAnswer")


def test_reasoning_ends_at_section_begin_and_calls_are_extracted():
    text = THINK + "I need the weather." + SB + call("functions.get_weather:0", '{"city":"Oslo"}') + SE + END
    msg = P(text, dialect=THINKING)
    assert msg.reasoning_content == "I need the weather."
    assert msg.content is None
    assert calls(msg) == [("functions.get_weather:0", "get_weather", '{"city":"Oslo"}', OK)]
    assert msg.stop_reason is StopReason.TOOL_CALLS
    assert kinds(msg) == ["reasoning_unclosed"]


def test_reasoning_ends_at_bare_call_begin():
    text = THINK + "hmm" + call("functions.f:0", '{"a": 1}') + END
    msg = P(text, dialect=THINKING)
    assert msg.reasoning_content == "hmm"
    assert calls(msg) == [("functions.f:0", "f", '{"a": 1}', OK)]
    assert "reasoning_unclosed" in kinds(msg) and "implicit_section" in kinds(msg)
    assert msg.stop_reason is StopReason.TOOL_CALLS


def test_text_after_section_that_closed_reasoning_is_content():
    text = THINK + "r" + section(call("functions.f:0", "{}")) + "then this" + UNTHINK + END
    msg = P(text, dialect=THINKING)
    # the late </think> is kept as text (warned): it says where the model thought its reasoning ended
    assert (msg.reasoning_content, msg.content) == ("r", "then this" + UNTHINK)
    assert "think_as_text" in kinds(msg)


def test_reasoning_unclosed_at_end_of_text_is_truncated():
    msg = P(THINK + "still thinking", dialect=THINKING)
    assert msg.reasoning_content == "still thinking"
    assert msg.stop_reason is StopReason.TRUNCATED
    assert msg.warnings == []


def test_reasoning_closed_by_end_of_turn():
    msg = P(THINK + "thinking" + END, dialect=THINKING)
    assert msg.reasoning_content == "thinking"
    assert msg.stop_reason is StopReason.END_TURN
    assert kinds(msg) == ["reasoning_unclosed"]


def test_stray_marker_in_reasoning_is_dropped_with_warning():
    msg = P(THINK + "a" + IM_MIDDLE + "b" + UNTHINK + "c", dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == ("ab", "c")
    assert [(w.kind, w.text, w.offset) for w in msg.warnings] == [("stray_marker", IM_MIDDLE, len(THINK) + 1)]


def test_think_end_without_open_is_kept_as_text_in_thinking_dialect():
    """Never joined across: dropping the marker would glue the reasoning's last words to the answer
    ("3 × 7 = 21.21"); kept as text, with a warning naming it and its offset."""
    msg = P("3 × 7 = 21." + UNTHINK + "21", dialect=THINKING)
    assert msg.content == "3 × 7 = 21." + UNTHINK + "21"
    assert [(w.kind, w.offset, w.text) for w in msg.warnings] == [("think_as_text", 11, UNTHINK)]
    assert "no reasoning is open here" in msg.warnings[0].message


def test_second_think_block_is_stray():
    msg = P(THINK + "a" + UNTHINK + "b" + THINK + "c" + UNTHINK, dialect=THINKING)
    assert (msg.reasoning_content, msg.content) == ("a", "b" + THINK + "c" + UNTHINK)
    assert kinds(msg) == ["think_as_text", "think_as_text"]


def test_instruct_think_is_literal_text():
    text = THINK + "x" + UNTHINK + "y"
    msg = P(text)  # kimi-k2-instruct
    assert (msg.content, msg.reasoning_content) == (text, None)
    # literal text, as docs/format.md says for a dialect without reasoning; warned, naming the dialects
    # that write it (a reasoning model's output parsed with the default dialect)
    assert [(w.kind, w.offset, w.text) for w in msg.warnings] == [
        ("think_as_text", 0, THINK), ("think_as_text", len(THINK) + 1, UNTHINK)]
    assert "kimi-k2.6" in msg.warnings[0].message and "reasoning is off" in msg.warnings[0].message
    for d in ("kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2", "kimi-k2-instruct-0905"):
        assert P(text, dialect=d).content == text


def test_instruct_think_when_caller_says_so():
    text = THINK + "x" + UNTHINK + "y"
    assert (P(text, reasoning=True).reasoning_content, P(text, reasoning=True).content) == ("x", "y")
    msg = P("x" + UNTHINK + "y", thinking_prefilled=True)
    assert (msg.reasoning_content, msg.content) == ("x", "y")


def test_thinking_rev1_is_not_prefilled():
    msg = P("answer" + UNTHINK + "more", dialect="kimi-k2-thinking@rev1")
    assert (msg.reasoning_content, msg.content) == (None, "answer" + UNTHINK + "more")


def test_prefilled_dialect_starts_inside_reasoning():
    msg = P("The user wants X." + UNTHINK + "Here is X." + END, dialect=K25)
    assert (msg.reasoning_content, msg.content, msg.warnings) == ("The user wants X.", "Here is X.", [])
    # the K2.5 bug: the prefilled reasoning must not leak into content
    msg = P("reasoning only", dialect=K25)
    assert (msg.reasoning_content, msg.content) == ("reasoning only", None)
    assert msg.stop_reason is StopReason.TRUNCATED


def test_kimi_k25_dialect_is_prefilled_unless_thinking_is_off():
    msg = P("r" + UNTHINK + "c", dialect="kimi-k2.5")
    assert (msg.reasoning_content, msg.content) == ("r", "c")
    msg = P("c", dialect="kimi-k2.5", thinking=False)
    assert (msg.reasoning_content, msg.content) == (None, "c")


def test_prefilled_follows_render_options():
    msg = P(THINK + "r" + UNTHINK + "c", dialect=K25, thinking=False)  # prompt had <think></think>
    assert (msg.reasoning_content, msg.content) == ("r", "c")
    msg = P("plain answer", dialect=K25, thinking=False)
    assert (msg.reasoning_content, msg.content) == (None, "plain answer")
    assert P("r" + UNTHINK + "c", dialect=K25, thinking_prefilled=False).content == "r" + UNTHINK + "c"


def test_prefilled_accepts_a_redundant_think():
    msg = P("\n" + THINK + "r" + UNTHINK + "c", dialect=K25)
    assert (msg.reasoning_content, msg.content, msg.warnings) == ("\nr", "c", [])


def test_prefilled_with_immediate_tool_call():
    msg = P(SB + call("functions.f:0", "{}") + SE, dialect=K25)
    assert msg.reasoning_content is None
    assert calls(msg) == [("functions.f:0", "f", "{}", OK)]
    assert kinds(msg) == ["reasoning_unclosed"]


# -------------------------------------------------------------------------------------- tool calls


def test_call_ends_at_next_call_begin():
    text = SB + call("functions.a:0", '{"x": 1}', end=False) + call("functions.b:1", '{"y": 2}') + SE
    msg = P(text)
    assert calls(msg) == [("functions.a:0", "a", '{"x": 1}', OK), ("functions.b:1", "b", '{"y": 2}', OK)]
    assert kinds(msg) == ["call_unclosed"]
    assert msg.tool_calls[0].raw == call("functions.a:0", '{"x": 1}', end=False)


def test_parallel_calls_are_never_merged():
    # a greedy id regex (.+:\d+) once swallowed the next call; ids and arguments that look alike
    text = SB + "".join(call(f"functions.f:{i}", f'{{"note": "then functions.f:{i + 1} {CE[:5]}"}}')
                        for i in range(5)) + SE
    msg = P(text)
    assert [(c.index, c.id, c.status) for c in msg.tool_calls] == [(i, f"functions.f:{i}", OK) for i in range(5)]
    assert json.loads(msg.tool_calls[4].arguments)["note"] == "then functions.f:5 " + CE[:5]


def test_call_ends_at_section_end():
    msg = P(SB + call("functions.a:0", '{"x": 1}', end=False) + SE + END)
    assert calls(msg) == [("functions.a:0", "a", '{"x": 1}', OK)]
    assert kinds(msg) == ["call_unclosed"]
    assert msg.stop_reason is StopReason.TOOL_CALLS


def test_call_ends_at_end_of_turn():
    msg = P(SB + call("functions.a:0", '{"x": 1}', end=False) + END + "junk")
    assert calls(msg) == [("functions.a:0", "a", '{"x": 1}', OK)]
    assert kinds(msg) == ["call_unclosed", "section_unclosed", "text_after_end"]
    assert msg.stop_reason is StopReason.TOOL_CALLS


def test_call_unclosed_at_end_of_stream():
    msg = P("ok" + SB + call("functions.write:0", '{"path": "a.txt", "text": "hel', end=False))
    [c] = msg.tool_calls
    assert (c.name, c.arguments, c.status) == ("write", '{"path": "a.txt", "text": "hel', ToolCallStatus.UNCLOSED)
    assert msg.stop_reason is StopReason.TRUNCATED
    assert msg.warnings == []


def test_call_unclosed_in_header_at_end_of_stream():
    msg = P(SB + CB + "functions.wri")
    [c] = msg.tool_calls
    assert (c.id, c.name, c.arguments, c.status) == ("functions.wri", "wri", "{}", ToolCallStatus.UNCLOSED)
    assert msg.stop_reason is StopReason.TRUNCATED


def test_missing_section_end_keeps_calls():
    # a missing <|tool_calls_section_end|> must not drop the calls
    msg = P(SB + call("functions.a:0", "{}") + call("functions.b:1", "{}") + END)
    assert [c.name for c in msg.tool_calls] == ["a", "b"]
    assert msg.stop_reason is StopReason.TOOL_CALLS
    assert kinds(msg) == ["section_unclosed"]
    # at the end of the text the section end is still owed: more calls may have been cut off
    msg = P(SB + call("functions.a:0", "{}"))
    assert [c.status for c in msg.tool_calls] == [OK]
    assert msg.stop_reason is StopReason.TRUNCATED


def test_singular_section_spelling():
    msg = P(SB1 + call("functions.a:0", '{"q": 1}') + SE1 + END)
    assert calls(msg) == [("functions.a:0", "a", '{"q": 1}', OK)]
    assert msg.warnings == []
    assert P(SB + call("functions.a:0", "{}") + SE1).warnings == []


def test_bare_call_without_section():
    msg = P("Sure." + call("functions.a:0", '{"q": 1}') + END)
    assert msg.content == "Sure."
    assert calls(msg) == [("functions.a:0", "a", '{"q": 1}', OK)]
    assert kinds(msg) == ["implicit_section"]
    assert msg.stop_reason is StopReason.TOOL_CALLS
    assert P("Sure." + call("functions.a:0", "{}")).stop_reason is StopReason.TOOL_CALLS


def test_several_sections_index_calls_across():
    msg = P(section(call("functions.a:0", "{}")) + "mid" + section(call("functions.b:0", "{}")))
    assert [(c.index, c.name) for c in msg.tool_calls] == [(0, "a"), (1, "b")]
    assert msg.content == "mid"


def test_text_between_calls_is_dropped_with_warning():
    text = SB + "\n" + call("functions.a:0", "{}") + " oops " + call("functions.b:1", "{}") + "\n" + SE
    msg = P(text)
    assert [c.name for c in msg.tool_calls] == ["a", "b"]
    assert msg.content is None
    [w] = msg.warnings
    assert (w.kind, w.text) == ("text_in_section", " oops ")
    assert w.offset == text.index(" oops ")


# ------------------------------------------------------------------------------------ ids and names


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("functions.get_weather:0", "get_weather"),
        ("functions.mcp.github:list-issues:3", "mcp.github:list-issues"),
        ("functions.get_weather", "get_weather"),
        ("functions.a.b-c.d:12", "a.b-c.d"),
        ("functions.ns:tool", "ns:tool"),
        ("functions.functions.x:0", "functions.x"),
        ("functions.名前:1", "名前"),
    ],
)
def test_names_from_headers(header, name):
    msg = P(section(call(header, "{}")))
    assert (msg.tool_calls[0].id, msg.tool_calls[0].name, msg.tool_calls[0].status) == (header, name, OK)


def test_header_is_trimmed_and_kept_verbatim_as_id():
    msg = P(section(call(" \n functions.get_weather:7\n ", "{}")))
    assert (msg.tool_calls[0].id, msg.tool_calls[0].name) == ("functions.get_weather:7", "get_weather")


@pytest.mark.parametrize("header", ["0", "call00003", "call_x"])
def test_opaque_header_name_inferred_from_tools(header):
    msg = P(section(call(header, '{"city": "Rome"}'), call("1", '{"query": "q"}')), tools=WEATHER)
    assert calls(msg) == [(header, "get_weather", '{"city": "Rome"}', OK), ("1", "search", '{"query": "q"}', OK)]
    assert kinds(msg) == ["name_inferred", "name_inferred"]


@pytest.mark.parametrize("header", ["0", "call00003", "call_x", ""])
def test_opaque_header_without_tools_is_unknown(header):
    msg = P(section(call(header, '{"city": "Rome"}')))
    assert calls(msg) == [(header, None, '{"city": "Rome"}', ToolCallStatus.UNKNOWN_TOOL)]


def test_opaque_header_no_fitting_tool():
    msg = P(section(call("0", '{"nope": 1}')), tools=WEATHER)
    assert calls(msg) == [("0", None, '{"nope": 1}', ToolCallStatus.UNKNOWN_TOOL)]
    msg = P(section(call("0", "not json")), tools=WEATHER)
    assert msg.tool_calls[0].status is ToolCallStatus.UNKNOWN_TOOL


def test_opaque_header_ambiguous():
    tools = WEATHER + [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"query": {}, "limit": {}}, "required": ["query"]}}}]
    # {"query"} fits search exactly and lookup partly: the exact fit wins
    assert P(section(call("0", '{"query": "q"}')), tools=tools).tool_calls[0].name == "search"
    tools.append({"name": "search2", "parameters": {"properties": {"query": {}}, "required": ["query"]}})
    msg = P(section(call("0", '{"query": "q"}')), tools=tools)
    assert msg.tool_calls[0].status is ToolCallStatus.UNKNOWN_TOOL
    assert kinds(msg) == ["name_ambiguous"]


def test_unprefixed_header_with_index():
    msg = P(section(call("get_weather:0", '{"city": "Rome"}')))
    assert calls(msg) == [("get_weather:0", "get_weather", '{"city": "Rome"}', ToolCallStatus.UNKNOWN_TOOL)]
    msg = P(section(call("get_weather:0", '{"city": "Rome"}')), tools=WEATHER)
    assert calls(msg) == [("get_weather:0", "get_weather", '{"city": "Rome"}', OK)]
    assert msg.warnings == []


def test_undeclared_name_is_unknown_tool():
    msg = P(section(call("functions.delete_everything:0", "{}")), tools=WEATHER)
    assert calls(msg) == [("functions.delete_everything:0", "delete_everything", "{}", ToolCallStatus.UNKNOWN_TOOL)]


def test_tools_in_bare_shape():
    tools = [{"name": "f", "parameters": {"properties": {"a": {}}}}]
    assert P(section(call("x", '{"a": 1}')), tools=tools).tool_calls[0].name == "f"


# -------------------------------------------------------------------------------------- arguments


def test_arguments_are_stripped_and_verbatim():
    args = '{"b" : [1,2 ,3],   "a":{"x": null}}'
    msg = P(section(call("functions.f:0", " \n" + args + "\n\t ")))
    assert msg.tool_calls[0].arguments == args  # never re-serialised


def test_empty_arguments_become_empty_object():
    assert P(section(call("functions.f:0", ""))).tool_calls[0].arguments == "{}"
    assert P(section(call("functions.f:0", "  \n "))).tool_calls[0].arguments == "{}"


def test_missing_argument_begin():
    msg = P(section(CB + "functions.f:0" + CE))
    assert calls(msg) == [("functions.f:0", "f", "{}", ToolCallStatus.INCOMPLETE)]
    assert kinds(msg) == ["missing_argument_begin"]


def test_invalid_json_is_kept():
    msg = P(section(call("functions.f:0", '{"a": 1,}')))
    assert calls(msg) == [("functions.f:0", "f", '{"a": 1,}', ToolCallStatus.INVALID_JSON)]


def test_non_object_json_is_invalid():
    assert P(section(call("functions.f:0", "[1, 2]"))).tool_calls[0].status is ToolCallStatus.INVALID_JSON
    assert P(section(call("functions.f:0", "42"))).tool_calls[0].status is ToolCallStatus.INVALID_JSON


def test_double_encoded_arguments_are_unwrapped_once():
    inner = '{"city": "Paris", "note": "say \\"hi\\""}'
    msg = P(section(call("functions.get_weather:0", json.dumps(inner))))
    assert calls(msg) == [("functions.get_weather:0", "get_weather", inner, OK)]
    assert kinds(msg) == ["double_encoded_arguments"]
    # twice-double-encoded: unwrapped once only, the result is a JSON string: invalid
    twice = json.dumps(json.dumps(inner))
    msg = P(section(call("functions.f:0", twice)))
    assert msg.tool_calls[0].arguments == twice
    assert msg.tool_calls[0].status is ToolCallStatus.INVALID_JSON


def test_json_string_not_holding_an_object_is_kept():
    msg = P(section(call("functions.f:0", '"hello"')))
    assert calls(msg) == [("functions.f:0", "f", '"hello"', ToolCallStatus.INVALID_JSON)]
    assert msg.warnings == []


def test_no_size_cap_on_arguments():
    big = json.dumps({"text": "x" * 1_000_000, "n": list(range(1000))})
    msg = parse(SB + call("functions.write:0", big) + SE + END)
    assert msg.tool_calls[0].arguments == big
    assert msg.tool_calls[0].status is OK


def test_marker_lookalikes_and_brackets_in_arguments():
    args = '{"html": "<div>[1]</div> <|not_a_marker|> [EOS x", "a": [[1], [2]]}'
    msg = P(section(call("functions.f:0", args)))
    assert calls(msg) == [("functions.f:0", "f", args, OK)]


def test_stray_marker_inside_arguments_is_dropped_but_kept_in_raw():
    msg = P(section(call("functions.f:0", '{"a": ' + MEDIA_PAD + '1}')))
    c = msg.tool_calls[0]
    assert (c.arguments, c.status) == ('{"a": 1}', OK)
    assert MEDIA_PAD in c.raw
    assert [(w.kind, w.text) for w in msg.warnings] == [("stray_marker", MEDIA_PAD)]


def test_unicode_arguments():
    args = '{"q": "東京の天気 🌧️ naïve"}'
    assert P(section(call("functions.f:0", args))).tool_calls[0].arguments == args


# ---------------------------------------------------------------------------- content and the end


def test_text_after_section_is_content():
    msg = P("Checking." + section(call("functions.f:0", "{}")) + " Done." + END)
    assert msg.content == "Checking. Done."


def test_whitespace_only_text_after_section_is_ignored():
    msg = P("Checking." + section(call("functions.f:0", "{}")) + "\n" + END)
    assert msg.content == "Checking."
    assert msg.warnings == []


def test_text_after_section_can_be_dropped():
    text = "Checking." + section(call("functions.f:0", "{}")) + " Done." + END
    msg = P(text, content_after_tool_calls=False)
    assert msg.content == "Checking."
    assert [(w.kind, w.text) for w in msg.warnings] == [("text_after_tool_calls", " Done.")]


def test_text_after_end_is_ignored_with_warning():
    text = "Hi" + END + "\n" + IM_USER + "user" + IM_MIDDLE + "more"
    msg = P(text)
    assert msg.content == "Hi"
    [w] = msg.warnings
    assert (w.kind, w.offset, w.text) == ("text_after_end", 2 + len(END), text[2 + len(END):])


def test_eos_ends_the_turn():
    msg = P("Hi" + EOS + "trailing")
    assert (msg.content, msg.stop_reason) == ("Hi", StopReason.END_TURN)
    assert kinds(msg) == ["text_after_end"]


def test_eot_is_not_an_end_of_turn():
    msg = P("Hi" + EOT + "there")
    assert (msg.content, msg.stop_reason) == ("Hithere", StopReason.END_OF_TEXT)
    assert kinds(msg) == ["stray_marker"]


def test_new_message_header_ends_the_turn():
    msg = P("Hi" + IM_USER + "user" + IM_MIDDLE + "next question")
    assert (msg.content, msg.stop_reason) == ("Hi", StopReason.END_TURN)
    assert kinds(msg) == ["new_message", "text_after_end"]
    assert msg.warnings[1].text == "user" + IM_MIDDLE + "next question"
    msg = P(section(call("functions.f:0", "{}")) + IM_ASSISTANT)
    assert msg.stop_reason is StopReason.TOOL_CALLS


def test_stray_markers_are_dropped_never_silently():
    text = "a" + IM_MIDDLE + "b" + MEDIA_PAD + "c"
    msg = P(text)
    assert msg.content == "abc"
    assert [(w.kind, w.text, w.offset) for w in msg.warnings] == [
        ("stray_marker", IM_MIDDLE, 1),
        ("stray_marker", MEDIA_PAD, 2 + len(IM_MIDDLE)),
    ]


@pytest.mark.parametrize("marker", [SE, AB, CE])
def test_misplaced_tool_markers_in_content_are_stray(marker):
    msg = P("a" + marker + "b")
    assert (msg.content, kinds(msg)) == ("ab", ["stray_marker"])


def test_markers_inside_call_that_do_not_fit_are_stray():
    msg = P(section(call("functions.f:0", "{" + AB + SB + "}")))
    assert msg.tool_calls[0].arguments == "{}"
    assert kinds(msg) == ["stray_marker", "stray_marker"]


# -------------------------------------------------------------------------------------- streaming


def test_one_feed_with_call_end_and_next_begin():
    # the bug: an end and the next begin in one delta truncated the first call
    p = StreamParser()
    deltas = p.feed(SB + CB + "functions.a:0" + AB + '{"x": 1')
    deltas += p.feed("}" + CE + CB + "functions.b:1" + AB + '{"y": 2}' + CE + SE)
    deltas += p.finish()
    assert merge(deltas).as_tuple() == (None, None, [(0, "functions.a:0", "a", '{"x": 1}'),
                                                     (1, "functions.b:1", "b", '{"y": 2}')])


def test_only_the_undecided_suffix_is_held_back():
    p = StreamParser()
    assert p.feed("Hello <|im_") == [Delta(content="Hello ")]
    assert p.offset == 6
    assert p.feed("end") == []
    assert p.feed("|>") == []
    assert p.message.stop_reason is StopReason.END_TURN
    assert p.message.content == "Hello "


def test_marker_prefix_that_is_not_a_marker_is_text():
    p = StreamParser()
    assert p.feed("a <|im") == [Delta(content="a ")]
    assert p.feed("x|> b") == [Delta(content="<|imx|> b")]
    p = StreamParser()
    assert p.feed("x <|tool_call") == [Delta(content="x ")]
    assert p.finish() == [Delta(content="<|tool_call")]
    assert p.message.content == "x <|tool_call"


def test_lone_marker_start_characters_are_not_held():
    p = StreamParser()
    assert p.feed("a < b [") == [Delta(content="a < b ")]  # "[" could start [EOS]
    assert p.feed("x") == [Delta(content="[x")]
    assert p.feed("<<") == [Delta(content="<")]


def test_deltas_send_id_and_name_once_then_argument_fragments():
    p = StreamParser(include_invalid=True)
    out: list[Delta] = []
    for piece in ["Hi", SB, CB, "functions.", "get_weather", ":0", AB, '{"city"', ': "Paris"', "}", CE, SE]:
        out += p.feed(piece)
    out += p.finish()
    assert out == [
        Delta(content="Hi"),
        Delta(tool_calls=[ToolCallDelta(0, id="functions.get_weather:0", name="get_weather")]),
        Delta(tool_calls=[ToolCallDelta(0, arguments='{"city"')]),
        Delta(tool_calls=[ToolCallDelta(0, arguments=': "Paris"')]),
        Delta(tool_calls=[ToolCallDelta(0, arguments="}")]),
    ]
    assert out[1].to_openai() == {"tool_calls": [{"index": 0, "id": "functions.get_weather:0",
                                                  "type": "function", "function": {"name": "get_weather"}}]}
    assert out[2].to_openai() == {"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]}


def test_opaque_id_name_is_sent_when_the_call_closes():
    p = StreamParser(tools=WEATHER, include_invalid=True)
    out = p.feed(SB + CB + "call_1" + AB + '{"city": "Rome"}')
    assert out == [Delta(tool_calls=[ToolCallDelta(0, id="call_1", arguments='{"city": "Rome"}')])]
    assert p.feed(CE) == [Delta(tool_calls=[ToolCallDelta(0, name="get_weather")])]


def test_leading_whitespace_is_held_until_known():
    p = StreamParser()
    assert p.feed("\n\n") == []
    assert p.feed("Hi") == [Delta(content="\n\nHi")]
    p = StreamParser()
    assert p.feed("\n") == []
    assert p.feed(SB + call("functions.f:0", "{}") + SE) == [
        Delta(tool_calls=[ToolCallDelta(0, id="functions.f:0", name="f", arguments="{}")])
    ]
    assert p.finish() == []
    assert p.message.content is None


def test_trailing_whitespace_of_arguments_is_held():
    p = StreamParser(include_invalid=True)
    p.feed(SB + CB + "functions.f:0" + AB)
    assert p.feed(' {"a": 1} ') == [Delta(tool_calls=[ToolCallDelta(0, arguments='{"a": 1}')])]
    assert p.feed("\n") == []
    assert p.feed('"') == [Delta(tool_calls=[ToolCallDelta(0, arguments=' \n"')])]
    assert p.feed(" ") == []
    assert p.feed(CE) == []
    assert p.message.tool_calls[0].arguments == '{"a": 1} \n"'


def test_double_encoded_arguments_are_held_until_the_call_closes():
    p = StreamParser(include_invalid=True)
    p.feed(SB + CB + "functions.f:0" + AB)
    assert p.feed('"{\\"a\\": 1}"') == []
    assert p.feed(CE) == [Delta(tool_calls=[ToolCallDelta(0, arguments='{"a": 1}')])]


def test_bytes_split_inside_multibyte_characters():
    text = "héllo 東京 🌧️" + SB + call("functions.f:0", '{"q": "日本"}') + SE
    data = text.encode()
    deltas, p = feed_chunks([data[i:i + 1] for i in range(len(data))])
    assert merge(deltas).as_tuple() == expected(parse(text))
    assert p.message == parse(text)


def test_token_ids_reveal_a_stripped_end_of_turn():
    p = StreamParser()
    p.feed("Hi", token_ids=[1234])
    assert p.message.stop_reason is None
    p.feed("", token_ids=[get_end_id()])
    assert p.message.stop_reason is StopReason.END_TURN
    assert p.message.content == "Hi"
    assert p.finish() == []
    # the spelling present as well: one end, not two
    p = StreamParser()
    p.feed("Hi" + END, token_ids=[1234, get_end_id()])
    p.finish()
    assert p.message.warnings == []


def get_end_id() -> int:
    from kimi_chat import markers as M

    assert M.IM_END.id is not None
    return M.IM_END.id


def test_message_while_streaming_and_state():
    p = StreamParser()
    p.feed("Hi" + SB + CB + "functions.f:0" + AB + '{"a"')
    m = p.message
    assert m.stop_reason is None
    assert m.tool_calls[0].status is ToolCallStatus.UNCLOSED
    assert m.tool_calls[0].arguments == '{"a"'
    assert "arguments" in p.state
    assert "StreamParser" in repr(p)
    p.feed(": 1}" + CE + SE + END + "x")
    assert p.state.startswith("ended")
    assert p.message.stop_reason is StopReason.TOOL_CALLS
    assert kinds(p.message) == ["text_after_end"]
    p.finish()
    assert "finished" in p.state
    assert p.message.tool_calls[0].status is OK
    assert kinds(p.message) == ["text_after_end"]


def test_finish_twice_and_feed_after_finish():
    p = StreamParser()
    p.feed("a")
    p.finish()
    assert p.finish() == []
    with pytest.raises(RuntimeError):
        p.feed("b")


# ------------------------------------------------------------------------------------ result shapes


def test_message_to_openai():
    msg = P(THINK + "r" + UNTHINK + "c" + section(call("functions.f:0", '{"a": 1}')) + END, dialect=THINKING)
    assert msg.to_openai() == {
        "role": "assistant",
        "content": "c",
        "reasoning_content": "r",
        "tool_calls": [{"id": "functions.f:0", "type": "function",
                        "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert P("x").to_openai() == {"role": "assistant", "content": "x"}
    unknown = P(section(call("0", "{}"))).tool_calls[0].to_openai()
    assert unknown["function"]["name"] == ""


def test_delta_to_openai():
    assert Delta(content="a").to_openai() == {"content": "a"}
    assert Delta(reasoning_content="r").to_openai() == {"reasoning_content": "r"}
    assert Delta().to_openai() == {}
    assert ToolCallDelta(2, arguments="").to_openai() == {"index": 2, "function": {"arguments": ""}}


def test_stop_reason_finish_reason():
    assert StopReason.END_TURN.finish_reason == "stop"
    assert StopReason.END_OF_TEXT.finish_reason == "stop"
    assert StopReason.TOOL_CALLS.finish_reason == "tool_calls"
    assert StopReason.TRUNCATED.finish_reason == "length"


def test_warning_str_names_the_offset():
    w = P("a" + IM_MIDDLE).warnings[0]
    assert "offset 1" in str(w) and IM_MIDDLE in str(w)


def test_bad_tools_raise():
    with pytest.raises(TypeError):
        StreamParser(tools=["nope"])
    with pytest.raises(ValueError):
        StreamParser(tools=[{"type": "function", "function": {}}])


def test_unknown_render_option_raises():
    with pytest.raises(TypeError, match="thinkng"):
        StreamParser("kimi-k2.5", thinkng=False)
    with pytest.raises(TypeError, match="thinking"):
        parse("x", thinking=False)  # kimi-k2-instruct takes no options


def test_unknown_dialect_raises():
    from kimi_chat.errors import UnknownDialectError

    with pytest.raises(UnknownDialectError):
        parse("x", dialect="nope")


# -------------------------------------------------------------------------------- grammar and docs


def test_docs_show_the_grammar_verbatim():
    from pathlib import Path

    from kimi_chat.families.k2.format import grammar_text

    doc = (Path(__file__).resolve().parents[2] / "docs" / "formats.md").read_text(encoding="utf-8")
    assert "```peg\n" + grammar_text() + "\n```" in doc


def test_every_start_rule_compiles_and_accepts_text_and_eof_everywhere():
    from kimi_chat.families.k2.format import START_RULES
    from kimi_chat.families.k2.format import machine as compile_machine
    from kimi_chat.output.peg import EOF, TEXT, WS

    for rule in START_RULES:
        for think in (True, False):
            m = compile_machine(rule, think=think)
            for st in m.states:
                if st.kind in ("text", "tok", "start"):
                    assert {TEXT, WS, EOF} <= set(st.trans), st
            assert ("<think>" in m.classes) is think


def test_token_classes_come_from_the_markers_module():
    from kimi_chat import markers as M
    from kimi_chat.families.k2.format import TOKEN_CLASSES

    assert all(m in M.MARKERS for ms in TOKEN_CLASSES.values() for m in ms)
    assert M.IM_END in TOKEN_CLASSES["END_TURN"] and M.EOT not in TOKEN_CLASSES["END_TURN"]


@pytest.mark.parametrize("bad", [5, [104, 105], None, 3.5])
def test_feed_refuses_what_is_not_text(bad):
    from kimi_chat.output import StreamParser, parse

    with pytest.raises(TypeError, match="str or bytes"):
        StreamParser().feed(bad)
    with pytest.raises(TypeError, match="str or bytes"):
        parse(bad)


# ------------------------------------------------------------------ marker-shaped text of no marker here


@pytest.mark.parametrize("spelling, why", [
    ("<|reserved_token_163595|>", "special id 163595 (<|tool_calls_section_begin|>"),  # a GGUF's spelling
    ("<|reserved_token_163700|>", "special id 163700 (reserved"),
    ("<|open|>", "dialect='kimi-k3'"),                                              # K3 tags in a K2 output
    ("<|end_of_msg|>", "dialect='kimi-k3'"),
])
@pytest.mark.parametrize("dialect", ["kimi-k2-instruct", "kimi-k2.6"])
def test_foreign_marker_is_kept_as_text_with_a_warning_naming_it_and_its_offset(spelling, why, dialect):
    text = "before" + spelling + "after"
    msg = P(text, dialect=dialect, thinking_prefilled=False)
    assert msg.content == text  # never passed silently, never dropped (nothing joined across it)
    assert [(w.kind, w.offset, w.text) for w in msg.warnings] == [("foreign_marker", 6, spelling)]
    assert why in msg.warnings[0].message


def test_reasoning_output_parsed_with_the_default_dialect_names_the_likely_dialect():
    """A K2.6 completion (reasoning, </think>, answer) parsed with the default (instruct) dialect: the
    text stays as it is, and the warning says which dialects write </think>."""
    text = "The user asks 3 × 7. 3 × 7 = 21." + UNTHINK + "21"
    msg = P(text)
    assert msg.content == text
    (w,) = msg.warnings
    assert (w.kind, w.offset, w.text) == ("think_as_text", text.index(UNTHINK), UNTHINK)
    assert "kimi-k2.6" in w.message and "kimi-k2-thinking" in w.message


@pytest.mark.parametrize("kw", [{"dialect": "kimi-k2.6", "thinking": False}, {"dialect": "kimi-k2-thinking"},
                                {"dialect": "kimi-k2.5", "thinking_prefilled": False}])
def test_think_end_with_reasoning_off_is_never_joined_across(kw):
    """Reasoning off (or never opened) and a </think> in the output: kept, so the reasoning's last
    words are not glued to the answer ("…= 21.21")."""
    msg = P("3 × 7 = 21." + UNTHINK + "21", **kw)
    assert msg.content == "3 × 7 = 21." + UNTHINK + "21" and msg.reasoning_content is None
    assert [(w.kind, w.offset) for w in msg.warnings] == [("think_as_text", 11)]


def test_many_foreign_markers_are_merged_into_bounded_warnings():
    msg = parse("x<|open|>" * 3000, dialect="kimi-k2-instruct")
    assert len(msg.warnings) <= 1001 and sum(w.count for w in msg.warnings) == 3000
