"""kimi_chat.grammar.json_schema on its own: each supported JSON-schema keyword, checked by running
the grammar it writes (tests/gbnf_recognizer.py) on JSON that must be accepted and JSON that must
not, the keywords accepted but not enforced, and the errors for what cannot be translated."""

from __future__ import annotations

import json

import pytest

from kimi_chat import markers as M
from kimi_chat.grammar import GrammarError, json_schema_to_gbnf
from kimi_chat.grammar.gbnf import Rules
from kimi_chat.grammar.json_schema import JsonSchemaTranslator, merge_schemas, resolve_ref

from gbnf_recognizer import accepts

OBJ_AB = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}

@pytest.mark.parametrize(
    "schema, good, bad",
    [
        # type, one per kind and as a list
        ({"type": "string"}, ['"x"', '""'], ["x", "1", "null"]),
        ({"type": "array"}, ["[]", '[1, "a", null]'], ["{}", "[1,]"]),
        ({"type": ["integer", "boolean"]}, ["1", "false"], ['"1"', "null", "1.5"]),
        # type inferred from the keywords
        ({"properties": {"a": {"type": "integer"}}}, ["{}", '{"a": 1}'], ["[]", '{"a": "1"}']),
        ({"items": {"type": "boolean"}}, ["[]", "[true, false]"], ["[1]", "{}"]),
        # integers: a non-negative minimum / exclusiveMinimum drops the sign, other bounds do not
        ({"type": "integer", "minimum": 0}, ["0", "42"], ["-1"]),
        ({"type": "integer", "exclusiveMinimum": 0}, ["7"], ["-7"]),
        ({"type": "integer", "minimum": -5}, ["-3", "3"], ["3.0"]),
        # anyOf / oneOf (oneOf as anyOf), with the sibling keywords merged into each branch
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ["1", '"a"'], ["true"]),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
         ['{"a": 1}', '{"b": 2}', '{"a": 1, "b": 2}'], ["{}"]),
        # const and enum of every JSON kind
        ({"const": "a<b"}, ['"a<b"'], ['"a"']),
        ({"enum": [[1, 2], {"k": None}, 1.5]}, ["[1, 2]", '{"k": null}', "1.5"], ["[1]", "1"]),
        # $ref: the root, definitions, JSON-pointer escapes, array indices
        ({"type": "object", "properties": {"kid": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["kid"]},
         ['{"kid": null}', '{"kid": {"kid": null}}'], ['{"kid": 1}']),
        ({"definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n"}, ["3"], ['"3"']),
        ({"$defs": {"a/b": {"type": "boolean"}, "c~d": {"type": "null"}},
          "type": "array", "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}]},
         ["[true, null]"], ["[null, true]"]),
        ({"$defs": {"list": [{"type": "integer"}, {"type": "string"}]}, "$ref": "#/$defs/list/1"}, ['"s"'], ["1"]),
        # required properties, in declaration order; optional ones in between
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["b"]},
         ['{"b": 1}', '{"a": 1, "b": 2}'], ["{}", '{"a": 1}', '{"b": 2, "a": 1}']),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
         ['{"a": 1, "b": 2}', '{"a":1,"b":2}'], ['{"a": 1}', '{"b": 2, "a": 1}']),
        # arrays: bounds on items
        ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
         ["[1, 2]", "[1, 2, 3]"], ["[1]", "[1, 2, 3, 4]"]),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 0}, ["[]"], ["[1]"]),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, ["[]", "[1]"], ["[1, 2]"]),
        # strings: bounds count characters, an escape is one character
        ({"type": "string", "maxLength": 2}, ['""', '"\\n"', '"é中"'], ['"abc"']),
        ({"type": "string", "minLength": 1}, ['"a"', '"abcdefgh"'], ['""', '"[x"']),
        # nullable (OpenAPI) on a non-string type
        ({"type": "integer", "nullable": True}, ["1", "null"], ['"1"']),
        ({"type": "boolean"}, ["true", "false"], ["1", '"true"']),
        ({"type": "null"}, ["null"], ["None"]),
        ({"type": "number"}, ["0", "-1.5", "3e10", "2.25E-3"], ["01", "1.", ".5", "NaN"]),
        ({"type": "integer"}, ["0", "-12", "123456"], ["1.0", "+1", "007"]),
        ({"type": ["string", "null"]}, ['"a"', "null"], ["1"]),
        ({"type": "string", "nullable": True}, ['"a"', "null"], ["1"]),
        ({"enum": ["a", 1, None, True]}, ['"a"', "1", "null", "true"], ['"b"', "2"]),
        ({"const": {"k": [1]}}, ['{"k": [1]}'], ['{"k":[1]}', "{}"]),
        ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"\\u003c|"'], ['"a"', '"abcd"', '"<"']),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 1}, ["[1]", "[1, 2]", "[1,2]"], ["[]", '["a"]']),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, ['[1, "a"]'], ["[1]", '["a", 1]']),
        ({"type": "object"}, ["{}", '{"a": [1, {"b": null}]}'], ["[]"]),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, ['{"x": 1, "y": 2}'], ['{"x": "1"}']),
        ({"type": "object", "additionalProperties": False}, ["{}"], ['{"a": 1}']),
        ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
         ['{"a": 1, "b": true}'], ['{"a": 1}', '{"b": true}']),
        ({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                             "required": ["next"]}},
          "$ref": "#/$defs/node"},
         ['{"next": null}', '{"next": {"next": {"next": null}}}'], ['{"next": 1}']),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}},
         ["{}", '{"a": 1}', '{"b": 1}', '{"a": 1, "c": 2}', '{"a": 1, "b": 2, "c": 3}'], ['{"c": 1, "a": 2}', '{, "a": 1}']),
        ({}, ['"x"', "1", "[true]", '{"a": {}}'], ["", "tru"]),
        ({"type": "string"}, ['""', '"é ü \\" \\\\ \\n"', '"<b> [x] <|"'], ['"<|im_end|>"', '"\\x"', '"a\nb"']),
        # every float json.dumps writes: the longest fixed-notation fraction is 17 significant digits after
        # three zeros, the longest integer part 16 digits (repr turns to an exponent from 1e16)
        ({"type": "number"}, [json.dumps(x) for x in (0.00012345678901234567, -0.013032478773240017,
                                                     1234567890123456.8, 1e16, 5e-324, -1.7976931348623157e308)],
         ["0.", "1.e5", "01"]),
    ],
)
def test_json_schema(schema, good, bad):
    g = json_schema_to_gbnf(schema)
    for s in good:
        assert accepts(g, s), s
        json.loads(s)
    for s in bad:
        assert not accepts(g, s), s


def test_json_strings_avoid_the_given_strings():
    """The translator works without any Kimi context: ``forbidden`` decides what strings avoid."""
    g = json_schema_to_gbnf({"type": "string"}, forbidden=["zz"])
    assert accepts(g, '"' + M.IM_END.text + '"')  # not forbidden here
    assert accepts(g, '"z z"')
    assert not accepts(g, '"azzb"')
    assert accepts(g, '"z\\u007az"')  # an escape resets the automaton: the decoded text is not checked
    default = json_schema_to_gbnf({"type": "string"})
    assert not accepts(default, '"' + M.IM_END.text + '"')


def test_translator_into_a_shared_rule_set():
    """JsonSchemaTranslator writes into a caller's Rules with the caller's string rule, and shares
    its primitives between schemas."""
    rules = Rules()
    rules.fresh("root")
    rules.set("chars", '[a-c]*')
    tr = JsonSchemaTranslator(rules, "chars")
    a = tr.rule({"type": "string"}, {"type": "string"}, "a", "#")
    b = tr.rule({"type": "array", "items": {"type": "string"}}, {}, "b", "#")
    rules.set("root", f"{a} | {b}")
    g = rules.text()
    assert accepts(g, '"abc"') and accepts(g, '["a", "cc"]')
    assert not accepts(g, '"abd"')
    assert g.count("json-string ::=") == 1


@pytest.mark.parametrize(
    "ignored",
    [{"pattern": "^[a-z]+$"}, {"format": "date-time"}, {"maximum": 3}, {"multipleOf": 2}, {"uniqueItems": True},
     {"minProperties": 1}, {"not": {"type": "null"}}, {"description": "x", "title": "y", "default": 1}],
)
def test_keywords_accepted_but_not_enforced(ignored):
    base = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with_kw = {**base, "properties": {"a": {"type": "integer", **ignored}}}
    assert json_schema_to_gbnf(with_kw) == json_schema_to_gbnf(base)


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "object", "properties": {"a": False}, "required": ["a"]}, r"#/properties/a: a false schema"),
        (False, r"#: a false schema"),
        ({"type": "array", "items": 3}, r"#/items: a schema must be an object or a boolean, got int"),
        ({"type": "int"}, r"#/type: unknown type 'int'"),
        ({"enum": []}, r"#/enum: expected a non-empty list"),
        ({"enum": "a"}, r"#/enum: expected a non-empty list"),
        ({"anyOf": []}, r"#/anyOf: expected a non-empty list"),
        ({"oneOf": {"type": "integer"}}, r"#/oneOf: expected a non-empty list"),
        ({"allOf": {"type": "integer"}}, r"#/allOf: expected a non-empty list"),
        ({"allOf": [OBJ_AB, "x"]}, r"#/allOf/1: only object schemas can be merged, got str"),
        ({"allOf": [{"properties": ["a"]}]}, r"#/allOf/0/properties: expected an object"),
        ({"type": "object", "properties": ["a", "b"]}, r"#/properties: expected an object"),
        ({"$ref": "#/$defs/missing"}, r"#/\$ref: cannot resolve '#/\$defs/missing'"),
        ({"allOf": [{"$ref": "#/$defs/missing"}]}, r"#/allOf/0/\$ref: cannot resolve"),
        ({"$ref": "https://example.com/s.json"}, r"only local references"),
        ({"$ref": 3}, r"only local references"),
        ({"$defs": {"a": {"$anchor": "a", "type": "integer"}}, "$ref": "#a"}, r"anchors are not supported"),
        ({"type": "array", "minItems": 3, "maxItems": 2}, r"#: minItems 3 is above maxItems 2"),
        ({"type": "string", "minLength": 3, "maxLength": 2}, r"#: minLength 3 is above maxLength 2"),
        ({"type": "string", "maxLength": -1}, r"#/maxLength: expected a non-negative integer"),
        ({"type": "array", "minItems": 1.5}, r"#/minItems: expected a non-negative integer"),
    ],
)
def test_errors_name_the_schema_path(schema, message):
    with pytest.raises(GrammarError, match=message):
        json_schema_to_gbnf(schema)


def test_all_of_member_ref_with_sibling_keywords_is_merged():
    """Regression: an allOf member holding a $ref *and* other keys used to leave the $ref in the
    merged schema, which then stood for the whole schema: the other members' requirements were lost."""
    schema = {
        "$defs": {"base": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
        "allOf": [{"$ref": "#/$defs/base", "description": "the base"},
                  {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}],
    }
    g = json_schema_to_gbnf(schema)
    assert accepts(g, '{"a": 1, "b": true}')
    assert not accepts(g, '{"a": 1}')
    assert not accepts(g, '{"b": true}')


def test_all_of_ref_uses_json_pointer_escapes():
    """Regression: allOf resolved its $ref members with a resolver of its own that knew no
    JSON-pointer escapes; it now shares the one $ref uses."""
    schema = {"$defs": {"a/b": {"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"]}},
              "allOf": [{"$ref": "#/$defs/a~1b"}]}
    g = json_schema_to_gbnf(schema)
    assert accepts(g, '{"x": null}') and not accepts(g, "{}")


def test_anchor_ref_is_refused_not_read_as_the_root():
    """Regression: ``#name`` (an anchor) used to resolve silently to the root schema."""
    schema = {"type": "object", "properties": {"n": {"$ref": "#num"}},
              "$defs": {"num": {"$anchor": "num", "type": "integer"}}}
    with pytest.raises(GrammarError, match="anchors"):
        json_schema_to_gbnf(schema)


def test_resolve_and_merge_helpers():
    root = {"$defs": {"x": [{"type": "null"}]}}
    assert resolve_ref("#", root, "#") is root
    assert resolve_ref("#/$defs/x/0", root, "#") == {"type": "null"}
    merged = merge_schemas(OBJ_AB | {"required": ["a"]},
                           {"properties": {"c": {"type": "null"}}, "required": ["c", "a"], "type": "array"}, root, "#")
    assert list(merged["properties"]) == ["a", "b", "c"]
    assert merged["required"] == ["a", "c"]
    assert merged["type"] == "object"  # the first schema's keys win
