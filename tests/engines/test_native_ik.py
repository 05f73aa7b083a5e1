"""The ik_llama.cpp backend (``NativeModel.load(path, backend="ik_llama.cpp")``, over
ik-llama-cpp-python 0.1.5) on the tiny Kimi-architecture model, and its conformance report.

Skipped locally when ik-llama-cpp-python is not installed (with the reason); under CI (which installs
it with ``.ci/install-native-ik.sh``) a missing package fails. What ik_llama.cpp gets wrong is
asserted as *known*: a fix upstream makes a test fail, and the report in docs/engines.md gets regenerated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import require_in_ci
from engine_support import tiny_model_fixtures

from kimi_chat import markers as M
from kimi_chat.output import parse
from kimi_chat.prompt import render

try:
    import ik_llama_cpp  # noqa: F401  (imports its ctypes binding lazily: the library loads on use)

    HAVE_IK = True
except ImportError:
    HAVE_IK = False

require_in_ci(HAVE_IK, "ik-llama-cpp-python (.ci/install-native-ik.sh installs it)")

pytestmark = [
    pytest.mark.native_ik,
    pytest.mark.skipif(not HAVE_IK, reason="ik-llama-cpp-python is not installed "
                       "(bash .ci/install-native-ik.sh .venv in the checkout)"),
]

DIALECT = "kimi-k2-instruct-0905"
BACKEND = "ik_llama.cpp"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 10},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"],
            "additionalProperties": False},  # closed: the token masks enforce the schema exactly
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


tiny_gguf, model = tiny_model_fixtures(DIALECT, "tiny-ik", "tiny.gguf", backend=BACKEND)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "kimi_chat.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


# --------------------------------------------------------------------------------------------------
# loading


def test_missing_extra_says_what_to_install(monkeypatch, tmp_path):
    import kimi_chat.engines.native as rt

    monkeypatch.setitem(sys.modules, "ik_llama_cpp", None)
    monkeypatch.delitem(sys.modules, "ik_llama_cpp._ctypes_api", raising=False)
    f = tmp_path / "x.gguf"
    f.write_bytes(b"GGUF")
    with pytest.raises(rt.NativeUnavailable, match=r"bash \.ci/install-native-ik\.sh \.venv"):
        rt.NativeModel.load(f, backend=BACKEND)


def test_unknown_backend_is_refused(tiny_gguf):
    from kimi_chat.engines.native import NativeModel

    with pytest.raises(ValueError, match="backend must be one of 'llama.cpp', 'ik_llama.cpp', not 'vllm'"):
        NativeModel.load(tiny_gguf, backend="vllm")


def test_loads_the_tiny_deepseek2_model(model):
    # without mla set to the context's value this load segfaults in build_deepseek2
    assert model.backend == BACKEND
    assert model.metadata["general.architecture"] == "deepseek2"
    assert model.metadata["tokenizer.ggml.pre"] == "kimi-k2"
    assert model.n_vocab == 163840 and model.n_ctx == 2048
    assert model.dialect.name == DIALECT and model.dialect_source.startswith("embedded template")
    assert model.eog_ids() == sorted([M.EOS.id, M.IM_END.id, M.EOT.id, M.PAD.id])


def test_loading_prints_nothing_on_stdout(tiny_gguf):
    # ik_llama.cpp's loader printf()s a line per MLA tensor; NativeModel.load silences fd 1 meanwhile
    code = ("from kimi_chat.engines.native import NativeModel; "
            f"NativeModel.load({str(tiny_gguf)!r}, backend={BACKEND!r}, n_ctx=512).close()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""


def test_vocabulary_and_markers(model):
    tok = model.tokenizer()  # built from the GGUF through ik_llama.cpp's vocabulary API
    assert tok.num_base_tokens == M.NUM_BASE_TOKENS
    for m in (M.IM_END, M.IM_USER, M.TOOL_CALL_BEGIN, M.TOOL_CALLS_SECTION_END):
        assert model.tokenize(m.text, special=True) == [m.id]
        assert model.detokenize([m.id]) == m.text
        assert m.id not in model.tokenize(m.text, special=False)
    # long tokens are exact (piece() sizes its buffer)
    long = [i for i in range(tok.num_base_tokens) if len(tok.id_to_bytes(i)) > 32]
    assert long and all(model.piece(i) == tok.id_to_bytes(i) for i in long)


# --------------------------------------------------------------------------------------------------
# tokenization and generation


def test_tokenization_agrees_except_on_combining_marks(model):
    agree = ["Hello, world!", "def f(x):\n    return x\n", "你好，世界！", "emoji 🎉🚀👍🏽", "  a   b\n\n"]
    assert model.compare_tokenization(agree) == []
    assert model.compare_tokenization(agree, special=True) == []
    # KNOWN: ik_llama.cpp's kimi-k2 pre-tokenizer splits like llama.cpp's on combining marks
    diffs = model.compare_tokenization(["नमस्ते दुनिया", "e\u0301's"])
    assert [d.text for d in diffs] == ["नमस्ते दुनिया", "e\u0301's"]
    assert [d.first_difference for d in diffs] == [2, 2]


def test_same_seed_same_output_and_prompt_read_back(model):
    a = model.chat(ASK, max_tokens=12, temperature=1.0, seed=3)
    b = model.chat(ASK, max_tokens=12, temperature=1.0, seed=3)
    assert a.completion_ids == b.completion_ids and len(a.completion_ids) >= 1
    assert model.detokenize(a.prompt_ids) == render(ASK, dialect=DIALECT)
    assert a.finish_reason in ("stop", "length")


@pytest.mark.parametrize("seed", range(3))
def test_grammar_forces_a_tool_call_that_parses(model, seed):
    r = model.chat(ASK, tools=[WEATHER], tool_choice="required", max_tokens=200, temperature=1.0, seed=seed)
    assert r.finish_reason == "tool_calls", r.text
    assert r.completion_ids[-1] in model.eog_ids()
    assert r.parsed.warnings == []
    for c in r.parsed.tool_calls:
        assert c.status.value == "ok" and c.name == "get_weather"
        args = json.loads(c.arguments)
        assert set(args) <= {"city", "unit"} and {"city", "unit"} <= set(args)
        assert args["unit"] in ("celsius", "fahrenheit") and len(args["city"]) <= 10
    assert parse(r.text, dialect=DIALECT, tools=[WEATHER]).to_openai() == r.message


def test_bad_grammar_is_a_clear_error(model):
    from kimi_chat.errors import KimiChatError

    with pytest.raises(KimiChatError, match="ik_llama.cpp rejected the grammar"):
        list(model.generate(model.prompt_ids(ASK), max_tokens=4, grammar="root ::= ( unclosed"))


PENALTIES = [{"presence_penalty": 100.0}, {"frequency_penalty": 100.0}, {"repeat_penalty": 1000.0}]


@pytest.mark.parametrize("penalty", PENALTIES, ids=lambda p: next(iter(p)))
def test_penalties_are_applied(model, penalty):
    # a bias of +50 makes one token win every greedy step; a penalty of 100 on a token already generated
    # (repetition 1000: its positive logit divided by 1000) takes it out after its first time, so the
    # rest is what greedy decoding gives with that token banned
    prompt = model.prompt_ids(ASK)
    (x,) = model.tokenize("Hello", special=False)
    plain = list(model.generate(prompt, max_tokens=6, temperature=0.0, logit_bias={x: 50.0}))
    penalised = list(model.generate(prompt, max_tokens=6, temperature=0.0, logit_bias={x: 50.0}, **penalty))
    banned = list(model.generate([*prompt, x], max_tokens=5, temperature=0.0, logit_bias={x: -1000.0}))
    assert plain == [x] * 6
    assert penalised == [x, *banned]


def test_penalties_reach_ik_through_the_server(model):
    pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install -e '.[serve]')")
    httpx = pytest.importorskip("httpx")
    from kimi_chat.servers.serve import NativeEngine, ServeConfig, create_app
    from serve_support import Uvicorn

    (x,) = model.tokenize("Hello", special=False)
    body = {"model": "m", "messages": ASK, "temperature": 0, "max_tokens": 4, "logit_bias": {str(x): 50}}
    with Uvicorn(create_app(NativeEngine(model), ServeConfig())) as s:
        url = s.url + "/v1/chat/completions"
        plain = httpx.post(url, json=body, timeout=120)
        answers = [httpx.post(url, json=dict(body, **p), timeout=120) for p in
                   ({"presence_penalty": 2.0}, {"frequency_penalty": 2.0}, {"repetition_penalty": 1.3})]
    assert plain.status_code == 200 and plain.json()["choices"][0]["message"]["content"] == "Hello" * 4
    assert [a.status_code for a in answers] == [200, 200, 200], [a.text for a in answers]


def test_builtin_format_swaps_user_and_assistant(model):
    # KNOWN (ik_llama.cpp's built-in kimi-k2 format): the user turn gets the assistant header and the
    # assistant turn the user header; the generation prompt is right
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                {"role": "assistant", "content": "A"}]
    got = model.apply_builtin_template(messages)
    swapped = [{"role": "system", "content": "S"}, {"role": "assistant", "content": "U"},
               {"role": "user", "content": "A"}]
    assert got == render(swapped, dialect=DIALECT)
    assert got != render(messages, dialect=DIALECT)


def test_both_backends_in_one_process_agree(model, tiny_gguf):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from kimi_chat.engines.native import NativeModel

    other = NativeModel.load(tiny_gguf, n_ctx=2048)
    try:
        texts = ["Hello, world!", "नमस्ते दुनिया", "<|im_end|> typed", "中文 🎉"]
        for special in (False, True):
            assert [model.tokenize(t, special=special) for t in texts] == [
                other.tokenize(t, special=special) for t in texts]
        before = model.chat(ASK, max_tokens=6, temperature=0.0, seed=1).completion_ids
        other.chat(ASK, max_tokens=6, temperature=0.0, seed=1)
        assert model.chat(ASK, max_tokens=6, temperature=0.0, seed=1).completion_ids == before
    finally:
        other.close()


# --------------------------------------------------------------------------------------------------
# the conformance report

IK_FAILURES = {
    ("tokenization", "Hindi"),
    ("tokenization", "combining marks"),
    ("special tokens", "token types"),
    ("special tokens", "detokenization without special tokens"),
    ("chat format", "built-in format: system, user"),
    ("chat format", "built-in format: system, user, assistant, user"),
    ("chat format", "built-in format: user only"),
}

SWAPPED = ("engine header '<|im_assistant|>assistant<|im_middle|>', kimi_chat '<|im_user|>user<|im_middle|>'")


def test_report_names_the_swapped_roles_and_the_pretokenizer(model):
    from kimi_chat.engines.native import conformance

    r = conformance(model)
    assert (r.backend, r.engine) == (BACKEND, "ik-llama-cpp-python 0.1.5")
    # every failure is a known engine problem (upstream, documented): none is this model's or template's
    assert r.failures == [] and r.ok
    assert {(c.group, c.name) for c in r.known} == IK_FAILURES
    c = r.check("chat format", "built-in format: system, user")
    # the first difference is at the user header, right after the system turn
    from kimi_chat.engines.conformance import CONVERSATIONS

    at = render(list(CONVERSATIONS[0][1]), dialect=DIALECT).index(M.IM_USER.text)
    assert c.first_difference == (f"at char {at}: kimi_chat ...'ddle|>You are terse.<|im_end|>"
                                  "<|im_user|>user<|im_middle|>Hi'..., engine ...'ddle|>You are terse.<|im_end|>"
                                  "<|im_assistant|>assistant<|im_'...")
    assert c.note.startswith(f"message 1 (user): {SWAPPED}; known engine problem (upstream, documented): ")
    assert r.check("chat format", "built-in format: user only").note.startswith(f"message 0 (user): {SWAPPED}; ")
    marks = r.check("tokenization", "combining marks")
    assert marks.first_difference == "\"e\\u0301's\" at token 2: kimi_chat [1048 \"'s\"], engine [6 \"'\" 82 's']"
    assert r.check("generation", "grammar-forced tool call").passed
    # the report in docs/engines.md is this one (regenerate: kimi-chat conformance /tmp/tiny.gguf -b ik_llama.cpp)
    from test_conformance import readme_report

    assert readme_report(BACKEND) == r.format_text()


def test_cli_conformance_on_ik(tiny_gguf):
    p = _cli("conformance", str(tiny_gguf), "--backend", BACKEND, "--json")
    assert p.returncode == 0, p.stderr  # only known engine problems fail: not this model's
    data = json.loads(p.stdout)
    assert data["backend"] == BACKEND and data["ok"] is True
    assert not [c for c in data["checks"] if c["status"] == "fail"]
    names = {(c["group"], c["name"]) for c in data["checks"] if c["status"] == "known"}
    assert names == IK_FAILURES
