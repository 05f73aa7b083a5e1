"""Kimi-K3 end to end in a real engine (llama.cpp through llama-cpp-python): the tiny random model built with K3's
special tokens over the same vocabulary (``build_tiny_model(dialect="kimi-k3")`` / ``kimi-chat tiny-model -d
kimi-k3``), the K3 prompt as kimi_chat's token ids, generation under the K3 tool-call grammar, the K3 parser.

Skipped when llama-cpp-python is not installed (``.ci/install-native.sh`` installs it in CI, where its absence
fails) or, for the tests on the tiny model, when the reference data (its vocabulary) is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import require_in_ci, skip_without_reference
from engine_support import (HAVE_LLAMA, LLAMA_MISSING, LOOKUP, reference_tokenizer_fixture, tiny_model_fixtures, valid,
                            weather_tool)

from kimi_chat import markers as M
from kimi_chat.output import parse
from kimi_chat.families.k3.render import render_k3_segments
from kimi_chat.tokens.rendered import render_tokens

require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")
pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(not HAVE_LLAMA, reason=LLAMA_MISSING),
]

K3 = "kimi-k3"
WEATHER = weather_tool(days_minimum=0)
TOOLS = [WEATHER, LOOKUP]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "system", "content": "Use the tools."},
       {"role": "user", "content": "Weather in Paris? Also look up item 7. <|open|>typed<|sep|> [EOS]"}]


tiny_k3, model = tiny_model_fixtures(K3, "tiny-k3", "tiny-kimi-k3.gguf", gguf_name="tiny_k3")
k3_tokenizer = reference_tokenizer_fixture("k3", name="k3_tokenizer")


# ------------------------------------------------------------------------------------------- the model


def test_tiny_k3_model_has_k3_special_tokens_and_is_recognised(model, k3_tokenizer):
    assert model.metadata["general.architecture"] == "deepseek2"
    assert model.embedded_chat_template is None  # K3 has no Jinja template
    assert model.dialect.name == K3 and "vocabulary" in model.dialect_source
    for m in M.K3_MARKERS:
        assert model.tokenize(m.text, special=True) == [m.id], m
        assert model.token_text(m.id) == m.text
    assert M.K3_END_OF_MSG.id in model.eog_ids()
    assert model.is_eog(M.K3_END_OF_MSG.id) and not model.is_eog(M.K3_OPEN.id)
    assert model.marker_tokens() == {M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text}
    # the tokenizer kimi_chat builds from the GGUF names K3's special ids as the reference K3 tokenizer does
    tok = model.tokenizer()
    assert tok.eos_id == M.K3_END_OF_MSG.id == k3_tokenizer.eos_id  # the model's eos


def test_k3_tokenizer_from_the_gguf_is_the_engines_size(model, k3_tokenizer):
    """K3's official tokenizer has 256 special ids (no ``+ 2``): the one built from a K3 GGUF has exactly
    the engine's vocabulary, so no id it encodes is one the engine does not have."""
    tok = model.tokenizer()
    assert tok.vocab_size == model.n_vocab == k3_tokenizer.vocab_size == 163840
    assert dict(tok.special_tokens) == dict(k3_tokenizer.special_tokens)
    for i in (163840, 163841):  # K2's two ids beyond the model
        text = f"<|reserved_token_{i}|>"
        assert text not in tok.special_tokens
        ids = tok.encode(text)
        assert ids == k3_tokenizer.encode(text) and max(ids) < model.n_vocab


@pytest.mark.parametrize("options", [{}, {"thinking": False}, {"tool_choice": "required"}])
def test_engine_tokenizes_the_k3_prompt_as_kimi_tokenizer(model, k3_tokenizer, options):
    segments = render_k3_segments(ASK, TOOLS, **options)
    ids = render_tokens(ASK, tokenizer=k3_tokenizer, tools=TOOLS, dialect=K3, **options).ids
    # segment by segment (markers as special tokens, text as ordinary text), as the official K3 tokenizer encodes
    engine = [i for s in segments for i in model.tokenize(s.text, special=s.special)]
    assert engine == ids
    assert model.prompt_ids(ASK, tools=TOOLS, **options) == ids
    # the whole text with special-token parsing on both sides; markers are single tokens at K3's ids
    text = "".join(s.text for s in segments)
    whole = model.tokenize(text, special=True)
    assert whole == k3_tokenizer.encode(text, allow_special=True)
    assert whole.count(M.K3_OPEN.id) == text.count(M.K3_OPEN.text)
    assert whole.count(M.K3_END_OF_MSG.id) == text.count(M.K3_END_OF_MSG.text)
    # text a user typed is ordinary text in the ids kimi_chat sends (not a marker)
    assert ids.count(M.K3_OPEN.id) == text.count(M.K3_OPEN.text) - 1 and M.EOS.id not in ids


# ------------------------------------------------------------------------------------------- generation


def _check(model, result, allowed: set[str], **options) -> None:
    msg = result.parsed
    assert result.finish_reason == "tool_calls", result.text
    assert msg.warnings == [], (msg.warnings, result.text)
    assert model.is_eog(result.completion_ids[-1])
    assert msg.tool_calls
    for c in msg.tool_calls:
        assert c.status.value == "ok", (c, result.text)
        assert c.name in allowed
        assert valid(json.loads(c.arguments), SCHEMAS[c.name]), c.arguments
    assert [c.id for c in msg.tool_calls] == [f"functions.{c.name}:{i}" for i, c in enumerate(msg.tool_calls)]
    assert result.message["content"] is None
    # the whole-text parse equals the streamed one
    assert parse(result.text, dialect=K3, tools=TOOLS, **options).to_openai() == result.message


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("options", [{"thinking": False}, {"reasoning": False}], ids=["thinking-off", "think-closed"])
def test_required_generation_under_the_grammar_parses_into_well_formed_calls(model, seed, options):
    r = model.chat(ASK, tools=TOOLS, tool_choice="required", max_tokens=400, temperature=1.0, seed=seed, **options)
    render_options = {k: v for k, v in options.items() if k != "reasoning"}
    _check(model, r, set(SCHEMAS), **render_options)
    assert r.prompt_ids == model.prompt_ids(ASK, tools=TOOLS, tool_choice="required", **render_options)
    head = M.K3_CLOSE.text + ("think" if "reasoning" in options else "response") + M.K3_SEP.text
    assert r.text.startswith(head)
    if "reasoning" in options:
        assert "reasoning_content" not in r.message


@pytest.mark.parametrize("seed", range(2))
def test_named_single_call(model, seed):
    r = model.chat(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "lookup"}},
                   parallel_tool_calls=False, max_tokens=300, temperature=1.0, seed=seed, thinking=False)
    _check(model, r, {"lookup"}, thinking=False)
    assert len(r.parsed.tool_calls) == 1


def test_tool_choice_none_writes_no_call_and_same_seed_same_output(model):
    a = model.chat(ASK, tools=TOOLS, tool_choice="none", max_tokens=24, temperature=1.0, seed=7, thinking=False)
    b = model.chat(ASK, tools=TOOLS, tool_choice="none", max_tokens=24, temperature=1.0, seed=7, thinking=False)
    assert a.completion_ids == b.completion_ids
    assert "tool_calls" not in a.message and a.parsed.warnings == []
    assert M.K3_OPEN.id not in a.completion_ids  # only the closers of the response channel and the message


# ------------------------------------------------------------------------------------------- the CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "kimi_chat.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_chat_keeps_k3_markers_typed_as_text(model, k3_tokenizer):
    """K3: the response spells ``<|end_of_msg|>`` as text (a grammar forces the literal;
    llama.cpp samples an end-of-generation token only where the grammar may end, so ordinary tokens; a
    literal ``<|close|>`` may be sampled as the special token, which is why only the end is typed here),
    then closes the message with the real tags."""
    import re

    typed = f"Type {M.K3_END_OF_MSG.text} to stop."
    user = [{"role": "user", "content": "How do I stop?"}]
    answer = {"role": "assistant", "content": typed}
    prompt = render_tokens(user, tokenizer=k3_tokenizer, dialect=K3, thinking=False).ids
    full = render_tokens(user + [answer], tokenizer=k3_tokenizer, dialect=K3, thinking=False,
                         add_generation_prompt=False).ids
    text = k3_tokenizer.decode(full[len(prompt):])
    assert text.startswith(typed) and text.endswith(M.K3_END_OF_MSG.text)
    # after the typed text, the closing tags as token references (the end of the message is the engine's)
    tags = [p for p in re.split(r"(<\|(?:open|close|sep)\|>)", text[len(typed):-len(M.K3_END_OF_MSG.text)]) if p]
    gbnf = "root ::= " + " ".join([f'"{typed}"'] + [p if p.startswith("<|") else f'"{p}"' for p in tags]) + "\n"
    result = model.chat(user, grammar=gbnf, max_tokens=64, temperature=0, thinking=False)
    ids = result.completion_ids
    assert model.is_eog(ids[-1]) and M.K3_END_OF_MSG.id not in ids[:-1]  # the typed one is ordinary tokens
    assert M.K3_END_OF_MSG.text in model.detokenize(ids[:-1])
    assert result.message["content"] == typed and result.finish_reason == "stop"
    assert result.parsed.warnings == []


def test_cli_tiny_model_and_run_for_k3(tmp_path):
    skip_without_reference()  # the tiny model's vocabulary
    out = tmp_path / "k3.gguf"
    p = _cli("tiny-model", "-d", K3, str(out))
    assert p.returncode == 0, p.stderr
    assert "kimi-k3 special tokens" in p.stderr and out.is_file()
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": ASK, "tools": TOOLS, "tool_choice": "required", "max_tokens": 300,
                               "temperature": 1.0, "seed": 5}), encoding="utf-8")
    for extra in (["-d", K3, "--kwargs", '{"thinking": false}'], ["--no-reasoning"]):  # the second: auto-detected
        p = _cli("run", str(out), str(req), "-q", *extra)
        assert p.returncode == 0, p.stderr
        choice = json.loads(p.stdout)["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        for c in choice["message"]["tool_calls"]:
            assert valid(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]])
    s = _cli("run", str(out), str(req), "-q", "--stream", "-d", K3, "--kwargs", '{"thinking": false}')
    assert s.returncode == 0, s.stderr
    chunks = [json.loads(line) for line in s.stdout.splitlines()]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert any(c["choices"][0]["delta"].get("tool_calls") for c in chunks)
