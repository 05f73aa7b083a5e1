"""The Kimi-K3 output parser: the XTML format as data, the tag lexer,
results, recovery, the CLI. Spellings come from kimi_chat.markers; expected values are read off the
format (``encoding_k3`` writes assistant turns this way)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_chat import markers as M
from kimi_chat.output.format import format_for
from kimi_chat.families.k3 import format as K3F
from kimi_chat.dialects import get_dialect
from kimi_chat.output import StreamParser, parse
from kimi_chat.families.k3.tags import TagLexer, parse_attributes, unescape
from kimi_chat.output.types import StopReason, ToolCallStatus

OPEN, CLOSE, SEP, EOM = M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text
ROOT = Path(__file__).resolve().parents[2]


def o(name: str, **attrs: object) -> str:
    return OPEN + name + "".join(f' {k}="{v}"' for k, v in attrs.items()) + SEP


def c(name: str) -> str:
    return CLOSE + name + SEP


def arg(key: str, typ: str, value: str) -> str:
    return o("argument", key=key, type=typ) + value + c("argument")


def call(name: str, index: int, *elements: str) -> str:
    return o("call", tool=name, index=index) + "".join(elements) + c("call")


END = c("message") + EOM
ISSUE_EXAMPLE = ("REASONING" + c("think") + o("response") + "CONTENT" + c("response") + o("tools")
                 + call("NAME", 1, arg("city", "string", "Zürich"), arg("days", "number", "3"))
                 + c("tools") + END)


def k3(text: str, **kw: object):
    return parse(text, dialect="kimi-k3", **kw)


def kinds(msg) -> list[str]:
    return [w.kind for w in msg.warnings]


# ---------------------------------------------------------------------------------------------- format


def test_k3_is_registered_and_compiles_both_start_rules():
    fmt = format_for(get_dialect("kimi-k3"))
    assert fmt is K3F.K3 and fmt.tags is K3F.TAGS
    assert fmt.machine(prefilled=True, think=True).start_rule == "message"
    assert fmt.machine(prefilled=False, think=False).start_rule == "message_response"


def test_docs_hold_the_k3_grammar_verbatim():
    doc = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- k3-grammar -->\n```peg\n(.*?)\n```", doc, re.S)
    assert m is not None, "docs/formats.md has no K3 grammar block"
    assert m.group(1) == K3F.grammar_text()


def test_every_k3_rule_is_documented_with_an_example():
    doc = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    k3_part = doc[doc.index("<!-- k3-grammar -->"):]
    for rule in K3F.GRAMMAR:
        assert f"`{rule}`" in k3_part, rule


# ---------------------------------------------------------------------------------------------- lexer


def test_attributes_are_unescaped_once():
    assert unescape("a &quot;b&quot; &amp;amp; &amp;quot;") == 'a "b" &amp; &quot;'
    assert parse_attributes(' tool="x&amp;y" index="2" tool="z"') == {"tool": "x&y", "index": "2"}


def test_an_opening_tag_is_held_until_its_sep():
    p = StreamParser("kimi-k3", thinking=False)
    assert [d.content for d in p.feed("Hi " + OPEN + "resp")] == ["Hi "]
    assert p.feed("onse") == [] and p.offset == 3
    p.feed(SEP)  # a redundant response open is stray
    assert p.message.warnings[-1].text == o("response")


def test_a_tag_that_never_closes_is_released_as_stray_and_its_text_kept():
    long = "x" * (K3F.TAGS.max_len + 1)
    msg = k3(o("response") + "a" + OPEN + long + c("response") + END)
    assert msg.content == "a" + long
    assert ("stray_marker", OPEN) in [(w.kind, w.text) for w in msg.warnings]
    # another marker before the sep releases it too; its head "b" (a malformed tag name) is dropped with it
    msg = k3(o("response") + "a" + OPEN + "b c" + EOM)
    assert msg.content == "a c" and msg.stop_reason is StopReason.END_TURN
    assert ("stray_marker", OPEN + "b") in [(w.kind, w.text) for w in msg.warnings]


def test_unknown_and_malformed_tags_are_dropped_with_their_text():
    for bad in (o("bogus"), OPEN + "call tool=x" + SEP, CLOSE + "response x" + SEP, SEP):
        msg = k3(o("response") + "a" + bad + "b" + c("response") + END)
        assert msg.content == "ab", bad
        assert [w.text for w in msg.warnings if w.kind == "stray_marker"] == [bad]


def test_tag_lexer_flush_releases_an_unfinished_tag():
    lx = TagLexer(K3F.machine().markers, K3F.TAGS)
    out: list = []
    lx.feed("a" + OPEN + "call tool=", lambda t: out.append((None, t)), lambda k, s: out.append((k, s)))
    assert lx.pending == OPEN + "call tool="
    lx.flush_into(lambda t: out.append((None, t)), lambda k, s: out.append((k, s)))
    assert out == [(None, "a"), ("CUT", OPEN + "call tool=")] and lx.pending == ""  # a tag cut short
    out.clear()
    lx.feed("a" + OPEN + "9 x", lambda t: out.append((None, t)), lambda k, s: out.append((k, s)))
    lx.flush_into(lambda t: out.append((None, t)), lambda k, s: out.append((k, s)))
    assert out == [(None, "a"), ("STRAY", OPEN), (None, "9 x")]  # no tag name after the marker: text


# ------------------------------------------------------------------- cut and malformed tags

@pytest.mark.parametrize("text, reasoning, content", [
    ("I am answering." + CLOSE + "thi", "I am answering.", None),
    ("r" + c("think") + o("response") + "Hi from subagent." + CLOSE + "response", "r", "Hi from subagent."),
    ("r" + c("think") + OPEN + "resp", "r", None),
    ("r" + c("think") + o("response") + "Hi" + CLOSE, "r", "Hi"),
    ("r" + c("think") + o("response") + "Hi" + c("response") + OPEN + 'call tool="f" ind', "r", "Hi"),
    ("r" + c("think") + o("response") + "Hi" + CLOSE + "response" + SEP[:3], "r", "Hi"),
    ("r" + c("think") + o("response") + "Hi" + c("response") + CLOSE + "mess", "r", "Hi"),
])
def test_a_tag_cut_by_the_end_of_the_text_is_dropped_and_truncates(text, reasoning, content):
    p = StreamParser("kimi-k3")
    for ch in text:
        p.feed(ch)
    p.finish()
    for msg in (k3(text), p.message):
        assert (msg.reasoning_content, msg.content) == (reasoning, content)
        assert msg.stop_reason is StopReason.TRUNCATED
        cut = [w for w in msg.warnings if w.kind == "truncated_tag"]
        assert len(cut) == 1 and text.endswith(cut[0].text) and text[cut[0].offset:] == cut[0].text


def test_a_close_tag_without_its_sep_is_that_tag():
    """A live server output: the think close lost its <|sep|> before the response opened."""
    text = "I think." + CLOSE + "think" + o("response") + "Hello" + c("response") + END
    msg = k3(text)
    assert (msg.reasoning_content, msg.content, msg.stop_reason) == ("I think.", "Hello", StopReason.END_TURN)
    assert [(w.kind, w.text, w.offset) for w in msg.warnings] == [
        ("tag_without_sep", CLOSE + "think", len("I think."))]
    # the same for the other tags, with attributes: the call's arguments come through
    text = ("r" + c("think") + o("response") + "a" + CLOSE + "response" + o("tools")
            + OPEN + 'call tool="f" index="1"' + OPEN + 'argument key="x" type="number"' + "1"
            + CLOSE + "argument" + c("call") + c("tools") + CLOSE + "message" + EOM)
    msg = k3(text)
    assert (msg.content, [(t.name, t.arguments, t.status) for t in msg.tool_calls], msg.stop_reason) == (
        "a", [("f", '{"x":1}', ToolCallStatus.OK)], StopReason.TOOL_CALLS)
    assert kinds(msg) == ["tag_without_sep"] * 5


@pytest.mark.parametrize("head", ["thnk", "respons", "Think", "think_"])
def test_a_malformed_tag_head_never_becomes_text(head):
    text = "I think." + CLOSE + head + o("response") + "Hello" + c("response") + END
    msg = k3(text)
    assert head not in (msg.reasoning_content or "") + (msg.content or "")
    assert ("stray_marker", CLOSE + head) in [(w.kind, w.text) for w in msg.warnings]


# ---------------------------------------------------------------------------------------------- results


def test_the_issue_example():
    msg = k3(ISSUE_EXAMPLE)
    assert (msg.reasoning_content, msg.content) == ("REASONING", "CONTENT")
    (tc,) = msg.tool_calls
    assert (tc.id, tc.name, tc.status) == ("functions.NAME:0", "NAME", ToolCallStatus.OK)
    assert json.loads(tc.arguments) == {"city": "Zürich", "days": 3}
    assert tc.arguments == '{"city":"Zürich","days":3}'
    assert msg.stop_reason is StopReason.TOOL_CALLS and msg.warnings == []
    assert tc.raw == ISSUE_EXAMPLE[ISSUE_EXAMPLE.index(OPEN + "call"):ISSUE_EXAMPLE.index(c("tools"))]
    assert msg.to_openai()["tool_calls"][0]["function"] == {"name": "NAME", "arguments": tc.arguments}


def test_thinking_off_starts_in_the_response_channel():
    msg = k3("Hello" + c("response") + END, thinking=False)
    assert (msg.content, msg.reasoning_content, msg.stop_reason) == ("Hello", None, StopReason.END_TURN)
    assert msg.warnings == []


def test_string_values_are_raw_others_verbatim():
    text = ("r" + c("think") + o("response") + c("response") + o("tools")
            + call("f", 1, arg("s", "string", 'a "q" \\n {x}'), arg("o", "object", '{"k": [1, 2]}'),
                   arg("b", "boolean", "true"), arg("n", "null", "null"), arg("a", "array", "[1,2]"))
            + c("tools") + END)
    (tc,) = k3(text).tool_calls
    assert tc.status is ToolCallStatus.OK
    assert tc.arguments == '{"s":"a \\"q\\" \\\\n {x}","o":{"k": [1, 2]},"b":true,"n":null,"a":[1,2]}'
    assert list(json.loads(tc.arguments)) == ["s", "o", "b", "n", "a"]


@pytest.mark.parametrize("typ,value", [("number", "abc"), ("number", '"3"'), ("boolean", "1"), ("object", "[]"),
                                       ("number", "")])
def test_a_value_that_is_not_its_type_is_invalid_json_and_kept(typ, value):
    text = c("think") + o("response") + c("response") + o("tools") + call("f", 1, arg("k", typ, value)) + c("tools") + END
    msg = k3(text)
    (tc,) = msg.tool_calls
    assert tc.status is ToolCallStatus.INVALID_JSON and tc.arguments == '{"k":' + value + "}"
    assert "argument_invalid" in kinds(msg)


def test_json_element_is_the_arguments_verbatim():
    body = '{"x": 1,  "y": "z"}'
    text = c("think") + o("response") + c("response") + o("tools") + call("f", 1, o("json", type="object") + body + c("json")) + c("tools") + END
    (tc,) = k3(text).tool_calls
    assert (tc.arguments, tc.status) == (body, ToolCallStatus.OK)
    bad = text.replace(body, "not json")
    assert k3(bad).tool_calls[0].status is ToolCallStatus.INVALID_JSON


def test_duplicate_keys_are_kept_and_warned():
    text = c("think") + o("response") + c("response") + o("tools") + call("f", 1, arg("k", "number", "1"), arg("k", "number", "2")) + c("tools") + END
    msg = k3(text)
    assert msg.tool_calls[0].arguments == '{"k":1,"k":2}' and json.loads(msg.tool_calls[0].arguments) == {"k": 2}
    assert "duplicate_argument" in kinds(msg)


def test_ids_are_zero_based_and_index_mismatch_warns():
    text = (c("think") + o("response") + c("response") + o("tools") + call("f", 1) + call("g", 5) + c("tools") + END)
    msg = k3(text)
    assert [t.id for t in msg.tool_calls] == ["functions.f:0", "functions.g:1"]
    assert [t.arguments for t in msg.tool_calls] == ["{}", "{}"]
    assert [w.kind for w in msg.warnings] == ["call_index"] and "'5'" in msg.warnings[0].message


def test_statuses_unclosed_incomplete_unknown():
    head = c("think") + o("response") + c("response") + o("tools")
    msg = k3(head + o("call", tool="f", index=1) + o("argument", key="a", type="string") + "x")
    assert msg.tool_calls[0].status is ToolCallStatus.UNCLOSED and msg.stop_reason is StopReason.TRUNCATED
    msg = k3(head + o("call", tool="f", index=1) + c("tools") + END)
    assert msg.tool_calls[0].status is ToolCallStatus.INCOMPLETE and msg.tool_calls[0].arguments == "{}"
    tools = [{"type": "function", "function": {"name": "g", "parameters": {"properties": {"a": {"type": "string"}}}}}]
    msg = k3(head + call("f", 1) + c("tools") + END, tools=tools)
    assert msg.tool_calls[0].status is ToolCallStatus.UNKNOWN_TOOL


@pytest.mark.parametrize("cut", ["", o("argument", key="a", type="str")[:-len(SEP)], "<|clo"])
def test_a_call_cut_before_its_first_element_has_empty_arguments(cut):
    # nothing was assembled: the arguments are the empty object, as K2's call cut before its
    # arguments (and as a K3 call closed before any element), never an empty string
    text = c("think") + o("response") + c("response") + o("tools") + o("call", tool="f", index=1) + cut
    whole = k3(text)
    got = [(t.id, t.name, t.arguments, t.status) for t in whole.tool_calls]
    assert got == [("functions.f:0", "f", "{}", ToolCallStatus.UNCLOSED)]
    assert whole.stop_reason is StopReason.TRUNCATED
    p = StreamParser("kimi-k3", include_invalid=True)
    streamed = ""
    for ch in [*text, None]:
        for d in (p.feed(ch) if ch is not None else p.finish()):
            streamed += "".join(t.arguments or "" for t in d.tool_calls)
    assert (p.message, streamed) == (whole, "{}")


def test_a_think_channel_with_thinking_off_is_reasoning_not_joined_to_the_reply():
    # the prompt opened the response channel (thinking=False) but the model wrote a think channel
    # first: its text is reasoning, the reply is content; before, the think tags were dropped as
    # strays and the two were joined ("planHi")
    text = o("think") + "plan" + c("think") + o("response") + "Hi" + c("response") + END
    whole = k3(text, thinking=False)
    assert (whole.reasoning_content, whole.content, whole.stop_reason) == ("plan", "Hi", StopReason.END_TURN)
    assert kinds(whole) == ["think_when_off"] and whole.warnings[0].offset == 0
    p = StreamParser("kimi-k3", thinking=False)
    for ch in text:
        p.feed(ch)
    p.finish()
    assert p.message == whole
    # without the think channel nothing changes: the output starts in the response channel
    plain = k3("Hi" + c("response") + END, thinking=False)
    assert (plain.reasoning_content, plain.content, plain.warnings) == (None, "Hi", [])


def test_schema_checks_are_warnings():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "properties": {"a": {"type": "string"}, "n": {"type": "integer"}}, "required": ["a", "n"]}}}]
    text = (c("think") + o("response") + c("response") + o("tools")
            + call("f", 1, arg("n", "string", "3"), arg("z", "number", "1")) + c("tools") + END)
    msg = k3(text, tools=tools)
    assert msg.tool_calls[0].status is ToolCallStatus.OK
    assert json.loads(msg.tool_calls[0].arguments) == {"n": "3", "z": 1}
    assert kinds(msg) == ["argument_schema_type", "argument_undeclared", "argument_missing"]


# ---------------------------------------------------------------------------------------------- recovery


def test_response_only_completion_is_content_not_reasoning():
    msg = k3(o("response") + "Hi" + c("response") + END)
    assert (msg.content, msg.reasoning_content) == ("Hi", None)
    assert kinds(msg) == ["think_unclosed"]


def test_closing_think_at_once_is_the_format():
    msg = k3(c("think") + o("response") + "Hi" + c("response") + END)
    assert (msg.content, msg.reasoning_content, msg.warnings) == ("Hi", None, [])


def test_tools_without_a_response_channel():
    msg = k3("r" + c("think") + o("tools") + call("f", 1) + c("tools") + END)
    assert kinds(msg) == ["no_response"] and msg.tool_calls[0].status is ToolCallStatus.OK


def test_a_second_tools_channel_holds_calls_never_content():
    # the encoder writes all calls in one tools channel; a model that closes it and opens another
    # still calls tools: the second channel's calls continue the turn (ids by position), none of its
    # tags or argument values leak into the content
    text = ("r" + c("think") + o("response") + "Hi" + c("response")
            + o("tools") + call("get_weather", 1, arg("city", "string", "Paris")) + c("tools")
            + o("tools") + call("get_weather", 2, o("json", type="object") + '{"city": "Oslo"}' + c("json"))
            + c("tools") + END)
    whole = k3(text)
    calls = [(t.id, t.name, t.arguments, t.status) for t in whole.tool_calls]
    assert calls == [("functions.get_weather:0", "get_weather", '{"city":"Paris"}', ToolCallStatus.OK),
                     ("functions.get_weather:1", "get_weather", '{"city": "Oslo"}', ToolCallStatus.OK)]
    assert (whole.content, whole.reasoning_content, whole.stop_reason) == ("Hi", "r", StopReason.TOOL_CALLS)
    assert kinds(whole) == ["tools_reopened"]
    assert whole.warnings[0].offset == text.rindex(o("tools"))
    p = StreamParser("kimi-k3")
    for ch in text:
        p.feed(ch)
    p.finish()
    assert p.message == whole


def test_message_close_without_response_close():
    msg = k3(c("think") + o("response") + "Hi" + END)
    assert msg.content == "Hi" and kinds(msg) == ["response_unclosed"]
    assert msg.stop_reason is StopReason.END_TURN


def test_truncated_reasoning_stays_reasoning():
    msg = k3("half a thou")
    assert (msg.reasoning_content, msg.content, msg.stop_reason) == ("half a thou", None, StopReason.TRUNCATED)
    assert msg.warnings == []


def test_a_reply_written_in_the_think_channel_is_named_by_its_response_close():
    # thinking on, the model skips think and writes its reply, closing a response channel it never
    # opened: the response close ends the think channel (the text stays reasoning, as streamed) and
    # is reported as what it is, not as a stray tag
    text = "The capital is Paris." + c("response") + END
    whole = k3(text)
    assert (whole.reasoning_content, whole.content, whole.stop_reason) == (
        "The capital is Paris.", None, StopReason.END_TURN)
    assert kinds(whole) == ["reply_in_think"] and whole.warnings[0].offset == text.index(CLOSE)
    p = StreamParser("kimi-k3")
    for ch in text:
        p.feed(ch)
    p.finish()
    assert p.message == whole


def test_end_of_msg_without_message_close_and_text_after_the_end():
    msg = k3(c("think") + o("response") + "Hi" + c("response") + EOM)
    assert msg.stop_reason is StopReason.END_TURN and kinds(msg) == ["message_unclosed"]
    msg = k3(c("think") + o("response") + "Hi" + c("response") + c("message") + " junk" + EOM + "x")
    assert kinds(msg) == ["text_after_end"] and msg.warnings[0].text == " junk" + EOM + "x"


def test_text_outside_any_channel_is_content_with_a_warning():
    msg = k3("r" + c("think") + "\n" + o("response") + "Hi" + c("response") + " extra " + END)
    assert msg.content == "Hi extra " and kinds(msg) == ["text_outside_channels"]
    assert msg.warnings[0].text == " extra "


def test_end_of_msg_token_id_without_its_text():
    p = StreamParser("kimi-k3")
    p.feed(c("think") + o("response") + "Hi" + c("response") + c("message"))
    p.feed("", token_ids=[M.K3_END_OF_MSG.id])
    p.finish()
    assert p.message.stop_reason is StopReason.END_TURN and p.message.warnings == []


# ---------------------------------------------------------------------------------------------- CLI


def _cli(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kimi_chat.cli", "parse", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, check=False)


def test_cli_parses_k3_whole_and_streamed():
    r = _cli("-d", "kimi-k3", "-", stdin=ISSUE_EXAMPLE)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reasoning_content"] == "REASONING" and out["tool_calls"][0]["function"]["name"] == "NAME"
    r = _cli("-d", "kimi-k3", "--stream", "--chunk", "3", "--kwargs", '{"thinking": false}', "-",
             stdin="Hi" + c("response") + END)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert "".join(x["delta"].get("content", "") for x in lines) == "Hi"
    assert lines[-1]["finish_reason"] == "stop"


def test_text_held_back_when_the_turn_ends_in_text_is_ignored_in_order():
    # found by the chunking property: "<" ends the turn (text after the close), "[" was held back
    text = c("message") + "<[BOS]x"
    p = StreamParser("kimi-k3")
    for ch in text:
        p.feed(ch)
    p.finish()
    assert p.message == k3(text)
    assert [(w.kind, w.text) for w in p.message.warnings][-1] == ("text_after_end", "<[BOS]x")


def test_a_stray_tag_inside_a_call_is_kept_in_its_raw_text():
    inner = o("argument", key="a", type="number") + "1" + o("bogus") + c("argument")
    text = c("think") + o("response") + c("response") + o("tools") + call("f", 1, inner) + c("tools") + END
    (tc,) = k3(text).tool_calls
    assert tc.raw == call("f", 1, inner) and tc.arguments == '{"a":1}'


# ------------------------------------------------------- the same parse options in both families

K2_DIALECT = "kimi-k2-instruct-0905"


@pytest.mark.parametrize("body", ['"{\\"a\\": 1}"', ' "{\\"a\\": [1, 2]}"\n', '  {"a": 1}\n ', "", " \n",
                                  '"x"', '"{\\"a\\": 1"', "[1]", '{"a": "b"} '])
def test_a_json_element_reads_as_k2_arguments(body):
    """A K3 json element's text is read as K2's arguments: trimmed, empty is {}, a double-encoded
    object unwrapped once (warned); whole and streamed."""
    k3_text = (c("think") + o("tools") + o("call", tool="f", index=1) + o("json", type="object") + body
               + c("json") + c("call") + c("tools") + END)
    k2_text = (M.TOOL_CALLS_SECTION_BEGIN.text + M.TOOL_CALL_BEGIN.text + "functions.f:0"
               + M.TOOL_CALL_ARGUMENT_BEGIN.text + body + M.TOOL_CALL_END.text + M.TOOL_CALLS_SECTION_END.text)
    got = []
    for dialect, text in (("kimi-k3", k3_text), (K2_DIALECT, k2_text)):
        msg = parse(text, dialect=dialect)
        p = StreamParser(dialect)
        for ch in text:
            p.feed(ch)
        p.finish()
        assert p.message == msg
        t = msg.tool_calls[0]
        got.append((t.arguments, t.status, "double_encoded_arguments" in kinds(msg)))
    assert got[0] == got[1]


def test_reasoning_false_is_a_clear_error_for_k3():
    for make in (lambda: k3("x", reasoning=False), lambda: StreamParser("kimi-k3", reasoning=False)):
        with pytest.raises(TypeError, match=r"kimi-k3: reasoning=False .* thinking=False"):
            make()
    text = "r" + c("think") + o("response") + "a" + c("response") + END
    assert k3(text, reasoning=True) == k3(text)  # what K3 always does: think tags are markup


def test_content_after_tool_calls_means_the_same_in_k3():
    tools = o("tools") + o("call", tool="f", index=1) + c("call") + c("tools")
    text = "r" + c("think") + o("response") + "Hi" + c("response") + tools + " more" + END
    kept = k3(text)
    assert kept.content == "Hi more" and "text_outside_channels" in kinds(kept)
    dropped = k3(text, content_after_tool_calls=False)
    assert dropped.content == "Hi"
    assert [(w.kind, w.text) for w in dropped.warnings] == [("text_after_tool_calls", " more")]
    # K2 says the same of text after its section
    k2 = parse("Hi" + M.TOOL_CALLS_SECTION_BEGIN.text + M.TOOL_CALL_BEGIN.text + "functions.f:0"
               + M.TOOL_CALL_ARGUMENT_BEGIN.text + "{}" + M.TOOL_CALL_END.text + M.TOOL_CALLS_SECTION_END.text
               + " more", dialect=K2_DIALECT, content_after_tool_calls=False)
    assert k2.content == "Hi" and [(w.kind, w.text) for w in k2.warnings] == [("text_after_tool_calls", " more")]


@pytest.mark.parametrize("content", ["Hello", " Hello", "\nHello world", "x" * 40])
def test_an_open_tag_whose_sep_was_dropped_runs_into_its_text(content):
    """The model dropped the <|sep|> of ``<|open|>response``: the name runs into the content."""
    text = "r" + c("think") + OPEN + "response" + content + c("response") + END
    msg = k3(text)
    assert (msg.reasoning_content, msg.content, msg.stop_reason) == ("r", content, StopReason.END_TURN)
    assert [(w.kind, w.text) for w in msg.warnings] == [("tag_without_sep", OPEN + "response")]


@pytest.mark.parametrize("spelling, why", [
    ("<|im_end|>", "Kimi-K2 dialect"), ("<|im_user|>", "Kimi-K2 dialect"),
    ("<|tool_calls_section_begin|>", "Kimi-K2 dialect"), ("<|reserved_token_163700|>", "special id 163700"),
])
def test_k2_markers_in_a_k3_completion_are_kept_as_text_with_a_warning(spelling, why):
    from kimi_chat.output import StreamParser, parse

    text = "ok" + spelling + "then"
    msg = parse(text, dialect="kimi-k3", thinking=False)
    sp = StreamParser("kimi-k3", thinking=False)
    for ch in text:
        sp.feed(ch)
    sp.finish()
    assert sp.message == msg
    assert msg.content == text
    assert [(w.kind, w.offset, w.text) for w in msg.warnings] == [("foreign_marker", 2, spelling)]
    assert why in msg.warnings[0].message
