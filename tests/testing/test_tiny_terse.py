"""The terse tiny model (``kimi-chat tiny-model --terse``, kimi_chat.testing.terse): its turns end. An
unconstrained reply is short, a forced call completes (finish_reason ``tool_calls``, arguments with every
required key), greedily and at temperature 1, in both families; the random model runs to ``max_tokens``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require_in_ci, skip_without_reference

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False

require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")
pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (bash .ci/install-native.sh .venv; "
                       "CI installs it with .ci/install-native.sh)"),
]

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
    "required": ["city", "days"]}}}
ASK = [{"role": "user", "content": "What is the weather in Beijing? Answer at length, in detail."}]
FREE_TOKENS = 3      # "OK", the end of the turn (K2.6 with thinking: "</think>" first)
CALL_TOKENS = 160    # a forced call: the tag / marker text the grammar forces, plus a few value tokens
MAX_TOKENS = 256


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    from kimi_chat.cli import main
    from kimi_chat.engines.native import NativeModel
    from kimi_chat.testing.tiny_model import build_tiny_model

    skip_without_reference()
    out = tmp_path_factory.mktemp("terse")
    k3 = out / "terse-k3.gguf"
    status = main(["tiny-model", "--terse", "-d", "kimi-k3", str(k3)])
    assert status == 0
    k26 = build_tiny_model(out / "terse-k26.gguf", dialect="kimi-k2.6", terse=True)
    loaded = {"kimi-k3": NativeModel.load(k3, n_ctx=2048), "kimi-k2.6": NativeModel.load(k26, n_ctx=2048)}
    yield loaded
    for m in loaded.values():
        m.close()


@pytest.mark.parametrize("dialect", ["kimi-k3", "kimi-k2.6"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_free_reply_is_short(models, dialect, temperature):
    r = models[dialect].chat(ASK, max_tokens=MAX_TOKENS, temperature=temperature, seed=7, thinking=False)
    assert r.finish_reason == "stop", r.text
    assert len(r.completion_ids) <= FREE_TOKENS, r.text
    assert r.message["content"] == "OK"


def test_k26_thinking_reply_closes_its_think_block(models):
    r = models["kimi-k2.6"].chat(ASK, max_tokens=MAX_TOKENS, temperature=1.0, seed=3)
    assert (r.finish_reason, r.message["content"]) == ("stop", "OK"), r.text
    assert len(r.completion_ids) <= FREE_TOKENS


def test_k3_thinking_reply_ends(models):
    r = models["kimi-k3"].chat(ASK, max_tokens=MAX_TOKENS, temperature=1.0, seed=3)
    assert r.finish_reason == "stop" and len(r.completion_ids) <= FREE_TOKENS, r.text


@pytest.mark.parametrize("dialect", ["kimi-k3", "kimi-k2.6"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_forced_call_completes(models, dialect, temperature):
    r = models[dialect].chat(ASK, tools=[WEATHER], tool_choice="required", max_tokens=MAX_TOKENS,
                             temperature=temperature, seed=11)
    assert r.finish_reason == "tool_calls", r.text
    assert len(r.completion_ids) <= CALL_TOKENS, r.text
    calls = r.message["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather"]
    args = json.loads(calls[0]["function"]["arguments"])
    assert {"city", "days"} <= set(args) and isinstance(args["days"], int)


def test_auto_without_a_reason_to_call_answers(models):
    r = models["kimi-k2.6"].chat(ASK, tools=[WEATHER], tool_choice="auto", max_tokens=MAX_TOKENS, temperature=0.0)
    assert (r.finish_reason, r.message["content"]) == ("stop", "OK"), r.text


def test_greedy_replies_are_deterministic(models):
    m = models["kimi-k3"]
    first = m.chat(ASK, tools=[WEATHER], tool_choice="required", max_tokens=MAX_TOKENS, temperature=0.0)
    again = m.chat(ASK, tools=[WEATHER], tool_choice="required", max_tokens=MAX_TOKENS, temperature=0.0)
    assert first.completion_ids == again.completion_ids


def test_the_random_model_does_not_end(tmp_path: Path):
    """What --terse changes: the same tiny model without the bias writes until max_tokens."""
    from kimi_chat.engines.native import NativeModel
    from kimi_chat.testing.tiny_model import build_tiny_model

    skip_without_reference()
    m = NativeModel.load(build_tiny_model(tmp_path / "random-k3.gguf", dialect="kimi-k3"), n_ctx=2048)
    try:
        r = m.chat(ASK, max_tokens=32, temperature=0.0, thinking=False)
    finally:
        m.close()
    assert r.finish_reason == "length"
