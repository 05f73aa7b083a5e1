"""kimi_chat.grammar.constraint for Kimi-K3: the completions the K3 renderer writes (the cases
of tests/grammar/test_grammar_k3.py, which checks the GBNF export on the same texts) are accepted, with or without
``<|end_of_msg|>``, and what a model must not write is rejected; typed arguments are checked on the schema
corpus (tests/data/constraint_schemas.json): under ``exact`` no invalid instance is accepted and every
valid one is, otherwise the notes name the path and ``validate`` flags the violating call; texts sampled
from a constraint parse into ok calls that satisfy the schema."""

from __future__ import annotations

import json
import random

import importlib.util

import pytest

from conftest import REFERENCE_MISSING, require_in_ci

_HAVE = all(importlib.util.find_spec(m) is not None for m in ("llguidance", "jsonschema"))
require_in_ci(_HAVE, "the constraints extra (pip install -e '.[test]': llguidance, jsonschema)")
if not _HAVE:
    pytest.skip("llguidance and jsonschema are not installed (pip install -e '.[constraints]')",
                allow_module_level=True)

import jsonschema  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st

from kimi_chat.grammar.request import constraint
from kimi_chat.output import ToolCallStatus, parse

import test_grammar_k3 as G
from gbnf_recognizer import accepts
from constraint_support import CORPUS, assistant, completion, sample, tool

K3 = G.K3
EOM = G.EOM


@pytest.mark.parametrize("choice, options, message", G.RENDERED)
def test_accepts_what_the_renderer_writes(choice, options, message):
    c = constraint(G.TOOLS, dialect=K3, tool_choice=choice, **options)
    out = G.completion(message, **options)
    assert c.accepts(out) and c.accepts(out + EOM), out
    msg = c.validate(parse(out + EOM, dialect=K3, tools=G.TOOLS, **options))
    assert [x.status for x in msg.tool_calls] == [ToolCallStatus.OK] * len(message.get("tool_calls") or [])


_REJECTED = [(out, why) for out, why in G.test_required_rejects.pytestmark[0].args[1]
             if why != "end of message (the engine adds it)"]  # accepts(): the end of turn is optional


@pytest.mark.parametrize("out, why", _REJECTED)
def test_required_rejects(out, why):
    if why == "< in a bounded string":  # the GBNF export's restriction: the raw string terminal is exact
        assert constraint(G.TOOLS, dialect=K3, tool_choice="required").accepts(out), why
        return
    if why == "undeclared argument":  # get_weather leaves additionalProperties unsaid: a reading
        assert constraint(G.TOOLS, dialect=K3, tool_choice="required").accepts(out), why
        assert not constraint(G.TOOLS, dialect=K3, tool_choice="required",
                              additional_properties="declared").accepts(out), why
        return
    assert not constraint(G.TOOLS, dialect=K3, tool_choice="required").accepts(out), why


def test_choices_markers_and_indices():
    one = G.call("get_weather", 1, G.W1)
    none = constraint(G.TOOLS, dialect=K3, tool_choice="none")
    assert none.accepts(G.turn(reasoning="r", content="Text with <b> and [x].")) and not none.accepts(G.turn(one))
    auto = constraint(G.TOOLS, dialect=K3)
    assert auto.accepts(G.turn(reasoning="r", content="x")) and auto.accepts(G.turn(one, content="calling"))
    for bad in (EOM, G.OPEN, "a" + G.CLOSE + "response" + G.SEP, "[BOS]", "<|reserved_token_163700|>"):
        assert not auto.accepts(G.turn(reasoning="r", content="text " + bad)), bad
    single = constraint(G.TOOLS, dialect=K3, tool_choice="required", parallel_tool_calls=False)
    assert single.accepts(G.turn(one)) and not single.accepts(G.turn(one, G.call("ping", 2)))
    shifted = constraint(G.TOOLS, dialect=K3, tool_choice="required", first_index=4)
    assert shifted.accepts(G.turn(G.call("ping", 5))) and not shifted.accepts(G.turn(G.call("ping", 1)))
    off = constraint(G.TOOLS, dialect=K3, tool_choice="required", thinking=False)
    assert off.accepts(G.turn(one, think=False)) and not off.accepts(G.turn(one))


def test_after_reasoning_starts_right_after_the_think_channel():
    # a server applying the grammar from where its reasoning parser says reasoning ended (the think
    # channel's close tag) gets the rest of the turn: the response channel, then the calls
    one = G.call("ping", 1)
    full = G.turn(one, reasoning="r")
    close = G.end("think")
    body = full[full.index(close) + len(close):]
    c = constraint(G.TOOLS, dialect=K3, tool_choice="required", after_reasoning=True)
    assert c.accepts(body) and c.accepts(body + EOM)
    assert not c.accepts(full) and not c.accepts(close + body)  # the think channel is behind it
    assert not c.accepts(G.tag("response") + "text" + body[len(G.tag("response")):])  # content before a forced call
    assert accepts(c.gbnf, body) and not accepts(c.gbnf, full)  # the GBNF export starts there too
    auto = constraint(G.TOOLS, dialect=K3, after_reasoning=True)
    assert auto.accepts(G.tag("response") + "Hi." + G.end("response") + G.end("message"))


def test_response_format_constrains_the_response_channel():
    rf = {"type": "json_schema", "json_schema": {"name": "a", "schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}}}
    c = constraint(None, dialect=K3, response_format=rf)
    assert c.accepts(G.turn(reasoning="r", content='{"ok": true}'))
    assert not c.accepts(G.turn(reasoning="r", content='{"ok": 1}'))
    assert not c.accepts(G.turn(reasoning="r", content="sure"))
    # the GBNF export (llama-server --grammar) constrains the response channel too, exactly here
    assert c.gbnf_exact and c.gbnf_notes == ()
    assert accepts(c.gbnf, G.turn(reasoning="r", content='{"ok": true}'))
    assert accepts(c.gbnf, G.turn(reasoning="r", content='{"ok":false}'))
    for bad in ('{"ok": 1}', "sure", '{"ok": true, "x": 1}', ""):
        assert not accepts(c.gbnf, G.turn(reasoning="r", content=bad)), bad
    off = constraint(None, dialect=K3, response_format={"type": "json_object"}, thinking=False)
    assert off.accepts(G.turn(content='{"a": [1]}', think=False)) and accepts(off.gbnf, G.turn(content='{"a": [1]}',
                                                                                               think=False))
    assert not accepts(off.gbnf, G.turn(content="[1]", think=False))


# ------------------------------------------------------------------------------ the schema corpus

def _k3_text(value, tools) -> str:
    return completion(assistant(None, "r", ("f", value)), tools, K3)


NOT_EXACT = {  # corpus schema -> the notes' paths (K3: typed argument elements)
    "one_of_overlapping": ["tools[0].function.parameters.properties.id.oneOf"],
    "unique_items": ["tools[0].function.parameters.properties.tags.uniqueItems"],
    "not_const": ["tools[0].function.parameters.properties.n.not"],
    "dependent_required": ["tools[0].function.parameters.dependentRequired"],
}


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus(case):
    tools = [tool(case["schema"])]
    c = constraint(tools, dialect=K3, tool_choice="required", parallel_tool_calls=False)
    assert c.exact == (not c.notes)
    assert [n.path for n in c.notes] == NOT_EXACT.get(case["name"], [])
    check = jsonschema.Draft202012Validator(case["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for value in case["valid"]:
        if c.exact:
            assert c.accepts(_k3_text(value, tools)), value
    for value in case["invalid"]:
        text = _k3_text(value, tools)
        if c.exact:
            assert not c.accepts(text), value
        elif c.accepts(text):
            msg = c.validate(parse(text, dialect=K3, tools=tools))
            assert [x.status for x in msg.tool_calls] == [ToolCallStatus.SCHEMA_MISMATCH], value
            assert not check.is_valid(value)


def test_nested_string_pattern_is_enforced_inside_json_values():
    """A pattern on a string inside a JSON-typed value (an object argument) is llguidance's, exact;
    only a raw (top-level string) argument value cannot carry it."""
    schema = {"type": "object", "properties": {"o": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[a-z]+$"}}, "required": ["code"], "additionalProperties": False}},
        "required": ["o"], "additionalProperties": False}
    tools = [tool(schema)]
    c = constraint(tools, dialect=K3, tool_choice="required")
    assert c.exact
    assert c.accepts(_k3_text({"o": {"code": "abc"}}, tools))
    assert not c.accepts(_k3_text({"o": {"code": "ABC"}}, tools))


EXACT_CASES = [c for c in CORPUS if not NOT_EXACT.get(c["name"])]


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(EXACT_CASES), seed=st.integers(0, 2**32 - 1), thinking=st.booleans(),
       choice=st.sampled_from(["required", "auto"]))
def test_sampled_texts_parse_into_calls_that_satisfy_the_schema(case, seed, thinking, choice):
    tools = [tool(case["schema"])]
    c = constraint(tools, dialect=K3, tool_choice=choice, max_calls=2, thinking=thinking)
    text = sample(c, random.Random(seed))
    if text is None:
        return  # the walk did not end within its budget: nothing sampled
    assert c.accepts(text)
    msg = parse(text + EOM, dialect=K3, tools=tools, thinking=thinking)
    # the parser names an undeclared argument (a warning, not an error): the schema allows them here
    assert [w for w in msg.warnings if w.kind != "argument_undeclared"] == [], (msg.warnings, text)
    check = jsonschema.Draft202012Validator(case["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for x in msg.tool_calls:
        assert x.status is ToolCallStatus.OK, text
        assert check.is_valid(json.loads(x.arguments)), text


def test_json_values_are_the_declared_schema_intersected_with_the_element_type():
    """A JSON-typed argument value is the property's declared schema (allOf, anyOf, $ref kept for
    llguidance, which intersects them) with the element's ``type``: exact."""
    schema = {"type": "object", "properties": {
        "n": {"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 5}]},
        "v": {"anyOf": [{"type": "integer", "multipleOf": 3}, {"type": "boolean"}]}},
        "required": ["n", "v"], "additionalProperties": False}
    tools = [tool(schema)]
    c = constraint(tools, dialect=K3, tool_choice="required")
    assert c.exact
    assert c.accepts(_k3_text({"n": 5, "v": 9}, tools)) and c.accepts(_k3_text({"n": 0, "v": True}, tools))
    for bad in ({"n": 6, "v": 3}, {"n": -1, "v": 3}, {"n": 1, "v": 4}):
        assert not c.accepts(_k3_text(bad, tools)), bad


@pytest.mark.skipif(REFERENCE_MISSING is not None, reason=REFERENCE_MISSING or "")
def test_matcher_over_the_k3_tokenizer():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k3")
    c = constraint(G.TOOLS, dialect=K3, tool_choice="required")
    out = G.completion(G.RENDERED[0][2])
    m = c.matcher(tok)
    assert m.consume_tokens(tok.encode(out)) and m.is_accepting()
    assert m.consume_token(tok.special_tokens[EOM]) and m.is_stopped()
    typed = c.matcher(tok)  # the tag markers typed as text: never the special tokens
    assert not (typed.consume_tokens(tok.encode(out, allow_special=False)) and typed.is_accepting())


def test_top_level_one_of_is_exact_where_llguidance_proves_the_branches_disjoint():
    circle = {"type": "object", "properties": {"shape": {"const": "circle"}, "radius": {"type": "number"}},
              "required": ["shape", "radius"], "additionalProperties": False}
    square = {"type": "object", "properties": {"shape": {"const": "square"}, "side": {"type": "number"}},
              "required": ["shape", "side"], "additionalProperties": False}
    tools = [tool({"oneOf": [circle, square]})]
    c = constraint(tools, dialect=K3, tool_choice="required")
    assert c.exact, c.notes
    assert c.accepts(_k3_text({"shape": "circle", "radius": 2}, tools))
    assert c.accepts(_k3_text({"shape": "square", "side": 1.5}, tools))
    assert not c.accepts(_k3_text({"shape": "circle", "side": 1}, tools))
    loose = [tool({"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                             {"type": "object", "properties": {"b": {"type": "integer"}}}]})]
    c = constraint(loose, dialect=K3, tool_choice="required")
    assert [n.path for n in c.notes] == ["tools[0].function.parameters.oneOf"]  # {} matches both branches
