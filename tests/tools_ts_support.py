"""Helpers for the in-template TypeScript tool declaration (tests/test_templates_tools_ts.py,
tests/engines/test_llama_server_tools_ts.py, benchmarks/tools_ts_coverage.py).

The expected text is always the OFFICIAL encoder's: ``Kimi-K2.6/tool_declaration_ts.py`` of the
reference data (Moonshot's own copy), loaded from there at run time and never copied, called as
``tokenization_kimi.py`` calls it: on the deep-sorted tools, any exception meaning "no tools_ts_str"
(the template then declares the tools as JSON)."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from kimi_chat.reference.oracle import deep_sort_dict, oracle_template, render_template
from kimi_chat.reference import reference_file
from kimi_chat.templates import template_text

ENCODER = "Kimi-K2.6/tool_declaration_ts.py"
CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "tools_ts" / "corpus.json"
TS_DIALECTS = ("kimi-k2.5", "kimi-k2.6")
_ENCODER_MODULE: Any = None


def official_encoder() -> Any | None:
    """The official ``tool_declaration_ts`` module, or ``None`` without the reference data."""
    global _ENCODER_MODULE
    if _ENCODER_MODULE is None:
        path = reference_file(ENCODER)
        if path is None:
            return None
        spec = importlib.util.spec_from_file_location("official_tool_declaration_ts", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        _ENCODER_MODULE = module
    return _ENCODER_MODULE


def official_ts(tools: list) -> str | None:
    """``tools_ts_str`` as the official tokenizer computes it (``None`` when its encoder raises)."""
    enc = official_encoder()
    assert enc is not None, "official encoder not available"
    logging.getLogger(enc.__name__).disabled = True  # its warning for `false` schemas
    try:
        return enc.encode_tools_to_typescript_style(deep_sort_dict(tools))
    except Exception:
        return None


def json_declaration(tools: list) -> str:
    """The declaration the official template writes without tools_ts_str (keys sorted by the tokenizer)."""
    return json.dumps(deep_sort_dict(tools), ensure_ascii=False, separators=(",", ":"))


def official_declaration(tools: list) -> str:
    """What the official tokenizer puts between ``tool_declare<|im_middle|>`` and ``<|im_end|>``."""
    return official_ts(tools) or json_declaration(tools)


MSGS = [{"role": "user", "content": "hi"}]

TOOL_CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Use the tool.", "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18°C"},
]
"""A conversation with a tool call and its result (the tests add their own turns after it)."""


def declaration_of(prompt: str) -> str:
    """The tool declaration inside a rendered prompt."""
    return prompt.split("tool_declare<|im_middle|>", 1)[1].split("<|im_end|>", 1)[0]


def ours_transformers(tools: list, dialect: str = "kimi-k2.6", messages: list | None = None, **kwargs: Any) -> str:
    """Our template rendered by transformers' machinery with tools as given (no tools_ts_str)."""
    return render_template(template_text(dialect), messages or MSGS, tools=tools, sort_tool_keys=False, **kwargs)


def official_prompt(tools: list, dialect: str, messages: list | None = None, **kwargs: Any) -> str:
    """The official prompt: the oracle template, deep-sorted tools, the official encoder's tools_ts_str."""
    ts = official_ts(tools) if tools else None
    if ts is not None:
        kwargs["tools_ts_str"] = ts
    return render_template(oracle_template(dialect), messages or MSGS, tools=tools, sort_tool_keys=True, **kwargs)


def corpus() -> list[dict]:
    """The real-world schema corpus: ``[{"source": ..., "tool": {...}}, ...]``."""
    return json.loads(CORPUS.read_text(encoding="utf-8"))


# -- hypothesis: tool schemas -------------------------------------------------------------------

_names = st.text(alphabet="abcdefgXYZ_09é中", min_size=1, max_size=6)
_desc = st.one_of(st.just(""), st.text(alphabet="ab \n\"'\\/é中🦄\t:*#<>", max_size=16))
_NUMS = {
    # any float; or (short=True) floats with a few significant digits, as schemas usually hold
    False: st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=64)),
    True: st.one_of(st.integers(-10**6, 10**6), st.integers(-10**5, 10**5).map(lambda i: i / 100),
                    st.sampled_from([1e-06, 2.5e-05, 1e20, -0.0, 0.0001, 1e16])),
}


def _scalar_value(short: bool) -> st.SearchStrategy:
    return st.one_of(st.none(), st.booleans(), _NUMS[short], st.text(alphabet="ab\"'\n é", max_size=5))


def _json(short: bool) -> st.SearchStrategy:
    return st.recursive(_scalar_value(short), lambda c: st.one_of(st.lists(c, max_size=3),
                                                                   st.dictionaries(_names, c, max_size=3)), max_leaves=6)
_CONSTRAINTS = {
    "string": ("maxLength", "minLength", "pattern"),
    "number": ("maximum", "minimum"),
    "integer": ("maximum", "minimum"),
    "array": ("maxItems", "minItems"),
}


@st.composite
def _extras(draw: st.DrawFn, typ: str | None, short: bool) -> dict:
    out: dict = {}
    if draw(st.booleans()):
        out["description"] = draw(_desc)
    if draw(st.integers(0, 3)) == 0:
        out["default"] = draw(_json(short))
    for key in _CONSTRAINTS.get(typ or "", ()):
        if draw(st.integers(0, 2)) == 0:
            out[key] = draw(st.text(alphabet="^a-z$[]{}", max_size=6)) if key == "pattern" else draw(_NUMS[short])
    if draw(st.integers(0, 5)) == 0:
        out["title"] = draw(_names)  # ignored by the encoder
    return out


@st.composite
def schemas(draw: st.DrawFn, defs: tuple[str, ...] = (), depth: int = 0, odd: bool = False, short: bool = False) -> Any:
    """A sub-schema of the kinds the encoder knows; ``odd`` adds ones it rejects (a $ref it cannot
    resolve, an enum contradicting its type, an unknown keyword set, a type list with an unknown name)."""
    kinds = ["scalar", "enum", "union", "bool", "empty", "ref", "self"]
    if depth < 3:
        kinds += ["object", "array", "anyOf"]
    if odd:
        kinds += ["odd"]
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        typ = draw(st.sampled_from(["string", "number", "integer", "boolean", "null", "any", "date"]))
        return {"type": typ, **draw(_extras(typ, short))}
    if kind == "enum":
        members = draw(st.lists(_scalar_value(short), min_size=1, max_size=4))
        s = {"enum": members, **draw(_extras(None, short))}
        if draw(st.booleans()):
            s["type"] = draw(st.sampled_from(["string", "number", "integer", "boolean", ["string", "null"], ["null", "integer"]]))
        return s
    if kind == "union":
        return {"type": draw(st.lists(st.sampled_from(["string", "number", "integer", "boolean", "null", "object", "array"]),
                                      min_size=1, max_size=3)), **draw(_extras(None, short))}
    if kind == "bool":
        return draw(st.booleans())
    if kind == "empty":
        return {}
    if kind == "ref":
        if not defs:
            return {"type": "string"}
        return {"$ref": "#/$defs/" + draw(st.sampled_from(defs)), **draw(_extras(None, short))}
    if kind == "self":
        return {"$ref": "#"}
    if kind == "odd":
        return draw(st.sampled_from([
            {"$ref": "#/definitions/X"}, {"$ref": "#/$defs/missing"}, {"type": "integer", "enum": ["a"]},
            {"allOf": [{"type": "string"}]}, {"type": ["string", "date"]}, {"anyOf": "x"}, 5,
            {"type": "object", "additionalProperties": 1}, {"description": 7, "type": "string"},
        ]))
    if kind == "array":
        s: dict = {"type": "array", **draw(_extras("array", short))}
        if draw(st.integers(0, 3)):
            s["items"] = draw(schemas(defs, depth + 1, odd, short))
        return s
    if kind == "anyOf":
        return {"anyOf": draw(st.lists(schemas(defs, depth + 1, odd, short), max_size=3)), **draw(_extras(None, short))}
    return draw(objects(defs, depth + 1, odd, short))


@st.composite
def objects(draw: st.DrawFn, defs: tuple[str, ...] = (), depth: int = 0, odd: bool = False, short: bool = False) -> dict:
    """An object schema: properties (in any key order), required (some names, maybe unknown ones),
    maybe additionalProperties."""
    props = draw(st.dictionaries(_names, schemas(defs, depth, odd, short), max_size=4))
    s: dict = {"type": "object", "properties": props, **draw(_extras(None, short))}
    names = sorted(props)
    if names or draw(st.booleans()):
        s["required"] = draw(st.lists(st.sampled_from(names + ["ghost"]), unique=True, max_size=len(names) + 1))
    if draw(st.integers(0, 3)) == 0:
        s["additionalProperties"] = draw(st.one_of(st.booleans(), schemas(defs, depth + 1, odd, short)))
    return s


@st.composite
def tool_lists(draw: st.DrawFn, odd: bool = False, short: bool = False, functions_only: bool = False) -> list:
    """One to three function tools (sometimes another tool type, unless ``functions_only``), with root
    $defs referenced by name; ``short``: floats with few digits only."""
    tools = []
    for _ in range(draw(st.integers(1, 3))):
        defs = tuple(draw(st.lists(st.sampled_from(["Node", "Item", "Addr", "Ünï"]), unique=True, max_size=2)))
        params = draw(st.one_of(objects(defs, 0, odd, short), st.just({}), st.none())) if not defs else draw(objects(defs, 0, odd, short))
        if defs:
            params["$defs"] = {d: draw(schemas(defs, 1, odd, short)) for d in defs}
        function: dict = {"name": draw(_names)}
        if draw(st.booleans()):
            function["description"] = draw(_desc)
        if params is not None:
            function["parameters"] = params
        if not functions_only and draw(st.integers(0, 9)) == 0:
            tools.append({"type": "_plugin", "_plugin": {"name": "x"}})
        tools.append({"type": "function", "function": function})
    return tools


_WILD_KEYS = st.sampled_from(["type", "properties", "required", "items", "enum", "anyOf", "$ref", "$defs",
                              "additionalProperties", "description", "default", "minimum", "maxLength", "pattern",
                              "maxItems", "$self_ref", "title", "A", "B", "a", "b"])
_WILD_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1e-07, 2.0]),
                       st.sampled_from(["string", "object", "array", "integer", "number", "null", "boolean", "#",
                                        "#/$defs/A", "#/$defs/B", "a", "", "x\ny"]))
_WILD = st.recursive(_WILD_LEAF, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_WILD_KEYS, c, max_size=4)),
                     max_leaves=12)


def wild_tool_lists() -> st.SearchStrategy[list]:
    """Function tools whose parameters are any JSON built from schema keywords and values (mostly
    schemas the official encoder rejects or encodes oddly)."""
    function = st.fixed_dictionaries({"name": st.just("f")}, optional={
        "parameters": _WILD, "description": st.one_of(st.text(max_size=5), st.integers())})
    return st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": function}), min_size=1, max_size=2)
