"""The K2.5 TypeScript tool-declaration encoder (``kimi_chat.families.k2.tools_ts``).

* the 20 goldens (outputs of a port of the official encoder) of the reference directory (a reference
  file: never copied into the project; the test skips, saying so, without the reference data);
* one unit test per rule, each reasoned from the goldens (or, where they are silent, from the
  choice documented in the module);
* hypothesis: on any JSON-ish schema the encoder returns a string or raises ``ToolSchemaError``
  naming the tool and a JSON pointer that exists in the tool entry; never another exception.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimi_chat.errors import KimiChatError, ToolSchemaError
from kimi_chat.reference import reference_file
from kimi_chat.families.k2.tools_ts import MAX_SCHEMA_DEPTH, tools_to_typescript

REFERENCE = "unverified/k25_tools_ts.golden.jsonl"
HEADER = "# Tools\n\n## functions\nnamespace functions {\n"
FOOTER = "\n}\n"


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _encode_quiet(tools):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tools_to_typescript(tools)


# --------------------------------------------------------------------------------------- goldens

def _reference_cases() -> list[dict]:
    path = reference_file(REFERENCE)
    if path is None:
        pytest.skip(f"reference file {REFERENCE} not found (../shared/reference or $KIMI_CHAT_REFERENCE_DIR)")
    return _load(path)


@pytest.mark.oracle
def test_golden_reference():
    cases = _reference_cases()
    assert len(cases) == 20
    for i, case in enumerate(cases):
        assert _encode_quiet(case["tools"]) == case["tools_ts_str"], f"case {i}"


@pytest.mark.oracle
def test_encoder_does_not_mutate_its_input():
    tools = [c["tools"] for c in _reference_cases()]
    before = copy.deepcopy(tools)
    for t in tools:
        _encode_quiet(t)
    assert tools == before


# ------------------------------------------------------------------------------------- helpers


def encode_fn(function: dict) -> str:
    """The block of one function tool (between the namespace header and footer)."""
    out = tools_to_typescript([{"type": "function", "function": function}])
    assert out.startswith(HEADER) and out.endswith(FOOTER)
    return out[len(HEADER) : -len(FOOTER)]


def fields(properties: dict, required=(), **schema) -> str:
    """The lines inside ``type f = (_: {...}) => any;`` for an object with these properties."""
    block = encode_fn(
        {"name": "f", "parameters": {"type": "object", "properties": properties,
                                     "required": list(required), **schema}}
    )
    prefix, suffix = "type f = (_: {\n", "\n}) => any;"
    assert block.startswith(prefix) and block.endswith(suffix), block
    return block[len(prefix) : -len(suffix)]


def one(schema, required=False) -> str:
    """The field text of a single property ``x``."""
    return fields({"x": schema}, ["x"] if required else [])


def err(tools_or_schema, *, wrap=True) -> ToolSchemaError:
    tools = (
        [{"type": "function", "function": {"name": "t", "parameters": {
            "type": "object", "properties": {"x": tools_or_schema}}}}]
        if wrap
        else tools_or_schema
    )
    with pytest.raises(ToolSchemaError) as info:
        _encode_quiet(tools)
    return info.value


# ------------------------------------------------------------------------------ tools and layout


@pytest.mark.parametrize("tools", [None, [], ()])
def test_no_tools_is_empty(tools):
    assert tools_to_typescript(tools) == ""


def test_only_non_function_tools_is_empty():
    assert tools_to_typescript([{"type": "retrieval"}, {"type": "_plugin", "function": {"name": "x"}}]) == ""


def test_function_tool_without_function_is_skipped():
    assert tools_to_typescript([{"type": "function"}, {"type": "function", "function": {}}]) == ""


def test_layout_of_several_tools_keeps_their_order():
    out = tools_to_typescript(
        [
            {"type": "function", "function": {"name": "b"}},
            {"type": "web_search"},
            {"type": "function", "function": {"name": "a", "description": "A"}},
        ]
    )
    assert out == HEADER + "type b = (_: {}) => any;\n// A\ntype a = (_: {}) => any;" + FOOTER


def test_missing_name_is_function_and_missing_parameters_are_empty():
    assert encode_fn({"description": "d"}) == "// d\ntype function = (_: {}) => any;"
    assert encode_fn({"name": "n", "parameters": None}) == "type n = (_: {}) => any;"


def test_names_are_printed_verbatim():
    assert encode_fn({"name": "a.b-c 名"}) == "type a.b-c 名 = (_: {}) => any;"
    assert fields({"x-y z": {"type": "string"}}) == "  x-y z?: string"


def test_root_schema_is_an_object_whatever_its_type():
    # the official encoder reads the parameters as an object schema without looking at "type"
    assert encode_fn({"name": "f", "parameters": {"type": "string", "minLength": 3}}) == (
        "type f = (_: {}) => any;"
    )


# -------------------------------------------------------------------------------- descriptions


def test_multiline_description_keeps_empty_lines_unindented():
    assert one({"type": "string", "description": "a\n\nb\n"}) == "  // a\n\n  // b\n\n  x?: string"
    assert encode_fn({"name": "f", "description": "one\ntwo"}) == "// one\n// two\ntype f = (_: {}) => any;"


def test_whitespace_only_lines_are_comments():
    assert one({"type": "string", "description": " "}) == "  //  \n  x?: string"


@pytest.mark.parametrize("desc", ["", None])
def test_empty_or_null_description_prints_nothing(desc):
    assert one({"type": "string", "description": desc}) == "  x?: string"
    assert encode_fn({"name": "f", "description": desc}) == "type f = (_: {}) => any;"


def test_description_of_the_parameters_object_is_not_printed():
    assert encode_fn({"name": "f", "parameters": {"type": "object", "description": "root"}}) == (
        "type f = (_: {}) => any;"
    )


# ---------------------------------------------------------------------------- ordering, required


def test_required_first_then_optional_each_sorted():
    props = {n: {"type": "string"} for n in ["d", "B", "a", "c", "_e"]}
    assert fields(props, ["d", "a"]) == "  a: string,\n  d: string,\n  B?: string,\n  _e?: string,\n  c?: string"


def test_required_names_without_property_are_ignored():
    assert fields({"a": {"type": "string"}}, ["a", "zzz"]) == "  a: string"


def test_required_string_is_a_set_of_characters_like_the_official_encoder():
    # set("ab") == {"a", "b"}: odd, but that is what the tokenizer computes
    assert fields({"a": {"type": "string"}, "ab": {"type": "string"}}, ()) == "  a?: string,\n  ab?: string"
    block = encode_fn({"name": "f", "parameters": {"type": "object", "required": "ab",
                                                   "properties": {"a": {"type": "string"}, "ab": {"type": "string"}}}})
    assert "  a: string,\n  ab?: string" in block


# -------------------------------------------------------------------------- scalars, constraints


@pytest.mark.parametrize(
    "type_, ts", [("string", "string"), ("number", "number"), ("integer", "number"),
                  ("boolean", "boolean"), ("null", "null")],
)
def test_scalar_types(type_, ts):
    assert one({"type": type_}, required=True) == f"  x: {ts}"


def test_unknown_scalar_type_string_is_printed_as_is():
    assert one({"type": "any"}) == "  x?: any"
    assert one({"type": "date-time"}) == "  x?: date-time"


def test_constraints_sorted_on_one_line_per_type():
    assert one({"type": "string", "pattern": "^a$", "minLength": 1, "maxLength": 2}) == (
        "  // maxLength: 2, minLength: 1, pattern: ^a$\n  x?: string"
    )
    assert one({"type": "integer", "minimum": 0, "maximum": 9.5}) == "  // maximum: 9.5, minimum: 0\n  x?: number"
    assert one({"type": "array", "maxItems": 3, "minItems": 0}) == "  // maxItems: 3, minItems: 0\n  x?: Array<any>"


def test_constraints_of_other_types_or_other_keywords_are_dropped():
    assert one({"type": "number", "minLength": 1, "exclusiveMinimum": 0, "multipleOf": 2}) == "  x?: number"
    assert one({"type": "string", "minimum": 1, "format": "uri"}) == "  x?: string"
    assert one({"type": "boolean", "minimum": 1}) == "  x?: boolean"
    assert one({"type": "object", "minProperties": 1}) == "  x?: {}"


def test_constraint_values_are_printed_with_python_str():
    assert one({"type": "number", "minimum": True, "maximum": None}) == "  // maximum: None, minimum: True\n  x?: number"


def test_description_then_constraints_then_default():
    assert one({"type": "integer", "description": "n", "maximum": 5, "default": 3}) == (
        "  // n\n  // maximum: 5\n  // Default: 3\n  x?: number"
    )


# ------------------------------------------------------------------------------------ defaults


@pytest.mark.parametrize(
    "default, text",
    [
        (False, "False"),
        (True, "True"),
        (0, "0"),
        (-2, "-2"),
        (1.5, "1.5"),
        (1e20, "1e+20"),
        ("é\"\n", '"é\\"\\n"'),
        ([1, None, "a"], '[1, null, "a"]'),
        ({"k": [True]}, '{"k": [true]}'),
        ("", '""'),
    ],
)
def test_default_values(default, text):
    assert one({"type": "string", "default": default}) == f"  // Default: {text}\n  x?: string"


def test_null_default_prints_nothing():
    assert one({"type": "string", "default": None}) == "  x?: string"


def test_default_of_a_boolean_schema_property_is_not_read():
    assert fields({"x": True}) == "  x?: any"


# --------------------------------------------------------------------------------------- enums


def test_enum_literals():
    assert one({"enum": ["a", 1, 2.5, None, True, False]}) == '  x?: "a" | 1 | 2.5 | None | True | False'


def test_enum_strings_are_not_escaped():
    assert one({"enum": ['say "hi"', "a\\b"]}) == '  x?: "say "hi"" | "a\\b"'


def test_enum_beats_type_and_keeps_description():
    assert one({"type": "string", "enum": ["a"], "description": "d", "minLength": 3}) == '  // d\n  x?: "a"'


def test_empty_enum_is_an_empty_type():
    assert one({"enum": []}) == "  x?: "


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "enum": ["a", None]},
        {"type": ["string", "null"], "enum": ["a", None]},
        {"type": ["null", "integer"], "enum": [1, None, True]},
        {"type": "number", "enum": [1, 2.5]},
        {"type": "boolean", "enum": [True, False]},
        {"type": "object", "enum": ["a", 1]},
        {"type": ["string"], "enum": ["a"]},
    ],
)
def test_enum_members_matching_the_declared_type(schema):
    one(schema)


@pytest.mark.parametrize(
    "schema, index",
    [
        ({"type": "string", "enum": ["a", 1]}, 1),
        ({"type": "integer", "enum": [1, 2.5]}, 1),
        ({"type": "number", "enum": ["1"]}, 0),
        ({"type": "boolean", "enum": [True, 0]}, 1),
        ({"type": ["string", "null"], "enum": [None, 3]}, 1),
    ],
)
def test_enum_member_contradicting_the_type_raises(schema, index):
    e = err(schema)
    assert e.path == f"/function/parameters/properties/x/enum/{index}"
    assert e.tool_name == "t" and "enum member" in str(e)


@pytest.mark.parametrize("type_", [["string", "number"], ["string", "number", "null"], []])
def test_enum_with_unsupported_type_list_raises(type_):
    assert err({"type": type_, "enum": ["a"]}).path == "/function/parameters/properties/x/type"


# ------------------------------------------------------------------------------ unions, anyOf


def test_type_list_union_mapping():
    assert one({"type": ["string", "integer", "number", "boolean", "null", "object", "array"]}) == (
        "  x?: string | number | number | boolean | null | {} | Array<any>"
    )


def test_type_list_prints_its_description_but_no_constraints():
    assert one({"type": ["string", "null"], "description": "d", "maxLength": 3}) == "  // d\n  x?: string | null"


@pytest.mark.parametrize("bad, index", [(["string", "date"], 1), (["string", 3], 1), ([["string"]], 0)])
def test_type_list_with_unknown_member_raises(bad, index):
    assert err({"type": bad}).path == f"/function/parameters/properties/x/type/{index}"


def test_anyof_hides_member_comments_and_keeps_its_own():
    assert one({"description": "either", "anyOf": [
        {"type": "string", "description": "s", "minLength": 1},
        {"type": "object", "properties": {"k": {"type": "integer"}}},
        {"type": "array", "items": {"type": "string"}},
    ]}) == "  // either\n  x?: string | {\n    k?: number\n  } | Array<string>"


def test_anyof_beats_enum_and_type():
    assert one({"anyOf": [{"type": "null"}], "enum": [1], "type": "string"}) == "  x?: null"


def test_anyof_with_non_list_raises():
    assert err({"anyOf": {"type": "string"}}).path == "/function/parameters/properties/x/anyOf"


# -------------------------------------------------------------------------------------- arrays


@pytest.mark.parametrize("items", [None, {}, True, False, []])
def test_array_without_items_is_array_of_any(items):
    schema = {"type": "array"} if items is None else {"type": "array", "items": items}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # items: false is "no items" for the official encoder: no warning
        assert one(schema) == "  x?: Array<any>"


def test_array_item_with_docstring_is_multiline():
    assert one({"type": "array", "items": {"type": "string", "minLength": 2}}) == (
        "  x?: Array<\n    // minLength: 2\n    string\n  >"
    )


def test_array_of_objects_and_nested_arrays():
    assert one({"type": "array", "items": {"type": "array", "items": {
        "type": "object", "description": "pt", "properties": {"a": {"type": "string"}}}}}) == (
        "  x?: Array<Array<\n    // pt\n    {\n      a?: string\n    }\n  >>"
    )


def test_array_of_enum_and_union():
    assert one({"type": "array", "items": {"enum": ["a", "b"]}}) == '  x?: Array<"a" | "b">'
    assert one({"type": "array", "items": {"type": ["string", "null"]}}) == "  x?: Array<string | null>"


# ----------------------------------------------------------------------- objects, additionalProps


def test_nested_object_indentation():
    assert one({"type": "object", "properties": {"a": {"type": "object", "properties": {
        "b": {"type": "string", "description": "deep"}}, "required": ["b"]}}}, required=True) == (
        "  x: {\n    a?: {\n      // deep\n      b: string\n    }\n  }"
    )


def test_object_without_properties_is_empty_braces():
    assert one({"type": "object"}) == "  x?: {}"
    assert one({"type": "object", "properties": {}}) == "  x?: {}"


@pytest.mark.parametrize(
    "ap, text",
    [(True, "any"), (False, "never"), ({}, "any"), ({"type": "integer"}, "number"),
     ({"type": "array", "items": {"type": "string"}}, "Array<string>")],
)
def test_additional_properties_index_signature(ap, text):
    assert one({"type": "object", "additionalProperties": ap}) == f"  x?: {{\n    [k: string]: {text}\n  }}"


def test_additional_properties_comes_after_fields_and_hides_its_comments():
    assert one({"type": "object", "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string", "description": "d"}}) == (
        "  x?: {\n    a?: string,\n    [k: string]: string\n  }"
    )


def test_additional_properties_of_nested_object_value():
    assert one({"type": "object", "additionalProperties": {"type": "object", "properties": {
        "v": {"type": "string"}}}}) == "  x?: {\n    [k: string]: {\n      v?: string\n    }\n  }"


def test_additional_properties_on_the_parameters_object():
    assert encode_fn({"name": "f", "parameters": {"type": "object", "additionalProperties": False}}) == (
        "type f = (_: {\n  [k: string]: never\n}) => any;"
    )


def test_additional_properties_null_is_absent():
    assert one({"type": "object", "additionalProperties": None}) == "  x?: {}"


@pytest.mark.parametrize("ap", [1, "string", [{"type": "string"}]])
def test_invalid_additional_properties_raises(ap):
    assert err({"type": "object", "additionalProperties": ap}).path == (
        "/function/parameters/properties/x/additionalProperties"
    )


# ------------------------------------------------------------------------------ $defs and $ref


def test_defs_become_interfaces_in_their_order():
    block = encode_fn({"name": "f", "description": "F", "parameters": {
        "type": "object",
        "$defs": {
            "Z": {"type": "object", "description": "zed\nline", "properties": {"b": {"type": "integer"}}},
            "A": {"type": "string", "minLength": 2, "description": "an a"},
            "E": {"enum": [1, None]},
        },
        "properties": {"p": {"$ref": "#/$defs/Z", "description": "the z"}, "q": {"$ref": "#/$defs/A"}},
        "required": ["q"],
    }})
    assert block == (
        "// zed\n// line\ninterface Z {\n  b?: number\n}\n"
        "// an a\ninterface A string\n"
        "interface E 1 | None\n"
        "// F\n"
        "type f = (_: {\n  q: A,\n  // the z\n  p?: Z\n}) => any;"
    )


def test_unreferenced_defs_are_still_declared():
    assert encode_fn({"name": "f", "parameters": {"$defs": {"U": {"type": "boolean"}}}}) == (
        "interface U boolean\ntype f = (_: {}) => any;"
    )


def test_defs_of_a_nested_object_are_registered():
    block = encode_fn({"name": "f", "parameters": {"type": "object", "properties": {
        "o": {"type": "object", "$defs": {"N": {"type": "number"}}, "properties": {"n": {"$ref": "#/$defs/N"}}}}}})
    assert block == "interface N number\ntype f = (_: {\n  o?: {\n    n?: N\n  }\n}) => any;"


def test_ref_is_resolved_before_anything_else():
    block = encode_fn({"name": "f", "parameters": {"type": "object", "$defs": {"D": {"type": "string"}},
                                                   "properties": {"x": {"$ref": "#/$defs/D", "type": "integer"}}}})
    assert block.endswith("  x?: D\n}) => any;")


def test_self_reference_makes_the_parameters_an_interface():
    block = encode_fn({"name": "tree", "description": "T", "parameters": {
        "type": "object", "required": ["v"],
        "$defs": {"Leaf": {"type": "string"}},
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "v": {"$ref": "#/$defs/Leaf"}},
    }})
    # The goldens do not settle the order of the parameters interface; like the official encoder's
    # structure, it lists the properties as declared (here: optional "kids" before required "v").
    assert block == (
        "interface parameters {\n  kids?: Array<parameters>,\n  v: Leaf\n}\n"
        "interface Leaf string\n// T\ntype tree = (_: parameters) => any;"
    )


@pytest.mark.parametrize("ref", ["#/definitions/A", "http://x/s.json", "#/properties/a", "", "A"])
def test_unsupported_ref_forms_raise(ref):
    e = err({"$ref": ref})
    assert e.path == "/function/parameters/properties/x/$ref"
    assert "unsupported $ref" in str(e) and "'t'" in str(e)


def test_ref_to_missing_definition_raises():
    e = err({"$ref": "#/$defs/Nope"})
    assert e.path == "/function/parameters/properties/x/$ref" and "Nope" in str(e)


def test_ref_to_a_boolean_definition_raises():
    tools = [{"type": "function", "function": {"name": "t", "parameters": {
        "$defs": {"B": True}, "properties": {"x": {"$ref": "#/$defs/B"}}}}}]
    assert err(tools, wrap=False).path == "/function/parameters/$defs/B"


def test_non_string_ref_raises():
    assert err({"$ref": 3}).path == "/function/parameters/properties/x/$ref"


# ---------------------------------------------------------------------------- boolean schemas


def test_true_and_empty_schema_are_any():
    assert fields({"a": True, "b": {}}) == "  a?: any,\n  b?: any"


def test_false_schema_is_null_with_a_warning_naming_tool_and_path():
    with pytest.warns(UserWarning, match=r"tools\[0\] \(function 't'\) at '/function/parameters/properties/x'"):
        out = tools_to_typescript([{"type": "function", "function": {
            "name": "t", "parameters": {"properties": {"x": False}}}}])
    assert "  x?: null\n" in out


def test_false_in_anyof_and_additional_properties_schema():
    with pytest.warns(UserWarning):
        assert one({"anyOf": [False, {"type": "string"}]}) == "  x?: null | string"


# ------------------------------------------------------------------------------------- errors


def test_tool_schema_error_is_a_value_error_and_a_kimi_chat_error():
    e = err({"type": "string", "enum": [1]})
    assert isinstance(e, ValueError) and isinstance(e, KimiChatError)
    assert e.tool_name == "t" and e.tool_index == 0
    assert "'t'" in str(e) and "/function/parameters/properties/x/enum/0" in str(e)


@pytest.mark.parametrize(
    "schema",
    [{"description": "no type"}, {"oneOf": [{"type": "string"}]}, {"allOf": []}, {"const": 1},
     {"default": 3}, {"format": "uri"}],
)
def test_schema_without_ref_anyof_enum_type_raises(schema):
    e = err(schema)
    assert e.path == "/function/parameters/properties/x" and "unsupported schema" in str(e)


@pytest.mark.parametrize("schema", ["string", 3, None, [{"type": "string"}], 1.5])
def test_non_object_non_boolean_schema_raises(schema):
    assert err(schema).path == "/function/parameters/properties/x"


def test_non_string_description_raises():
    assert err({"type": "string", "description": 5}).path == "/function/parameters/properties/x/description"
    e = err([{"type": "function", "function": {"name": "t", "description": ["a"]}}], wrap=False)
    assert e.path == "/function/description"


def test_falsy_non_string_description_is_ignored():
    assert one({"type": "string", "description": 0}) == "  x?: string"


@pytest.mark.parametrize(
    "params, path",
    [
        ({"properties": ["a"]}, "/function/parameters/properties"),
        ({"properties": {"a": {}}, "required": 3}, "/function/parameters/required"),
        ({"properties": {"a": {}}, "required": None}, "/function/parameters/required"),
        ({"properties": {"a": {}}, "required": [["a"]]}, "/function/parameters/required/0"),
        ({"$defs": ["A"]}, "/function/parameters/$defs"),
        ("a string", "/function/parameters"),
        ([1], "/function/parameters"),
    ],
)
def test_malformed_parameters_raise(params, path):
    e = err([{"type": "function", "function": {"name": "t", "parameters": params}}], wrap=False)
    assert e.path == path and e.tool_name == "t"


def test_malformed_tools_list_and_entries():
    assert err({"type": "function"}, wrap=False).tool_index is None
    e = err([{"type": "function", "function": {"name": "ok"}}, "nope"], wrap=False)
    assert e.tool_index == 1 and e.tool_name is None and "tools[1]" in str(e)
    e = err([{"type": "function", "function": ["x"]}], wrap=False)
    assert e.path == "/function"


def test_error_names_the_right_tool_among_several():
    tools = [{"type": "function", "function": {"name": "good"}},
             {"type": "function", "function": {"name": "bad", "parameters": {"properties": {"a/b~c": {"x": 1}}}}}]
    e = err(tools, wrap=False)
    assert (e.tool_name, e.tool_index, e.path) == ("bad", 1, "/function/parameters/properties/a~1b~0c")


def test_too_deep_schema_raises_instead_of_recursing():
    # deeper than Python's recursion limit lets the official encoder go: it fails (and the tokenizer
    # falls back to JSON); so does this encoder, with a ToolSchemaError
    schema: dict = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH + 5):
        schema = {"type": "array", "items": schema}
    e = err(schema)
    assert "deeper" in str(e) and e.path.startswith("/function/parameters")


def test_deep_but_allowed_schema_encodes():
    # 200 levels: the official encoder encodes them (it recurses out at ~247 object levels from a
    # shallow caller; the equality of the two is checked by test_encoder_equals_the_official_one)
    schema: dict = {"type": "string"}
    for _ in range(200):
        schema = {"type": "object", "properties": {"a": schema}}
    assert one(schema).count("{") == 200


def test_cyclic_python_schema_raises():
    schema: dict = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    assert "deeper" in str(err(schema))


def test_unprintable_default_raises():
    deep: list = []
    cur = deep
    for _ in range(100_000):
        cur.append([])
        cur = cur[0]
    assert err({"type": "string", "default": deep}).path == "/function/parameters/properties/x/default"
    cyclic: list = []
    cyclic.append(cyclic)
    assert err({"type": "string", "default": cyclic}).path == "/function/parameters/properties/x/default"


def test_non_string_type_used_as_text_follows_python_formatting_or_raises():
    # the official encoder formats a non-string scalar "type" with str() where it uses an f-string...
    assert one({"type": None}) == "  x?: None"
    assert one({"type": "array", "items": {"type": 5}}) == "  x?: Array<5>"
    # ...and fails where it concatenates or joins it
    assert err({"anyOf": [{"type": 5}]}).path == "/function/parameters/properties/x/anyOf/0/type"
    assert err({"type": "array", "items": {"type": 5, "description": "d"}}).path == (
        "/function/parameters/properties/x/items/type"
    )


# --------------------------------------------------------------------------------- hypothesis

_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False) | st.text(max_size=6)
_json = st.recursive(
    _json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)
_names = st.sampled_from(["a", "b", "c/d", "e~f", "名", ""])
_type_names = st.sampled_from(["string", "number", "integer", "boolean", "null", "object", "array", "any", "date"])
_refs = st.sampled_from(["#", "#/$defs/A", "#/$defs/B", "#/$defs/Missing", "#/definitions/A", "x"])
_KEYWORDS = ["type", "properties", "required", "items", "enum", "anyOf", "$ref", "$defs",
             "additionalProperties", "description", "default", "minimum", "maximum", "minLength",
             "maxLength", "pattern", "minItems", "maxItems", "format"]


def _schema_dict(children):
    values = {
        "type": _type_names | st.lists(_type_names, max_size=3) | _json,
        "properties": st.dictionaries(_names, children, max_size=3) | _json,
        "required": st.lists(_names, max_size=3) | _json,
        "items": children | _json,
        "enum": st.lists(_json_leaf, max_size=4) | _json,
        "anyOf": st.lists(children, max_size=3) | _json,
        "$ref": _refs | _json,
        "$defs": st.dictionaries(st.sampled_from(["A", "B"]), children, max_size=2) | _json,
        "additionalProperties": st.booleans() | children | _json,
        "description": st.text(max_size=8) | _json,
    }
    return st.dictionaries(
        st.sampled_from(_KEYWORDS), st.just(None), max_size=5
    ).flatmap(
        lambda keys: st.fixed_dictionaries({k: values.get(k, _json) for k in keys})
    )


_schema = st.recursive(st.booleans() | st.just({}) | _json_leaf, _schema_dict, max_leaves=12)


def _resolve(doc, pointer: str):
    """Follow a JSON pointer; fails if a segment does not exist."""
    if pointer == "":
        return doc
    assert pointer.startswith("/"), pointer
    for raw in pointer[1:].split("/"):
        seg = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, list):
            doc = doc[int(seg)]
        else:
            assert isinstance(doc, dict) and seg in doc, (pointer, seg)
            doc = doc[seg]
    return doc


def _check(tools):
    before = copy.deepcopy(tools)
    try:
        out = _encode_quiet(tools)
    except ToolSchemaError as e:
        assert not e.reason.startswith("unexpected"), e  # the safety net is never needed
        if e.tool_index is not None:
            tool = tools[e.tool_index]
            _resolve(tool, e.path)
            fn = tool.get("function") if isinstance(tool, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            assert e.tool_name == (name if isinstance(name, str) else None)
            if e.tool_name is not None:
                assert repr(e.tool_name) in str(e)
            if e.path:
                assert repr(e.path) in str(e)
        return None
    else:
        assert isinstance(out, str)
        assert out == "" or (out.startswith(HEADER) and out.endswith(FOOTER))
        assert _encode_quiet(copy.deepcopy(before)) == out  # deterministic
        return out
    finally:
        assert tools == before  # never mutates its input


_SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_schema, st.text(max_size=5))
def test_any_schema_as_a_property_gives_text_or_tool_schema_error(schema, name):
    _check([{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"p": schema}, "$defs": {"A": {"type": "string"}}}}}])


@_SETTINGS
@given(_schema)
def test_any_schema_as_the_parameters_gives_text_or_tool_schema_error(schema):
    _check([{"type": "function", "function": {"name": "f", "parameters": schema}}])


@_SETTINGS
@given(st.lists(_json | st.fixed_dictionaries({"type": st.sampled_from(["function", "other"]) | _json},
                                               optional={"function": st.fixed_dictionaries(
                                                   {}, optional={"name": _json, "description": _json,
                                                                 "parameters": _schema}) | _json}),
                max_size=3))
def test_any_tools_list_gives_text_or_tool_schema_error(tools):
    _check(tools)


# A well-formed subset (known types, refs to existing defs, string descriptions): always encodes.
_ok_leaf = st.fixed_dictionaries({"type": st.sampled_from(["string", "number", "integer", "boolean", "null"])},
                                 optional={"description": st.text(max_size=6), "minimum": st.integers(),
                                           "maxLength": st.integers(0, 9), "default": _json})
_ok_leaf = _ok_leaf | st.just({}) | st.just({"$ref": "#/$defs/A"}) | st.just({"$ref": "#"}) | st.fixed_dictionaries(
    {"enum": st.lists(st.text(max_size=3) | st.none(), max_size=3), "type": st.just("string")})


def _ok_compound(children):
    return (
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(_names, children, max_size=3)},
                              optional={"required": st.lists(_names, max_size=3),
                                        "additionalProperties": st.booleans() | children})
        | st.fixed_dictionaries({"type": st.just("array")}, optional={"items": children, "minItems": st.integers(0, 3)})
        | st.fixed_dictionaries({"anyOf": st.lists(children, min_size=1, max_size=3)})
    )


_ok_schema = st.recursive(_ok_leaf, _ok_compound, max_leaves=10)


@_SETTINGS
@given(st.dictionaries(_names, _ok_schema, max_size=4))
def test_well_formed_schemas_always_encode_and_declare_every_property(props):
    params = {"type": "object", "properties": props, "$defs": {"A": {"type": "string"}}}
    out = _encode_quiet([{"type": "function", "function": {"name": "f", "parameters": params}}])
    assert out.startswith(HEADER) and out.endswith(FOOTER)
    assert "interface A string\n" in out
    for name in props:
        assert f"\n  {name}?: " in out


# ------------------------------------------------------- against the official encoder
# Moonshot's own tool_declaration_ts.py (../shared/reference/Kimi-K2.6/), imported from the reference
# directory at test time: equal text where it encodes, a ToolSchemaError exactly where it raises (the
# tokenizer then falls back to the JSON declaration).


def _official_or_skip():
    from kimi_chat.reference.oracle import OFFICIAL_TOOLS_TS, official_tools_ts

    if reference_file(OFFICIAL_TOOLS_TS) is None:
        pytest.skip(f"reference file {OFFICIAL_TOOLS_TS} not found (../shared/reference or $KIMI_CHAT_REFERENCE_DIR)")
    return official_tools_ts


def _same_as_official(tools):
    import logging

    from kimi_chat.families.k2.tools_ts import typescript_or_none

    official = _official_or_skip()
    logging.disable(logging.WARNING)  # the official encoder logs false schemas
    try:
        theirs = official(copy.deepcopy(tools))
    finally:
        logging.disable(logging.NOTSET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = typescript_or_none(copy.deepcopy(tools))
    assert ours == theirs


_DIFF = settings(max_examples=max(300, settings().max_examples), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_leaf_odd = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
_json_odd = st.recursive(_leaf_odd, lambda c: st.lists(c, max_size=3) | st.tuples(c)
                         | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=6)


@pytest.mark.oracle
@_DIFF
@given(_schema, st.text(max_size=5))
def test_encoder_equals_the_official_one_for_a_property(schema, name):
    _same_as_official([{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"p": schema},
        "$defs": {"A": {"type": "string"}, "group": {"type": "object", "properties": {"items": {"type": "string"}}}}}}}])


@pytest.mark.oracle
@_DIFF
@given(_schema)
def test_encoder_equals_the_official_one_for_the_parameters(schema):
    _same_as_official([{"type": "function", "function": {"name": "f", "parameters": schema}}])


@pytest.mark.oracle
@_DIFF
@given(st.lists(_json_odd | st.fixed_dictionaries({"type": st.sampled_from(["function", "other"]) | _json_odd},
                                                   optional={"function": st.fixed_dictionaries(
                                                       {}, optional={"name": _json_odd, "description": _json_odd,
                                                                     "parameters": _schema}) | _json_odd}),
                max_size=3))
def test_encoder_equals_the_official_one_for_any_tools_list(tools):
    _same_as_official(tools)


def _deep_tools(kind: str, depth: int) -> list:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema} if kind == "array" else (
            {"type": "object", "properties": {"a": schema}} if kind == "object" else (
                {"anyOf": [schema]} if kind == "anyOf" else {"type": "object", "additionalProperties": schema}))
    return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": schema}}}}]


@pytest.mark.oracle
@pytest.mark.parametrize("kind", ["array", "object", "anyOf", "additionalProperties"])
def test_encoder_equals_the_official_one_for_deep_schemas(kind):
    # both recurse: from the same caller they encode the same depths and fail from the same one on
    # (found here by bisection: where depends on the caller's own stack depth)
    from kimi_chat.families.k2.tools_ts import typescript_or_none

    official = _official_or_skip()
    lo, hi = 1, 1000  # official encodes lo, fails at hi
    assert official(_deep_tools(kind, lo)) is not None and official(_deep_tools(kind, hi)) is None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if official(_deep_tools(kind, mid)) is not None else (lo, mid)
    assert hi > 150  # a few hundred levels fit
    for depth in (lo - 1, lo, hi, hi + 1):
        assert typescript_or_none(_deep_tools(kind, depth)) == official(_deep_tools(kind, depth)), depth


@pytest.mark.oracle
@pytest.mark.parametrize("ref", ["#/$defs/group/items", "#/$defs/Missing", "#/definitions/A", "group"])
def test_refs_the_official_encoder_refuses(ref):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"g": {"$ref": ref}}, "$defs": {"group": {"type": "object"}}}}}]
    assert _official_or_skip()(tools) is None
    _same_as_official(tools)


# ------------------------------------------------------- the one-pass encoder
# ``typescript_fast`` writes what servers declare in one pass and leaves everything else (``None``) to the
# parsing encoder. Where it writes, its text is the official encoder's for the deep-sorted tools (what the
# tokenizer encodes), whatever the order of the keys it was given.

_server_leaf = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "number", "integer", "boolean", "null"])},
    optional={"description": st.text(max_size=8), "minimum": st.integers() | st.floats(allow_nan=False),
              "maximum": st.integers(), "minLength": st.integers(0, 9), "maxLength": st.integers(0, 9),
              "pattern": st.text(max_size=4), "format": st.text(max_size=4), "minItems": st.integers(0, 3),
              "default": _json_leaf},
) | st.just({}) | st.just(True) | st.fixed_dictionaries(
    {"enum": st.lists(st.text(max_size=3) | st.none() | st.integers() | st.booleans(), max_size=3)},
    optional={"description": st.text(max_size=5), "default": st.text(max_size=3)})


def _server_compound(children):
    return (
        st.fixed_dictionaries({"type": st.just("object")},
                              optional={"properties": st.dictionaries(_names, children, max_size=3),
                                        "required": st.lists(_names, max_size=3), "description": st.text(max_size=6),
                                        "additionalProperties": st.booleans() | children})
        | st.fixed_dictionaries({"type": st.just("array")},
                                optional={"items": children, "minItems": st.integers(0, 3),
                                          "maxItems": st.integers(0, 9), "description": st.text(max_size=6)})
        | st.fixed_dictionaries({"anyOf": st.lists(children, max_size=3)}, optional={"description": st.text(max_size=6)})
        | st.fixed_dictionaries({"type": st.lists(st.sampled_from(["string", "integer", "null", "object", "array"]),
                                                  min_size=1, max_size=3)})
    )


_server_schema = st.recursive(_server_leaf, _server_compound, max_leaves=10)
_server_tool = st.fixed_dictionaries(
    {"type": st.just("function"),
     "function": st.fixed_dictionaries(
         {"name": st.text(max_size=6), "parameters": st.fixed_dictionaries(
             {"type": st.just("object"), "properties": st.dictionaries(_names, _server_schema, max_size=4)},
             optional={"required": st.lists(_names, max_size=3)})},
         optional={"description": st.text(max_size=12)})})


def _shuffled_keys(value, seed: int):
    """``value`` with every dict's keys in another order (reversed or rotated, by ``seed``)."""
    if isinstance(value, dict):
        items = list(value.items())
        items = items[::-1] if seed % 2 else items[seed % max(1, len(items)):] + items[:seed % max(1, len(items))]
        return {k: _shuffled_keys(v, seed + 1) for k, v in items}
    if isinstance(value, list):
        return [_shuffled_keys(v, seed + 1) for v in value]
    return value


@pytest.mark.oracle
@_DIFF
@given(st.lists(_server_tool, min_size=1, max_size=4), st.integers(0, 5))
def test_one_pass_encoder_writes_server_tools_as_the_official_one(tools, seed):
    from kimi_chat.families.k2.tools_ts import typescript_fast
    from kimi_chat.reference.oracle import deep_sort_dict

    official = _official_or_skip()
    expected = official(deep_sort_dict(copy.deepcopy(tools)))
    fast = typescript_fast(_shuffled_keys(tools, seed))
    if expected is None:  # a `false`-free schema the official encoder refuses: none is generated here
        pytest.fail(f"the official encoder refused {tools!r}")
    if fast is None:  # only a schema nested deeper than the one-pass encoder goes is left to the other
        from kimi_chat.families.k2.tools_ts import _FAST_DEPTH

        assert max(len(p) for p in _paths(tools)) > _FAST_DEPTH
    else:
        assert fast == expected


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))


@_DIFF
@given(st.lists(_json_odd | st.fixed_dictionaries({"type": st.sampled_from(["function", "other"]) | _json_odd},
                                                   optional={"function": st.fixed_dictionaries(
                                                       {}, optional={"name": _json_odd, "description": _json_odd,
                                                                     "parameters": _schema}) | _json_odd}),
                max_size=3), st.integers(0, 5))
def test_one_pass_encoder_writes_what_the_parsing_one_writes_or_leaves_it(tools, seed):
    from kimi_chat.families.k2 import tools_ts
    from kimi_chat.reference.oracle import deep_sort_dict

    fast = tools_ts.typescript_fast(tools)
    if fast is None:
        return
    assert tools_ts.typescript_fast(_shuffled_keys(tools, seed)) == fast
    sorted_tools = deep_sort_dict(tools)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the one-pass encoder never writes what warns
        assert tools_ts.typescript_fast(sorted_tools) == fast
        text, pending = tools_ts._encode(sorted_tools, one_pass=False)
    assert (text, pending) == (fast, [])
