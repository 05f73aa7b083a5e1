"""The embedded engine behind ``kimi-chat serve`` (the tiny Kimi models in llama.cpp): a vocabulary without
the dialect's markers is refused at load; a constraint that fails mid-generation fails the request once
(no traceback per token); the KV cache of the previous request's prompt is reused; the sampling fields and
log probabilities are real llama.cpp ones; ``kimi-chat tiny-model -d kimi-k2.6`` writes the vocabulary its
dialect needs, saying its progress; ``--upstream`` llama-server with ``-np`` slots runs two requests at
once."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from conftest import require_in_ci, skip_without_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' (in the checkout))")
httpx = pytest.importorskip("httpx")

from kimi_chat import markers as M  # noqa: E402

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False
require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")

needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed "
                                 "(pip install -e '.[native]' (in the checkout))")


@pytest.fixture(scope="module")
def k26_made(tmp_path_factory) -> tuple[Path, str]:
    """``kimi-chat tiny-model -d kimi-k2.6``: the GGUF and what the command wrote to stderr."""
    import os
    import subprocess
    import sys

    skip_without_reference()
    pytest.importorskip("gguf")
    out = tmp_path_factory.mktemp("k26") / "k26.gguf"
    proc = subprocess.run([sys.executable, "-m", "kimi_chat.cli", "tiny-model", "-d", "kimi-k2.6", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


@pytest.fixture(scope="module")
def k26_gguf(k26_made) -> Path:
    return k26_made[0]


def test_tiny_model_k26_has_the_markers_of_its_dialect_and_says_its_progress(k26_made):
    import gguf

    gguf_path, stderr = k26_made
    reader = gguf.GGUFReader(str(gguf_path))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    types = reader.fields["tokenizer.ggml.token_type"]

    def token(i: int) -> tuple[str, int]:
        return (bytes(tokens.parts[tokens.data[i]]).decode("utf-8"), int(types.parts[types.data[i]][0]))

    control = gguf.TokenType.CONTROL
    # K2.6 writes reasoning between <think> and </think>, each one special id (reference/PROVENANCE.md)
    assert token(M.THINK_BEGIN.id) == (M.THINK_BEGIN.text, control)
    assert token(M.THINK_END.id) == (M.THINK_END.text, control)
    progress = [line for line in stderr.splitlines() if line.startswith("kimi-chat: ")]
    assert len(progress) >= 4  # the tokenizer, the vocabulary, the weights, the file; then "wrote"
    assert any("vocabulary" in line for line in progress) and progress[-1].startswith("kimi-chat: wrote")



# --------------------------------------------------------------------------------------------------
# the embedded engine (llama.cpp)

DIALECT = "kimi-k2-instruct-0905"
BODY = {"model": "m", "messages": [{"role": "user", "content": "Tell me about Paris."}], "temperature": 0,
        "seed": 1, "max_tokens": 8}


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    from kimi_chat.testing.tiny_model import build_tiny_model

    skip_without_reference()
    if not HAVE_LLAMA:
        pytest.skip("llama-cpp-python is not installed")
    return build_tiny_model(tmp_path_factory.mktemp("engine") / "k2.gguf", dialect=DIALECT)


@pytest.fixture(scope="module")
def engine(gguf):
    from kimi_chat.servers.serve import NativeEngine

    e = NativeEngine.load(gguf, n_ctx=2048)
    yield e
    e.close()


@pytest.fixture(scope="module")
def url(engine):
    from kimi_chat.servers.serve import ServeConfig, create_app
    from serve_support import Uvicorn

    with Uvicorn(create_app(engine, ServeConfig())) as s:
        yield s.url + "/v1/chat/completions"


@needs_llama
def test_a_vocabulary_without_the_dialects_markers_is_refused_at_load(tmp_path, capsys):
    from kimi_chat.cli import main
    from kimi_chat.errors import KimiChatError
    from kimi_chat.servers.serve import NativeEngine
    from kimi_chat.testing.tiny_model import build_tiny_model
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    skip_without_reference()
    # a K2.6 GGUF converted with the July-2025 vocabulary: <think> / </think> are no tokens of it
    path = build_tiny_model(tmp_path / "k26-old-vocab.gguf", dialect="kimi-k2.6",
                            tokenizer=KimiTokenizer.from_reference("k2"))
    with pytest.raises(KimiChatError) as caught:
        NativeEngine.load(path, n_ctx=512)
    message = str(caught.value)
    assert M.THINK_BEGIN.text in message and M.THINK_END.text in message and "tokenizer_config.json" in message
    code = main(["serve", str(path), "--port", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code > 0 and M.THINK_END.text in err[-1] and "serving" not in " ".join(err)


@needs_llama
def test_a_constraint_failing_mid_generation_fails_the_request_once(engine, url, monkeypatch, caplog, capfd):
    from kimi_chat.engines import constrain

    real = constrain.TokenMask.__call__
    calls = []

    def failing(self, input_ids, scores):
        calls.append(1)
        if len(calls) >= 3:
            raise constrain.ConstraintViolation('unknown special token "</think>"')
        return real(self, input_ids, scores)

    monkeypatch.setattr(constrain.TokenMask, "__call__", failing)
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"):
        r = httpx.post(url, json=dict(BODY, max_tokens=40), timeout=120)
    monkeypatch.undo()
    after = httpx.post(url, json=BODY, timeout=120)
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "engine_error" and "constraint failed" in err["message"] and "</think>" in err["message"]
    assert len(calls) == 3  # generation stopped at the failure, not run on unconstrained
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # one line, no traceback
    assert "Exception ignored" not in capfd.readouterr().err
    assert after.status_code == 200


@needs_llama
def test_the_kv_cache_of_the_previous_prompt_is_reused(engine):
    import threading as th

    from kimi_chat.servers.contract import read_chat_request
    from kimi_chat.servers.serve.generation import prepare, run

    def ids_of(messages):
        return prepare(engine, read_chat_request(dict(BODY, messages=messages), dialect=DIALECT))

    turn1 = [{"role": "system", "content": "You are terse. " * 30}, {"role": "user", "content": "Hi"}]
    turn2 = [*turn1, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "And then?"}]
    other = [{"role": "user", "content": "Something unrelated entirely."}]
    p1, p2, p_other = ids_of(turn1), ids_of(turn2), ids_of(other)
    common = 0
    for a, b in zip(p1.prompt_ids, p2.prompt_ids):
        if a != b:
            break
        common += 1

    def generate(prepared):
        return [item for item in run(engine, prepared, th.Event())][-1].completion_ids

    generate(p_other)
    cold = generate(p2)
    cold_reused = engine.native.reused_tokens
    generate(p1)
    warm = generate(p2)
    assert engine.native.reused_tokens >= common > 0  # the first turn's prompt (and more) came from the cache
    assert cold_reused < common
    assert warm == cold  # greedy: the same tokens with the cache as without


@needs_llama
def test_logit_bias_steers_the_real_sampler(engine, url):
    tok = engine.tokenizer()
    (paris,) = tok.encode("Paris", allow_special=False)
    plain = httpx.post(url, json=dict(BODY, max_tokens=1), timeout=120).json()
    biased = httpx.post(url, json=dict(BODY, max_tokens=1, logit_bias={str(paris): 100}), timeout=120).json()
    assert plain["choices"][0]["message"]["content"] != "Paris"  # (the noise model does not say it unbiased)
    assert biased["choices"][0]["message"]["content"] == "Paris"


@needs_llama
def test_logprobs_of_the_real_sampler(url):
    r = httpx.post(url, json=dict(BODY, logprobs=True, top_logprobs=3), timeout=120)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert len(content) == r.json()["usage"]["completion_tokens"] - (r.json()["choices"][0]["finish_reason"] == "stop")
    for entry in content:
        top = entry["top_logprobs"]
        assert len(top) == 3 and all(a["logprob"] >= b["logprob"] for a, b in zip(top, top[1:]))
        assert entry["logprob"] <= 0.0
        # greedy (temperature 0): the chosen token is the most likely one
        assert (entry["token"], entry["logprob"]) == (top[0]["token"], top[0]["logprob"])


def test_help_says_the_embedded_engine_runs_one_request_at_a_time():
    from kimi_chat.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices and "serve" in a.choices)
    text = " ".join(sub.choices["serve"].format_help().split())
    assert "ONE REQUEST AT A TIME" in text
    assert "llama-server with -np N slots" in text and "--upstream" in text


@needs_llama
def test_upstream_llama_server_slots_generate_two_requests_at_once(gguf, tmp_path):
    import time

    from kimi_chat.servers.serve import ServeConfig, UpstreamEngine, create_app
    from llama_server_support import LlamaServer, missing_reason
    from serve_support import Uvicorn, sse_events

    reason = missing_reason()
    if reason:
        require_in_ci(False, f"llama-server ({reason})")
        pytest.skip(reason)
    with LlamaServer(gguf, None, tmp_path / "llama-server.log", args=("-np", "2"), n_ctx=4096) as ls:
        up = UpstreamEngine.connect(ls.url, gguf)
        end = up.tokenizer().token_to_id("<|im_end|>")
        # the end of the turn biased away: each generation runs its 200 tokens
        body = dict(BODY, stream=True, max_tokens=200, temperature=1.0, logit_bias={str(end): -100})
        spans: dict[int, list[float]] = {}
        try:
            with Uvicorn(create_app(up, ServeConfig(queue=0))) as s:
                def stream(k: int) -> None:
                    with httpx.stream("POST", s.url + "/v1/chat/completions", json=body, timeout=300) as r:
                        for event in sse_events(r.iter_lines()):
                            if any(c["delta"].get("content") for c in event["choices"]):
                                spans.setdefault(k, []).append(time.monotonic())

                threads = [threading.Thread(target=stream, args=(k,)) for k in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(300)
                lp = httpx.post(s.url + "/v1/chat/completions", timeout=300,
                                json=dict(BODY, logprobs=True, top_logprobs=2, temperature=0)).json()
        finally:
            up.close()
    content = lp["choices"][0]["logprobs"]["content"]  # (llama-server's n_probs)
    assert content and all(e["logprob"] <= 0 and len(e["top_logprobs"]) == 2 for e in content)
    assert all(e["token"] == e["top_logprobs"][0]["token"] for e in content)  # greedy: the most likely one
    assert up.slots == 2
    assert sorted(spans) == [0, 1]
    # each stream's text began before the other's ended: the two generated at the same time (the embedded
    # engine, one request at a time, would finish one before the other's first token)
    assert spans[0][0] < spans[1][-1] and spans[1][0] < spans[0][-1]
