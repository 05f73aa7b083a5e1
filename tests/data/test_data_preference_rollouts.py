"""Preference pairs (one prompt's official ids, two answers as generated) and RL rollouts (sampled ids kept
exactly, divergences from the official rendering reported)."""

from __future__ import annotations

import pytest
from conftest import needs_reference

from kimi_chat import KimiTokenizer, render_tokens
from kimi_chat.data import (IGNORE_INDEX, extend_rollout, preference_batch, preference_pair, start_rollout)
from kimi_chat.errors import RenderError

pytestmark = needs_reference  # the reference tokenizers

PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
CHOSEN = {"role": "assistant", "content": "4", "reasoning_content": "Add them."}
REJECTED = {"role": "assistant", "content": "5", "reasoning_content": "Guess."}


@pytest.fixture(scope="module")
def tok():
    return KimiTokenizer.from_reference("k2.6")


@pytest.mark.oracle
def test_preference_pair_is_the_request_and_the_answers_as_generated(tok):
    pytest.importorskip("transformers", reason="the official rendering needs transformers (pip install -e '.[verify]' in the checkout)")
    from kimi_chat.reference.oracle import render_official

    pair = preference_pair(PROMPT, CHOSEN, REJECTED, dialect="kimi-k2.6", tokenizer=tok)
    assert pair["prompt_ids"] == tok.encode(render_official(PROMPT, dialect="kimi-k2.6", add_generation_prompt=True))
    # the K2.6 generation prompt opens <think>; the template writes a kept turn <think>{reasoning}</think>{content}
    # then <|im_end|>: the answer is what follows the opened <think>
    assert pair["chosen_ids"] == tok.encode("Add them.</think>4<|im_end|>")
    assert pair["rejected_ids"] == tok.encode("Guess.</think>5<|im_end|>")
    # the conversational form (TRL): chosen / rejected as whole conversations
    again = preference_pair(None, [*PROMPT, CHOSEN], [*PROMPT, REJECTED], dialect="kimi-k2.6", tokenizer=tok)
    assert again == pair


def test_preference_prompts_must_agree(tok):
    other = [{"role": "system", "content": "Be long."}, PROMPT[1]]
    with pytest.raises(RenderError, match="do not share the prompt"):
        preference_pair(None, [*PROMPT, CHOSEN], [*other, REJECTED], dialect="kimi-k2.6", tokenizer=tok)


def test_preference_batch(tok):
    pytest.importorskip("pyarrow", reason="the batch form needs pyarrow (pip install -e '.[data]' in the checkout)")
    rows = [{"prompt": PROMPT, "chosen": [CHOSEN], "rejected": [REJECTED], "id": "p"}, {"prompt": PROMPT}]
    res = preference_batch(rows, dialect="kimi-k2.6", tokenizer=tok)
    data = res.batch.to_pydict()
    assert data["sample_id"] == ["p"] and (res.rows, res.errors) == (2, 1)
    assert data["chosen_ids"][0] == preference_pair(PROMPT, CHOSEN, REJECTED, dialect="kimi-k2.6",
                                                    tokenizer=tok)["chosen_ids"]
    assert res.findings[0].kind == "bad_row" and res.findings[0].row == 1


def test_rollout_keeps_sampled_ids_and_reports_the_rerender(tok):
    r = start_rollout([{"role": "user", "content": "Hi"}], dialect="kimi-k2.6", tokenizer=tok)
    prompt = list(r.input_ids)
    sampled = tok.encode("Greet back.</think>Hello")  # cut before <|im_end|> (max_tokens)
    r = extend_rollout(r, sampled, [{"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."},
                                    {"role": "user", "content": "Bye"}])
    end = tok.encode("<|im_end|>")
    assert r.input_ids[: len(prompt) + len(sampled) + 1] == prompt + sampled + end  # closed with the end marker
    # after the sampled turn: the next user message and generation prompt, as the template writes them
    assert r.input_ids[len(prompt) + len(sampled) + 1:] == tok.encode(
        "<|im_user|>user<|im_middle|>Bye<|im_end|><|im_assistant|>assistant<|im_middle|><think>")
    assert [i for i, x in zip(r.input_ids, r.labels) if x != IGNORE_INDEX] == sampled + end
    # K2.6 re-renders the answer without its reasoning: <think></think>Hello from the first sampled id on
    (div,) = r.divergences
    assert (div.turn, div.position, div.message_index) == (1, len(prompt), 1)


@pytest.mark.parametrize("dialect, config", [("kimi-k2-instruct-0905", "k2.6"), ("kimi-k3", "k3")])
def test_rollout_without_divergence_is_the_official_rendering(dialect, config):
    tok = KimiTokenizer.from_reference(config)
    call = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    messages = [{"role": "user", "content": "Go"}, {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "functions.f:0", "content": "done"}]
    r = start_rollout(messages[:1], dialect=dialect, tokenizer=tok)
    full = render_tokens(messages, tokenizer=tok, dialect=dialect, add_generation_prompt=True)
    first = render_tokens(messages[:1], tokenizer=tok, dialect=dialect, add_generation_prompt=True)
    turn = [i for i, m in zip(full.ids, full.assistant_mask) if m]  # what the model generated, as rendered
    r = extend_rollout(r, turn, messages[1:])
    assert r.input_ids == full.ids and not r.divergences
    assert [i for i, x in zip(r.input_ids, r.labels) if x != IGNORE_INDEX] == turn
    assert r.input_ids[: len(first.ids)] == first.ids


@pytest.mark.parametrize("dialect, config, marker", [
    ("kimi-k2.6", "k2.6", "<|im_end|>"), ("kimi-k2-instruct@rev2", "k2", "<|im_end|>"),
    ("kimi-k3", "k3", "<|close|>message<|sep|><|end_of_msg|>"),
])
def test_end_marker_closes_a_turn(dialect, config, marker):
    from kimi_chat.data import end_marker

    tok = KimiTokenizer.from_reference(config)
    assert end_marker(dialect, tok) == tok.encode(marker)
