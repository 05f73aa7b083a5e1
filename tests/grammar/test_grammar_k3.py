"""kimi_chat.grammar for Kimi-K3 without an engine: the GBNF ``tool_call_grammar(dialect="kimi-k3")`` writes is
checked with the small GBNF recognizer (tests/gbnf_recognizer.py) against completions the K3 renderer writes (an
assistant turn rendered by ``kimi-k3``, minus the prompt) and against texts a model must not write; texts sampled
from the grammar itself parse with the K3 parser into ok calls whose arguments follow the schema. The same grammar
runs in llama.cpp in test_native_k3.py."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kimi_chat import markers as M
from kimi_chat.grammar import GrammarError, constraint, default_token_markers, forbidden_text, tool_call_grammar
from kimi_chat.output import parse
from kimi_chat.prompt import render

from engine_support import valid
from gbnf_recognizer import SAMPLE_CHARS as _CHARS, Gbnf, accepts, compiled, sample as _sample

K3 = "kimi-k3"
OPEN, CLOSE, SEP, EOM = M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 0},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
                "exact": {"type": "boolean"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "filters": {"type": "object", "properties": {"lang": {"type": "string"}, "score": {"type": "number"}},
                            "required": ["lang"]},
            },
            "required": ["query", "exact"],
        },
    },
}
NOTE = {"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}  # free-form
PING = {"type": "function", "function": {"name": "ping"}}  # no parameters
TOOLS = [WEATHER, SEARCH, NOTE, PING]
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {"type": "object", "properties": {}})
           for t in TOOLS}
USER = [{"role": "user", "content": "Weather in Paris, and search kimi."}]


def completion(message: dict[str, Any], tools: list | None = TOOLS, **options: Any) -> str:
    """What the K3 renderer writes for ``message`` after the generation prompt (the model's part), without the
    final ``<|end_of_msg|>`` (the engine's end-of-generation token, not part of the grammar)."""
    prompt = render(USER, dialect=K3, tools=tools, **options)
    full = render(USER + [message], dialect=K3, tools=tools, add_generation_prompt=False, **options)
    assert full.startswith(prompt)
    out = full[len(prompt):]
    assert out.endswith(EOM)
    return out[: -len(EOM)]


def assistant(content: str | None = None, reasoning: str | None = None, *calls: tuple[str, Any]) -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = [
            {"id": f"functions.{n}:{i}", "type": "function",
             "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a, ensure_ascii=False)}}
            for i, (n, a) in enumerate(calls)
        ]
    return m


def tag(name: str, **attrs: Any) -> str:
    return OPEN + name + "".join(f' {k}="{v}"' for k, v in attrs.items()) + SEP


def end(name: str) -> str:
    return CLOSE + name + SEP


def arg(key: str, kind: str, value: str) -> str:
    return tag("argument", key=key, type=kind) + value + end("argument")


def call(name: str, index: int, *args: str) -> str:
    return tag("call", tool=name, index=index) + "".join(args) + end("call")


def turn(*calls: str, reasoning: str = "", content: str = "", think: bool = True) -> str:
    """A completion written by hand (thinking on: it starts inside the think channel)."""
    head = (reasoning + end("think") + tag("response")) if think else ""
    out = head + content + end("response")
    if calls:
        out += tag("tools") + "".join(calls) + end("tools")
    return out + end("message")


def parsed_ok(text: str, tools: list = TOOLS, repeats: bool = False, **options: Any):
    """``text`` parsed without warnings into ok calls; ``repeats``: a ``duplicate_argument`` warning allowed
    (an undeclared key written twice, which no grammar can refuse: the constraint's note says so)."""
    msg = parse(text + EOM, dialect=K3, tools=tools, **options)
    warnings = [w for w in msg.warnings if not (repeats and w.kind == "duplicate_argument")]
    assert warnings == [], (msg.warnings, text)
    assert all(c.status.value == "ok" for c in msg.tool_calls), (msg.tool_calls, text)
    return msg


# ------------------------------------------------------------------------------------------- accepted


RENDERED = [
    ("required", {}, assistant(None, "Let me look.", ("get_weather", {"city": "Paris"}))),
    ("required", {}, assistant(None, "", ("get_weather", {"city": "Paris", "unit": "c", "days": 3}))),
    ("required", {}, assistant(None, "x < y [z]", ("search", {"query": "kimi <b> [1] |x|", "exact": False,
                                                              "limit": None}))),
    ("required", {}, assistant(None, "two calls",
                               ("search", {"query": "", "tags": ["a", "bb"], "exact": True, "limit": 7,
                                           "filters": {"lang": "fr", "score": 0.5}}),
                               ("get_weather", {"city": "Zürich", "days": 10}))),
    ("required", {}, assistant(None, "free", ("note", {"text": "hi", "n": [1, {"a": None}]}))),
    ("required", {}, assistant(None, "free, empty", ("note", {}))),
    ("required", {}, assistant(None, "no params", ("ping", {}))),
    ("required", {"thinking": False}, assistant(None, None, ("get_weather", {"city": "Oslo"}))),
    ("auto", {}, assistant("Sure, here.", "plan", ("get_weather", {"city": "Rome"}))),
    ("auto", {}, assistant("Just an answer: 2 < 3.", "thinking it over")),
    ("auto", {"thinking": False}, assistant("No thinking, no call.")),
    ("none", {}, assistant("Plain answer.", "hm")),
    ({"type": "function", "function": {"name": "search"}}, {}, assistant(None, "s", ("search", {"query": "q",
                                                                                               "exact": True}))),
]


@pytest.mark.parametrize("choice, options, message", RENDERED)
def test_accepts_what_the_renderer_writes_and_the_parser_agrees(choice, options, message):
    g = tool_call_grammar(TOOLS, tool_choice=choice, dialect=K3, **options)
    out = completion(message, **options)
    assert accepts(g, out), out
    msg = parsed_ok(out, **options)
    calls = message.get("tool_calls") or []
    assert [c.name for c in msg.tool_calls] == [c["function"]["name"] for c in calls]
    for got, want in zip(msg.tool_calls, calls):
        assert json.loads(got.arguments) == json.loads(want["function"]["arguments"])


def test_the_grammar_ends_at_the_message_close():
    """``<|end_of_msg|>`` is the end-of-generation token: llama.cpp allows it once the grammar is complete and
    cannot match it inside one, so it is not in the grammar (the renderer's completion ends with it)."""
    g = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3)
    out = completion(assistant(None, "r", ("ping", {})))
    assert accepts(g, out) and not accepts(g, out + EOM)
    assert EOM not in g and end("message").replace(CLOSE, "").replace(SEP, "") in g.replace('"', "")


# ------------------------------------------------------------------------------------------- rejected

W1 = arg("city", "string", "Paris")


@pytest.mark.parametrize(
    "out, why",
    [
        (turn(reasoning="r"), "no call under required"),
        ("", "nothing"),
        (turn(call("get_weather", 1), reasoning="r"), "missing required argument"),
        (turn(call("get_weather", 1, arg("days", "number", "3")), reasoning="r"), "missing required argument"),
        (turn(call("get_weather", 1, W1, arg("days", "string", "3")), reasoning="r"), "wrong type attribute"),
        (turn(call("get_weather", 1, W1, arg("days", "integer", "3")), reasoning="r"),
         "type attribute is the encoder's (number), not the schema's"),
        (turn(call("get_weather", 1, W1, arg("days", "number", "three")), reasoning="r"), "not a number"),
        (turn(call("get_weather", 1, W1, arg("days", "number", "1.5")), reasoning="r"), "not an integer"),
        (turn(call("get_weather", 1, W1, arg("unit", "string", "k")), reasoning="r"), "not in the enum"),
        (turn(call("get_weather", 1, arg("city", "string", "a much too long city")), reasoning="r"), "maxLength"),
        (turn(call("get_weather", 1, W1, arg("extra", "number", "1")), reasoning="r"), "undeclared argument"),
        (turn(call("get_weather", 1, arg("unit", "string", "c"), W1), reasoning="r"), "declaration order"),
        (turn(call("get_weather", 1, W1, W1), reasoning="r"), "repeated argument"),
        (turn(call("nope", 1), reasoning="r"), "unknown tool"),
        (turn(call("get_weather", 2, W1), reasoning="r"), "first index is 1"),
        (turn(call("get_weather", 1, W1), call("get_weather", 1, W1), reasoning="r"), "indices count up"),
        (turn(call("search", 1, arg("query", "string", "x" + CLOSE + "argument" + SEP + "y"),
                   arg("exact", "boolean", "true")), reasoning="r"), "closer inside a string value"),
        (turn(call("search", 1, arg("query", "string", "x" + EOM), arg("exact", "boolean", "true")),
              reasoning="r"), "<|end_of_msg|> inside a string value"),
        (turn(call("search", 1, arg("query", "string", "x[EOS]"), arg("exact", "boolean", "true")),
              reasoning="r"), "[EOS] inside a string value"),
        (turn(call("get_weather", 1, arg("city", "string", "a<b")), reasoning="r"), "< in a bounded string"),
        (turn(call("search", 1, arg("query", "string", "q"), arg("exact", "boolean", "true"),
                   arg("filters", "object", '{"lang": "a<|open|>"}')), reasoning="r"), "marker in a JSON string"),
        (turn(call("search", 1, arg("query", "string", "q"), arg("exact", "boolean", "true"),
                   arg("filters", "object", '{"score": 1}')), reasoning="r"), "nested required key"),
        (turn(call("search", 1, arg("query", "string", "q"), arg("exact", "string", "true")), reasoning="r"),
         "boolean written as a string"),
        (turn(call("get_weather", 1, W1), reasoning="r", content="I will call it."), "content under required"),
        (turn(call("get_weather", 1, W1), reasoning="a" + OPEN + "think" + SEP), "marker inside the reasoning"),
        (turn(call("get_weather", 1, W1), reasoning="r") + EOM, "end of message (the engine adds it)"),
        (turn(call("get_weather", 1, W1), reasoning="r") + "more", "text after the message"),
        ("r" + end("think") + tag("tools") + call("get_weather", 1, W1) + end("tools") + end("message"),
         "no response channel"),
        (turn(call("note", 1, tag("json", type="object") + "[1]" + end("json")), reasoning="r"),
         "a json element holds an object"),
    ],
)
def test_required_rejects(out, why):
    g = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3)
    assert not accepts(g, out), why


def test_none_auto_named_and_parallel():
    one = call("get_weather", 1, W1)
    none = tool_call_grammar(TOOLS, tool_choice="none", dialect=K3)
    assert accepts(none, turn(reasoning="r", content="Text with <b> and [x]."))
    assert not accepts(none, turn(one, reasoning="r"))
    assert tool_call_grammar(TOOLS, tool_choice="none", dialect=K3) == tool_call_grammar(None, dialect=K3)
    auto = tool_call_grammar(TOOLS, dialect=K3)  # auto is the default with tools
    assert accepts(auto, turn(reasoning="r", content="x")) and accepts(auto, turn(one, content="calling"))
    for bad in (EOM, OPEN, "a" + CLOSE + "response" + SEP, "[BOS]", "<|reserved_token_163700|>"):
        assert not accepts(auto, turn(reasoning="r", content="text " + bad)), bad
    named = tool_call_grammar(TOOLS, tool_choice={"type": "function", "function": {"name": "ping"}}, dialect=K3)
    assert accepts(named, turn(call("ping", 1))) and not accepts(named, turn(one))
    single = tool_call_grammar(TOOLS, tool_choice="required", parallel_tool_calls=False, dialect=K3)
    assert accepts(single, turn(one)) and not accepts(single, turn(one, call("ping", 2)))
    capped = tool_call_grammar(TOOLS, tool_choice="required", max_calls=2, dialect=K3)
    pings = [call("ping", i) for i in (1, 2, 3)]
    assert accepts(capped, turn(*pings[:2])) and not accepts(capped, turn(*pings))
    shifted = tool_call_grammar(TOOLS, tool_choice="required", first_index=4, dialect=K3)
    assert accepts(shifted, turn(call("ping", 5), call("ping", 6)))
    content = tool_call_grammar(TOOLS, tool_choice="required", content=True, dialect=K3)
    assert accepts(content, turn(one, content="I will call it."))


def test_start_rules_follow_the_prompt():
    one = call("get_weather", 1, W1)
    off = tool_call_grammar(TOOLS, tool_choice="auto", dialect=K3, thinking=False)
    assert accepts(off, turn(one, content="calling", think=False))
    assert not accepts(off, turn(one, reasoning="r"))  # no think channel with thinking off
    on = tool_call_grammar(TOOLS, tool_choice="auto", dialect=K3)
    assert not accepts(on, turn(one, think=False))
    closed = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3, reasoning=False)
    assert accepts(closed, turn(one)) and not accepts(closed, turn(one, reasoning="r"))


def test_free_form_and_top_level_any_of_are_argument_elements():
    """encoding_k3 writes a dict's items as argument elements, whatever the schema; a json element only
    for arguments that are not a JSON object (never a valid instance): not generated."""
    g = tool_call_grammar([NOTE], tool_choice="required", dialect=K3)
    body = tag("json", type="object") + '{"a": [1, "x"], "b": null}' + end("json")
    assert not accepts(g, turn(call("note", 1, body), reasoning="r"))
    free = arg("a", "array", '[1, "x"]') + arg("b", "null", "null")
    for out in (turn(call("note", 1, free), reasoning="r"), turn(call("note", 1), reasoning="r")):
        assert accepts(g, out)
        assert parsed_ok(out, tools=[NOTE]).tool_calls[0].name == "note"
    # a top-level anyOf: the elements of one branch, as the encoder writes the object
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"anyOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}]}}}]
    g = tool_call_grammar(tools, tool_choice="required", dialect=K3)
    assert accepts(g, turn(call("f", 1, arg("b", "string", "x"))))
    assert accepts(g, turn(call("f", 1, arg("a", "number", "3"))))
    assert not accepts(g, turn(call("f", 1, tag("json", type="object") + '{"b": "x"}' + end("json"))))
    assert not accepts(g, turn(call("f", 1)))
    # $ref / allOf at the top are resolved into argument elements
    tools = [{"type": "function", "function": {"name": "r", "parameters": {
        "$ref": "#/$defs/p", "$defs": {"p": {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                                       {"properties": {"b": {"type": ["string", "null"]}}}]}}}}}]
    g = tool_call_grammar(tools, tool_choice="required", dialect=K3)
    for b in ("", arg("b", "string", "x"), arg("b", "null", "null")):
        out = turn(call("r", 1, arg("a", "number", "-2"), b))
        assert accepts(g, out), b
        assert parsed_ok(out, tools=tools).tool_calls[0].status.value == "ok"
    assert not accepts(g, turn(call("r", 1, arg("a", "number", "1"), arg("b", "number", "1"))))


def test_any_value_property_allows_every_type():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"v": {}}, "required": ["v"]}}}]
    g = tool_call_grammar(tools, tool_choice="required", dialect=K3)
    for kind, value in (("string", "raw text"), ("number", "1.5e3"), ("boolean", "false"), ("null", "null"),
                        ("object", '{"k": [1]}'), ("array", "[]")):
        out = turn(call("f", 1, arg("v", kind, value)))
        assert accepts(g, out), kind
        parsed_ok(out, tools=tools)
    assert not accepts(g, turn(call("f", 1, arg("v", "integer", "1"))))


def test_markers_and_forbidden_text_come_from_the_k3_format():
    assert default_token_markers(K3) == {OPEN, CLOSE, SEP, EOM}
    assert set(forbidden_text(K3)) >= {OPEN, CLOSE, SEP, EOM, M.EOS.text, "<|reserved_token_"}
    assert M.IM_END.text not in forbidden_text(K3)  # not a K3 marker
    g = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3)
    assert f"{OPEN} " in g and f'"{OPEN}' not in g  # token references
    literal = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3, token_markers=())
    assert f'"{OPEN}"' in literal and f"{OPEN} " not in literal  # literal text
    out = completion(assistant(None, "r", ("get_weather", {"city": "Paris"})))
    assert accepts(literal, out)
    # tool names and keys are attribute values, escaped as the encoder escapes them
    odd = [{"type": "function", "function": {"name": 'a"b&c', "parameters": {
        "type": "object", "properties": {'k"&': {"type": "boolean"}}, "required": ['k"&']}}}]
    g = tool_call_grammar(odd, tool_choice="required", dialect=K3)
    out = completion(assistant(None, "r", ('a"b&c', {'k"&': True})), tools=odd)
    assert 'tool="a&quot;b&amp;c"' in out and accepts(g, out)
    assert json.loads(parsed_ok(out, tools=odd).tool_calls[0].arguments) == {'k"&': True}


def test_errors_name_the_field():
    with pytest.raises(GrammarError, match="not a declared function tool"):
        tool_call_grammar(TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}, dialect=K3)
    with pytest.raises(GrammarError, match="needs at least one"):
        tool_call_grammar([], tool_choice="required", dialect=K3)
    with pytest.raises(GrammarError, match="tool_choice"):
        tool_call_grammar(TOOLS, tool_choice="sometimes", dialect=K3)
    with pytest.raises(GrammarError, match="max_calls"):
        tool_call_grammar(TOOLS, max_calls=0, dialect=K3)

    def fn(props: dict) -> list:
        return [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": props, "required": list(props)}}}]

    for props, match in (
        ({"a": False}, r"tools\['f'\].parameters/properties/a: a false schema"),
        ({"a": {"type": "date"}}, r"tools\['f'\].parameters/properties/a/type: unknown type 'date'"),
        ({"a": {"type": "string", "maxLength": 1, "minLength": 2}}, r"properties/a: minLength 2 is above"),
        ({"a": {"enum": []}}, r"properties/a/enum: expected a non-empty list"),
        ({"a": {"enum": ["ok", "x<|close|>y"]}}, r"properties/a: the value 'x<\|close\|>y' spells the marker"),
        ({"a": {"$ref": "#/nowhere"}}, r"properties/a/\$ref: cannot resolve"),
    ):
        with pytest.raises(GrammarError, match=match):
            tool_call_grammar(fn(props), tool_choice="required", dialect=K3)


def test_every_rule_is_defined_and_reachable():
    for kwargs in ({}, {"tool_choice": "required"}, {"thinking": False}, {"tool_choice": "none"},
                   {"tool_choice": "required", "parallel_tool_calls": False}):
        g = tool_call_grammar(TOOLS, dialect=K3, **kwargs)
        names = [line.split(" ::= ")[0] for line in g.splitlines()]
        assert names[0] == "root" and len(names) == len(set(names))
        Gbnf(g)  # raises on an undefined rule


# ------------------------------------------------------------------------------------------- properties


CHOICES = ["required", "auto", "none", {"type": "function", "function": {"name": "search"}}]


@given(seed=st.integers(0, 2**32 - 1), choice=st.sampled_from(CHOICES), thinking=st.booleans(),
       parallel=st.booleans())
@example(seed=396, choice="required", thinking=True, parallel=False)  # note's undeclared key "!" written twice
def test_every_text_sampled_from_the_grammar_parses_into_ok_calls(seed, choice, thinking, parallel):
    g = tool_call_grammar(TOOLS, tool_choice=choice, parallel_tool_calls=parallel, dialect=K3, thinking=thinking,
                          max_calls=3)
    out = _sample(compiled(g), random.Random(seed))
    assert accepts(g, out)
    # the free-form tool's undeclared keys may repeat (no grammar keeps them distinct: the test below); the
    # parser's duplicate_argument warning is the only one allowed, and only in that tool's calls
    msg = parsed_ok(out, thinking=thinking, repeats=True)
    dup = {w.message.split(":")[0] for w in msg.warnings if w.kind == "duplicate_argument"}
    assert dup <= {f"tool call {c.index}" for c in msg.tool_calls if c.name == "note"}, (msg.warnings, out)
    if choice == "none":
        assert msg.tool_calls == []
    elif choice != "auto":
        assert 1 <= len(msg.tool_calls) <= (3 if parallel else 1)
    for c in msg.tool_calls:
        assert c.name in (SCHEMAS if not isinstance(choice, dict) else {"search"})
        assert valid(json.loads(c.arguments), SCHEMAS[c.name]), c.arguments
    assert [c.id for c in msg.tool_calls] == [f"functions.{c.name}:{i}" for i, c in enumerate(msg.tool_calls)]


_text = st.lists(st.sampled_from(_CHARS), max_size=10).map("".join).filter(
    lambda s: not any(f in s for f in forbidden_text(K3)))
_weather = st.fixed_dictionaries(
    {"city": st.text(st.sampled_from(list("abcé中 -.,")), max_size=12)},
    optional={"unit": st.sampled_from(["c", "f"]), "days": st.integers(0, 10**6)})
_search = st.fixed_dictionaries(
    {"query": _text, "exact": st.booleans()},
    # bounded JSON strings never hold a raw < or [ (the grammar writes them \u003c / \u005b: json_schema.py)
    optional={"tags": st.lists(st.text(st.sampled_from(list('ab"é\\')), max_size=5), max_size=3),
              "limit": st.one_of(st.none(), st.integers(-50, 50)),
              "filters": st.fixed_dictionaries({"lang": _text}, optional={"score": st.floats(-1e6, 1e6)}).map(
                  lambda f: {k: f[k] for k in ("lang", "score") if k in f})})  # properties in declaration order


def _ordered(args: dict[str, Any], name: str) -> dict[str, Any]:
    props = SCHEMAS[name]["properties"]
    return {k: args[k] for k in props if k in args}


@given(calls=st.lists(st.one_of(_weather.map(lambda a: ("get_weather", _ordered(a, "get_weather"))),
                                _search.map(lambda a: ("search", _ordered(a, "search")))), min_size=1, max_size=3),
       reasoning=_text, thinking=st.booleans())
def test_the_grammar_accepts_every_call_the_renderer_writes(calls, reasoning, thinking):
    g = tool_call_grammar(TOOLS, tool_choice="required", dialect=K3, thinking=thinking, max_calls=3)
    out = completion(assistant(None, reasoning, *calls), thinking=thinking)
    assert accepts(g, out), out
    msg = parsed_ok(out, thinking=thinking)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == calls


def test_undeclared_keys_may_repeat_and_only_a_property_count_is_noted():
    """``encoding_k3`` writes each key of the arguments dict once, but no grammar keeps an unbounded set of
    undeclared keys distinct (docs/constraints.md): a key written twice is accepted, and the parser warns
    ``duplicate_argument``. The arguments still satisfy the schema (the last value is read), so it is not an
    inexactness, except a ``minProperties`` of 2 or more, which counts elements: that one is noted. Declared
    keys cannot repeat (one element each; an undeclared key spells none of them)."""
    twice = turn(call("note", 1, arg("k", "number", "1"), arg("k", "number", "2")), reasoning="r")
    msg = parse(twice + EOM, dialect=K3, tools=TOOLS)
    assert [w.kind for w in msg.warnings] == ["duplicate_argument"]
    assert json.loads(msg.tool_calls[0].arguments) == {"k": 2}
    assert accepts(tool_call_grammar(TOOLS, tool_choice="required", dialect=K3), twice)
    c = constraint(TOOLS, tool_choice="required", dialect=K3)
    assert c.accepts(twice) and c.exact, c.notes
    city = turn(call("get_weather", 1, arg("city", "string", "a"), arg("city", "string", "b")), reasoning="r")
    assert not c.accepts(city)

    def counted(**keywords: Any) -> list:
        return [{"type": "function", "function": {"name": "note", "parameters": {"type": "object", **keywords}}}]

    c = constraint(counted(minProperties=2), tool_choice="required", dialect=K3)
    assert c.accepts(twice)  # two elements, one property: {"k": 2} has fewer than minProperties
    assert not c.exact
    assert [n.path for n in c.notes] == ["tools[0].function.parameters.minProperties"]
    c = constraint([{"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}}, "minProperties": 3}}}], tool_choice="required",
        dialect=K3)
    assert [n.path for n in c.notes] == ["tools[0].function.parameters.minProperties"]
    for keywords in ({"minProperties": 1}, {"minProperties": 2, "properties": {"a": {"type": "number"}},
                                            "required": ["a"]}, {"minProperties": 2, "additionalProperties": False,
                      "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}):
        c = constraint(counted(**keywords), tool_choice="required", dialect=K3)
        assert not [n for n in c.notes if n.path.endswith("minProperties")], (keywords, c.notes)
