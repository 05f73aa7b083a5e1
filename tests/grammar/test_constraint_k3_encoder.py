"""The Kimi-K3 constraint against the official encoder, on generated schemas: for a tool's ``parameters``
schema drawn from the shapes real tools use (typed properties with string keywords, numbers, arrays,
nested objects, ``anyOf`` of types, a top-level ``anyOf``/``allOf``/``$ref``, each reading of
``additionalProperties``), a valid instance (drawn from the schema by :func:`_instances`, checked valid
by ``jsonschema``) rendered as a call by the official
``encoding_k3`` is accepted by ``constraint(...)`` whenever it claims ``exact``, and an invalid instance
(a valid one changed, checked invalid by ``jsonschema``) rendered the same way is refused; the GBNF
export takes the valid call too where it claims ``gbnf_exact``.

Instances list the declared properties in declaration order, undeclared ones after (the order the
constraint generates, as llguidance's ``%json`` does for K2)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import needs_reference, require_in_ci

_HAVE = all(importlib.util.find_spec(m) is not None for m in ("llguidance", "jsonschema"))
require_in_ci(_HAVE, "the test extra (pip install -e '.[test]': llguidance, jsonschema)")
if not _HAVE:
    pytest.skip("llguidance and jsonschema are not installed (pip install -e '.[test]')", allow_module_level=True)

import jsonschema  # noqa: E402
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gbnf_recognizer import accepts as gbnf_accepts  # noqa: E402
from kimi_chat.grammar.request import constraint  # noqa: E402

K3 = "kimi-k3"
USER = [{"role": "user", "content": "Please call the tool."}]

_CHARS = st.characters(codec="utf-8", exclude_characters="\x7f")
"""Any character but a raw DEL, which llguidance refuses inside a JSON string (a documented departure, pinned by
test_raw_del_in_a_json_string_is_refused_escaped_accepted)."""

_STRINGS = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
              st.integers(0, 3), st.integers(0, 6)),
    st.sampled_from([{"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "[0-9]"},
                     {"type": "string", "pattern": "^ab"}, {"type": "string", "pattern": "x$|^y"},
                     {"type": "string", "format": "date"}, {"type": "string", "format": "uuid"},
                     {"type": "string", "format": "ipv4"}, {"type": "string", "format": "date-time"},
                     {"type": "string", "enum": ["red", "green", "a b"]},
                     {"type": "string", "enum": ["a", "bb", "ccc"], "maxLength": 2},
                     {"const": "fixed"}]),
)
_SCALARS = st.one_of(
    _STRINGS,
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
              st.integers(-5, 5), st.integers(0, 20)),
    st.just({"type": "number"}), st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.just({"type": ["string", "null"]}), st.just({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]}),
    st.just({"enum": [1, "one", None]}),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.builds(lambda items, n: {"type": "array", "items": items, "maxItems": n}, inner, st.integers(0, 3)),
        st.builds(lambda props: {"type": "object", "properties": props, "additionalProperties": False},
                  st.dictionaries(st.sampled_from(["p", "q", "r"]), inner, max_size=2)),
    ),
    max_leaves=3,
)
_NAMES = st.sampled_from(["city", "days", "unit", "query", "lawsuit.check_case", "a&b", "tags", "x"])
_EXTRA = st.sampled_from([None, False, True, {"type": "integer"}, {"type": "string", "maxLength": 4}])


@st.composite
def _object(draw, names=_NAMES) -> dict:
    props = draw(st.dictionaries(names, _VALUES, min_size=1, max_size=3))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=len(props)))
    schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = [k for k in props if k in required]
    extra = draw(_EXTRA)
    if extra is not None:
        schema["additionalProperties"] = extra
    counts = draw(st.sampled_from([None, "min", "max"]))
    if counts == "min":
        schema["minProperties"] = draw(st.integers(1, len(props) + (extra is not False)))
    elif counts == "max":
        schema["maxProperties"] = draw(st.integers(len(required), len(props)))
    return schema


@st.composite
def _parameters(draw) -> dict:
    shape = draw(st.sampled_from(["object", "anyOf", "allOf", "ref"]))
    if shape == "object":
        return draw(_object())
    if shape == "anyOf":  # branches told apart by their required properties (disjoint names)
        a = draw(_object(st.sampled_from(["radius", "shape"])))
        b = draw(_object(st.sampled_from(["side", "label"])))
        a["required"], b["required"] = list(a["properties"])[:1], list(b["properties"])[:1]
        for branch in (a, b):
            branch["additionalProperties"] = False
            branch.pop("maxProperties", None)
            branch.pop("minProperties", None)
        return {"anyOf": [a, b]}
    if shape == "allOf":
        a = draw(_object(st.sampled_from(["city", "days"])))
        b = draw(_object(st.sampled_from(["unit", "tags"])))
        for branch in (a, b):  # members add up: counts and additionalProperties of one member would clash
            for key in ("additionalProperties", "minProperties", "maxProperties"):
                branch.pop(key, None)
        return {"type": "object", "allOf": [a, b]}
    return {"$ref": "#/$defs/args", "$defs": {"args": draw(_object())}}


_FORMATS = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "date-time": st.builds(lambda d, h, m, z: f"{d.isoformat()}T{h:02d}:{m:02d}:05{z}", st.dates(),
                           st.integers(0, 23), st.integers(0, 59), st.sampled_from(["Z", "+01:00", ".5z"])),
}


def _instances(schema: object, root: dict) -> st.SearchStrategy:
    """Values of ``schema`` (the shapes :func:`_parameters` draws; the test keeps the ones ``jsonschema``
    finds valid). hypothesis-jsonschema would do it, but its release does not run on this hypothesis."""
    if schema is True or schema == {}:
        return st.one_of(st.none(), st.booleans(), st.integers(-9, 9), st.text(_CHARS, max_size=4))
    assert isinstance(schema, dict)
    if "$ref" in schema:
        return _instances(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_instances(s, root) for s in schema["anyOf"]])
    if "allOf" in schema:
        merged: dict = {"properties": {}, "required": []}
        for s in schema["allOf"]:
            merged["properties"].update(s.get("properties", {}))
            merged["required"] += s.get("required", [])
        extras = [s["additionalProperties"] for s in schema["allOf"] if "additionalProperties" in s]
        if extras:
            merged["additionalProperties"] = extras[0]
        return _instances(merged, root)
    t = schema.get("type", "object")
    if isinstance(t, list):
        return st.one_of([_instances({**schema, "type": x}, root) for x in t])
    if t == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"].replace("$", r"\Z"), alphabet=_CHARS)
        if "format" in schema:
            return _FORMATS[schema["format"]]
        lo = schema.get("minLength", 0)
        return st.text(_CHARS, min_size=lo, max_size=schema.get("maxLength", lo + 8))
    if t == "integer":
        return st.integers(schema.get("minimum", -1000), schema.get("maximum", 1000))
    if t == "number":
        return st.one_of(st.integers(-1000, 1000), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
    if t == "boolean":
        return st.booleans()
    if t == "null":
        return st.none()
    if t == "array":
        return st.lists(_instances(schema.get("items", True), root), max_size=schema.get("maxItems", 3))
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    if "minProperties" in schema or "maxProperties" in schema:  # those with the count (or drawn again)
        plain = {k: v for k, v in schema.items() if k not in ("minProperties", "maxProperties")}
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties", 99)
        return _instances(plain, root).filter(lambda v: lo <= len(v) <= hi)
    extra = schema.get("additionalProperties", True)
    fixed = st.fixed_dictionaries({k: _instances(v, root) for k, v in props.items() if k in required},
                                  optional={k: _instances(v, root) for k, v in props.items() if k not in required})
    fixed = fixed.map(lambda d: {k: d[k] for k in props if k in d})  # declaration order, as generated
    if extra is False:
        return fixed
    more = st.dictionaries(st.text(_CHARS, max_size=6).filter(lambda k: k not in props), _instances(extra, root),
                           max_size=2)
    return st.builds(lambda a, b: {**a, **b}, fixed, more)


def _order(schema: dict) -> list[str]:
    """Property names in the order the schema declares them (branches and members in order)."""
    out: list[str] = []

    def visit(s: object) -> None:
        if not isinstance(s, dict):
            return
        if "$ref" in s:
            visit(schema["$defs"][s["$ref"].rsplit("/", 1)[1]])
        out.extend(k for k in s.get("properties", {}) if k not in out)
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in s.get(key, []):
                visit(sub)

    visit(schema)
    return out


def _ordered(value: dict, schema: dict) -> dict:
    order = _order(schema)
    return {**{k: value[k] for k in order if k in value}, **{k: v for k, v in value.items() if k not in order}}


def _completion(schema: dict, value: dict, thinking: bool) -> str:
    """What the official encoder writes for a call of ``f`` with ``value`` after the generation prompt."""
    from kimi_chat.families.k3.oracle import official_k3_render

    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps(value)}}
    message = {"role": "assistant", "content": None, "reasoning_content": "ok", "tool_calls": [call]}
    prompt = official_k3_render(USER, tools, add_generation_prompt=True, thinking=thinking)
    full = official_k3_render(USER + [message], tools, add_generation_prompt=False, thinking=thinking)
    assert full.startswith(prompt)
    return full[len(prompt):]


def _validator(schema: dict) -> jsonschema.Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


_WRONG = st.one_of(st.none(), st.booleans(), st.integers(-100, 100), st.text(max_size=5),
                   st.lists(st.integers(0, 3), max_size=2), st.just({"k": 1}))


@needs_reference
@settings(deadline=None, suppress_health_check=list(HealthCheck))  # examples: the profile (ci: 300)
@given(schema=_parameters(), data=st.data(), thinking=st.booleans())
def test_official_encoder_calls_are_accepted_and_invalid_ones_refused(schema, data, thinking):
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    c = constraint(tools, dialect=K3, tool_choice="required", parallel_tool_calls=False, thinking=thinking)
    # every keyword these schemas use is enforced, but a minProperties that one undeclared key written twice
    # (two elements, one property: no grammar keeps the keys distinct) can reach is noted
    assert c.exact or [n.path for n in c.notes] == ["tools[0].function.parameters.minProperties"], c.notes
    check = _validator(schema)
    value = _ordered(data.draw(_instances(schema, schema), label="valid"), schema)
    assume(check.is_valid(value))  # hypothesis-jsonschema's formats are not always jsonschema's
    text = _completion(schema, value, thinking)
    assert c.accepts(text), value
    if c.gbnf_exact:  # the GBNF export, where it claims exactness, takes the same call
        assert gbnf_accepts(c.gbnf, text.removesuffix("<|end_of_msg|>")), value
    # an invalid instance: one property's value replaced, or an undeclared property added
    bad = dict(value)
    key = data.draw(st.sampled_from(sorted(bad) + ["zz_undeclared"]), label="key")
    bad[key] = data.draw(_WRONG, label="wrong value")
    bad = _ordered(bad, schema)
    if not check.is_valid(bad):
        assert not c.accepts(_completion(schema, bad, thinking)), bad


@needs_reference
@settings(deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=_object(), data=st.data())
def test_declared_reading_accepts_declared_properties_only(schema, data):
    """``additional_properties="declared"``: the valid instances without undeclared properties are
    accepted, an undeclared property is refused unless ``additionalProperties`` says it is allowed."""
    schema.pop("minProperties", None)  # a count above the declared properties: no object under this reading
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    c = constraint(tools, dialect=K3, tool_choice="required", parallel_tool_calls=False,
                   additional_properties="declared")
    assert c.exact, c.notes
    value = data.draw(_instances(schema, schema), label="valid")
    assume(_validator(schema).is_valid(value))
    declared = {k: v for k, v in _ordered(value, schema).items() if k in schema["properties"]}
    assert _validator(schema).is_valid(declared)
    assert c.accepts(_completion(schema, declared, True)), declared
    extra = {**declared, "zz_undeclared": 1}
    if _validator(schema).is_valid(extra):
        allowed = schema.get("additionalProperties") not in (None, False)
        assert c.accepts(_completion(schema, extra, True)) is allowed, extra



@needs_reference
def test_raw_del_in_a_json_string_is_refused_escaped_accepted():
    """llguidance's JSON lexer reads a raw U+007F (DEL) in a JSON string as a control character: a K3 argument
    element's JSON (``json.dumps`` writes DEL raw) holding one is refused, written ``\\u007f`` it is accepted; a
    raw string value (no JSON) takes it as it is (docs/constraints.md, departures not noted)."""
    schema = {"type": "object", "required": ["c", "s"],
              "properties": {"c": {"type": "array", "items": {"type": "string"}}, "s": {"type": "string"}}}
    c = constraint([{"type": "function", "function": {"name": "f", "parameters": schema}}], dialect=K3,
                   tool_choice="required", parallel_tool_calls=False)
    raw = _completion(schema, {"c": ["a\x7fb"], "s": "x"}, True)
    assert "\x7f" in raw and not c.accepts(raw)
    assert c.accepts(raw.replace("\x7f", "\\u007f"))
    assert c.accepts(_completion(schema, {"c": ["ab"], "s": "x\x7fy"}, True))
