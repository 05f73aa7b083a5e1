"""``kimi-chat serve --upstream``: the request's constraint reaches llama-server as its GBNF export, a
``response_format`` reply included, and a request whose forced call or reply schema has no GBNF export is
a 400 naming the field (never generated unconstrained). The upstream is a stand-in for llama-server's
``/props`` and ``/completion`` (tests/serve_support.py: it answers with the ids it is given and keeps each
request); the real llama-server runs in tests/servers/test_serve.py."""

from __future__ import annotations

import json

import pytest

from conftest import needs_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' in the checkout)")
httpx = pytest.importorskip("httpx")
pytest.importorskip("llguidance")

from kimi_chat.grammar.request import constraint  # noqa: E402
from kimi_chat.servers.serve import ServeConfig, UpstreamEngine, create_app  # noqa: E402
from serve_support import FakeLlamaServer, FakeVocabulary, Uvicorn, sse_events  # noqa: E402

pytestmark = needs_reference

K2 = "kimi-k2-instruct-0905"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
          "required": ["city", "temperature"], "additionalProperties": False}
WEATHER = {"type": "json_schema", "json_schema": {"name": "weather", "strict": True, "schema": SCHEMA}}
REPLY = '{"city":"Paris","temperature":21}'
USER = {"role": "user", "content": "The weather of Paris as JSON."}
# a schema beyond the GBNF rules' limits (minLength above 1000): no GBNF export
TOO_LONG = {"type": "object", "properties": {"a": {"type": "string", "minLength": 2000}}}


def _served(tokenizer, reply_ids):
    fake = FakeLlamaServer(reply_ids)
    engine = UpstreamEngine(fake.url, vocabulary=FakeVocabulary(tokenizer, K2))
    return fake, engine, Uvicorn(create_app(engine, ServeConfig()))


def _reply_ids(tokenizer, text: str) -> list[int]:
    return [*tokenizer.encode(text, allow_special=False), tokenizer.token_to_id("<|im_end|>")]


def test_response_format_reaches_llama_server_as_gbnf(tokenizer):
    fake, engine, app = _served(tokenizer, _reply_ids(tokenizer, REPLY))
    body = {"model": "m", "messages": [USER], "response_format": WEATHER}
    try:
        with app:
            plain = httpx.post(app.url + "/v1/chat/completions", json=body, timeout=60).json()
            with httpx.stream("POST", app.url + "/v1/chat/completions", json={**body, "stream": True},
                              timeout=60) as r:
                events = list(sse_events(r.iter_lines()))
    finally:
        engine.close()
        fake.close()
    expected = constraint(None, dialect=K2, response_format=WEATHER).gbnf
    assert expected and len(fake.bodies) == 2
    assert [b["grammar"] for b in fake.bodies] == [expected, expected]
    assert '"\\x22city\\x22"' in expected  # (the schema's key, as the GBNF export writes it)
    assert plain["choices"][0]["message"]["content"] == REPLY
    assert plain["choices"][0]["finish_reason"] == "stop"
    streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert json.loads(streamed) == json.loads(REPLY)


@pytest.mark.parametrize("body, param", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": TOO_LONG}}},
     "response_format.json_schema.schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": TOO_LONG}}], "tool_choice": "required"},
     "tools"),
])
def test_a_constraint_without_gbnf_export_is_refused_not_generated_unconstrained(tokenizer, body, param):
    fake, engine, app = _served(tokenizer, _reply_ids(tokenizer, REPLY))
    try:
        with app:
            r = httpx.post(app.url + "/v1/chat/completions", json={"model": "m", "messages": [USER], **body},
                           timeout=60)
    finally:
        engine.close()
        fake.close()
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == param and error["code"] == "unsupported_schema"
    assert "minLength" in error["message"]
    assert fake.bodies == []  # nothing was generated


def test_auto_tools_without_gbnf_export_are_generated_unconstrained(tokenizer):
    """No forced call: the model may answer in text; its calls are read by id and checked after."""
    fake, engine, app = _served(tokenizer, _reply_ids(tokenizer, "OK"))
    body = {"model": "m", "messages": [USER], "tools": [{"type": "function", "function": {"name": "f",
                                                                                          "parameters": TOO_LONG}}]}
    try:
        with app:
            r = httpx.post(app.url + "/v1/chat/completions", json=body, timeout=60)
    finally:
        engine.close()
        fake.close()
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "OK"
    assert len(fake.bodies) == 1 and "grammar" not in fake.bodies[0]


def test_real_llama_server_replies_json_of_the_schema(tmp_path):
    """The GBNF export on a real llama-server (the terse tiny model: its strings close at once, so the
    reply completes): a ``json_schema`` reply, plain and streamed, is JSON of the schema."""
    pytest.importorskip("llama_cpp", reason="the upstream engine reads the GGUF's vocabulary with llama-cpp-python")
    import jsonschema

    from conftest import require_in_ci
    from llama_server_support import LlamaServer, missing_reason
    from kimi_chat.testing.tiny_model import build_tiny_model

    reason = missing_reason()
    if reason:
        require_in_ci(False, f"llama-server ({reason})")
        pytest.skip(reason)
    gguf = build_tiny_model(tmp_path / "terse.gguf", dialect=K2, terse=True)
    body = {"model": "m", "messages": [USER], "response_format": WEATHER, "max_tokens": 200, "temperature": 0}
    with LlamaServer(gguf, None, tmp_path / "llama-server.log") as ls:
        engine = UpstreamEngine.connect(ls.url, gguf)
        try:
            with Uvicorn(create_app(engine)) as s:
                plain = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=120).json()
                with httpx.stream("POST", s.url + "/v1/chat/completions", json={**body, "stream": True},
                                  timeout=120) as r:
                    events = list(sse_events(r.iter_lines()))
        finally:
            engine.close()
    streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    finishes = [e["choices"][0]["finish_reason"] for e in events if e.get("choices") and e["choices"][0]["finish_reason"]]
    assert plain["choices"][0]["finish_reason"] == "stop" and finishes == ["stop"]
    for text in (plain["choices"][0]["message"]["content"], streamed):
        jsonschema.validate(json.loads(text), SCHEMA)
