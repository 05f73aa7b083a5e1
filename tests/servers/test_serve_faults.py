"""``kimi-chat serve`` operations on a scripted engine (tests/serve_support.py) behind a real uvicorn on
loopback: the API key, the body limit, malformed JSON, the bounded queue, a client that disconnects,
the per-request timeout, an engine that dies mid-stream; the server stays up through each."""

from __future__ import annotations

import logging
import threading

import pytest

from conftest import needs_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' in the checkout)")
httpx = pytest.importorskip("httpx")

from serve_support import WAIT, ScriptedEngine, abandoned_request, serve, sse_events, wait_for  # noqa: E402

pytestmark = needs_reference

BODY = {"model": "scripted", "messages": [{"role": "user", "content": "Hi"}]}


def test_answers_with_the_scripted_text(tokenizer):
    engine = ScriptedEngine(tokenizer)
    with serve(engine) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    assert choice["message"]["content"] == "Hello there"
    assert choice["finish_reason"] == "stop"
    assert r.json()["usage"]["completion_tokens"] == len(engine.ids) + 1


def test_api_key_required_when_set(tokenizer):
    with serve(ScriptedEngine(tokenizer), api_key="s3cret") as s:
        missing = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
        wrong = httpx.post(s.url + "/v1/chat/completions", json=BODY, headers={"Authorization": "Bearer nope"},
                           timeout=30)
        models = httpx.get(s.url + "/v1/models", timeout=30)
        right = httpx.post(s.url + "/v1/chat/completions", json=BODY, headers={"Authorization": "Bearer s3cret"},
                           timeout=30)
        health = httpx.get(s.url + "/health", timeout=30)
    assert (missing.status_code, wrong.status_code, models.status_code) == (401, 401, 401)
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert right.status_code == 200 and health.status_code == 200


def test_malformed_json_is_a_400(tokenizer):
    with serve(ScriptedEngine(tokenizer)) as s:
        r = httpx.post(s.url + "/v1/chat/completions", content=b'{"model": "x", "messages": [', timeout=30,
                       headers={"Content-Type": "application/json"})
        after = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "invalid_json"
    assert after.status_code == 200


def test_oversized_body_is_a_413(tokenizer):
    big = dict(BODY, messages=[{"role": "user", "content": "x" * 5000}])
    with serve(ScriptedEngine(tokenizer), max_body=4096) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=big, timeout=30)
        # a chunked body (no Content-Length) is cut at the limit too
        chunked = httpx.post(s.url + "/v1/chat/completions", content=iter([b'{"model": "x", ', b" " * 5000]),
                             headers={"Content-Type": "application/json"}, timeout=30)
        small = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    assert (r.status_code, chunked.status_code, small.status_code) == (413, 413, 200)
    assert r.json()["error"]["code"] == "request_too_large"


def test_a_full_queue_answers_429_at_once(tokenizer):
    gate = threading.Event()
    engine = ScriptedEngine(tokenizer, gate=gate)
    with serve(engine, queue=1) as s:
        results: list[int] = []

        def post() -> None:
            results.append(httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60).status_code)

        running = threading.Thread(target=post)
        running.start()
        ready = wait_for(engine.started.is_set)
        assert ready
        waiting = threading.Thread(target=post)
        waiting.start()
        ready = wait_for(lambda: s.server.config.app.state.server.scheduler.held == 2)
        assert ready
        refused = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)  # gate closed: no hang
        gate.set()
        running.join(60)
        waiting.join(60)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "queue_full"
    assert refused.json()["error"]["type"] == "server_busy_error"
    assert int(refused.headers["Retry-After"]) >= 1
    assert sorted(results) == [200, 200]


def test_client_disconnect_mid_stream_cancels_the_generation(tokenizer):
    # (the engine sends 50 words, then nothing until it is cancelled: it cannot finish first under load)
    engine = ScriptedEngine(tokenizer, text="word " * 400, hold_after=50)
    with serve(engine) as s:
        with httpx.stream("POST", s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30) as r:
            events = sse_events(r.iter_lines())
            first = [next(events) for _ in range(3)]  # the role chunk, then content
        # the connection is closed: the engine is told to stop long before its 400 words
        ready = wait_for(lambda: engine.endings == ["cancelled"])
        assert ready
        engine.hold_after = None  # (the next generation runs to its end)
        after = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY), timeout=60)
    assert first[0]["choices"][0]["delta"]["role"] == "assistant"
    assert after.status_code == 200


def test_client_disconnect_while_waiting_cancels_the_queued_request(tokenizer):
    gate = threading.Event()
    engine = ScriptedEngine(tokenizer, gate=gate)
    with serve(engine, queue=4) as s:
        generating = abandoned_request(s.url + "/v1/chat/completions", BODY, engine.started.is_set)  # gives up
        assert generating
        ready = wait_for(lambda: engine.endings == ["cancelled"])
        assert ready
        gate.set()
        after = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60)
    assert after.status_code == 200


def test_timeout_answers_504_and_stops_the_engine(tokenizer):
    gate = threading.Event()  # never set: the generation would wait forever
    engine = ScriptedEngine(tokenizer, gate=gate)
    with serve(engine, timeout=0.3) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
        ready = wait_for(lambda: engine.endings == ["cancelled"])
        assert ready
        streamed = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30)
    assert r.status_code == 504 and r.json()["error"]["code"] == "timeout"
    assert r.json()["error"]["type"] == "timeout_error"
    errors = [e for e in sse_events(iter(streamed.text.splitlines())) if "error" in e]
    assert [e["error"]["code"] for e in errors] == ["timeout"]


def test_engine_failure_mid_stream_is_an_error_event(tokenizer, caplog):
    engine = ScriptedEngine(tokenizer, text="one two three four", fail_after=2)
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"), serve(engine) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30)
        health = httpx.get(s.url + "/health", timeout=30)
        plain = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    events = list(sse_events(iter(r.text.splitlines())))
    assert r.status_code == 200  # the stream had begun
    assert "error" in events[-1] and events[-1]["error"]["code"] == "engine_error"
    assert health.status_code == 200
    assert plain.status_code == 502 and plain.json()["error"]["code"] == "engine_error"
    assert plain.json()["error"]["type"] == "engine_error"
    # the engine's own words go to the log, not to the client
    for message in (events[-1]["error"]["message"], plain.json()["error"]["message"]):
        assert "scripted engine died" not in message and "request id" in message
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 2 and all("scripted engine died" in m for m in logged)


def test_one_log_line_per_request(tokenizer, caplog):
    engine = ScriptedEngine(tokenizer)
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"), serve(engine, api_key="k") as s:
        httpx.post(s.url + "/v1/chat/completions", json=BODY, headers={"Authorization": "Bearer k"}, timeout=30)
        httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    lines = [r.getMessage() for r in caplog.records if r.name == "kimi_chat.serve"
             and r.getMessage().startswith("chatcmpl-")]
    assert len(lines) == 2
    assert "dialect=kimi-k2-instruct-0905" in lines[0] and "outcome=stop" in lines[0]
    assert f"completion_tokens={len(engine.ids) + 1}" in lines[0]
    assert "outcome=401" in lines[1]


def test_binds_loopback_by_default():
    from kimi_chat.cli import build_parser

    args = build_parser().parse_args(["serve", "model.gguf"])
    assert args.host == "127.0.0.1" and args.contract == "open"


# --------------------------------------------------------------------------------------------------
# stop sequences (the scripted text is known, so the cut is)


@pytest.mark.parametrize("pieces, stops, sent", [
    (["Hel", "lo th", "ere"], [" th"], ["Hel", "lo"]),            # a stop split across pieces
    (["ab", "c", "d"], ["cx"], ["ab", "cd"]),                      # a false start is released later
    (["abc"], ["zz"], ["abc"]),
    (["a", "bc"], ["b", "abc"], []),                               # the earliest stop in the text wins
    (["xa", "bc"], ["b", "abc"], ["x"]),
])
def test_stop_text(pieces, stops, sent):
    from kimi_chat.servers.serve.stops import StopText

    s = StopText(stops)
    for p in pieces:
        s.feed(p)
    s.finish()
    assert [x for x in s.sent if x] == sent


def test_stop_sequence_ends_the_content_plain_and_streamed(tokenizer):
    engine = ScriptedEngine(tokenizer, text="Hello there, world and more words")
    body = dict(BODY, stop=[", w"])
    with serve(engine) as s:
        plain = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30).json()
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(body, stream=True), timeout=30)
    assert plain["choices"][0]["message"]["content"] == "Hello there"
    assert plain["choices"][0]["finish_reason"] == "stop"
    assert plain["usage"]["completion_tokens"] < len(engine.ids)  # the generation stopped there
    events = list(sse_events(iter(r.text.splitlines())))
    text = "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])
    assert text == "Hello there"
    assert [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]] == ["stop"]


def test_a_marker_spelled_by_ordinary_tokens_stays_text(tokenizer):
    # the engine writes "<|im_end|>" as ordinary tokens (not the special id): parsed by id, it is text
    # and does not end the turn; the special id after it does
    text = "Type <|im_end|> to stop."
    engine = ScriptedEngine(tokenizer, text=text)
    assert tokenizer.token_to_id("<|im_end|>") not in engine.ids
    with serve(engine) as s:
        plain = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30).json()
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, stream=True), timeout=30)
    assert plain["choices"][0]["message"]["content"] == text
    assert plain["choices"][0]["finish_reason"] == "stop"
    events = list(sse_events(iter(r.text.splitlines())))
    assert "".join(c["delta"].get("content") or "" for e in events for c in e["choices"]) == text


# --------------------------------------------------------------------------------------------------
# faults: a hung upstream, abandoned waiters, start-up, /health


def _held(s) -> int:
    return s.server.config.app.state.server.scheduler.held


def test_a_waiting_request_whose_client_left_leaves_the_queue_at_once(tokenizer):
    gate = threading.Event()
    engine = ScriptedEngine(tokenizer, gate=gate)
    with serve(engine, queue=4) as s:
        running = threading.Thread(target=lambda: httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60))
        running.start()
        assert wait_for(engine.started.is_set)
        # a second request waits behind it, then its client gives up
        queued = abandoned_request(s.url + "/v1/chat/completions", BODY, lambda: _held(s) == 2)
        freed = wait_for(lambda: _held(s) == 1)  # the gate is still closed: only the running one holds a place
        gate.set()
        running.join(60)
    assert queued and freed
    assert engine.generations == 1 and engine.endings == []  # the abandoned request never reached the engine


def test_a_full_server_answers_429_before_preparing_the_request(tokenizer, monkeypatch):
    from kimi_chat.servers.serve import app as app_module

    prepared: list[int] = []
    real = app_module.prepare
    monkeypatch.setattr(app_module, "prepare", lambda engine, chat: prepared.append(1) or real(engine, chat))
    gate = threading.Event()
    engine = ScriptedEngine(tokenizer, gate=gate)
    with serve(engine, queue=0) as s:
        running = threading.Thread(target=lambda: httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60))
        running.start()
        assert wait_for(engine.started.is_set)
        refused = [httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30) for _ in range(3)]
        gate.set()
        running.join(60)
    assert [r.status_code for r in refused] == [429, 429, 429]
    assert len(prepared) == 1  # only the request that ran was rendered, tokenized and constrained


def test_the_tokenizer_is_built_once_at_start_up_and_health_waits_for_it(tokenizer):
    from serve_support import SlowStartEngine

    engine = SlowStartEngine(tokenizer)
    with serve(engine, queue=16) as s:
        loading = httpx.get(s.url + "/health", timeout=30)
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(
            httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60).status_code)) for _ in range(8)]
        for t in threads:
            t.start()
        engine.built.set()
        for t in threads:
            t.join(60)
        ok = httpx.get(s.url + "/health", timeout=30)
    assert loading.status_code == 503
    assert loading.json()["status"] == "unavailable" and loading.json()["reason"].startswith("loading")
    assert ok.status_code == 200 and ok.json()["status"] == "ok"
    assert results == [200] * 8
    assert engine.builds == 1  # (each first request built its own before)


def test_health_is_503_while_the_engine_is_stuck(tokenizer):
    gate = threading.Event()  # never set until the end: the engine does not return
    engine = ScriptedEngine(tokenizer, gate=gate)
    engine_ignores_cancel = threading.Event()

    def stuck_generate(ids, **kwargs):  # an engine that does not see the cancel (a blocked native call)
        engine.started.set()
        gate.wait(WAIT)
        engine_ignores_cancel.set()
        yield from ()

    engine.generate = stuck_generate
    with serve(engine, timeout=0.3, api_key="k") as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=BODY, headers={"Authorization": "Bearer k"}, timeout=30)
        stuck = wait_for(lambda: httpx.get(s.url + "/health", timeout=30).status_code == 503)
        detail = httpx.get(s.url + "/health", headers={"Authorization": "Bearer k"}, timeout=30).json()
        keyless = httpx.get(s.url + "/health", timeout=30).json()
        gate.set()
        recovered = wait_for(lambda: httpx.get(s.url + "/health", timeout=30).status_code == 200)
    assert r.status_code == 504
    assert stuck and recovered
    assert detail["reason"].startswith("stuck")
    assert keyless == {"status": "unavailable"}  # without the key: ok / not ok only


def test_the_upstream_read_is_bounded_by_the_request_timeout(tokenizer):
    from kimi_chat.servers.serve import UpstreamEngine
    from serve_support import FakeVocabulary, HangingLlamaServer

    with HangingLlamaServer(hang_props=False) as upstream:
        vocabulary = FakeVocabulary(tokenizer, "kimi-k2-instruct-0905")
        engine = UpstreamEngine(upstream.url, vocabulary=vocabulary, timeout=0.5)
        with serve(engine, timeout=0.5) as s:
            r = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
            # the engine thread is free again long before the upstream's 600 s (the read timed out)
            freed = wait_for(lambda: _held(s) == 0)
        engine.close()
    assert r.status_code == 504 and freed


def test_an_upstream_whose_props_hang_fails_start_up_with_one_line(tokenizer, monkeypatch, capsys, tmp_path):
    from kimi_chat.cli import main
    from kimi_chat.engines import native
    from serve_support import FakeVocabulary, HangingLlamaServer

    monkeypatch.setattr(native.NativeModel, "load", classmethod(
        lambda cls, *a, **k: FakeVocabulary(tokenizer, "kimi-k2-instruct-0905")))
    with HangingLlamaServer(hang_props=True) as upstream:
        codes: list[int] = []
        t = threading.Thread(target=lambda: codes.append(main(
            ["serve", str(tmp_path / "m.gguf"), "--upstream", upstream.url, "--port", "0"])))
        t.start()
        t.join(60)  # (the /props deadline is 5 s; before, start-up waited 600 s)
        hung = t.is_alive()
    assert not hung and codes and codes[0] > 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if "error:" in line]) == 1 and "/props" in err[-1]


def test_a_port_in_use_is_reported_before_serving(monkeypatch, capsys, caplog, tmp_path):
    import socket

    from kimi_chat.cli import main
    from kimi_chat.engines import native

    loads: list[str] = []
    monkeypatch.setattr(native.NativeModel, "load", classmethod(lambda cls, *a, **k: loads.append("load")))
    with socket.socket() as taken, caplog.at_level(logging.INFO, logger="kimi_chat.serve"):
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(["serve", str(tmp_path / "m.gguf"), "--port", str(port)])
    assert code > 0
    assert "in use" in capsys.readouterr().err
    assert loads == []  # said before the model is loaded
    assert not any("serving" in r.getMessage() for r in caplog.records)


def test_the_cli_gives_its_timeout_to_the_upstream(monkeypatch, tmp_path):
    from kimi_chat.cli import main
    from kimi_chat.servers.serve import EngineError, UpstreamEngine
    given: dict = {}

    def connect(cls, url, gguf, **kwargs):
        given.update(kwargs)
        raise EngineError("stop here")

    monkeypatch.setattr(UpstreamEngine, "connect", classmethod(connect))
    code = main(["serve", str(tmp_path / "m.gguf"), "--upstream", "http://127.0.0.1:9", "--timeout", "7",
                 "--port", "0"])
    assert code > 0 and given["timeout"] == 7.0


def test_an_engine_with_slots_generates_that_many_requests_at_once(tokenizer):
    # an upstream llama-server started with -np 2 reports total_slots 2 (UpstreamEngine.slots)
    gate = threading.Event()
    engine = ScriptedEngine(tokenizer, gate=gate)
    engine.slots = 2
    with serve(engine, queue=0) as s:
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(
            httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=60).status_code)) for _ in range(2)]
        for t in threads:
            t.start()
        both = wait_for(lambda: engine.generations == 2)  # both generating while the gate is closed
        third = httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)  # queue 0: two slots, no more
        gate.set()
        for t in threads:
            t.join(60)
    assert both
    assert third.status_code == 429 and sorted(results) == [200, 200]


def test_the_upstream_engine_takes_its_slots_from_props(tokenizer):
    from kimi_chat.servers.serve import UpstreamEngine
    from serve_support import FakeLlamaServer, FakeVocabulary

    with FakeLlamaServer([], total_slots=3) as upstream:
        engine = UpstreamEngine(upstream.url, vocabulary=FakeVocabulary(tokenizer, "kimi-k2-instruct-0905"))
        engine.close()
    assert engine.slots == 3


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "plain"])
def test_a_client_leaving_closes_the_upstream_connection(tokenizer, stream):
    # the upstream sends "Hello" and then nothing (a long generation between tokens, or a hung server):
    # the read it blocks is interrupted when the client leaves, not left to --timeout (600 s here)
    from kimi_chat.servers.serve import UpstreamEngine
    from serve_support import FakeVocabulary, StallingLlamaServer

    with StallingLlamaServer(tokenizer.encode("Hello", allow_special=False)) as upstream:
        engine = UpstreamEngine(upstream.url, vocabulary=FakeVocabulary(tokenizer, "kimi-k2-instruct-0905"))
        with serve(engine) as s:
            if stream:
                with httpx.stream("POST", s.url + "/v1/chat/completions", json=dict(BODY, stream=True),
                                  timeout=30) as r:
                    for event in sse_events(r.iter_lines()):
                        if event["choices"] and event["choices"][0]["delta"].get("content"):
                            break  # the client leaves after the first text
            else:  # the client gives up waiting for the answer and leaves
                abandoned_request(s.url + "/v1/chat/completions", BODY, upstream.streaming.is_set)
            closed = upstream.closed.wait(60)
            freed = wait_for(lambda: _held(s) == 0)
        engine.close()
    assert upstream.completions == 1 and upstream.streaming.is_set()
    assert closed  # the upstream saw its connection close
    assert freed  # and the engine's worker is free for the next request


def _serve_cli_while_loading(monkeypatch, tmp_path, load):
    """``kimi-chat serve`` in a thread with ``NativeEngine.load`` replaced by ``load``: the thread, its exit
    codes, the port, and the uvicorn servers it made (to stop it)."""
    import importlib

    import uvicorn

    from kimi_chat.cli import main
    from kimi_chat.servers.serve import NativeEngine

    serve_cli = importlib.import_module("kimi_chat.cli.serve")  # (the module: its _bind is what run() calls)

    servers = []
    bound = []  # (--port 0: the kernel's free port, read from the socket the command binds)
    bind = serve_cli._bind
    monkeypatch.setattr(serve_cli, "_bind", lambda host, port: bound.append(bind(host, port)) or bound[-1])

    class Recorded(uvicorn.Server):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            servers.append(self)

    monkeypatch.setattr(uvicorn, "Server", Recorded)
    monkeypatch.setattr(NativeEngine, "load", classmethod(lambda cls, *a, **k: load()))
    codes: list[int] = []
    t = threading.Thread(target=lambda: codes.append(main(["serve", str(tmp_path / "m.gguf"), "--port", "0"])))
    t.start()
    if not wait_for(lambda: bool(bound) or not t.is_alive()) or not bound:
        raise AssertionError("kimi-chat serve did not bind its socket")
    return t, codes, f"http://127.0.0.1:{bound[0].getsockname()[1]}", servers


def _answer(url: str):
    def get() -> httpx.Response | None:
        try:
            return httpx.get(url + "/health", timeout=30)  # (refused at once until it listens)
        except httpx.TransportError:
            return None
    return get


def test_health_answers_loading_model_while_the_gguf_loads(tokenizer, monkeypatch, tmp_path, caplog):
    loaded = threading.Event()

    def load():
        loaded.wait(60)
        engine = ScriptedEngine(tokenizer)
        engine.slots = 2  # (an upstream llama-server's -np 2: known only once loaded)
        return engine

    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"):
        t, codes, url, servers = _serve_cli_while_loading(monkeypatch, tmp_path, load)
        try:
            health = _answer(url)
            answering = wait_for(lambda: health() is not None)
            loading = health()
            chat = httpx.post(url + "/v1/chat/completions", json=BODY, timeout=30)
            listening = [r.getMessage() for r in caplog.records if "listening on" in r.getMessage()]
            serving_before = any("serving" in r.getMessage() for r in caplog.records)
            loaded.set()
            ready = wait_for(lambda: getattr(health(), "status_code", None) == 200)
            after = httpx.post(url + "/v1/chat/completions", json=BODY, timeout=30)
            scheduler = servers[0].config.app.state.server.scheduler
        finally:
            loaded.set()
            wait_for(lambda: bool(servers))
            for s in servers:
                s.should_exit = True
            t.join(60)
    assert answering and loading.status_code == 503
    assert loading.json()["status"] == "unavailable" and loading.json()["reason"].startswith("loading model")
    assert chat.status_code == 503 and chat.headers["retry-after"].isdigit()
    error = chat.json()["error"]
    assert (error["type"], error["code"]) == ("service_unavailable_error", "model_loading")
    assert listening and url in listening[0] and not serving_before
    assert ready and after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "Hello there"
    assert (scheduler.workers, scheduler.capacity) == (2, 16 + 2)  # the loaded engine's slots, the queue's 16
    assert codes == [0]


def test_a_failed_load_exits_with_one_line(tokenizer, monkeypatch, tmp_path, capsys):
    from kimi_chat.errors import KimiChatError

    release = threading.Event()

    def load():
        release.wait(60)
        raise KimiChatError("m.gguf: llama.cpp could not load the model")

    t, codes, url, servers = _serve_cli_while_loading(monkeypatch, tmp_path, load)
    try:
        health = _answer(url)
        wait_for(lambda: health() is not None)
        loading = health().status_code
    finally:
        release.set()
        t.join(60)
    alive = t.is_alive()
    if alive:
        for s in servers:
            s.should_exit = True
        t.join(30)
    assert loading == 503 and not alive  # the server stopped by itself
    assert codes and codes[0] > 0
    err = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line.lower()]
    assert len(err) == 1 and "could not load the model" in err[0]


def test_a_client_asking_again_after_its_answer_finds_its_place_given_back(tokenizer):
    # queue 0, one slot: the place is given back before the answer ends, so the client's next request,
    # sent the moment the previous answer is read, is served (not a 429 racing the engine's worker thread)
    engine = ScriptedEngine(tokenizer)
    with serve(engine, queue=0) as s, httpx.Client(base_url=s.url, timeout=30) as client:
        codes = [client.post("/v1/chat/completions", json=dict(BODY, stream=bool(k % 2))).status_code
                 for k in range(20)]
    assert codes == [200] * 20
