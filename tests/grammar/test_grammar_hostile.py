"""Grammar generation on hostile tool declarations, both families.

* A marker spelling inside a literal the grammar copies from the request (tool name, property name,
  ``enum``/``const`` value) either is refused with a GrammarError naming where, or is escaped: every
  text sampled from the grammar then parses back to a call with exactly the declared value.
* Junk schemas (too deep, cyclic, wrong types, huge counts) give a GrammarError, never a foreign
  exception; hypothesis fuzzes the translator with generated junk.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kimi_chat.dialects import DEFAULT_DIALECT
from kimi_chat.grammar import GrammarError, forbidden_text, json_schema_to_gbnf, tool_call_grammar
from kimi_chat.grammar.json_schema import MAX_REPEAT
from kimi_chat.output import parse

from gbnf_recognizer import accepts, compiled, sample

K2, K3 = DEFAULT_DIALECT, "kimi-k3"
FAMILIES = [K2, K3]
END = "a<|tool_call_end|>b"  # K2's call end spelled inside a value
CLOSE = "a<|close|>b"  # K3's tag close
MARKS = {K2: END, K3: CLOSE}


def tool(params: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": params}}


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def parsed_calls(out: str, tools: list, dialect: str) -> list:
    text = out + ("<|end_of_msg|>" if dialect == K3 else "")
    msg = parse(text, dialect=dialect, tools=tools)
    assert all(c.status.value == "ok" for c in msg.tool_calls), (msg.tool_calls, out)
    return msg.tool_calls


# ------------------------------------------------------------------ 24.2: markers in literals

def _escaped_sites(mark: str) -> list[tuple[str, Any, Any]]:
    """(site, parameters, the arguments every call must have): JSON literals, escaped in both families."""
    return [
        ("nested property name", obj(o=obj(**{mark: {"type": "boolean", "const": True}})), {"o": {mark: True}}),
        ("enum in an object", obj(o=obj(k={"enum": [mark]})), {"o": {"k": mark}}),
        ("const array", obj(a={"const": [mark, 1]}), {"a": [mark, 1]}),
        ("const object", obj(a={"const": {mark: mark}}), {"a": {mark: mark}}),
        ("enum in array items", obj(a={"type": "array", "items": {"enum": [mark]}, "minItems": 1, "maxItems": 1}),
         {"a": [mark]}),
    ]


K2_ONLY_ESCAPED = [  # in K2 the arguments are one JSON object: these are JSON literals too
    ("property name", obj(**{END: {"const": 1}}), {END: 1}),
    ("string enum", obj(a={"enum": [END]}), {"a": END}),
    ("string const", obj(a={"const": END}), {"a": END}),
]


@pytest.mark.parametrize("dialect", FAMILIES)
@pytest.mark.parametrize("mark_of", ["own", "other"])
def test_marker_in_a_json_literal_is_escaped_and_parses_back(dialect, mark_of):
    mark = MARKS[dialect] if mark_of == "own" else MARKS[K3 if dialect == K2 else K2]
    sites = _escaped_sites(mark) + (K2_ONLY_ESCAPED if dialect == K2 and mark_of == "own" else [])
    for site, params, want in sites:
        tools = [tool(params)]
        g = tool_call_grammar(tools, tool_choice="required", parallel_tool_calls=False, dialect=dialect)
        rnd = random.Random(site)
        for _ in range(15):
            out = sample(compiled(g), rnd)
            calls = parsed_calls(out, tools, dialect)
            assert [c.name for c in calls] == ["f"], (site, out)
            assert json.loads(calls[0].arguments) == want, (site, out)


@pytest.mark.parametrize("dialect", FAMILIES)
def test_a_json_literal_with_a_marker_never_spells_it(dialect):
    # the raw spelling is not in the language; the escaped one is (K2: the whole call is JSON text)
    mark = MARKS[dialect]
    params = obj(a={"enum": [mark]}) if dialect == K2 else obj(a={"const": {"k": mark}})
    g = tool_call_grammar([tool(params)], tool_choice="required", dialect=dialect)
    assert mark not in g
    assert "a\\x5Cu003c|" in g  # GBNF for the JSON text a\u003c|... (the backslash written \x5C)


def test_json_schema_to_gbnf_escapes_markers_in_literals():
    g = json_schema_to_gbnf({"type": "object", "properties": {"[EOS]": {"enum": ["<|im_end|>"]}},
                             "required": ["[EOS]"]})
    assert accepts(g, '{"\\u005bEOS]": "\\u003c|im_end|>"}')
    assert not accepts(g, '{"[EOS]": "<|im_end|>"}')
    assert json.loads('{"\\u005bEOS]": "\\u003c|im_end|>"}') == {"[EOS]": "<|im_end|>"}


@pytest.mark.parametrize("dialect, mark", [(d, m) for d in FAMILIES for m in (MARKS[d], "x[EOS]", "<|reserved_token_7|>")])
def test_marker_in_a_tool_name_is_refused(dialect, mark):
    assert any(f in mark for f in forbidden_text(dialect))
    tools = [tool(obj(), name="ok"), tool(obj(), name=mark)]
    with pytest.raises(GrammarError, match=re.escape(f"function name: the value {mark!r} spells the marker")):
        tool_call_grammar(tools, dialect=dialect)
    # a choice naming another tool leaves the hostile name out of the grammar
    g = tool_call_grammar(tools, tool_choice={"type": "function", "function": {"name": "ok"}}, dialect=dialect)
    assert mark not in g


@pytest.mark.parametrize("site, params, where", [
    ("argument name", obj(**{CLOSE: {"type": "string"}}), f"/properties/{CLOSE}: argument name"),
    ("string enum", obj(a={"enum": ["ok", CLOSE]}), "/properties/a"),
    ("string const", obj(a={"type": "string", "const": "x[EOS]"}), "/properties/a"),
    ("string in anyOf", obj(a={"anyOf": [{"const": 1}, {"const": CLOSE}]}), "/properties/a/anyOf/1"),
])
def test_k3_marker_in_an_attribute_or_raw_string_is_refused(site, params, where):
    # K3 writes argument names as attributes and string values raw: no escape exists
    with pytest.raises(GrammarError, match=re.escape(f"tools['f'].parameters{where}")):
        tool_call_grammar([tool(params)], dialect=K3)


# ------------------------------------------------------------------ 24.3: junk schemas

def _deep(n: int) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "string"}
    for _ in range(n):
        s = obj(a=s)
    return s


JUNK = [
    ("200-deep properties", _deep(200), "nested more than"),
    ("allOf of the root", {"allOf": [{"$ref": "#"}]}, r"(nested more than|\$ref chain too deep)"),
    ("$ref cycle in allOf", {"$defs": {"a": {"$ref": "#/$defs/a"}}, "allOf": [{"$ref": "#/$defs/a"}]},
     r"(levels deep|too deep)"),
    ("required 5", {"type": "object", "properties": {"a": {"type": "string"}}, "required": 5},
     "required: expected a list of property names"),
    ("required of non-strings", {"type": "object", "properties": {"a": {}}, "required": [1]},
     "required: expected a list"),
    ("integer property key", {"type": "object", "properties": {1: {"type": "string"}}},
     "property names must be strings"),
    ("minItems inf", obj(a={"type": "array", "minItems": math.inf}), "minItems: expected a non-negative integer"),
    ("maxLength nan", obj(a={"type": "string", "maxLength": math.nan}), "maxLength: expected a non-negative"),
    ("minLength 10**12", obj(a={"type": "string", "minLength": 10**12}), f"limit of {MAX_REPEAT}"),
    ("minItems 1e300", obj(a={"type": "array", "minItems": 1e300}), f"limit of {MAX_REPEAT}"),
    ("unhashable type", obj(a={"type": ["string", {"x": 1}]}), "unknown type"),
    ("non-JSON const", obj(a={"const": {1, 2}}), "cannot be written as JSON"),
]


@pytest.mark.parametrize("dialect", FAMILIES)
@pytest.mark.parametrize("site, params, match", JUNK, ids=[j[0] for j in JUNK])
def test_junk_schema_is_a_grammar_error(dialect, site, params, match):
    with pytest.raises(GrammarError, match=match):
        tool_call_grammar([tool(params)], dialect=dialect)


@pytest.mark.parametrize("site, params, match", JUNK, ids=[j[0] for j in JUNK])
def test_junk_schema_is_a_grammar_error_standalone(site, params, match):
    with pytest.raises(GrammarError, match=match):
        json_schema_to_gbnf(params)


@pytest.mark.parametrize("dialect", FAMILIES)
def test_huge_maximum_counts_are_not_written(dialect):
    # a maximum above MAX_REPEAT is not enforced (documented): no huge count reaches the grammar
    params = obj(s={"type": "string", "minLength": 2, "maxLength": 10**12},
                 a={"type": "array", "items": {"type": "boolean"}, "maxItems": 1e300})
    g = tool_call_grammar([tool(params)], tool_choice="required", parallel_tool_calls=False, dialect=dialect)
    counts = [int(n) for n in re.findall(r"\{(\d+),?(?:\d+)?\}", g)]
    assert counts and max(counts) <= MAX_REPEAT
    assert "{2,}" in g  # the minimum is kept
    rnd = random.Random(0)
    for _ in range(10):
        out = sample(compiled(g), rnd)
        (c,) = parsed_calls(out, [tool(params)], dialect)
        args = json.loads(c.arguments)
        assert len(args["s"]) >= 2 and all(isinstance(x, bool) for x in args["a"])


_KEYS = ["type", "properties", "required", "items", "prefixItems", "enum", "const", "anyOf", "oneOf", "allOf",
         "$ref", "$defs", "minItems", "maxItems", "minLength", "maxLength", "additionalProperties", "nullable",
         "minimum"]
_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**70), st.floats(), st.text(max_size=4),
    st.sampled_from(["string", "object", "array", "integer", "number", "null", "boolean", "#", "#/$defs/a",
                     "#/properties/a", "#/allOf/0", "#x", "http://x", END, CLOSE]),
)
_junk = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.sampled_from(["a", "b", END]), st.integers(0, 2)),
                        kids, max_size=4),
    ),
    max_leaves=25,
)


_junk_props = st.dictionaries(st.one_of(st.sampled_from(["a", "b", END, CLOSE]), st.integers(0, 2)), _junk, max_size=3)
_junk_object = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.one_of(_junk_props, _junk)},
    optional={"required": st.one_of(st.lists(st.sampled_from(["a", "b"])), _junk), "allOf": _junk, "$defs": _junk},
)


@given(params=st.one_of(_junk, _junk_object), dialect=st.sampled_from(FAMILIES))
@example(params=True, dialect="kimi-k3")  # a boolean schema: was a TypeError (found by this fuzz)
def test_fuzz_only_grammar_errors_escape(params, dialect):
    for make in (lambda: tool_call_grammar([tool(params)], dialect=dialect),
                 lambda: json_schema_to_gbnf(params)):
        try:
            g = make()
        except GrammarError:
            continue
        compiled(g)  # what it writes is a well-formed grammar with every rule defined
