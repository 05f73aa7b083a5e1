"""The in-template TypeScript tool declaration in a real llama-server: ``/apply-template`` with our
K2.5/K2.6 templates and NO
``tools_ts_str`` declares tools exactly as the official tokenizer does (the official encoder
``Kimi-K2.6/tool_declaration_ts.py`` on the deep-sorted tools), so a conversation with tools gets the
official prompt. llama.cpp's Jinja runs the same macros as transformers (tests/test_templates_tools_ts.py),
with its own float printing replaced by the template's (``ts_float``).

The server is the one tests/llama_server_support.py finds (``.ci/install-native.sh`` builds it);
without it these tests skip locally, with the reason, and fail under CI."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, note, settings

from kimi_chat.reference import reference_file
from kimi_chat.templates import template_path

from conftest import IN_CI, needs_reference
from llama_server_support import (
    RECOMMENDED_FLAGS, LlamaServer, floats_written_alike, has_non_json_arguments, llama_server_message, llama_server_tool, missing_reason,
)
from tools_ts_support import (
    MSGS, TOOL_CONVERSATION, TS_DIALECTS, corpus, declaration_of, json_declaration, official_declaration, official_prompt,
    official_ts, tool_lists,
)

pytestmark = [pytest.mark.native, needs_reference]

CONVERSATION = [
    *TOOL_CONVERSATION,
    {"role": "assistant", "content": "18°C.", "reasoning_content": "Done."},
    {"role": "user", "content": "Thanks. Tomorrow?"},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``server(dialect)``: llama-server with our template for ``dialect`` and the README's flags."""
    reason = missing_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI: {reason}; .ci/install-native.sh must build it")
        pytest.skip(reason)
    pytest.importorskip("gguf", reason="the native extra is not installed (.ci/install-native.sh)")
    from kimi_chat.testing.tiny_model import build_tiny_model

    tmp = tmp_path_factory.mktemp("llama-server-ts")
    gguf = build_tiny_model(tmp / "tiny-kimi.gguf", dialect="kimi-k2-instruct-0905")
    running: dict[str, LlamaServer] = {}

    def get(dialect: str) -> LlamaServer:
        if dialect not in running or not running[dialect].alive():
            running[dialect] = LlamaServer(gguf, template_path(dialect), tmp / f"{dialect}.log",
                                           args=RECOMMENDED_FLAGS[1:])
        return running[dialect]

    yield get
    for s in running.values():
        s.close()


def declared(server, tools: list, dialect: str = "kimi-k2.6") -> str:
    return declaration_of(server(dialect).apply_template(MSGS, tools))


REFUSALS = (b"JSON schema error", b"Unsupported tool type", b"Failed to parse tools")


def declared_or_refused(server, tools: list, dialect: str = "kimi-k2.6") -> str | None:
    """The declaration, or ``None`` when llama-server refuses the request itself (HTTP 500 from its
    tool parsing or schema-to-grammar step, before any template runs: no prompt to compare)."""
    try:
        return declared(server, tools, dialect)
    except urllib.error.HTTPError as e:
        body = e.read()
        if e.code == 500 and any(r in body for r in REFUSALS):
            return None
        raise


@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_corpus_one_tool_at_a_time(server, dialect):
    for case in corpus():
        tools = [case["tool"]]
        ts = official_ts(tools)
        if ts is None:
            continue  # JSON: test_rejected_schemas_are_declared_as_json
        if '"$ref": "#"' in json.dumps(tools):
            # KNOWN: llama-server's own schema-to-grammar step refuses a root self-reference (HTTP 500)
            with pytest.raises(urllib.error.HTTPError) as e:
                declared(server, tools, dialect)
            assert b"unsupported $ref #" in e.value.read()
            continue
        assert declared(server, tools, dialect) == ts, case["source"]


@pytest.mark.parametrize("dialect", TS_DIALECTS)
@pytest.mark.parametrize("agp", [True, False])
def test_conversation_with_tools_gets_the_official_prompt(server, dialect, agp):
    tools = [c["tool"] for c in corpus() if official_ts([c["tool"]]) and '"$ref": "#"' not in json.dumps(c["tool"])]
    got = server(dialect).apply_template(CONVERSATION, tools, add_generation_prompt=agp)
    assert got == official_prompt(tools, dialect, CONVERSATION, add_generation_prompt=agp)
    # the messages llama-server passes on are the ones sent here (no rewrite applies to them)
    assert [llama_server_message(m) for m in CONVERSATION][2]["tool_calls"][0]["function"]["arguments"] == {"location": "Paris"}


GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"


@pytest.mark.parametrize("dialect", TS_DIALECTS)
def test_golden_conversations_with_tools_without_tools_ts_str(server, dialect):
    # the golden conversations with tools (official prompts, fixtures/golden), sent with NO
    # tools_ts_str: the official prompt, apart from the one rewrite test_llama_server.py lists for them
    # (K2.6: llama-server drops the `reasoning` alias)
    seen = 0
    for path in sorted((GOLDEN / dialect).glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        if not case.get("tools") or path.stem == "reasoning_and_reasoning_content":
            continue
        if has_non_json_arguments(case["messages"]):  # KNOWN: llama-server refuses them (test_llama_server.py)
            continue
        body = {"add_generation_prompt": case["add_generation_prompt"]}
        if case.get("options"):
            body["chat_template_kwargs"] = dict(case["options"])
        got = server(dialect).apply_template(case["messages"], case["tools"], **body)
        assert got == path.with_suffix(".txt").read_bytes().decode("utf-8"), path.stem
        assert declaration_of(got) == official_declaration(case["tools"]), path.stem
        seen += 1
    assert seen >= 5


def test_golden_reference_cases(server):
    lines = reference_file("unverified/k25_tools_ts.golden.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        tools = json.loads(line)["tools"]
        got = declared_or_refused(server, tools)
        assert got is None or got == official_declaration(tools)


def test_rejected_schemas_are_declared_as_json(server):
    # the official encoder raises: the tokenizer passes no tools_ts_str, the template writes JSON
    # (llama-server's rebuilt tool: "type" then "function" {"name", "description", "parameters"}, sorted
    # by the template; integers only here, which llama.cpp's tojson writes as Python does)
    tools = [{"type": "function", "function": {"name": "bad", "description": "d", "parameters": {
        "type": "object", "properties": {"x": {"$ref": "#/definitions/X"}, "n": {"type": "integer", "maximum": 3}}}}}]
    assert official_ts(tools) is None
    got = declared_or_refused(server, tools)
    assert got is None or got == json_declaration(tools)


@pytest.mark.parametrize("x", [0.5, 0.85, 1.0, 3600.0, 0.0001, 1e-06, 2.5e-05, 1e16, 1e20, -0.0, 123.456])
def test_floats_are_written_as_python_writes_them(server, x):
    # llama.cpp's own float printing has six significant digits; the template computes Python's repr
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"v": {"type": "number", "minimum": x, "default": x,
                                               "enum": [x]}, "w": {"type": "number", "default": [x, {"k": x}]}}}}}]
    assert declared(server, tools) == official_ts(tools)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(tools=tool_lists(odd=True, short=True, functions_only=True))
def test_generated_schemas(server, tools):
    # floats with few digits (the template computes their repr; see test_floats_...); tools are all
    # functions (llama-server refuses any other type)
    note(json.dumps(tools, ensure_ascii=False))
    ts = official_ts(tools)
    got = declared_or_refused(server, tools)
    assume(got is not None)
    if ts is not None:
        assert got == ts
    else:
        # the JSON declaration of the tools as llama-server rebuilds them, floats as its tojson writes them
        sent = [llama_server_tool(t) for t in tools]
        assume(floats_written_alike(sent))
        assert got == json_declaration(sent)


def test_templates_without_ts_macros_are_unchanged(server):
    # the tools_ts_str a caller passes still wins
    tools = [corpus()[0]["tool"]]
    got = server("kimi-k2.6").apply_template(MSGS, tools, chat_template_kwargs={"tools_ts_str": "# given\n"})
    assert declaration_of(got) == "# given\n"
