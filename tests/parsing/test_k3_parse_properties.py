"""Property tests of the Kimi-K3 output parser.

* chunking invariance: any split (random cuts, one character at a time, cuts inside markers, tag
  names and attribute values) gives merged deltas == ``parse(text)`` and ``StreamParser.message``;
* robustness: on tag soup nothing raises and every input character outside the tags is accounted
  for (content, reasoning, a call's raw text or a warning);
* round trip: an assistant message rendered by ``render_k3`` parses back to its reasoning, content
  and calls (arguments equal as JSON values, key order kept).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from kimi_chat import markers as M
from kimi_chat.families.k3.format import TAGS, machine
from kimi_chat.output import ParsedMessage, parse
from kimi_chat.families.k3.tags import TagLexer
from kimi_chat.families.k3.render import render_k3
from parse_helpers import expected, feed_chunks, merge, split_at, streamed_openai

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OPEN, CLOSE, SEP, EOM = M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text
SPELLINGS = [m.text for m in M.K3_MARKERS]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "properties": {"a": {"type": "string"}, "n": {"type": "number"}}, "required": ["a"]}}}]
CONFIGS: list[dict[str, Any]] = [{}, {"thinking": False}, {"tools": TOOLS}]

names = st.sampled_from(sorted(TAGS.open_classes) + ["bogus", "Think", ""])
attr_values = st.sampled_from(["f", "g", "1", "2", "a", "n", "string", "number", "object", "json",
                               "x&amp;y", "&quot;q&quot;", "", "a b"])
attr_keys = st.sampled_from(["tool", "index", "key", "type", "role", "x"])


@st.composite
def tags(draw: st.DrawFn) -> str:
    name = draw(names)
    if draw(st.booleans()):
        return CLOSE + name + SEP
    attrs = draw(st.lists(st.tuples(attr_keys, attr_values), max_size=3))
    return OPEN + name + "".join(f' {k}="{v}"' for k, v in attrs) + SEP


PARTIALS = sorted({s[:k] for s in SPELLINGS for k in range(1, len(s))})
snippets = st.sampled_from(['{"a": 1}', "3", "true", "[1,", '"', "\\", "<", "|", " ", "\n", "é", "東京",
                            "🌧️", 'tool="f"', "=", "call", "argument"])
soup = st.lists(st.one_of(tags(), st.sampled_from(SPELLINGS), st.sampled_from(PARTIALS), snippets,
                          st.text(max_size=5)), max_size=40).map("".join)


# ------------------------------------------------------------------------------- well-formed turns

plain = st.text(alphabet=st.sampled_from(list('abc xyz\n\t.,{}[]<>|"&\':-_/\\é東🌧\u0301')), max_size=20)
keys = st.text(alphabet=st.sampled_from(list('abk_"&<> é')), min_size=1, max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False) | plain,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain, inner, max_size=3),
    max_leaves=6,
)
tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.:-]{0,10}", fullmatch=True)


def marker_free(s: str) -> bool:
    return not any(m in s for m in SPELLINGS)


@st.composite
def assistant_messages(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": draw(plain)}
    if draw(st.booleans()):
        msg["reasoning_content"] = draw(plain)
    calls = []
    for j in range(draw(st.integers(0, 3))):
        args = draw(st.dictionaries(keys, json_values, max_size=4))
        calls.append({"id": f"call_{j}", "type": "function",
                      "function": {"name": draw(tool_names), "arguments": args}})
    if calls:
        msg["tool_calls"] = calls
    return msg


def output_of(message: dict[str, Any], thinking: bool) -> str:
    """The text the model wrote: the rendered turn after the generation prompt's prefix."""
    user = [{"role": "user", "content": "hi"}]
    prefix = render_k3(user, thinking=thinking)
    full = render_k3(user + [message], add_generation_prompt=False, thinking=thinking)
    assert full.startswith(prefix)
    return full[len(prefix):]


@st.composite
def well_formed(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    thinking = draw(st.booleans())
    message = draw(assistant_messages())
    assume(marker_free(json.dumps(message, ensure_ascii=False)))
    return output_of(message, thinking), {"thinking": thinking}


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    text, kw = draw(well_formed())
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:i] + draw(st.one_of(tags(), st.sampled_from(SPELLINGS + PARTIALS), snippets)) + text[i:]
        else:
            text = text[:i] + text[i + draw(st.integers(1, 30)):]
    return text, kw


inputs = st.one_of(st.tuples(soup, st.sampled_from(CONFIGS)), well_formed(), mutated())


def check_stream_equals_parse(text: str, chunks: list[Any], kw: dict[str, Any]) -> None:
    whole = parse(text, dialect="kimi-k3", **kw)
    deltas, sp = feed_chunks(chunks, dialect="kimi-k3", **kw)
    assert merge(deltas).as_tuple() == expected(whole)
    assert sp.message == whole


# ------------------------------------------------------------------------------- chunking invariance


@SETTINGS
@given(inputs, st.lists(st.integers(0, 600), max_size=12))
def test_any_split_gives_the_same_result(item, cuts):
    text, kw = item
    check_stream_equals_parse(text, split_at(text, cuts), kw)


@SETTINGS
@given(inputs)
# the message closed without its <|sep|>, then text that ends the turn: the tag after it is ignored text,
# never lexed as a (repaired) tag whatever the chunking (the whole text once warned it, a stream did not)
@example(('<|close|>response<|sep|><|close|>message<<|open|>call|sep|>|sep|><|end_of_msg|>', {"thinking": False}))
def test_one_character_at_a_time(item):
    text, kw = item
    check_stream_equals_parse(text, list(text), kw)


@SETTINGS
@given(inputs, st.sampled_from([0, 1, 2]), st.integers(0, 40))
# a tag found in one search ends the turn: the lexer stops there (the text after it, padded, is never lexed
# into a repaired tag, as one character at a time it is not)
@example(('<|close|>response<|sep|><|close|>message<|sep|><|open|>call<|sep|><|open|>responseHello' + "x" * 600,
          {"thinking": False}), 2, 0)
def test_a_long_text_read_whole_as_one_character_at_a_time(item, where, cut):
    """A chunk longer than 256 characters is lexed by the long scan, which finds a complete tag
    (marker, body, ``<|sep|>``) in one search; one character at a time no tag is found so. Both read the
    same (malformed, repeated and cut tags included), with the text padded to the long scan's size before,
    inside or after the turn."""
    text, kw = item
    pad = "words  \n" * 40
    i = min(cut, len(text))
    text = (pad + text, text[:i] + pad + text[i:], text + pad)[where]
    check_stream_equals_parse(text, list(text), kw)


@SETTINGS
@given((st.text(max_size=40) | st.text(min_size=64, max_size=200)).filter(marker_free),
       st.lists(st.integers(0, 300), max_size=6))
def test_a_string_argument_is_the_json_string_json_dumps_writes(value, cuts):
    """Escaping checked before it is done: a ``string`` argument written raw by the renderer
    reads back as the JSON string ``json.dumps`` writes of it (control characters, quotes, backslashes,
    line separators, lone surrogates), whole or in any pieces, short and long (checked otherwise)."""
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": value}}}]}
    text = output_of(message, True)
    want = json.dumps({"a": value}, ensure_ascii=False, separators=(",", ":"))
    assert parse(text, dialect="kimi-k3").tool_calls[0].arguments == want
    _, sp = feed_chunks(split_at(text, cuts), dialect="kimi-k3")
    assert sp.message.tool_calls[0].arguments == want


@SETTINGS
@given(inputs, st.lists(st.integers(0, 600), max_size=12))
def test_the_default_stream_hands_out_what_to_openai_says(item, cuts):
    """K3: by default no call that is not ``ok`` streams as a tool call; the client's
    accumulated message is ``parse(text).to_openai()``, invalid calls reported, for any split."""
    text, kw = item
    whole = parse(text, dialect="kimi-k3", **kw)
    for chunks in (split_at(text, cuts), list(text)):
        got, sp = streamed_openai(chunks, dialect="kimi-k3", **kw)
        assert got == whole.to_openai() and sp.message == whole


_TAG_SPAN = re.compile(re.escape(OPEN) + "|" + re.escape(CLOSE))


@SETTINGS
@given(st.one_of(well_formed(), mutated()), st.data())
def test_cuts_inside_markers_tag_names_and_attribute_values(item, data):
    text, kw = item
    starts = [m.start() for m in _TAG_SPAN.finditer(text)]
    assume(starts)
    cuts = []
    for s in data.draw(st.lists(st.sampled_from(starts), min_size=1, max_size=6)):
        end = text.find(SEP, s)
        end = len(text) if end < 0 else end + len(SEP)
        cuts.append(data.draw(st.integers(s + 1, max(s + 1, end - 1))))
    check_stream_equals_parse(text, split_at(text, cuts), kw)


@SETTINGS
@given(inputs, st.lists(st.integers(0, 600), max_size=8))
def test_byte_chunks_give_the_same_result(item, cuts):
    text, kw = item
    data = text.encode("utf-8")
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = parse(text, dialect="kimi-k3", **kw)
    deltas, sp = feed_chunks(chunks, dialect="kimi-k3", **kw)
    assert merge(deltas).as_tuple() == expected(whole) and sp.message == whole


# ------------------------------------------------------------------------------------- robustness

def _nonspace(s: str) -> Counter[str]:
    """Non-whitespace characters of the text tokens of ``s``, as the tag lexer cuts it."""
    pieces: list[str] = []
    lx = TagLexer(machine().markers, TAGS)
    lx.feed(s, pieces.append, lambda cls, spelling: None)
    lx.flush_into(pieces.append, lambda cls, spelling: None)
    return Counter(ch for ch in "".join(pieces) if not ch.isspace())


def _chars(s: str) -> Counter[str]:
    return Counter(ch for ch in s if not ch.isspace())


def accounted(text: str, msg: ParsedMessage) -> None:
    """Every non-whitespace input character that the tag lexer makes text is in the content, the
    reasoning, a call's raw text or a warning's text (stray tags and markers are warnings)."""
    # content and reasoning as they are (a dropped stray can glue two pieces into a marker spelling)
    got = _chars(msg.content or "") + _chars(msg.reasoning_content or "")
    for c in msg.tool_calls:
        assert c.raw in text  # an exact substring of the input
        # lexed as a piece of the input, not its end (a tag head at the raw's end is not a tag cut short)
        got += _nonspace(c.raw + "<|end_of_msg|>")
    for w in msg.warnings:
        assert 0 <= w.offset <= len(text)
        if w.kind == "stray_marker":
            assert text.startswith(w.text, w.offset)
        if w.kind == "text_after_end":
            assert text.endswith(w.text)
        if w.kind == "text_after_end":
            got += _nonspace(w.text)
        elif w.kind in ("text_in_section", "text_in_call"):
            got += _chars(w.text)
    assert not (_nonspace(text) - got)


@SETTINGS
@given(inputs, st.lists(st.integers(0, 600), max_size=8))
@example(('<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="A" index="1"<|sep|><|open|>argument k'
          '<|open|>call<|sep|>ey="<" type="null"<|sep|>null<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools'
          '<|sep|><|close|>message<|sep|><|end_of_msg|>', {"thinking": False}), [])  # a tag head ending a call's raw
def test_never_raises_and_accounts_for_every_character(item, cuts):
    text, kw = item
    msg = parse(text, dialect="kimi-k3", **kw)
    accounted(text, msg)
    assert msg.stop_reason is not None
    for c in msg.tool_calls:
        assert c.id.startswith("functions.") and c.id.endswith(f":{c.index}")
    _, sp = feed_chunks(split_at(text, cuts), dialect="kimi-k3", **kw)
    assert sp.message == msg


# ------------------------------------------------------------------------------------- round trip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assistant_messages(), st.booleans())
def test_round_trip_through_the_k3_renderer(message, thinking):
    assume(marker_free(json.dumps(message, ensure_ascii=False)))
    turn = output_of(message, thinking)
    msg = parse(turn, dialect="kimi-k3", thinking=thinking)

    def nonblank(s: Any) -> Any:
        return s if s and not s.isspace() else None

    assert msg.content == nonblank(message["content"])
    assert msg.reasoning_content == (nonblank(message.get("reasoning_content")) if thinking else None)
    calls = message.get("tool_calls", [])
    assert len(msg.tool_calls) == len(calls)
    for j, (got, c) in enumerate(zip(msg.tool_calls, calls)):
        fn = c["function"]
        assert (got.index, got.id, got.name, got.status.value) == (j, f"functions.{fn['name']}:{j}", fn["name"], "ok")
        value = json.loads(got.arguments)
        assert value == fn["arguments"] and list(value) == list(fn["arguments"])
    assert msg.stop_reason.value == ("tool_calls" if calls else "end_turn")
    assert msg.warnings == []
    check_stream_equals_parse(turn, list(turn), {"thinking": thinking})


# ------------------------------------------------------------ cut and malformed tags

letterless = st.text(alphabet=st.sampled_from(list("0123456789 .,!?é東🌧\n")), max_size=12)
_LETTER = re.compile("[A-Za-z]")
_MARKER = re.compile("|".join(re.escape(s) for s in SPELLINGS))


@st.composite
def letterless_turns(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A well-formed turn whose reasoning, content and string values hold no ASCII letter: a letter in
    the parsed reasoning or content can only be a tag's name or attributes."""
    thinking = draw(st.booleans())
    message: dict[str, Any] = {"role": "assistant", "content": draw(letterless)}
    if draw(st.booleans()):
        message["reasoning_content"] = draw(letterless)
    calls = [{"id": f"c{j}", "type": "function", "function": {"name": "f", "arguments": draw(
        st.dictionaries(st.sampled_from(["a", "n"]), letterless | st.integers(0, 9), max_size=2))}}
        for j in range(draw(st.integers(0, 2)))]
    if calls:
        message["tool_calls"] = calls
    return output_of(message, thinking), {"thinking": thinking}


@st.composite
def broken_turns(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    """A letterless turn with some tag's ``<|sep|>`` dropped and/or cut at a token boundary (never
    inside a marker spelling); ``True`` if the cut falls inside a tag (after its opening marker,
    before the end of its ``<|sep|>``)."""
    text, kw = draw(letterless_turns())
    seps = [m.start() for m in re.finditer(re.escape(SEP), text)]
    if seps and draw(st.booleans()):
        i = draw(st.sampled_from(seps))
        text = text[:i] + text[i + len(SEP):]
    inside = False
    if draw(st.booleans()):
        spans = [m.span() for m in _MARKER.finditer(text)]
        points = [p for p in range(len(text) + 1) if not any(a < p < b for a, b in spans)]
        cut = draw(st.sampled_from(points))
        before = [(a, b) for a, b in spans if b <= cut]
        after = [(a, b) for a, b in spans if b > cut]
        # the last marker before the cut opens a tag whose next marker is its <|sep|>
        inside = bool(before) and text[slice(*before[-1])] in (OPEN, CLOSE) \
            and bool(after) and text[slice(*after[0])] == SEP
        text = text[:cut]
    return text, kw, inside


@SETTINGS
@given(broken_turns(), st.lists(st.integers(0, 600), max_size=8))
def test_cut_and_malformed_tags_never_leak_their_names(item, cuts):
    text, kw, inside = item
    msg = parse(text, dialect="kimi-k3", tools=TOOLS, **kw)
    assert not _LETTER.search((msg.reasoning_content or "") + (msg.content or ""))
    if inside:
        assert msg.stop_reason.value == "truncated"
        assert "truncated_tag" in [w.kind for w in msg.warnings]
    check_stream_equals_parse(text, list(text), {"tools": TOOLS, **kw})
    check_stream_equals_parse(text, split_at(text, cuts), {"tools": TOOLS, **kw})
