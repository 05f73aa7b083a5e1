"""``kimi-chat serve`` against a hostile client and for its operator (a scripted engine behind a real
uvicorn on loopback): deadlines on the request head and body (slowloris), ``application/json`` only,
``Host`` / ``Origin`` checks (DNS rebinding, cross-site posts), no upstream internals in error bodies, the
API key from the environment or a file, ``/metrics``, ``X-Request-Id`` and the access log."""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Callable

import pytest

from conftest import needs_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' (in the checkout))")
httpx = pytest.importorskip("httpx")

from serve_support import ScriptedEngine, WAIT, serve  # noqa: E402

pytestmark = needs_reference

BODY = {"model": "scripted", "messages": [{"role": "user", "content": "Hi"}]}


def _trickle(sock: socket.socket, byte: bytes, done: Callable[[bytes], bool],
             every: float = 0.1) -> tuple[bytes, bool]:
    """Send ``byte`` once per ``every`` seconds until ``done(what the server sent)``, the server closes the
    connection, or :data:`WAIT` seconds pass (far beyond the deadlines tested: a loaded machine may be slow
    to fire them, never early); what the server sent, and whether it closed the connection. Bounded by
    time, not by a count of bytes: the client never runs out of bytes before a slow server acts."""
    sock.settimeout(every)
    answer = b""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and not done(answer):
        try:
            sock.sendall(byte)
            got = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:  # reset / broken pipe: closed
            return answer, True
        if not got:
            return answer, True
        answer += got
    return answer, False


def test_a_client_sending_its_headers_a_byte_at_a_time_is_disconnected(tokenizer):
    from kimi_chat.servers.serve.http import header_deadline_protocol

    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: "
    with serve(ScriptedEngine(tokenizer), http=header_deadline_protocol(0.5)) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=WAIT) as sock:
            sock.sendall(head)
            _, closed = _trickle(sock, b"a", lambda got: False)  # the header's value, a byte at a time
        after = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    assert closed
    assert after.status_code == 200  # a normal client is served as before


def _rest_of_body(sock: socket.socket, answer: bytes) -> bytes:
    """Read what is missing of the body whose head is in ``answer`` (it may arrive in a later packet)."""
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    missing = int(length.group(1)) - len(body) if length else 0
    sock.settimeout(WAIT)
    rest = b""
    while len(rest) < missing:
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    return rest


def test_a_body_sent_a_byte_at_a_time_is_a_408(tokenizer):
    with serve(ScriptedEngine(tokenizer), body_timeout=0.5) as s:
        with socket.create_connection(("127.0.0.1", s.port), timeout=WAIT) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n")
            answer, _ = _trickle(sock, b" ", lambda got: b"\r\n\r\n" in got)  # the body, a byte per 0.1 s
            answer += _rest_of_body(sock, answer)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b'"timeout_error"' in answer


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_only_application_json_is_read(tokenizer, content_type):
    import json

    headers = {"Content-Type": content_type} if content_type else {}
    with serve(ScriptedEngine(tokenizer)) as s:
        r = httpx.post(s.url + "/v1/chat/completions", content=json.dumps(BODY).encode(), headers=headers, timeout=30)
        charset = httpx.post(s.url + "/v1/chat/completions", content=json.dumps(BODY).encode(), timeout=30,
                             headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 415 and r.json()["error"]["param"] == "Content-Type"
    assert charset.status_code == 200


def test_a_foreign_host_or_origin_is_refused(tokenizer):
    with serve(ScriptedEngine(tokenizer)) as s:
        u = s.url + "/v1/chat/completions"
        rebound = httpx.post(u, json=BODY, headers={"Host": f"attacker.example:{s.port}"}, timeout=30)
        foreign = httpx.post(u, json=BODY, headers={"Origin": "https://attacker.example"}, timeout=30)
        own = httpx.post(u, json=BODY, headers={"Origin": s.url}, timeout=30)
        localhost = httpx.post(f"http://localhost:{s.port}/v1/chat/completions", json=BODY, timeout=30)
        health = httpx.get(s.url + "/health", headers={"Host": "attacker.example"}, timeout=30)
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "origin_not_allowed"
    assert health.status_code == 403
    assert own.status_code == 200 and localhost.status_code == 200


def test_allowed_hosts_and_origins_open_what_they_name(tokenizer):
    with serve(ScriptedEngine(tokenizer), allowed_hosts=("llm.internal",),
               allowed_origins=("https://app.example",)) as s:
        u = s.url + "/v1/chat/completions"
        named = httpx.post(u, json=BODY, headers={"Host": "llm.internal", "Origin": "https://app.example"}, timeout=30)
        other = httpx.post(u, json=BODY, headers={"Host": "other.internal"}, timeout=30)
    assert named.status_code == 200 and other.status_code == 403


def test_error_bodies_do_not_echo_the_upstreams_internals(tokenizer, caplog):
    from kimi_chat.servers.serve import UpstreamEngine
    from serve_support import FakeVocabulary, HangingLlamaServer

    with HangingLlamaServer(hang_props=False, hang=0) as upstream:  # /completion answers 500 at once
        engine = UpstreamEngine(upstream.url, vocabulary=FakeVocabulary(tokenizer, "kimi-k2-instruct-0905"))
        with caplog.at_level(logging.INFO, logger="kimi_chat.serve"), serve(engine) as s:
            plain = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
            streamed = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30)
        engine.close()
    assert plain.status_code == 502
    for text in (plain.text, streamed.text):
        assert "engine_error" in text
        assert upstream.url not in text and "127.0.0.1" not in text and "released" not in text
    logged = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert upstream.url in logged and "released" in logged  # the operator sees the detail


def test_the_api_key_from_the_environment_or_a_file(monkeypatch, tmp_path):
    from kimi_chat.cli import build_parser
    from kimi_chat.cli.serve import API_KEY_ENV, _api_key

    parse = build_parser().parse_args
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert _api_key(parse(["serve", "m.gguf"])) == "from-env"
    assert _api_key(parse(["serve", "m.gguf", "--api-key-file", str(key_file)])) == "from-file"
    assert _api_key(parse(["serve", "m.gguf", "--api-key", "from-argv"])) == "from-argv"
    monkeypatch.delenv(API_KEY_ENV)
    assert _api_key(parse(["serve", "m.gguf"])) is None
    with pytest.raises(ValueError, match="--api-key-file"):
        _api_key(parse(["serve", "m.gguf", "--api-key-file", str(tmp_path / "missing")]))


def test_health_without_the_key_says_only_ok(tokenizer):
    with serve(ScriptedEngine(tokenizer), api_key="k") as s:
        bare = httpx.get(s.url + "/health", timeout=30)
        keyed = httpx.get(s.url + "/health", headers={"Authorization": "Bearer k"}, timeout=30)
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    assert keyed.json()["model"] == "scripted" and keyed.json()["dialect"] == "kimi-k2-instruct-0905"


# --------------------------------------------------------------------------------------------------
# operators


def _sample(text: str, name: str) -> float:
    """The value of the sample line ``name`` (with its labels) in a Prometheus exposition."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {name} in the exposition")


def test_metrics_in_the_prometheus_format(tokenizer):
    from prometheus_client.parser import text_string_to_metric_families

    engine = ScriptedEngine(tokenizer)
    with serve(engine) as s:
        ok = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30).json()
        httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30)
        httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, n=0), timeout=30)
        r = httpx.get(s.url + "/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = {f.name for f in text_string_to_metric_families(r.text)}  # (parses: the format is right)
    assert {"kimi_chat_requests", "kimi_chat_time_to_first_token_seconds", "kimi_chat_generation_seconds",
            "kimi_chat_requests_waiting", "kimi_chat_requests_running"} <= families
    assert _sample(r.text, 'kimi_chat_requests_total{status="200"}') == 2
    assert _sample(r.text, 'kimi_chat_requests_total{status="400"}') == 1
    assert _sample(r.text, "kimi_chat_prompt_tokens_total") == 2 * ok["usage"]["prompt_tokens"]
    assert _sample(r.text, "kimi_chat_completion_tokens_total") == 2 * ok["usage"]["completion_tokens"]
    assert _sample(r.text, "kimi_chat_time_to_first_token_seconds_count") == 2
    assert _sample(r.text, "kimi_chat_requests_waiting") == 0


def test_x_request_id_on_every_response_and_in_the_log(tokenizer, caplog):
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"), serve(ScriptedEngine(tokenizer)) as s:
        given = httpx.post(s.url + "/v1/chat/completions", json=BODY, headers={"X-Request-Id": "trace-42"}, timeout=30)
        fresh = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
        refused = httpx.post(s.url + "/v1/chat/completions", json={"model": "x"}, timeout=30)
        missing = httpx.get(s.url + "/nowhere", timeout=30)
        health = httpx.get(s.url + "/health", timeout=30)
    assert given.headers["X-Request-Id"] == "trace-42"
    assert fresh.headers["X-Request-Id"] == fresh.json()["id"]  # the response id when the client gives none
    for r in (refused, missing, health):
        assert r.headers["X-Request-Id"].startswith("chatcmpl-")
    lines = [r.getMessage() for r in caplog.records if r.name == "kimi_chat.serve"]
    assert any(m.startswith("trace-42 ") and "outcome=stop" in m for m in lines)
    assert any(m.startswith(refused.headers["X-Request-Id"] + " ") and "outcome=400" in m for m in lines)


def test_the_access_log_is_optional(tokenizer, caplog):
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve.access"):
        with serve(ScriptedEngine(tokenizer)) as s:
            httpx.get(s.url + "/health", timeout=30)
        quiet = [r for r in caplog.records if r.name == "kimi_chat.serve.access"]
        with serve(ScriptedEngine(tokenizer), access_log=True) as s:
            httpx.get(s.url + "/health", headers={"X-Request-Id": "r1"}, timeout=30)
            httpx.get(s.url + "/nowhere", timeout=30)
        lines = [r.getMessage() for r in caplog.records if r.name == "kimi_chat.serve.access"]
    assert quiet == []
    assert len(lines) == 2
    assert '"GET /health" 200' in lines[0] and "request_id=r1" in lines[0]
    assert '"GET /nowhere" 404' in lines[1]
