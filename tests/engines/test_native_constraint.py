"""Constrained generation in the native runtime: llguidance's token masks, applied as a
logits processor (:mod:`kimi_chat.engines.constrain`), in llama.cpp on the tiny random models of both
families. The model is noise: what the produced calls satisfy, the constraint alone guarantees. The
arguments are checked with ``jsonschema`` (not with kimi_chat's own code).

Skipped without llama-cpp-python / llguidance / jsonschema (CI installs them with .ci/install-native.sh,
where their absence fails) or without the reference data (the tiny models' vocabulary).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_in_ci, skip_without_reference

from kimi_chat import markers as M

try:
    import jsonschema
    import llama_cpp  # noqa: F401
    import llguidance  # noqa: F401

    HAVE_ALL = True
except ImportError:
    HAVE_ALL = False

require_in_ci(HAVE_ALL, "llama-cpp-python, llguidance and jsonschema (.ci/install-native.sh installs them)")
pytestmark = [pytest.mark.native,
              pytest.mark.skipif(not HAVE_ALL, reason="needs llama-cpp-python, llguidance and jsonschema "
                                 "(bash .ci/install-native.sh .venv)")]

K2 = "kimi-k2-instruct-0905"
K3 = "kimi-k3"
ASK = [{"role": "user", "content": "Book it."}]

# every keyword here bounds the output, so a call always closes within max_tokens; every one is
# enforced exactly in both families (K3 writes the nested object as JSON)
BOOKING = {
    "type": "object",
    "properties": {
        "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        "cabin": {"type": "string", "enum": ["economy", "business"]},
        "passenger": {
            "type": "object",
            "properties": {
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
                "meal": {"enum": ["veg", "fish", None]},
                "ticket": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
            },
            "required": ["age", "meal", "ticket"],
            "additionalProperties": False,
        },
    },
    "required": ["seats", "cabin", "passenger"],
    "additionalProperties": False,
}
LEVEL = {"type": "object", "properties": {"level": {"type": "integer", "minimum": -3, "maximum": 3}},
         "required": ["level"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "book", "description": "Book seats.", "parameters": BOOKING}},
    {"type": "function", "function": {"name": "set_level", "description": "Set a level.", "parameters": LEVEL}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
NAMED = {"type": "function", "function": {"name": "book"}}


def _build(tmp_path_factory: pytest.TempPathFactory, dialect: str) -> Path:
    from kimi_chat.testing.tiny_model import build_tiny_model

    skip_without_reference()
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / f"tiny-{dialect}.gguf", dialect=dialect)


@pytest.fixture(scope="module")
def k2_gguf(tmp_path_factory):
    return _build(tmp_path_factory, K2)


@pytest.fixture(scope="module")
def k3_gguf(tmp_path_factory):
    return _build(tmp_path_factory, K3)


@pytest.fixture(scope="module")
def models(k2_gguf, k3_gguf):
    from kimi_chat.engines.native import NativeModel

    loaded = {K2: NativeModel.load(k2_gguf, n_ctx=2048), K3: NativeModel.load(k3_gguf, n_ctx=2048)}
    yield loaded
    for m in loaded.values():
        m.close()


def _options(dialect: str) -> dict:
    return {"thinking": False} if dialect == K3 else {}


def _assert_valid_calls(r, *, names: set[str]) -> None:
    assert r.finish_reason == "tool_calls", (r.finish_reason, r.text)
    calls = r.message["tool_calls"]
    assert calls, r.text
    for c in calls:
        assert c["function"]["name"] in names, c
        jsonschema.validate(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]])


def _assert_no_typed_marker(model, r) -> None:
    """Every marker in the output text is the marker's special id (none spelled by ordinary tokens)."""
    from kimi_chat.grammar import format_markers

    for m in format_markers(model.dialect):
        assert r.text.count(m.text) == r.completion_ids.count(m.id), (m.text, r.text)


# --------------------------------------------------------------------------------------------------
# forced calls: the constraint alone makes the arguments valid


@pytest.mark.parametrize("dialect", [K2, K3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_required_call_arguments_validate(models, dialect, seed):
    model = models[dialect]
    r = model.chat(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=160,
                   temperature=1.0, seed=seed, **_options(dialect))
    _assert_valid_calls(r, names=set(SCHEMAS))
    assert len(r.message["tool_calls"]) == 1
    _assert_no_typed_marker(model, r)
    assert r.constraint is not None and r.grammar == r.constraint.lark


@pytest.mark.parametrize("dialect", [K2, K3])
@pytest.mark.parametrize("seed", [3, 4])
def test_named_call_is_that_function_and_validates(models, dialect, seed):
    model = models[dialect]
    r = model.chat(ASK, tools=TOOLS, tool_choice=NAMED, parallel_tool_calls=False, max_tokens=160,
                   temperature=1.0, seed=seed, **_options(dialect))
    _assert_valid_calls(r, names={"book"})
    _assert_no_typed_marker(model, r)


@pytest.mark.parametrize("dialect", [K2, K3])
def test_parallel_required_calls_each_validate(models, dialect):
    model = models[dialect]
    tools = [TOOLS[1]]  # the short schema: several calls fit in max_tokens
    r = model.chat(ASK, tools=tools, tool_choice="required", max_tokens=200, temperature=1.0, seed=5,
                   **_options(dialect))
    _assert_valid_calls(r, names={"set_level"})
    _assert_no_typed_marker(model, r)


# --------------------------------------------------------------------------------------------------
# the mask itself


@pytest.mark.parametrize("dialect", [K2, K3])
def test_mask_refuses_a_typed_marker_and_allows_the_end_only_when_complete(models, dialect):
    """Replaying a named call through a fresh mask of its constraint: every id is allowed where it
    came, the end of turn only once the call is complete, and a marker spelled with ordinary tokens
    is refused where the marker's id is expected."""
    from kimi_chat.engines.constrain import ConstraintViolation, mask_for

    model = models[dialect]
    tok = model.tokenizer()
    r = model.chat(ASK, tools=[TOOLS[1]], tool_choice={"type": "function", "function": {"name": "set_level"}},
                   parallel_tool_calls=False, max_tokens=80, temperature=1.0, seed=6, **_options(dialect))
    assert r.finish_reason == "tool_calls", r.text
    end, turn = r.completion_ids[-1], r.completion_ids[:-1]
    c = r.constraint
    assert c.accepts(r.text) and c.accepts(tok.decode(turn))
    mask = mask_for(c, tok, dialect=model.dialect, prompt_len=0)
    for i, t in enumerate(turn):
        ok = mask.allowed()
        assert ok[t] and not ok[end], (i, tok.decode(turn[:i + 1]))
        mask.feed([t])
    assert mask.accepting and mask.allowed()[end]
    # the call's last marker, spelled with ordinary tokens where its id is expected
    last = max(i for i, t in enumerate(turn) if t in tok.special_ids)
    typed = tok.encode(tok.id_to_token(turn[last]), allow_special=False)
    assert len(typed) > 1
    mask = mask_for(c, tok, dialect=model.dialect, prompt_len=0)
    mask.feed(turn[:last])
    assert mask.allowed()[turn[last]] and not mask.allowed()[typed[0]]
    with pytest.raises(ConstraintViolation):
        mask.feed(typed)


def test_a_raw_string_pattern_is_enforced_in_generation(models):
    """K3 writes a string argument raw, between its markers: its ``pattern`` and ``maxLength`` are enforced on
    that text (llguidance regular expressions), so the constraint is exact and a random model, which does not
    write three capitals by chance, writes a call that satisfies the schema (``jsonschema``) every time."""
    code = {"type": "object", "properties": {"code": {"type": "string", "maxLength": 3, "pattern": "^[A-Z]{3}$"}},
            "required": ["code"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "code", "parameters": code}}]
    for seed in range(4):
        r = models[K3].chat(ASK, tools=tools, tool_choice="required", parallel_tool_calls=False, max_tokens=60,
                            temperature=1.0, seed=seed, thinking=False)
        assert r.constraint.exact and not r.constraint.notes
        (call,) = r.parsed.tool_calls
        assert jsonschema.Draft202012Validator(code).is_valid(json.loads(call.arguments)), (call, r.text)
        assert call.status.value == "ok" and r.message.get("tool_calls"), (call, r.text)


def test_mask_costs_are_recorded(models):
    r = models[K2].chat(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=160,
                        temperature=1.0, seed=0)
    assert len(r.mask.step_seconds) == len(r.completion_ids)


def test_user_gbnf_still_constrains_and_no_mask_is_made(models):
    r = models[K2].chat(ASK, tools=TOOLS, grammar='root ::= "ok"', max_tokens=8, temperature=1.0, seed=0)
    assert r.message["content"] == "ok" and r.text == "ok" + M.IM_END.text
    assert r.constraint is None and r.mask is None and r.grammar == 'root ::= "ok"'


def test_grammar_false_is_unconstrained(models):
    r = models[K2].chat(ASK, tools=TOOLS, tool_choice="required", grammar=False, max_tokens=4, seed=0)
    assert r.constraint is None and r.mask is None and r.grammar is None


# --------------------------------------------------------------------------------------------------
# the CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "kimi_chat.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize("fmt", ["lark", "gbnf"])
def test_cli_run_show_grammar(k2_gguf, tmp_path, fmt):
    from kimi_chat.grammar import constraint

    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": ASK, "tools": TOOLS, "tool_choice": NAMED, "parallel_tool_calls": False,
                               "max_tokens": 160,
                               "temperature": 1.0, "seed": 1}))
    p = _cli("run", str(k2_gguf), str(req), "-q", "--show-grammar", "--grammar-format", fmt)
    assert p.returncode == 0, p.stderr
    c = constraint(TOOLS, dialect=K2, tool_choice=NAMED, parallel_tool_calls=False)
    shown = c.lark if fmt == "lark" else c.gbnf
    assert shown in p.stderr
    assert f"exact: {str(c.exact if fmt == 'lark' else c.gbnf_exact).lower()}" in p.stderr
    call = json.loads(p.stdout)["choices"][0]["message"]["tool_calls"][0]
    jsonschema.validate(json.loads(call["function"]["arguments"]), BOOKING)
