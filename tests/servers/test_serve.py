"""``kimi-chat serve`` generating for real: the tiny Kimi models (K2 0905 and K3) in llama.cpp behind a
real uvicorn on loopback, read with the OpenAI SDK (its types and ``ChatCompletionStreamState``); a load
of 32 concurrent streams; the ``--upstream`` engine on a real llama-server, killed mid-stream; the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import require_in_ci, skip_without_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' in the checkout)")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False
require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")

from kimi_chat.servers.serve import NativeEngine, ServeConfig, UpstreamEngine, create_app  # noqa: E402
from serve_support import Uvicorn, listening_port, sse_events, wait_for  # noqa: E402

pytestmark = [pytest.mark.native, pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed "
                                                     "(bash .ci/install-native.sh .venv)")]

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}, "required": ["city"]}}}]
FORCED = dict(messages=[{"role": "user", "content": "Weather in Paris?"}], tools=TOOLS, tool_choice="required",
              parallel_tool_calls=False,
              max_tokens=200, temperature=0, extra_body={"thinking": {"type": "disabled"}})
DIALECTS = ("kimi-k2-instruct-0905", "kimi-k3")


@pytest.fixture(scope="module", params=DIALECTS)
def gguf(request, tmp_path_factory) -> Path:
    from kimi_chat.testing.tiny_model import build_tiny_model
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    skip_without_reference()
    dialect = request.param
    tok = KimiTokenizer.from_reference("k3") if dialect == "kimi-k3" else None
    return build_tiny_model(tmp_path_factory.mktemp("serve") / f"{dialect}.gguf", dialect=dialect, tokenizer=tok)


@pytest.fixture(scope="module")
def engine(gguf):
    e = NativeEngine.load(gguf, n_ctx=4096)
    yield e
    e.close()


@pytest.fixture(scope="module")
def server(engine):
    with Uvicorn(create_app(engine, ServeConfig(queue=40))) as s:
        yield s


@pytest.fixture()
def client(server):
    return openai.Client(base_url=server.url + "/v1", api_key="unused", timeout=120, max_retries=0)


def streamed(client, **kw):
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    usage = None
    for chunk in client.chat.completions.create(model="m", stream=True, stream_options={"include_usage": True}, **kw):
        state.handle_chunk(chunk)
        usage = chunk.usage or usage
    return state.current_completion_snapshot, usage


def test_models_and_health(server, engine):
    models = httpx.get(server.url + "/v1/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == [engine.model]
    # (503 "loading" while the tokenizer and the marker tokens are built at start-up)
    ready = wait_for(lambda: httpx.get(server.url + "/health", timeout=30).status_code == 200, 120)
    health = httpx.get(server.url + "/health", timeout=30).json()
    assert ready and health["status"] == "ok" and health["dialect"] == engine.dialect.name


def test_forced_call_plain_and_streamed_agree(client, engine):
    plain = client.chat.completions.create(model="m", **FORCED)
    snap, usage = streamed(client, **FORCED)
    choice = plain.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather"]
    assert calls[0].function.arguments in ('{"city":"Paris"}', '{"city":"Rome"}', '{"city": "Paris"}',
                                           '{"city": "Rome"}')
    s = snap.choices[0]
    assert s.finish_reason == "tool_calls"
    assert [(c.id, c.function.name, c.function.arguments) for c in s.message.tool_calls] == \
        [(c.id, c.function.name, c.function.arguments) for c in calls]
    assert usage.model_dump() == plain.usage.model_dump()
    assert plain.usage.completion_tokens > 0


def test_reasoning_plain_and_streamed_agree(client, engine):
    kw = dict(messages=[{"role": "user", "content": "Think."}], max_tokens=12, temperature=0)
    if engine.dialect.name != "kimi-k3":
        kw["messages"] = [{"role": "system", "content": "Be brief."}, *kw["messages"]]
    plain = client.chat.completions.create(model="m", **kw)
    snap, usage = streamed(client, **kw)
    p, s = plain.choices[0], snap.choices[0]
    assert p.finish_reason == s.finish_reason == "length"
    assert plain.usage.completion_tokens == usage.completion_tokens == 12
    # what the model wrote lands in the same fields, whole or streamed
    p_fields = (p.message.content or "", getattr(p.message, "reasoning_content", None) or "")
    s_fields = (s.message.content or "", getattr(s.message, "reasoning_content", None) or "")
    assert p_fields == s_fields and any(p_fields)
    if engine.dialect.name == "kimi-k3":  # thinking on: the prompt opened the think channel
        assert p_fields[1]


def test_json_schema_reply_plain_and_streamed(client):
    import json

    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"], "additionalProperties": False}
    kw = dict(messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=60, temperature=0,
              response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
              extra_body={"thinking": {"type": "disabled"}})
    plain = client.chat.completions.create(model="m", **kw)
    snap, _ = streamed(client, **kw)
    for choice in (plain.choices[0], snap.choices[0]):
        assert choice.finish_reason == "stop"
        text = choice.message.content
        assert "\n" not in text and "\t" not in text  # (KVV's rule for a json_schema reply)
        assert json.loads(text)["answer"] in ("yes", "no")
    assert snap.choices[0].message.content == plain.choices[0].message.content


def test_bad_request_is_an_openai_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=[{"role": "tool", "content": "42"}], tools=TOOLS)
    assert e.value.body["param"] == "messages[0].tool_call_id"


def test_32_concurrent_streams_lose_no_request_and_no_text(server, client):
    prompts = [f"Tell me about {w}." for w in ("cats", "the sea", "Kimi", "numbers")]
    kw = dict(max_tokens=8, temperature=0, seed=7)
    expected = {}
    for p in prompts:
        m = client.chat.completions.create(model="m", messages=[{"role": "user", "content": p}], **kw)
        expected[p] = (m.choices[0].message.content, getattr(m.choices[0].message, "reasoning_content", None),
                       m.usage.completion_tokens)
    results: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        p = prompts[i % len(prompts)]
        try:
            body = {"model": "m", "messages": [{"role": "user", "content": p}], "stream": True,
                    "stream_options": {"include_usage": True}, **kw}
            content, reasoning, usage = [], [], None
            with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=120) as r:
                for ev in sse_events(r.iter_lines()):
                    for ch in ev["choices"]:
                        content.append(ch["delta"].get("content") or "")
                        reasoning.append(ch["delta"].get("reasoning_content") or "")
                    usage = ev.get("usage") or usage
            results[i] = (p, "".join(content) or None, "".join(reasoning) or None, usage["completion_tokens"])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    assert sorted(results) == list(range(32))
    for p, content, reasoning, n in results.values():
        assert (content, reasoning, n) == expected[p]


# --------------------------------------------------------------------------------------------------
# --upstream: a real llama-server


@pytest.fixture(scope="module")
def llama_server(gguf, tmp_path_factory):
    from llama_server_support import LlamaServer, missing_reason

    reason = missing_reason()
    if reason:
        require_in_ci(False, f"llama-server ({reason})")
        pytest.skip(reason)
    with LlamaServer(gguf, None, tmp_path_factory.mktemp("ls") / "llama-server.log") as ls:
        yield ls


def test_upstream_forced_call(llama_server, gguf, client):
    import json

    native = client.chat.completions.create(model="m", **FORCED)
    up = UpstreamEngine.connect(llama_server.url, gguf)
    try:
        with Uvicorn(create_app(up)) as s:
            c = openai.Client(base_url=s.url + "/v1", api_key="unused", timeout=120, max_retries=0)
            plain = c.chat.completions.create(model="m", **FORCED)
            snap, usage = streamed(c, **FORCED)
    finally:
        up.close()
    # (llama-server applies the GBNF export, the in-process engine llguidance: the same calls, spelled
    # with or without spaces)
    calls = [[(t.function.name, json.loads(t.function.arguments)) for t in ch.message.tool_calls]
             for ch in (plain.choices[0], snap.choices[0])]
    assert calls[0] == calls[1]
    assert [name for name, _ in calls[0]] == ["get_weather"]
    assert calls[0][0][1]["city"] in ("Paris", "Rome")
    assert plain.choices[0].finish_reason == snap.choices[0].finish_reason == "tool_calls"
    assert plain.usage.prompt_tokens == usage.prompt_tokens == native.usage.prompt_tokens


def test_upstream_killed_mid_stream_is_an_error_event_and_the_server_stays_up(gguf, tmp_path):
    from llama_server_support import LlamaServer, missing_reason

    reason = missing_reason()
    if reason:
        require_in_ci(False, f"llama-server ({reason})")
        pytest.skip(reason)
    with LlamaServer(gguf, None, tmp_path / "llama-server.log") as ls:
        up = UpstreamEngine.connect(ls.url, gguf)
        try:
            with Uvicorn(create_app(up)) as s:
                body = {"model": "m", "messages": [{"role": "user", "content": "Go on."}], "max_tokens": 3000,
                        "stream": True, "temperature": 1.0}
                events = []
                with httpx.stream("POST", s.url + "/v1/chat/completions", json=body, timeout=120) as r:
                    for ev in sse_events(r.iter_lines()):
                        events.append(ev)
                        if len(events) == 3:
                            ls.proc.kill()
                health = httpx.get(s.url + "/health", timeout=30)
                after = httpx.post(s.url + "/v1/chat/completions", json=dict(body, stream=False), timeout=60)
        finally:
            up.close()
    assert "error" in events[-1], events[-1]
    assert events[-1]["error"]["code"] == "engine_error"
    assert health.status_code == 200
    assert after.status_code == 502 and after.json()["error"]["code"] == "engine_error"


# --------------------------------------------------------------------------------------------------
# the command


def test_cli_serves_the_gguf(gguf, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "kimi_chat.cli", "serve", str(gguf), "--port", "0",
                                 "--api-key", "k"], env=env, stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        port = listening_port(log_path, proc)
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(url + "/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                return proc.poll() is not None

        ready = wait_for(up, 120)
        assert ready and proc.poll() is None
        c = openai.Client(base_url=url + "/v1", api_key="k", timeout=120, max_retries=0)
        r = c.chat.completions.create(model="m", **FORCED)
        assert r.choices[0].finish_reason == "tool_calls"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    log = log_path.read_text("utf-8", "replace")
    assert "outcome=tool_calls" in log and f"http://127.0.0.1:{port}/v1" in log


def test_cli_help_says_what_the_default_contract_does():
    from kimi_chat.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices and "serve" in a.choices)
    text = sub.choices["serve"].format_help()
    assert "'open' (default)" in text and "passes any valid sampling" in " ".join(text.split())
