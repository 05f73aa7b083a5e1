"""One validator, one finding: the same bad input gets the same finding (code and path) from ``render(strict=True)``,
``parse`` (for tools), ``lint`` and the server (``read_chat_request`` and the ``kimi-chat serve`` app's 400).

Each expected ``(code, path)`` is reasoned from the format: the path names the field as the OpenAI body spells it
(``messages[i].FIELD``, ``tools[i].function...``); a template option's path is its name, which a body gives under
``chat_template_kwargs``."""

from __future__ import annotations

from typing import Any

import pytest

from kimi_chat import lint, parse, render
from kimi_chat.errors import RequestError, StrictModeError
from kimi_chat.messages import InvalidMessagesError, InvalidToolsError
from kimi_chat.servers.contract import read_chat_request
from kimi_chat.validation import Mode, Validator, body_param, findings_of

from conftest import needs_reference

DIALECT = "kimi-k2.6"
USER = {"role": "user", "content": "What is the weather in Paris?"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
CALL = {"role": "assistant", "content": "", "reasoning_content": "I look it up.", "tool_calls": [
    {"id": "functions.get_weather:0", "type": "function",
     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}

# (case id, messages, tools, template options, expected code, expected path, whether parse reads the input)
CASES: list[tuple[str, list[Any], Any, dict[str, Any], str, str, bool]] = [
    ("function tool without its function", [USER], [{"type": "function"}], {},
     "tool-without-function", "tools[0].function", True),
    ("function without a name", [USER], [{"type": "function", "function": {"description": "d"}}], {},
     "tool-without-function", "tools[0].function.name", True),
    ("function with an empty name", [USER], [{"type": "function", "function": {"name": ""}}], {},
     "tool-without-function", "tools[0].function.name", True),
    ("function name not a string", [USER], [{"type": "function", "function": {"name": 5}}], {},
     "invalid-tool", "tools[0].function.name", True),
    ("function description not a string", [USER],
     [{"type": "function", "function": {"name": "f", "description": 5}}], {},
     "invalid-tool", "tools[0].function.description", True),
    ("tools that are not a list", [USER], "get_weather", {}, "invalid-tool", "tools", True),
    ("a tool entry that is not an object", [USER], ["get_weather"], {}, "invalid-tool", "tools[0]", True),
    ("a role no template has", [{"role": "moderator", "content": "x"}, USER], None, {},
     "unknown-role", "messages[0].role", False),
    ("a message without a role", [{"content": "hi"}], None, {}, "missing-field", "messages[0].role", False),
    ("a role that is not a string", [{"role": 5, "content": "hi"}], None, {},
     "invalid-field", "messages[0].role", False),
    ("a tool message without tool_call_id", [USER, CALL, {"role": "tool", "content": "18 C"}], [WEATHER], {},
     "missing-tool-call-id", "messages[2].tool_call_id", False),
    ("a user message without content", [{"role": "user"}], None, {}, "missing-content", "messages[0].content", False),
    ("a field the OpenAI schema has not", [{"role": "user", "content": "hi", "tool_call": []}], None, {},
     "unknown-field", "messages[0].tool_call", False),
    ("a non-bool thinking switch", [USER], None, {"thinking": "yes"}, "non-bool-option", "thinking", False),
]
IDS = [c[0] for c in CASES]


def _errors(call: Any) -> list[tuple[str, str]]:
    """``(code, path)`` of the error findings ``call()`` returns or raises."""
    try:
        found = call()
    except (StrictModeError, InvalidMessagesError, RequestError) as e:
        found = findings_of(e)
        assert found, f"{type(e).__name__} without findings: {e}"
    return [(f.code, f.path) for f in found if f.severity == "error"]


@pytest.mark.parametrize("name, messages, tools, options, code, path, parsed", CASES, ids=IDS)
def test_render_parse_lint_and_the_contract_agree(name, messages, tools, options, code, path, parsed):
    expected = [(code, path)]
    assert _errors(lambda: render(messages, tools=tools, dialect=DIALECT, strict=True, **options)) == expected
    assert _errors(lambda: lint(messages, tools=tools, dialect=DIALECT, **options)) == expected
    if parsed:
        with pytest.raises(InvalidToolsError) as info:
            parse("Hello", tools=tools, dialect=DIALECT)
        assert [(f.code, f.path) for f in info.value.findings] == expected
    body = {"model": "kimi", "messages": messages, **({"tools": tools} if tools is not None else {}),
            **({"chat_template_kwargs": options} if options else {})}
    with pytest.raises(RequestError) as refused:
        read_chat_request(body, dialect=DIALECT)
    e = refused.value
    assert e.finding is not None and (e.finding.code, e.finding.path) == (code, path)
    assert e.status == 400 and e.param == body_param(e.finding) and str(e).endswith(f"({code})")
    # the validator itself, in the mode of each surface
    assert _errors(lambda: Validator(DIALECT, Mode.STRICT).check(messages, tools=tools, options=options)) == expected
    assert _errors(lambda: Validator(DIALECT, "api").check(messages, tools=tools, options=options)) == expected


def test_the_body_param_of_an_option_is_under_chat_template_kwargs():
    with pytest.raises(RequestError) as info:
        read_chat_request({"model": "kimi", "messages": [USER], "chat_template_kwargs": {"thinking": "yes"}},
                          dialect=DIALECT)
    assert info.value.param == "chat_template_kwargs.thinking" and info.value.finding.path == "thinking"


def test_parity_refuses_only_what_the_official_machinery_refuses():
    """A function tool without its function is rendered as given in parity mode (the official templates do),
    refused under strict and api; a message without a role is refused in every mode."""
    tools = [{"type": "function"}]
    assert Validator(DIALECT, Mode.PARITY).check([USER], tools=tools) == []
    assert "tool_declare" in render([USER], tools=tools, dialect=DIALECT)
    for dialect in (DIALECT, "kimi-k3"):
        assert Validator(dialect, Mode.PARITY).check([USER], tools=tools) == []
        for mode in Mode:
            with pytest.raises((InvalidMessagesError, RequestError)) as info:
                Validator(dialect, mode).check([{"content": "hi"}])
            assert [(f.code, f.path) for f in findings_of(info.value)] == [("missing-field", "messages[0].role")]


def test_lint_warnings_are_not_refused_by_any_mode():
    """A warning (a tool result answering no call) is a finding of lint and of strict mode's check, refused
    by no mode."""
    msgs = [USER, {"role": "tool", "tool_call_id": "functions.f:0", "content": "r"}, USER]
    for mode in Mode:
        kept = Validator(DIALECT, mode).check(msgs)
        assert all(f.severity == "warning" for f in kept)
    assert ("unknown-tool-call-id", "messages[1].tool_call_id") in [(f.code, f.path) for f in lint(msgs, dialect=DIALECT)]


@needs_reference
@pytest.mark.parametrize("name, messages, tools, options, code, path, parsed", CASES, ids=IDS)
def test_the_serve_app_answers_the_same_finding(name, messages, tools, options, code, path, parsed, serve_client):
    body = {"model": "scripted", "messages": messages, **({"tools": tools} if tools is not None else {}),
            **({"chat_template_kwargs": options} if options else {})}
    r = serve_client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400, r.text[:300]
    err = r.json()["error"]
    expected_param = f"chat_template_kwargs.{path}" if options else path
    assert err["param"] == expected_param and err["message"].endswith(f"({code})")


@pytest.fixture(scope="module")
def serve_client():
    pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]')")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from kimi_chat.servers.serve import ServeConfig, create_app
    from kimi_chat.tokens.tokenizer import KimiTokenizer
    from serve_support import ScriptedEngine

    with TestClient(create_app(ScriptedEngine(KimiTokenizer.from_reference("k2"), dialect=DIALECT),
                               ServeConfig()), base_url="http://127.0.0.1") as client:
        yield client


def test_what_the_official_renderer_refuses_is_an_unrenderable_finding():
    """The K3 encoder refuses tool-call arguments that are JSON but not an object: render raises a RenderError
    (with or without strict) whose finding names the arguments; every other 400 of the contract carries a
    finding too (a sampling parameter: invalid-parameter at its name)."""
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "[1]"}}]}
    msgs = [USER, call, {"role": "tool", "tool_call_id": "c1", "content": "18 C"}]
    for strict in (False, True):
        assert _errors_any(lambda: render(msgs, dialect="kimi-k3", strict=strict)) == [
            ("unrenderable", "messages[1].tool_calls[0].function.arguments")]
    with pytest.raises(RequestError) as info:
        read_chat_request({"model": "kimi", "messages": [USER], "temperature": 3}, dialect=DIALECT)
    assert (info.value.finding.code, info.value.finding.path) == ("invalid-parameter", "temperature")


def _errors_any(call: Any) -> list[tuple[str, str]]:
    from kimi_chat.errors import RenderError

    try:
        call()
    except RenderError as e:
        return [(f.code, f.path) for f in findings_of(e)]
    return []


@pytest.mark.parametrize("dialect", ["kimi-k3", "kimi-k2-instruct-0905", "kimi-k2-instruct@rev1", "kimi-k2.7-code"])
@pytest.mark.parametrize("name, messages, tools, options, code, path, parsed",
                         [c for c in CASES if not c[3] and "tool_call_id" not in c[5]], ids=lambda v: v if isinstance(v, str) else None)
def test_every_family_gives_the_same_finding(dialect, name, messages, tools, options, code, path, parsed):
    """The same table in other dialects (K3's encoder included), but for what the modes decide differently on
    purpose: a template option a dialect does not read (the API drops it with a warning) and a tool result
    without tool_call_id (the API refuses it in every family; K3 and rev1 write no id, so strict renders it)."""
    expected = [(code, path)]
    if dialect == "kimi-k3" and name == "a role that is not a string":
        # K3's encoder drops a message of a role it does not know, a non-string one too: its lint calls it
        # unknown-role, while the API's shape check (before any family's rule) calls it invalid-field
        expected = [("unknown-role", path)]
    assert _errors(lambda: render(messages, tools=tools, dialect=dialect, strict=True)) == expected
    assert _errors(lambda: lint(messages, tools=tools, dialect=dialect)) == expected
    if expected != [(code, path)]:
        return
    body = {"model": "kimi", "messages": messages, **({"tools": tools} if tools is not None else {})}
    with pytest.raises(RequestError) as refused:
        read_chat_request(body, dialect=dialect)
    assert (refused.value.finding.code, refused.value.finding.path) == (code, path)
