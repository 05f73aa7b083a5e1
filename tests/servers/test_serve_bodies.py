"""Hostile and unusual request bodies against ``kimi-chat serve`` (a scripted engine behind a real uvicorn
on loopback): every one is answered with an OpenAI-shaped JSON error naming the field (never a plain-text
500, which the OpenAI SDK would retry twice), or the feature works."""

from __future__ import annotations

import json
import logging

import pytest

from conftest import needs_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' (in the checkout))")
httpx = pytest.importorskip("httpx")

from kimi_chat.servers._fields import DECODE_DEPTH, nests_deeper_than  # noqa: E402
from kimi_chat.servers.serve import ServeConfig, create_app  # noqa: E402
from serve_support import ScriptedEngine, Uvicorn  # noqa: E402

pytestmark = needs_reference

MESSAGES = [{"role": "user", "content": "Hi"}]
BODY = {"model": "scripted", "messages": MESSAGES}
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def url(tokenizer):
    with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig())) as s:
        yield s.url + "/v1/chat/completions"


def post_raw(url: str, raw: bytes) -> httpx.Response:
    return httpx.post(url, content=raw, headers=JSON, timeout=60)


def error_of(r: httpx.Response, status: int = 400) -> dict:
    """The OpenAI error of ``r`` (asserting the status and that the body is JSON)."""
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    return r.json()["error"]


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_deeply_nested_json_is_a_400_naming_the_field(url, depth):
    # (json.loads raises RecursionError on these: a plain-text 500 before)
    raw = b'{"model": "x", "messages": [{"role": "user", "content": "Hi"}], "metadata": {"a": ' + nested(depth) + b"}}"
    err = error_of(post_raw(url, raw))
    assert err["code"] == "nesting_too_deep"
    assert err["param"] == "metadata.a[0][0]"  # the path, cut to its first four segments


@pytest.mark.parametrize("raw, deeper", [
    (nested(DECODE_DEPTH), False),
    (nested(DECODE_DEPTH + 1), True),
    (b'{"a": "' + b"[" * 5000 + b'"}', False),  # brackets in a string are text
    (b'{"a": "\\"' + b"[" * 5000 + b'"}', False),  # ... after an escaped quote too
    (b'{"a": "\\\\", "b": ' + nested(DECODE_DEPTH + 1) + b"}", True),  # an escaped backslash ends no string
    (json.dumps([[{"a": [1, 2]}]] * 2000).encode(), False),  # many brackets, shallow
])
def test_the_depth_is_read_from_the_bytes_before_decoding(raw, deeper):
    # json.loads near the recursion limit let finalisers that ran inside it fail unreported
    assert nests_deeper_than(raw) is deeper


def test_nesting_deeper_than_the_limit_but_parseable_is_a_400(url):
    # 200 levels decode (under Python's recursion limit) and would reach jsonschema and the grammar
    content = json.loads(nested(200))
    err = error_of(httpx.post(url, json=dict(BODY, messages=[{"role": "user", "content": content}]), timeout=60))
    assert err["code"] == "nesting_too_deep" and err["param"] == "messages[0].content[0]"


def test_tool_parameters_150_deep_are_a_400_naming_the_tool(url):
    schema: dict = {"type": "string"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"a": schema}}
    tools = [{"type": "function", "function": {"name": "deep", "parameters": schema}}]
    err = error_of(httpx.post(url, json=dict(BODY, tools=tools), timeout=60))
    assert err["code"] == "nesting_too_deep" and err["param"] == "tools[0].function.parameters"


@pytest.mark.parametrize("body, param", [
    (b'{"model": "x", "messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "\\ud800"}}',
     "thinking.type"),
    (b'{"model": "x", "messages": [{"role": "\\udfff", "content": "Hi"}]}', "messages[0].role"),
    (b'{"model": "x", "messages": [{"role": "user", "content": "a\\ud83d"}]}', "messages[0].content"),
    (b'{"model": "\\ud800x", "messages": [{"role": "user", "content": "Hi"}]}', "model"),
])
def test_a_lone_surrogate_in_any_string_is_a_400_naming_the_field(url, body, param):
    # (echoing the surrogate raised UnicodeEncodeError: a plain-text 500 before)
    err = error_of(post_raw(url, body))
    assert err["code"] == "invalid_unicode" and err["param"] == param


def test_n_is_capped_and_n_times_max_tokens_bounded(tokenizer):
    with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig(max_request_tokens=1000))) as s:
        u = s.url + "/v1/chat/completions"
        huge = error_of(httpx.post(u, json=dict(BODY, n=1_000_000), timeout=60))
        product = error_of(httpx.post(u, json=dict(BODY, n=4, max_tokens=300), timeout=60))
        alone = error_of(httpx.post(u, json=dict(BODY, max_completion_tokens=2000), timeout=60))
        fits = httpx.post(u, json=dict(BODY, n=3, max_tokens=300), timeout=60)
    assert huge["param"] == "n" and "128" in huge["message"]
    assert product["param"] == "n" and "1200" in product["message"]
    assert alone["param"] == "max_completion_tokens"
    assert fits.status_code == 200 and len(fits.json()["choices"]) == 3


def test_param_is_the_field_the_client_sent(tokenizer):
    engine = ScriptedEngine(tokenizer)
    engine.n_ctx = 300
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": "word " * 40}} for i in range(8)]
    with Uvicorn(create_app(engine, ServeConfig())) as s:
        u = s.url + "/v1/chat/completions"
        mct = error_of(httpx.post(u, json=dict(BODY, max_completion_tokens=290), timeout=60))
        mt = error_of(httpx.post(u, json=dict(BODY, max_tokens=290), timeout=60))
        overflow = error_of(httpx.post(u, json=dict(BODY, tools=tools), timeout=60))
        long = error_of(httpx.post(u, json=dict(BODY, messages=[{"role": "user", "content": "word " * 400}]),
                                   timeout=60))
    assert (mct["param"], mt["param"]) == ("max_completion_tokens", "max_tokens")
    assert mct["code"] == "context_length_exceeded"
    assert overflow["param"] == "tools"  # the messages alone fit
    assert long["param"] == "messages"


@pytest.mark.parametrize("extra, param", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
     "tools[0].function.parameters.type"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "minimum": "zero"}}}}}]},
     "tools[0].function.parameters.properties.x.minimum"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "bogus"}}}},
     "response_format.json_schema.schema.type"),
    ({"reasoning_effort": 5}, "reasoning_effort"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"thinking": {"type": "enabled", "effort": 3}}, "thinking.effort"),
])
def test_invalid_schemas_and_efforts_are_400s_naming_the_path(url, extra, param):
    err = error_of(httpx.post(url, json=dict(BODY, **extra), timeout=60))
    assert err["param"] == param, err


@pytest.mark.parametrize("method, path, status", [("GET", "/nowhere", 404), ("GET", "/v1/chat/completions", 405),
                                                  ("DELETE", "/v1/models", 405)])
def test_404_and_405_are_openai_json(url, method, path, status):
    base = url.rsplit("/v1/", 1)[0]
    r = httpx.request(method, base + path, timeout=30)
    err = error_of(r, status)
    assert err["code"] == {404: "not_found", 405: "method_not_allowed"}[status]
    assert err["type"] in ("not_found_error", "invalid_request_error")


def test_a_tool_choice_the_constraint_applies_is_not_logged_as_ignored(url, caplog):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"):
        r = httpx.post(url, json=dict(BODY, tools=tools, tool_choice="required"), timeout=60)
    assert r.status_code == 200
    said = [rec.getMessage() for rec in caplog.records if "tool_choice" in rec.getMessage()]
    assert said and not any("ignored" in m for m in said)
