"""kimi_chat.grammar.constraint, K2 family and the parts every family shares: official-format
outputs (what the renderer writes for an assistant turn) are accepted, malformed ones and typed markers
rejected; on the schema corpus (tests/data/constraint_schemas.json), under ``exact`` no invalid instance
is accepted and every valid one is (``json.dumps``' default spacing and compact), a non-exact constraint
names its notes and ``validate`` flags the violating call; texts sampled from a constraint parse into ok
calls that satisfy the schema; every schema Moonshot's vendor check would send builds. K3:
tests/grammar/test_constraint_k3.py."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import importlib.util

import pytest

from conftest import require_in_ci

_HAVE = all(importlib.util.find_spec(m) is not None for m in ("llguidance", "jsonschema"))
require_in_ci(_HAVE, "the constraints extra (pip install -e '.[test]': llguidance, jsonschema)")
if not _HAVE:
    pytest.skip("llguidance and jsonschema are not installed (pip install -e '.[constraints]')",
                allow_module_level=True)

import jsonschema  # noqa: E402
import llguidance  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st

from kimi_chat import markers as M
from kimi_chat.grammar import GrammarError
from kimi_chat.grammar.request import Constraint, ConstraintNote, byte_tokenizer, constraint, llg_tokenizer
from kimi_chat.grammar.schemas import prepare
from kimi_chat.output import ToolCallStatus, parse

from conftest import REFERENCE_MISSING
import test_grammar as G
from gbnf_recognizer import accepts
from constraint_support import CORPUS, assistant, completion, sample, tool

K2 = "kimi-k2-instruct"
SB, SE = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
CB, AB, CE = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text
END = M.IM_END.text

WEATHER = tool({"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                 "unit": {"type": "string", "enum": ["c", "f"]},
                                                 "days": {"type": "integer", "minimum": 1, "maximum": 10}},
                "required": ["city"], "additionalProperties": False}, "get_weather")
SEARCH = tool({"type": "object", "properties": {"query": {"type": "string"}, "exact": {"type": "boolean"}},
               "required": ["query", "exact"]}, "search")
TOOLS = [WEATHER, SEARCH]


def call(name: str, index: int, args: dict | str, compact: bool = False) -> str:
    a = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False,
                                                      separators=(",", ":") if compact else None)
    return f"{CB}functions.{name}:{index}{AB}{a}{CE}"


def section(*calls: str) -> str:
    return SB + "".join(calls) + SE


def byte_accepts(c: Constraint, data: bytes) -> bool:
    """Whether the constraint's matcher takes ``data`` as plain bytes (no special token at all)."""
    tok, _ = byte_tokenizer(c.dialect)
    m = c.matcher(tok)
    return m.consume_tokens(list(data)) and m.is_accepting()


# ------------------------------------------------------------------------------ official outputs

RENDERED = [
    ("required", {}, assistant(None, None, ("get_weather", {"city": "Paris"}))),
    ("required", {}, assistant(None, None, ("get_weather", {"city": "Oslo", "unit": "c", "days": 10}))),
    ("required", {}, assistant(None, None, ("search", {"query": "kimi <b> [1]", "exact": False}),
                               ("get_weather", {"city": "Zürich"}))),
    ("required", {"compact": True}, assistant(None, None, ("get_weather", {"city": "Rome", "days": 3}),
                                              compact=True)),
    ("auto", {}, assistant("Let me check.", None, ("get_weather", {"city": "Paris"}))),
    ("auto", {}, assistant("Just an answer: 2 < 3 and [x].", None)),
    ("none", {}, assistant("Plain text.", None)),
    ({"type": "function", "function": {"name": "search"}}, {}, assistant(None, None, ("search", {"query": "q",
                                                                                               "exact": True}))),
]


@pytest.mark.parametrize("dialect", [K2, "kimi-k2-instruct-0905", "kimi-k2-thinking"])
@pytest.mark.parametrize("choice, options, message", RENDERED)
def test_accepts_what_the_renderer_writes(dialect, choice, options, message):
    c = constraint(TOOLS, dialect=dialect, tool_choice=choice)
    out = completion(message, TOOLS, dialect).removesuffix(END)
    assert c.accepts(out) and c.accepts(out + END), out
    msg = c.validate(parse(out, dialect=dialect, tools=TOOLS))
    assert [x.status for x in msg.tool_calls] == [ToolCallStatus.OK] * len(message.get("tool_calls", []))


def test_reasoning_dialects():
    body = section(call("get_weather", 0, {"city": "Paris"}))
    t = constraint(TOOLS, dialect="kimi-k2-thinking", tool_choice="required")
    assert t.accepts(body) and t.accepts("<think>Let me think: a < b.</think>" + body)
    assert not t.accepts("<think>a <think> b</think>" + body)
    assert not constraint(TOOLS, dialect="kimi-k2-thinking", tool_choice="required",
                          reasoning=False).accepts("<think>x</think>" + body)
    k25 = constraint(TOOLS, dialect="kimi-k2.5", tool_choice="required")  # the prompt opened <think>
    assert k25.accepts("plan</think>" + body) and not k25.accepts(body)
    assert constraint(TOOLS, dialect="kimi-k2.5", tool_choice="required", thinking=False).accepts(body)
    # a special token in the reasoning dialects' vocabulary (K2-Thinking's too): never spelled as text
    assert '"<think>"' not in constraint(TOOLS, dialect="kimi-k2-thinking").lark
    assert '"<think>"' not in constraint(TOOLS, dialect="kimi-k2.5").lark


_GBNF_REJECTED = [(out, why) for out, why in G.test_required_rejects.pytestmark[0].args[1]
                  if why not in ("undeclared property",  # JSON Schema allows it (GBNF: never generated)
                                 "end marker (the engine adds it)")]  # accepts(): the end of turn is optional


@pytest.mark.parametrize("out, why", _GBNF_REJECTED)
def test_required_rejects_what_the_gbnf_export_rejects(out, why):
    """The cases of tests/grammar/test_grammar.py, on its tools."""
    assert not constraint(G.TOOLS, dialect=K2, tool_choice="required").accepts(out), why


@pytest.mark.parametrize(
    "out, why",
    [
        (section(call("get_weather", 0, {"city": "Paris", "days": 11})), "maximum"),
        (section(call("get_weather", 0, {"city": "Paris", "days": 663300605086031})), "maximum"),
        (section(call("get_weather", 0, {"city": "Paris", "days": 0})), "minimum"),
        (section(call("get_weather", 0, {"city": "Paris", "extra": 1})), "additionalProperties false"),
        (section(call("get_weather", 0, '{"city":  "Paris"}')), "spacing Kimi does not write"),
        (section(call("get_weather", 0, '{\n"city": "Paris"}')), "a newline in the arguments"),
        (section(call("get_weather", 0, {"city": "Paris"})) + END + "x", "text after the end of turn"),
        (section(call("get_weather", 0, {"city": "P" + END})), "marker inside a string"),
        (CB + "functions.get_weather:0" + AB + '{"city": "Paris"}' + CE, "no section begin"),
    ],
)
def test_required_rejects(out, why):
    assert not constraint(TOOLS, dialect=K2, tool_choice="required").accepts(out), why


def test_choices_and_parallel_calls():
    one = call("get_weather", 0, {"city": "P"})
    auto = constraint(TOOLS, dialect=K2)
    assert auto.accepts("") and auto.accepts("Hello, 2 < 3 and [x] is fine.\n") and auto.accepts("ok" + section(one))
    assert not auto.accepts("a" + section(one) + section(call("get_weather", 1, {"city": "Q"})))
    none = constraint(TOOLS, dialect=K2, tool_choice="none")
    assert none.accepts("text") and not none.accepts(section(one))
    assert constraint(None, dialect=K2).lark == none.lark  # auto without tools is none
    named = constraint(TOOLS, dialect=K2, tool_choice={"type": "function", "function": {"name": "search"}})
    assert not named.accepts(section(one))
    single = constraint(TOOLS, dialect=K2, tool_choice="required", parallel_tool_calls=False)
    assert single.accepts(section(one)) and not single.accepts(section(one, call("get_weather", 1, {"city": "Q"})))
    capped = constraint(TOOLS, dialect=K2, tool_choice="required", max_calls=2)
    three = [call("get_weather", i, {"city": "P"}) for i in range(3)]
    assert capped.accepts(section(*three[:2])) and not capped.accepts(section(*three))
    shifted = constraint(TOOLS, dialect=K2, tool_choice="required", first_index=5)
    assert shifted.accepts(section(call("get_weather", 5, {"city": "P"}), call("search", 6, {"query": "",
                                                                                             "exact": False})))
    assert not shifted.accepts(section(one))
    forced = constraint(TOOLS, dialect=K2, tool_choice="required", content=True)
    assert forced.accepts("Calling. " + section(one))


@pytest.mark.parametrize("marker", [END, "[EOS]", CB, SB, "<|im_user|>", "<|reserved_token_163700|>"])
def test_markers_cannot_be_typed_or_spelled(marker):
    """A marker in free text: as its special token the grammar does not allow it there (the end of turn
    only at the end), and spelled as plain bytes the text avoids it (the parser would read a marker)."""
    auto = constraint(TOOLS, dialect=K2)
    assert not auto.accepts("text " + marker + " more")
    assert not byte_accepts(auto, ("text " + marker).encode())
    assert byte_accepts(auto, b"text <| im_end |>")  # not a marker spelling
    # forced call: the section begin written as bytes never satisfies the special token
    req = constraint(TOOLS, dialect=K2, tool_choice="required")
    assert not byte_accepts(req, section(call("get_weather", 0, {"city": "P"})).encode())


def test_response_format_constrains_the_content():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"],
              "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    c = constraint(None, dialect=K2, response_format=rf)
    assert c.accepts('{"n": 3}') and c.accepts('{"n":3}' + END)
    assert not c.accepts('{"n": 4}') and not c.accepts("hello") and not c.accepts("")
    obj = constraint(None, dialect=K2, response_format={"type": "json_object"})
    assert obj.accepts('{"any": [1, {"x": null}]}') and not obj.accepts("[1]")
    assert constraint(None, dialect=K2, response_format={"type": "text"}).accepts("hello")
    with_tools = constraint(TOOLS, dialect=K2, response_format=rf)  # auto: the JSON reply, or a call
    assert with_tools.accepts('{"n": 1}') and with_tools.accepts(section(call("get_weather", 0, {"city": "P"})))
    assert not with_tools.accepts("free text")
    with pytest.raises(GrammarError, match="response_format"):
        constraint(None, dialect=K2, response_format={"type": "xml"})


def test_gbnf_export_constrains_the_reply_to_the_response_format():
    # llama-server --grammar (kimi-chat serve --upstream): the reply is a JSON value of the schema, as the
    # Lark grammar wants it; what the GBNF rules leave out (maximum) is named, the rest is exact
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3},
                                               "tag": {"type": "string", "enum": ["a", "b"]}},
              "required": ["n"], "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    c = constraint(None, dialect=K2, response_format=rf)
    for ok in ('{"n": 3}', '{"n":3}', '{"n": -2, "tag": "b"}'):
        assert c.accepts(ok) and accepts(c.gbnf, ok), ok
    for bad in ("hello", "", '{"n": "3"}', '{"m": 3}', '{"n": 3, "tag": "c"}', '{"n": 3} and more'):
        assert not accepts(c.gbnf, bad), bad
    assert not c.gbnf_exact
    assert [n.path for n in c.gbnf_notes] == ["response_format.json_schema.schema.properties.n.maximum"]
    assert accepts(c.gbnf, '{"n": 4}') and not c.accepts('{"n": 4}')  # what the note says
    obj = constraint(None, dialect=K2, response_format={"type": "json_object"})
    assert obj.gbnf_exact and obj.gbnf_notes == ()
    assert accepts(obj.gbnf, '{"any": [1, {"x": null}], "s": "a < b"}') and accepts(obj.gbnf, "{}")
    for bad in ("[1]", '"x"', "text", '{"a": 1'):
        assert not accepts(obj.gbnf, bad), bad
    # a JSON string of the reply cannot spell a marker (the parser would read it as one)
    assert not accepts(obj.gbnf, '{"s": "' + END + '"}')
    # auto: the JSON reply or a call; forced calls are unchanged by response_format
    auto = constraint(TOOLS, dialect=K2, response_format=rf)
    assert accepts(auto.gbnf, '{"n": 1}') and accepts(auto.gbnf, section(call("get_weather", 0, {"city": "P"})))
    assert not accepts(auto.gbnf, "free text")
    forced = constraint(TOOLS, dialect=K2, tool_choice="required", response_format=rf)
    assert forced.gbnf == constraint(TOOLS, dialect=K2, tool_choice="required").gbnf
    # a reply schema the GBNF rules cannot translate: no export, and the note names the response format
    # what reading the schema found holds for the export too (here: a reference that resolves nowhere)
    loose = constraint(None, dialect=K2, response_format={"type": "json_schema", "json_schema": {
        "schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}, "required": ["a"],
                   "additionalProperties": False}}})
    assert not loose.exact and not loose.gbnf_exact
    assert "response_format.json_schema.schema.properties.a.$ref" in [n.path for n in loose.gbnf_notes]
    long = constraint(None, dialect=K2, response_format={"type": "json_schema", "json_schema": {
        "schema": {"type": "object", "properties": {"a": {"type": "string", "minLength": 2000}}}}})
    assert long.exact and long.gbnf == "" and not long.gbnf_exact
    assert long.gbnf_notes[-1].path == "response_format" and "minLength" in long.gbnf_notes[-1].reason


def test_after_reasoning_is_the_body():
    # K2: where the reasoning ended (a server's reasoning parser saw </think>) the rest is the body, as
    # with thinking off and no reasoning block
    for d, off in (("kimi-k2.6", {"thinking": False}), ("kimi-k2-thinking", {})):  # K2-Thinking: no switch
        c = constraint(TOOLS, dialect=d, tool_choice="required", after_reasoning=True)
        assert c.lark == constraint(TOOLS, dialect=d, tool_choice="required", reasoning=False, **off).lark
        ok = section(call("get_weather", 0, {"city": "P"}))
        assert c.accepts(ok) and not c.accepts(M.THINK_BEGIN.text + "r" + M.THINK_END.text + ok)
        assert not c.accepts("r" + M.THINK_END.text + ok)
    plain = constraint(TOOLS, dialect=K2, tool_choice="required", after_reasoning=True)
    assert plain.lark == constraint(TOOLS, dialect=K2, tool_choice="required").lark  # no reasoning to skip


def test_errors_name_the_field():
    with pytest.raises(GrammarError, match="not a declared function tool"):
        constraint(TOOLS, dialect=K2, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(GrammarError, match="required"):
        constraint(None, dialect=K2, tool_choice="required")
    with pytest.raises(GrammarError, match=r"^tools\[0\]\.function\.parameters: a false schema"):
        constraint([tool(False)], dialect=K2, tool_choice="required")


# ------------------------------------------------------------------------------ the schema corpus

def _k2_texts(value, index: int = 0) -> list[str]:
    return [section(call("f", index, value)), section(call("f", index, value, compact=True))]


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_exact_means_exact(case):
    tools = [tool(case["schema"])]
    c = constraint(tools, dialect=K2, tool_choice="required", parallel_tool_calls=False)
    assert c.exact == (not c.notes)
    check = jsonschema.Draft202012Validator(case["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for value in case["valid"]:  # exact or a superset: always accepted
        assert all(c.accepts(t) for t in _k2_texts(value)), value
    for value in case["invalid"]:
        texts = _k2_texts(value)
        accepted = [t for t in texts if c.accepts(t)]
        if c.exact:
            assert not accepted, value
        for t in accepted:  # only where the constraint says it is not exact: validate flags the call
            msg = c.validate(parse(t, dialect=K2, tools=tools))
            assert [x.status for x in msg.tool_calls] == [ToolCallStatus.SCHEMA_MISMATCH], value
            assert not check.is_valid(value)
            assert msg.to_openai()["invalid_tool_calls"][0]["status"] == "schema_mismatch"


NOT_EXACT = {  # corpus schema -> the notes' paths (K2): what llguidance does not enforce, named
    "one_of_overlapping": ["tools[0].function.parameters.properties.id.oneOf"],
    "unique_items": ["tools[0].function.parameters.properties.tags.uniqueItems"],
    "not_const": ["tools[0].function.parameters.properties.n.not"],
    "dependent_required": ["tools[0].function.parameters.dependentRequired"],
}


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_notes_name_the_path(case):
    c = constraint([tool(case["schema"])], dialect=K2, tool_choice="required")
    assert [n.path for n in c.notes] == NOT_EXACT.get(case["name"], [])
    assert all(isinstance(n, ConstraintNote) and n.reason for n in c.notes)


def test_exact_at_least_where_llguidance_compiles_the_schema_alone():
    """Every corpus schema llguidance compiles as it is gives an exact constraint, and the ones it
    refuses are exactly the non-exact ones (their notes name what is dropped)."""
    refused = set()
    for case in CORPUS:
        is_error, _ = llguidance.LLMatcher.validate_grammar_with_warnings(
            llguidance.LLMatcher.grammar_from_json_schema(case["schema"]))
        c = constraint([tool(case["schema"])], dialect=K2, tool_choice="required")
        if is_error:
            refused.add(case["name"])
        else:
            assert c.exact, case["name"]
    assert refused == set(NOT_EXACT)


def test_prepare_bundles_references_and_drops_only_annotations():
    schema = next(c["schema"] for c in CORPUS if c["name"] == "id_relative_ref")
    p = prepare(schema, "p")
    assert p.exact and "$id" not in json.dumps(p.schema) and set(p.schema["$defs"]) == {"kc0"}
    item = {**p.schema["properties"]["item"], "$defs": p.schema["$defs"]}  # a sub-schema stands alone (K3)
    assert llguidance.LLMatcher.validate_grammar_with_warnings(
        llguidance.LLMatcher.grammar_from_json_schema(item)) == (False, [])
    annotated = next(c["schema"] for c in CORPUS if c["name"] == "annotated")
    q = prepare(annotated, "p")
    assert q.exact and "description" not in json.dumps(q.schema) and q.schema["properties"]["limit"]["maximum"] == 50
    remote = prepare({"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}}, "p")
    assert not remote.exact and remote.notes[0].path == "p.properties.a.$ref"
    lookaround = prepare({"type": "string", "pattern": "^(?!x)"}, "p")
    assert not lookaround.exact and lookaround.notes[0].path == "p.pattern" and "pattern" not in lookaround.schema


def test_gbnf_export_has_its_own_exactness():
    c = constraint(TOOLS, dialect=K2, tool_choice="required")
    assert c.gbnf.startswith("root ::=") and not c.gbnf_exact
    assert "tools[0].function.parameters.properties.days.maximum" in [n.path for n in c.gbnf_notes]
    simple = constraint([tool({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                               "additionalProperties": False})], dialect=K2, tool_choice="required")
    assert simple.gbnf_exact and simple.exact


# ------------------------------------------------------------------------------ property: sampled texts

EXACT_CASES = [c for c in CORPUS if not NOT_EXACT.get(c["name"])]


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(EXACT_CASES), seed=st.integers(0, 2**32 - 1),
       dialect=st.sampled_from([K2, "kimi-k2-thinking", "kimi-k2.5"]), choice=st.sampled_from(["required", "auto"]))
def test_sampled_texts_parse_into_calls_that_satisfy_the_schema(case, seed, dialect, choice):
    tools = [tool(case["schema"])]
    c = constraint(tools, dialect=dialect, tool_choice=choice, max_calls=2)
    text = sample(c, random.Random(seed))
    if text is None:
        return  # the walk did not end within its budget: nothing sampled
    assert c.accepts(text)
    msg = parse(text, dialect=dialect, tools=tools)
    assert msg.warnings == [], (msg.warnings, text)
    check = jsonschema.Draft202012Validator(case["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    for x in msg.tool_calls:
        assert x.status is ToolCallStatus.OK, text
        assert check.is_valid(json.loads(x.arguments)), text
    assert c.validate(msg) is msg


# ------------------------------------------------------------------------------ Moonshot's vendor check

KVV = (Path(os.environ.get("KIMI_CHAT_KVV_DIR") or Path(__file__).resolve().parents[3] / "shared" / "kvv")
       / "tests" / "tool_call_json_schema")  # found as tests/servers/test_kvv.py finds it


def _kvv_schemas():
    for case in CORPUS:
        yield case["name"], case["schema"]
        for key, sub in case["schema"].get("properties", {}).items():
            yield f"{case['name']}.{key}", sub


@pytest.mark.skipif(not (KVV / "validator.py").is_file(), reason=f"Moonshot's vendor check not found at {KVV}")
@pytest.mark.parametrize("dialect", [K2, "kimi-k3"])
def test_every_schema_the_vendor_check_sends_builds(dialect):
    """The vendor check wraps each case schema as a tool's ``value`` property and forces a call
    (validator.classify_case); the case files are not shipped, so the corpus schemas and their property
    schemas stand in for them. Each builds, and a value valid for the case validates."""
    sys.path.insert(0, str(KVV))
    try:
        import validator as kvv
    finally:
        sys.path.remove(str(KVV))
    built = 0
    for name, schema in _kvv_schemas():
        params, _ = kvv.classify_case(kvv.ValidatorCase("corpus", "valid", 0, json.dumps(schema)))
        if params is None:
            continue
        c = constraint([tool(params, kvv.TOOL_NAME)], dialect=dialect, tool_choice="required")
        assert isinstance(c, Constraint) and c.lark.startswith("start:"), name
        built += 1
    assert built >= len(CORPUS)


# ------------------------------------------------------------------------------ the real vocabulary

@pytest.mark.skipif(REFERENCE_MISSING is not None, reason=REFERENCE_MISSING or "")
def test_matcher_over_the_kimi_tokenizer():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2")
    assert llg_tokenizer(tok) is llg_tokenizer(tok)  # cached
    c = constraint(TOOLS, dialect=K2, tool_choice="required")
    good = section(call("get_weather", 0, {"city": "Paris", "days": 3}))
    m = c.matcher(tok)
    assert m.consume_tokens(tok.encode(good)) and m.is_accepting()
    assert m.consume_token(tok.special_tokens[END]) and m.is_stopped()
    typed = c.matcher(tok)  # the markers typed as text: never the special tokens
    assert not (typed.consume_tokens(tok.encode(good, allow_special=False)) and typed.is_accepting())
    bad = c.matcher(tok)
    assert not (bad.consume_tokens(tok.encode(section(call("get_weather", 0, {"city": "Paris", "days": 11}))))
                and bad.is_accepting())


# ------------------------------------------------------------------------------ imports

def test_grammar_package_works_without_llguidance():
    """``import kimi_chat.grammar`` keeps the GBNF API without llguidance; the constraint needs it."""
    import subprocess

    code = (
        "import sys; sys.modules['llguidance'] = None\n"
        "import kimi_chat.grammar as g\n"
        "from kimi_chat.grammar import *\n"
        "assert g.tool_call_grammar(None).startswith('root ::=')\n"
        "try:\n    g.constraint\nexcept ImportError as e:\n    print('ImportError', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.startswith("ImportError"), out


def test_constraint_is_callable_however_it_was_imported():
    import kimi_chat.grammar as g
    import kimi_chat.grammar.request as module

    assert g.constraint(None, dialect=K2).lark == module.constraint(None, dialect=K2).lark
    assert g.Constraint is Constraint and g.ConstraintNote is ConstraintNote


# ------------------------------------------------------------------------------ odd schemas

ODD = [
    {"type": "object", "properties": {"a": {"type": "foo"}}},  # not a valid JSON Schema
    {"type": "object", "properties": {"a": {"items": [{"type": "string"}], "additionalItems": False}}},  # draft 7
    {"type": "object", "properties": {"a": {"$ref": "https://example.com/remote.json"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 10, "maximum": 1}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=a)b"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "string", "format": "uri-reference"}}},
    {"type": "object", "if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}},
    {"type": "object", "properties": {"a": {"$ref": "#"}}},
    {"definitions": {"a": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/definitions/a"}}},
    {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"$ref": "#/properties/c"}}},
                                      "c": {"type": "integer"}}},
    {}, True, None,
]


@pytest.mark.parametrize("dialect", [K2, "kimi-k3"])
@pytest.mark.parametrize("schema", ODD, ids=[json.dumps(s)[:40] for s in ODD])
def test_odd_schemas_build_or_name_the_path(dialect, schema):
    """Every schema gives a constraint (non-exact ones say why) or a GrammarError naming the schema path;
    never another exception."""
    try:
        c = constraint([tool(schema)], dialect=dialect, tool_choice="required")
    except GrammarError as e:
        assert str(e).startswith("tools[0].function.parameters"), e
        return
    assert c.exact == (not c.notes)
    assert all(n.path.startswith("tools[0].function.parameters") for n in c.notes)
    if isinstance(schema, dict) and ("foo" in json.dumps(schema) or "additionalItems" in schema.get("properties", {})
                                     .get("a", {})):
        assert any("not a valid JSON Schema" in n.reason for n in c.notes)


def test_the_cache_keeps_property_order_apart():
    """Two requests that differ only in the order of properties get their own grammars (the order is
    the one generated)."""
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "required": ["a", "b"], "additionalProperties": False}
    ba = {**ab, "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    first = constraint([tool(ab)], dialect=K2, tool_choice="required")
    second = constraint([tool(ba)], dialect=K2, tool_choice="required")
    assert first.accepts(section(call("f", 0, {"a": 1, "b": 2})))
    assert second.accepts(section(call("f", 0, {"b": 2, "a": 1})))
    assert not second.accepts(section(call("f", 0, {"a": 1, "b": 2})))
    assert constraint([tool(ab)], dialect=K2, tool_choice="required") is first


# ------------------------------------------------------------------------------ undeclared properties

_OPEN = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
_STATED = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
           "additionalProperties": {"type": "integer"}}


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct", "kimi-k3"])
def test_additional_properties_reading_is_one_policy_for_both_families(dialect):
    """``"schema"`` (the default): an undeclared property is generated where JSON Schema allows it;
    ``"declared"``: only where ``additionalProperties`` says so explicitly. Neither reading is a note."""
    from constraint_support import assistant, completion, tool

    def text(value, schema):
        return completion(assistant(None, "r", ("f", value)), [tool(schema)], dialect)

    def build(schema, reading):
        return constraint([tool(schema)], dialect=dialect, tool_choice="required", parallel_tool_calls=False,
                          additional_properties=reading)

    extra = {"q": "x", "n": 1}
    for reading in ("schema", "declared"):
        c, stated = build(_OPEN, reading), build(_STATED, reading)
        assert c.exact and not c.notes and stated.exact
        assert c.accepts(text({"q": "x"}, _OPEN))
        assert c.accepts(text(extra, _OPEN)) is (reading == "schema")
        assert stated.accepts(text(extra, _STATED))  # explicitly allowed: both readings
        assert not stated.accepts(text({"q": "x", "n": "s"}, _STATED))  # the value holds to its schema
    assert constraint([tool(_OPEN)], dialect=dialect, tool_choice="required").accepts(
        text(extra, _OPEN))  # the default is "schema"
    with pytest.raises(GrammarError, match="additional_properties: expected one of 'schema', 'declared'"):
        build(_OPEN, "strict")


def test_gbnf_notes_an_enum_its_rules_do_not_check_against_other_keywords():
    from constraint_support import tool

    schema = {"type": "object", "properties": {"e": {"type": "string", "enum": ["a", "bbb"], "maxLength": 2},
                                               "t": {"type": "string", "enum": ["a", "b"]}}}
    c = constraint([tool(schema)], dialect="kimi-k2-instruct", tool_choice="required")
    assert c.exact  # llguidance intersects them
    paths = [n.path for n in c.gbnf_notes]
    assert "tools[0].function.parameters.properties.e.enum" in paths
    assert "tools[0].function.parameters.properties.t.enum" not in paths
