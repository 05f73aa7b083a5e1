"""Our K2.5/K2.6 templates write the official TypeScript tool declaration themselves when
the caller passes no ``tools_ts_str`` (the macro block ``templates/macros/tools_ts.jinja``).

Expected values come from the OFFICIAL encoder (``Kimi-K2.6/tool_declaration_ts.py`` in the reference
data, run on the deep-sorted tools as ``tokenization_kimi.py`` runs it; when it raises, the tokenizer
passes no ``tools_ts_str`` and the template declares the tools as JSON) and the official templates.
Rendered here under transformers' sandbox (tests/engines/test_llama_server_tools_ts.py: llama.cpp's Jinja).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st

from kimi_chat import render
from kimi_chat.reference.oracle import deep_sort_dict
from kimi_chat.templates import template_text

from conftest import needs_reference
from tools_ts_support import (
    CORPUS, MSGS, TOOL_CONVERSATION, TS_DIALECTS, corpus, declaration_of, json_declaration, official_declaration, official_prompt,
    official_ts, ours_transformers, tool_lists,
)

ROOT = Path(__file__).resolve().parent.parent
MACROS = ROOT / "templates" / "macros"
CONVERSATION = TOOL_CONVERSATION


def _compiled(source: str):
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compiled_cache.setdefault(source, _compile_jinja_template(source))


_compiled_cache: dict = {}


def macro(call: str, **values) -> str:
    """Render one call of the macro block under transformers' sandboxed environment."""
    block = (MACROS / "tools_ts.jinja").read_text(encoding="utf-8")
    return _compiled(block + "{{- " + call + " -}}").render(**values)


# -- one source for both templates ----------------------------------------------------------------


@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_macro_block_is_in_step_with_its_source(dialect):
    sys.path.insert(0, str(MACROS))
    try:
        import sync  # templates/macros/sync.py
    finally:
        sys.path.remove(str(MACROS))
    text = template_text(dialect)
    assert sync.block() in text, "run python templates/macros/sync.py"
    assert sync.synced(text) == text


# -- against the official encoder ----------------------------------------------------------------


@needs_reference
@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_corpus_one_tool_at_a_time(dialect):
    for case in corpus():
        tools = [case["tool"]]
        got = declaration_of(ours_transformers(tools, dialect))
        assert got == official_declaration(tools), case["source"]


@needs_reference
@pytest.mark.parametrize("dialect", TS_DIALECTS)
@pytest.mark.parametrize("agp", [True, False])
def test_corpus_whole_prompt_is_official(dialect, agp):
    tools = [c["tool"] for c in corpus() if official_ts([c["tool"]])]
    expected = official_prompt(tools, dialect, CONVERSATION, add_generation_prompt=agp)
    assert "# Tools\n\n## functions\nnamespace functions {\n" in expected
    assert ours_transformers(tools, dialect, CONVERSATION, add_generation_prompt=agp) == expected


@needs_reference
def test_corpus_covers_what_it_claims():
    cases = corpus()
    assert len(cases) >= 50 and CORPUS.is_file()
    ts = [official_ts([c["tool"]]) for c in cases]
    text = "\n".join(t for t in ts if t)
    for feature in ("interface ", "Array<\n", " | null", "[k: string]: ", "// Default: ", "(_: parameters)",
                    '"celsius" | "fahrenheit"', "// maxLength: 3, minLength: 3"):
        assert feature in text, feature
    assert sum(t is None for t in ts) >= 5  # the official encoder raises: JSON declarations


@needs_reference
def test_golden_reference_cases():
    from kimi_chat.reference import reference_file

    lines = reference_file("unverified/k25_tools_ts.golden.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 20
    for line in lines:
        tools = json.loads(line)["tools"]
        assert declaration_of(ours_transformers(tools)) == official_declaration(tools)


@needs_reference
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tools=tool_lists(odd=False), dialect=st.sampled_from(TS_DIALECTS))
def test_generated_schemas(tools, dialect):
    note(json.dumps(tools, ensure_ascii=False))
    assert declaration_of(ours_transformers(tools, dialect)) == official_declaration(tools)


@needs_reference
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tools=tool_lists(odd=True))
def test_generated_schemas_with_ones_the_encoder_rejects(tools):
    note(json.dumps(tools, ensure_ascii=False))
    assert declaration_of(ours_transformers(tools)) == official_declaration(tools)


# -- the fallback to JSON -------------------------------------------------------------------------

RAISES = [  # the official encoder raises on each: the tokenizer passes no tools_ts_str
    {"type": "object", "properties": {"x": {"$ref": "#/definitions/X"}}, "definitions": {"X": {"type": "string"}}},
    {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}},
    {"type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}},
    {"type": "object", "properties": {"x": {"allOf": [{"type": "string"}]}}},
    {"type": "object", "properties": {"x": {"type": ["string", "date"]}}},
    {"type": "object", "properties": {"x": {"type": "string", "description": ["not", "text"]}}},
    {"type": "object", "properties": {"x": {"type": "object", "additionalProperties": "yes"}}},
    {"type": "object", "properties": ["x"]},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": None},
    # a $ref resolved before the nested $defs that declares it is registered (properties parse in order)
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/Late"},
                                       "b": {"type": "object", "$defs": {"Late": {"type": "string"}}}}},
]


@needs_reference
@pytest.mark.parametrize("dialect", TS_DIALECTS)
@pytest.mark.parametrize("params", RAISES)
def test_schemas_the_official_encoder_rejects_are_declared_as_json(dialect, params):
    tools = [{"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "bad", "parameters": params}}]
    assert official_ts(tools) is None
    out = ours_transformers(tools, dialect)
    assert declaration_of(out) == json_declaration(tools)
    assert out == official_prompt(tools, dialect)


def test_no_function_tool_declares_json():
    # encode_tools_to_typescript_style gives "" (falsy tools_ts_str): the template's JSON branch
    tools = [{"type": "_plugin", "_plugin": {"name": "x"}}, {"type": "function", "function": {}}]
    assert declaration_of(ours_transformers(tools)) == json_declaration(tools)


@needs_reference
def test_nested_defs_registered_before_use_are_declared():
    # $defs of a nested object join the declarations (in registration order, after the root's)
    params = {"type": "object", "$defs": {"Z": {"type": "number"}},
              "properties": {"a": {"type": "object", "$defs": {"A": {"type": "string", "description": "an A"}},
                                   "properties": {"x": {"$ref": "#/$defs/A"}}},
                             "b": {"$ref": "#/$defs/A"}}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    ts = official_ts(tools)
    assert ts is not None and "// an A\ninterface A string" in ts and ts.index("interface Z") < ts.index("interface A")
    assert declaration_of(ours_transformers(tools)) == ts


# -- what the template leaves to JSON on purpose (documented in docs/tools_ts.md) -------------------

UNSUPPORTED = [  # the official encoder writes Python's str() of a list/dict, or iterates a string
    {"type": "object", "properties": {"x": {"type": "string", "maxLength": [1, 2]}}},
    {"type": "object", "properties": {"x": {"enum": "abc"}}},
    {"type": "object", "properties": {"x": {"enum": [[1], {"a": 1}]}}},
    {"type": "object", "properties": {"x": {"type": 5}}},
]


@needs_reference
@pytest.mark.parametrize("params", UNSUPPORTED)
def test_schemas_outside_the_macros_are_declared_as_json(params):
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    assert official_ts(tools) is not None  # the official tokenizer writes TypeScript: a known mismatch
    assert declaration_of(ours_transformers(tools)) == json_declaration(tools)


# -- the tokenizer's tools_ts_str still wins; render is untouched ---------------------------------


@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_given_tools_ts_str_is_used_verbatim(dialect):
    tools = [corpus()[0]["tool"]]
    out = ours_transformers(tools, dialect, tools_ts_str="# given\n")
    assert declaration_of(out) == "# given\n"


@needs_reference
@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_render_agrees_where_its_port_encodes(dialect):
    # kimi_chat.render (its Python port, tools_ts.py) and the template agree on the corpus
    tools = [c["tool"] for c in corpus() if official_ts([c["tool"]])]
    assert render(CONVERSATION, tools=tools, dialect=dialect) == ours_transformers(tools, dialect, CONVERSATION)


def test_template_does_not_mutate_the_tools():
    tools = [c["tool"] for c in corpus()]
    before = copy.deepcopy(tools)
    ours_transformers(tools)
    assert tools == before


# -- llama.cpp's float path, run under Jinja2 -------------------------------------------------------


@given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_computed_float_digits_are_pythons_or_nothing(x):
    # the engine without Python's float printing (native=false): repr(x) exactly, or '' (-> JSON)
    got = macro("ts_float(x, false)", x=x)
    assert got in (repr(x), "")
    digits = repr(abs(x)).split("e")[0].replace(".", "").strip("0")
    if x == 0 or (1e-22 <= abs(x) < 1e22 and len(digits) <= 15):
        assert got == repr(x)


@pytest.mark.parametrize("x", [0.5, 0.85, 1.0, -2.5, 3600.0, 0.0001, 0.1, 0.3, 1e15, 123.456, -0.0, 9007199254740994.0,
                               1e-06, -2.5e-05, 1e-09, 9.999e-05, 1e-22, 1e16, 1.5e17, -1e20])
def test_computed_float_digits_of_common_values(x):
    assert macro("ts_float(x, false)", x=x) == repr(x)


@needs_reference
def test_non_native_path_on_the_corpus():
    # the whole declaration with the computed float digits (what llama.cpp runs), under Jinja2
    for case in corpus():
        tools = [case["tool"]]
        got = macro("ts_tools(tools, false)", tools=tools)
        assert got == (official_ts(tools) or ""), case["source"]
