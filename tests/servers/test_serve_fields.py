"""Request fields ``kimi-chat serve`` used to validate and drop: the llama.cpp sampling features (penalties,
logit bias, top_k, min_p, repetition_penalty, log probabilities) reach the engine (the embedded one through a
recording stand-in of the GGUF model, an upstream llama-server through a fake one); a documented OpenAI field
the server cannot honour is a 400 naming it; an undocumented field is logged once per name, or refused
under ``strict_fields``."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import needs_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]' (in the checkout))")
httpx = pytest.importorskip("httpx")

from kimi_chat.dialects import get_dialect  # noqa: E402
from kimi_chat.servers.serve import NativeEngine, ServeConfig, UpstreamEngine, create_app  # noqa: E402
from serve_support import FakeLlamaServer, FakeVocabulary, ScriptedEngine, Uvicorn  # noqa: E402

pytestmark = needs_reference

BODY = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
SAMPLING = {"top_k": 5, "min_p": 0.1, "repetition_penalty": 1.2, "presence_penalty": 0.5, "frequency_penalty": -0.25,
            "logit_bias": {"100": -100, "7": 2.5}, "temperature": 0.3, "top_p": 0.9, "seed": 11}


class RecordingModel:
    """What :class:`NativeEngine` uses of a :class:`~kimi_chat.engines.native.NativeModel`: it "generates"
    ``reply`` then the end of the turn, and records the keywords of every ``generate`` call. Asked for
    log probabilities it yields :class:`~kimi_chat.engines.native.TokenLogprob` ids (logprob -0.5 each,
    alternatives ``(id + 1, -1.5)``)."""

    def __init__(self, tokenizer: Any, reply: str) -> None:
        self.path = "recording.gguf"
        self.dialect = get_dialect("kimi-k2-instruct-0905")
        self.n_ctx = 4096
        self._tok = tokenizer
        self.end = tokenizer.token_to_id("<|im_end|>")
        self.reply = tokenizer.encode(reply, allow_special=False)
        self.calls: list[dict[str, Any]] = []

    def tokenizer(self) -> Any:
        return self._tok

    def marker_tokens(self, dialect: Any) -> frozenset[str]:
        return frozenset()

    def is_eog(self, tid: int) -> bool:
        return tid == self.end

    def generate(self, ids: Any, **kwargs: Any) -> Iterator[int]:
        from kimi_chat.engines.native import TokenLogprob

        self.calls.append(kwargs)
        for tid in [*self.reply, self.end]:
            if kwargs.get("logprobs") is None:
                yield tid
            else:
                yield TokenLogprob(tid, -0.5, tuple((tid + k + 1, -1.5 - k) for k in range(kwargs["logprobs"])))

    def close(self) -> None:
        pass


def test_sampling_fields_reach_the_embedded_engine(tokenizer):
    model = RecordingModel(tokenizer, "Hello")
    with Uvicorn(create_app(NativeEngine(model), ServeConfig())) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, **SAMPLING), timeout=30)
    assert r.status_code == 200, r.text
    call = model.calls[0]
    assert (call["top_k"], call["min_p"], call["repeat_penalty"]) == (5, 0.1, 1.2)
    assert (call["presence_penalty"], call["frequency_penalty"]) == (0.5, -0.25)
    assert call["logit_bias"] == {100: -100.0, 7: 2.5}
    assert (call["temperature"], call["top_p"], call["seed"]) == (0.3, 0.9, 11)
    assert call["logprobs"] is None


def test_defaults_leave_llama_cpp_samplers_off(tokenizer):
    model = RecordingModel(tokenizer, "Hello")
    with Uvicorn(create_app(NativeEngine(model), ServeConfig())) as s:
        httpx.post(s.url + "/v1/chat/completions", json=BODY, timeout=30)
    call = model.calls[0]
    assert (call["top_k"], call["min_p"], call["repeat_penalty"], call["presence_penalty"],
            call["frequency_penalty"], call["logit_bias"]) == (0, 0.0, 1.0, 0.0, 0.0, {})


def test_sampling_fields_reach_the_upstream_llama_server(tokenizer):
    reply = [*tokenizer.encode("Hello", allow_special=False), tokenizer.token_to_id("<|im_end|>")]
    with FakeLlamaServer(reply) as upstream:
        engine = UpstreamEngine(upstream.url, vocabulary=FakeVocabulary(tokenizer, "kimi-k2-instruct-0905"))
        with Uvicorn(create_app(engine, ServeConfig())) as s:
            r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, **SAMPLING), timeout=30)
            lp = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, logprobs=True, top_logprobs=2), timeout=30)
        engine.close()
    assert r.status_code == 200
    sent = upstream.bodies[0]
    assert (sent["top_k"], sent["min_p"], sent["repeat_penalty"]) == (5, 0.1, 1.2)
    assert (sent["presence_penalty"], sent["frequency_penalty"]) == (0.5, -0.25)
    assert sent["logit_bias"] == [[7, 2.5], [100, -100.0]]
    assert upstream.bodies[1]["n_probs"] == 2 and "n_probs" not in sent
    content = lp.json()["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in content) == "Hello"
    assert [(e["logprob"], [t["logprob"] for t in e["top_logprobs"]]) for e in content] == [(-1.0, [-1.0, -2.0])] * len(
        content)


def test_logprobs_from_an_engine_without_them_are_a_400(tokenizer):
    with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig())) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, logprobs=True), timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs"


def test_logprobs_plain_and_streamed(tokenizer):
    model = RecordingModel(tokenizer, "Hello there")
    body = dict(BODY, logprobs=True, top_logprobs=2)
    with Uvicorn(create_app(NativeEngine(model), ServeConfig())) as s:
        plain = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30).json()
        streamed = httpx.post(s.url + "/v1/chat/completions", json=dict(body, stream=True), timeout=30)
    assert model.calls[0]["logprobs"] == 2
    content = plain["choices"][0]["logprobs"]["content"]
    # one entry per generated token, the end of the turn excluded; the text of the tokens is the reply
    assert len(content) == len(model.reply)
    assert "".join(e["token"] for e in content) == "Hello there"
    assert all(e["logprob"] == -0.5 and bytes(e["bytes"]).decode() == e["token"] for e in content)
    assert [len(e["top_logprobs"]) for e in content] == [2] * len(content)
    assert math.isclose(content[0]["top_logprobs"][1]["logprob"], -2.5)
    from serve_support import sse_events

    events = list(sse_events(iter(streamed.text.splitlines())))
    choices = [c for e in events for c in e["choices"]]
    # as OpenAI streams them: each content chunk carries the log probabilities of its own tokens
    with_text = [c for c in choices if c["delta"].get("content")]
    assert len(with_text) > 1
    for c in with_text:
        assert "".join(e["token"] for e in c["logprobs"]["content"]) == c["delta"]["content"]
    assert [e for c in choices if c.get("logprobs") for e in c["logprobs"]["content"]] == content


def test_streamed_logprobs_accumulate_in_the_openai_sdk(tokenizer):
    openai = pytest.importorskip("openai")
    model = RecordingModel(tokenizer, "Hello there")
    with Uvicorn(create_app(NativeEngine(model), ServeConfig())) as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0)
        with client.chat.completions.stream(model="m", messages=BODY["messages"], logprobs=True,
                                            top_logprobs=1) as stream:
            events = list(stream)
            final = stream.get_final_completion()
        client.close()
    deltas = [e for e in events if e.type == "logprobs.content.delta"]
    texts = [e.delta for e in events if e.type == "content.delta" and e.delta]  # (the first chunk: "")
    assert len(deltas) == len(texts) > 1  # one logprobs delta with each content delta
    assert ["".join(t.token for t in d.content) for d in deltas] == texts
    tokens = final.choices[0].logprobs.content
    assert "".join(t.token for t in tokens) == final.choices[0].message.content == "Hello there"
    assert [t.logprob for t in tokens] == [-0.5] * len(tokens)


@pytest.mark.parametrize("extra, param", [
    ({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}]}]}, "messages[0].content[1]"),
    ({"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"]}, "modalities"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
    ({"store": True}, "store"),
    ({"logit_bias": {"999999999": 1}}, "logit_bias.999999999"),
    ({"logit_bias": {"abc": 1}}, "logit_bias.abc"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"top_k": -1}, "top_k"),
])
def test_a_documented_field_the_server_cannot_honour_is_a_400(tokenizer, extra, param):
    with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig())) as s:
        r = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, **extra), timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_undocumented_fields_are_logged_once_or_refused_when_strict(tokenizer, caplog):
    body = dict(BODY, litellm_trace_id="t1", mock_response=None, user="u1", metadata={"k": "v"})
    with caplog.at_level(logging.INFO, logger="kimi_chat.serve"):
        with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig())) as s:
            answers = [httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30) for _ in range(3)]
        with Uvicorn(create_app(ScriptedEngine(tokenizer), ServeConfig(strict_fields=True))) as s:
            strict = httpx.post(s.url + "/v1/chat/completions", json=body, timeout=30)
            documented = httpx.post(s.url + "/v1/chat/completions", json=dict(BODY, user="u1"), timeout=30)
    assert [a.status_code for a in answers] == [200, 200, 200]
    said = [r.getMessage() for r in caplog.records if "not one this server reads" in r.getMessage()]
    assert len(said) == 2  # once per name, not per request
    assert any("'litellm_trace_id'" in m for m in said) and any("'mock_response'" in m for m in said)
    assert strict.status_code == 400 and strict.json()["error"]["param"] == "litellm_trace_id"
    assert documented.status_code == 200
