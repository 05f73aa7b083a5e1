"""Property tests of the output parser ("Invariants").

* chunking invariance: any split of the input (random cuts, one character at a time, cuts inside
  markers, byte-level cuts inside multi-byte characters) gives merged deltas == ``parse(text)`` and
  ``StreamParser.message == parse(text)``;
* robustness: on arbitrary text mixing markers, partial markers, braces, quotes and unicode, nothing
  raises and every input character is accounted for (in a field, in a call's ``raw`` or in a
  warning), no marker token ever lands in content, reasoning, ids or arguments;
* structure: a well-formed turn built from parts parses back to those parts;
* round trip: an assistant message rendered by :mod:`kimi_chat.render` parses back to its content,
  reasoning and tool calls.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kimi_chat import markers as M
from kimi_chat.dialects import get_dialect
from kimi_chat.output import MarkerLexer, ParsedMessage, StreamParser, parse
from parse_helpers import (AB, CB, CE, END, SB, SE, THINK, UNTHINK, expected, feed_chunks, merge, split_at,
                           streamed_openai)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

K25 = replace(get_dialect("kimi-k2-thinking@rev1"), name="test-k25", options=("thinking",),
              spec=replace(get_dialect("kimi-k2-thinking@rev1").spec, think="history_split_prefilled"))
PARSER_CONFIGS: list[dict[str, Any]] = [
    {},  # kimi-k2-instruct: <think> is text
    {"dialect": "kimi-k2-thinking"},
    {"dialect": K25},  # prefilled
    {"dialect": "kimi-k2-thinking", "content_after_tool_calls": False},
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"a": {}}}}},
               {"name": "g", "parameters": {"properties": {"b": {}, "c": {}}, "required": ["b"]}}]},
]
ALL_SPELLINGS = [m.text for m in M.MARKERS]
PARTIALS = sorted({s[:k] for s in ALL_SPELLINGS for k in (1, 2, 3, len(s) // 2, len(s) - 1) if k > 0})

configs = st.sampled_from(PARSER_CONFIGS)
snippets = st.sampled_from(
    ['{"a": 1}', '{"b": "x", "c": [1, 2]}', '"{\\"a\\": 2}"', "{", "}", '"', "\\", "[", "]", "<", ">", "|",
     "functions.f:0", "functions.mcp.x:y-z:3", "0", "call_1", ":", " ", "\n", "\t", "é", "東京", "🌧️",
     "\u200b", "<div>", "[1]", "<|", "|>"]
)
soup = st.lists(
    st.one_of(
        st.sampled_from(ALL_SPELLINGS),
        st.sampled_from(PARTIALS),
        snippets,
        st.text(max_size=6),
    ),
    max_size=40,
).map("".join)

# well-formed pieces (no marker spellings inside)
plain_text = st.text(
    alphabet=st.sampled_from(list("abc xyz\n\t.,!?{}[]<>|\"':-_/\\é東🌧\u0301")), max_size=30
)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,12}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | plain_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_text, inner, max_size=3),
    max_leaves=8,
)
arg_objects = st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4)


def marker_free(s: str) -> bool:
    return not any(m in s for m in ALL_SPELLINGS)


@st.composite
def well_formed(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A Kimi output in the official format (plus optional end) and what it should parse to."""
    reasoning = draw(st.none() | plain_text)
    content = draw(plain_text)
    n_calls = draw(st.integers(0, 3))
    calls = []
    for i in range(n_calls):
        name = draw(names)
        args = json.dumps(draw(arg_objects), ensure_ascii=draw(st.booleans()),
                          separators=draw(st.sampled_from([(", ", ": "), (",", ":")])))
        calls.append((f"functions.{name}:{i}", name, args))
    end = draw(st.booleans())
    for s in [reasoning or "", content] + [c[2] for c in calls]:
        assume(marker_free(s))
    text = ""
    if reasoning is not None:
        text += THINK + reasoning + UNTHINK
    text += content
    if calls:
        text += SB + "".join(CB + h + AB + a + CE for h, _, a in calls) + SE
    if end:
        text += END
    want = {
        "reasoning": reasoning if reasoning and not reasoning.isspace() else None,
        "content": content if content and not content.isspace() else None,
        "calls": [(i, h, n, a) for i, (h, n, a) in enumerate(calls)],
    }
    return text, want


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A well-formed turn with pieces inserted (markers, partial markers, text) and spans deleted:
    near-valid output that exercises every recovery path."""
    text, _ = draw(well_formed())
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            piece = draw(st.one_of(st.sampled_from(ALL_SPELLINGS), st.sampled_from(PARTIALS), snippets))
            text = text[:i] + piece + text[i:]
        else:
            text = text[:i] + text[i + draw(st.integers(1, 30)):]
    return text


inputs = st.one_of(soup, well_formed().map(lambda t: t[0]), mutated())


def check_stream_equals_parse(text: str, chunks: list[Any], kw: dict[str, Any]) -> None:
    whole = parse(text, **kw)
    deltas, sp = feed_chunks(chunks, **kw)
    assert merge(deltas).as_tuple() == expected(whole)
    assert sp.message == whole


# ----------------------------------------------------------------------------- chunking invariance


@SETTINGS
@given(inputs, configs, st.lists(st.integers(0, 400), max_size=12))
def test_any_split_gives_the_same_result(text, kw, cuts):
    check_stream_equals_parse(text, split_at(text, cuts), kw)


@SETTINGS
@given(inputs, configs)
def test_one_character_at_a_time(text, kw):
    check_stream_equals_parse(text, list(text), kw)


@SETTINGS
@given(inputs, configs, st.lists(st.integers(0, 400), max_size=12))
def test_the_default_stream_hands_out_what_to_openai_says(text, kw, cuts):
    """By default no call that is not ``ok`` streams as a tool call; the client's
    accumulated message is ``parse(text).to_openai()``, invalid calls reported, for any split."""
    whole = parse(text, **kw)
    for chunks in (split_at(text, cuts), list(text)):
        got, sp = streamed_openai(chunks, **kw)
        assert got == whole.to_openai() and sp.message == whole


@SETTINGS
@given(well_formed(), configs, st.data())
def test_cuts_inside_markers(item, kw, data):
    text, _ = item
    spans = [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, ALL_SPELLINGS)), text)]
    cuts = [data.draw(st.integers(a + 1, b - 1)) for a, b in spans if b - a > 1]
    check_stream_equals_parse(text, split_at(text, cuts), kw)


@SETTINGS
@given(inputs, configs, st.lists(st.integers(0, 1600), max_size=12))
def test_byte_splits_inside_multibyte_characters(text, kw, cuts):
    data = text.encode("utf-8")
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    check_stream_equals_parse(text, [data[a:b] for a, b in zip(bounds, bounds[1:])], kw)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(soup, mutated()), configs, st.integers(0, 3), st.data())
def test_long_chunks_scanned_per_start_character_give_the_same_result(text, kw, seed, data):
    """Long chunks take the lexer's per-start-character search path (with marker start characters
    in plain text, rare or frequent); the result is the same as one character at a time (always the
    single-regex path)."""
    words = data.draw(st.sampled_from(["lorem ipsum dolor sit amet, consectetur ", "a <b> [c] <| d </x [EO "]))
    filler = (words * 60)[: 1200 + 37 * seed]
    pieces = [filler, text, filler]
    if data.draw(st.booleans()):
        pieces.insert(2, data.draw(st.sampled_from(ALL_SPELLINGS)) + filler)
    text = "".join(pieces)
    check_stream_equals_parse(text, list(text), kw)


def test_the_long_scan_is_exercised(monkeypatch):
    calls = []
    orig = MarkerLexer._scan_long
    monkeypatch.setattr(MarkerLexer, "_scan_long", lambda self, t, h, *cb: calls.append(h) or orig(self, t, h, *cb))
    text = "x" * 1000 + SB + CB + "functions.f:0" + AB + "{}" + CE + SE + "y" * 1000 + "<" + END + "tail"
    msg = parse(text)
    assert calls and msg.content == "x" * 1000 + "y" * 1000 + "<"
    assert [c.name for c in msg.tool_calls] == ["f"]
    assert msg.warnings[0].text == "tail"


# ------------------------------------------------------------------------------------- robustness


def _marker_re(sp: StreamParser) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(s) for s in sorted(sp.machine.classes, key=len, reverse=True)))


def _nonspace(s: str) -> Counter[str]:
    return Counter(c for c in s if not c.isspace())


def accounted(text: str, msg: ParsedMessage, sp: StreamParser) -> None:
    """Every non-whitespace character of the input that is not part of a marker token is in the
    content, the reasoning, a call's raw text or a warning; every marker token of the input is
    either consumed by the grammar or reported in a warning."""
    mre = _marker_re(sp)
    want = _nonspace(mre.sub("", text))
    # reasoning markers where they are none are kept as text (think_as_text): out of the fields' count,
    # as they are out of the input's (mre cuts every marker of the machine)
    kept = sorted({w.text for w in msg.warnings if w.kind == "think_as_text" and w.text in sp.machine.classes})
    kre = re.compile("|".join(map(re.escape, kept))) if kept else None

    def field(s: str | None) -> Counter[str]:
        return _nonspace(kre.sub("", s or "") if kre is not None else s or "")

    got = field(msg.content) + field(msg.reasoning_content)
    for c in msg.tool_calls:
        assert text.count(c.raw) >= 1  # an exact substring of the input
        got += _nonspace(mre.sub("", c.raw))
    for w in msg.warnings:
        if w.kind == "text_after_end":
            assert text.endswith(w.text)
            got += _nonspace(mre.sub("", w.text))
        elif w.kind in ("text_in_section", "text_after_tool_calls"):
            got += _nonspace(w.text)
        elif w.kind == "stray_marker":
            assert w.text in sp.machine.classes
            assert text.startswith(w.text, w.offset)
    assert got == want


@SETTINGS
@given(inputs, configs, st.lists(st.integers(0, 400), max_size=8))
def test_never_raises_and_accounts_for_every_character(text, kw, cuts):
    msg = parse(text, **kw)
    sp = StreamParser(**kw)
    for chunk in split_at(text, cuts):
        sp.feed(chunk)
    sp.finish()
    assert sp.message == msg
    accounted(text, msg, sp)
    assert msg.stop_reason is not None
    for c in msg.tool_calls:
        # arguments and ids come from text runs: a marker token of the input never lands there
        assert c.arguments.strip() == c.arguments and c.arguments
        assert c.id == c.id.strip()
    for w in msg.warnings:
        assert 0 <= w.offset <= len(text)


@SETTINGS
@given(soup, configs)
def test_no_marker_in_fields_without_stray_markers(text, kw):
    """Unless a dropped stray marker glued two text pieces into a marker spelling, no field contains
    a marker spelling."""
    msg = parse(text, **kw)
    assume(not any(w.kind == "stray_marker" for w in msg.warnings))
    sp = StreamParser(**kw)
    kept = {w.text for w in msg.warnings if w.kind == "think_as_text"}  # reasoning markers where none is: text
    for s in sp.machine.classes.keys() - kept:
        assert s not in (msg.content or "")
        assert s not in (msg.reasoning_content or "")
        for c in msg.tool_calls:
            assert s not in c.arguments and s not in c.id


# -------------------------------------------------------------------------------------- structure


@SETTINGS
@given(well_formed())
def test_well_formed_turn_parses_to_its_parts(item):
    text, want = item
    msg = parse(text, dialect="kimi-k2-thinking")
    assert msg.reasoning_content == want["reasoning"]
    assert msg.content == want["content"]
    assert [(c.index, c.id, c.name, c.arguments) for c in msg.tool_calls] == want["calls"]
    assert all(c.status.value == "ok" for c in msg.tool_calls)
    assert msg.warnings == []
    if want["calls"]:
        assert msg.stop_reason.value == "tool_calls"
    else:
        assert msg.stop_reason.value == ("end_turn" if text.endswith(END) else "end_of_text")


# ------------------------------------------------------------------------------------- round trip

ROUND_TRIP_DIALECTS = ["kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2", "kimi-k2-instruct-0905",
                       "kimi-k2-thinking@rev1", "kimi-k2.5", "kimi-k2.6"]


@st.composite
def assistant_messages(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": draw(plain_text)}
    assume(marker_free(msg["content"]))
    if draw(st.booleans()):
        msg["reasoning_content"] = draw(plain_text)
        assume(marker_free(msg["reasoning_content"]))
    n = draw(st.integers(0, 3))
    if n:
        msg["tool_calls"] = []
        for i in range(n):
            name = draw(names)
            obj = draw(arg_objects)
            args: Any = obj if draw(st.booleans()) else json.dumps(obj, ensure_ascii=False)
            assume(marker_free(json.dumps(obj, ensure_ascii=False)) and marker_free(json.dumps(obj)))
            msg["tool_calls"].append({"id": f"functions.{name}:{i}", "type": "function",
                                      "function": {"name": name, "arguments": args}})
    return msg


def assistant_turn(prompt: str) -> str:
    head = prompt.rindex(M.IM_ASSISTANT.text)
    return prompt[prompt.index(M.IM_MIDDLE.text, head) + len(M.IM_MIDDLE.text):]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assistant_messages(), st.sampled_from(ROUND_TRIP_DIALECTS))
def test_round_trip_through_the_formatter(message, dialect):
    from kimi_chat.prompt import render

    d = get_dialect(dialect)
    prompt = render([{"role": "user", "content": "hi"}, message], dialect=dialect, add_generation_prompt=False)
    turn = assistant_turn(prompt)
    if d.prefills_think() and turn.startswith(THINK):
        # K2.5: the generation prompt ends with <think>; the model writes what follows it
        turn = turn[len(THINK):]
    msg = parse(turn, dialect=dialect)
    calls = message.get("tool_calls", []) if d.spec.tool_calls else []

    def nonblank(s: Any) -> Any:
        return s if s and not s.isspace() else None

    assert msg.content == nonblank(message["content"])
    # K2-Thinking keeps reasoning only after the last assistant message without tool calls
    want_reasoning = nonblank(message.get("reasoning_content")) if d.reasoning and calls else None
    assert msg.reasoning_content == want_reasoning
    assert len(msg.tool_calls) == len(calls)
    for j, (got, c) in enumerate(zip(msg.tool_calls, calls)):
        fn = c["function"]
        want_id = f"functions.{fn['name']}:{j}" if d.spec.tool_call_ids == "regenerate" else c["id"]
        assert (got.index, got.id, got.name, got.status.value) == (j, want_id, fn["name"], "ok")
        if isinstance(fn["arguments"], str):
            assert got.arguments == fn["arguments"].strip()  # verbatim (unwrapped once for rev2)
        else:
            assert json.loads(got.arguments) == fn["arguments"]
    if calls:
        assert msg.stop_reason.value == "tool_calls"
    check_stream_equals_parse(turn, list(turn), {"dialect": dialect})
