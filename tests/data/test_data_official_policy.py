"""``reasoning="official"``: one sample per conversation, the official rendering (no generation prompt) of the
conversation up to its last trained turn, with every trainable token of a trained message labelled, checked on
generated conversations against the rendering's public per-token facts (ids, mask, message index)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from conftest import needs_reference
from data_pipeline_support import reference_tokenizer

from kimi_chat.data import IGNORE_INDEX, conversation_samples
from kimi_chat.dialects import K2_DIALECTS, get_dialect
from kimi_chat.errors import KimiChatError
from kimi_chat.testing.strategies import requests
from kimi_chat.testing.strategies_k3 import k3_requests
from kimi_chat.tokens.reasoning import carried_reasoning
from kimi_chat.tokens.rendered import render_tokens

pytestmark = needs_reference

_tok = reference_tokenizer


def _check(messages, tools, dialect, tok, options, policy) -> None:
    try:
        result = conversation_samples(messages, dialect=dialect, tokenizer=tok, tools=tools, reasoning="official",
                                      special_tokens=policy, warn=False, **options)
    except KimiChatError:
        return
    turns = [i for i, m in enumerate(messages) if i and m.get("role") == "assistant" and m.get("train") is not False]
    if not turns:
        assert result.samples == [] and result.reasoning_dropped == 0
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = render_tokens(messages[: turns[-1] + 1], tokenizer=tok, tools=tools, dialect=dialect,
                          add_generation_prompt=False, special_tokens=policy, **options)
    ids, mask, owner = r.ids, r.assistant_mask, r.message_index
    (sample,) = result.samples
    assert sample.input_ids == ids and sample.turns == turns
    # labelled: exactly the trainable tokens of the trained messages
    assert sample.labels == [x if k and j in turns else IGNORE_INDEX for x, k, j in zip(ids, mask, owner)]
    # each turn's span: from its first to its last trainable token, in the last run of its tokens that has any
    runs = {}
    for sp in r.spans:
        trainable = [k for k in range(sp.start, sp.end) if mask[k]]
        if sp.message_index >= 0 and trainable:
            runs[sp.message_index] = trainable
    assert sample.spans == [(runs[i][0], runs[i][-1] + 1) if i in runs else (0, 0) for i in turns]
    # dropped: messages whose reasoning those trainable ids do not hold
    dropped = 0
    for j, m in enumerate(messages[: turns[-1] + 1]):
        carried = carried_reasoning(m)
        text = tok.decode([ids[k] for k in runs.get(j, [])])
        dropped += bool(carried) and not any(x in text for x in carried)
    assert result.reasoning_dropped == dropped


@pytest.mark.parametrize("name", sorted(K2_DIALECTS))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=60)
@given(data=st.data())
def test_official_sample_is_the_rendering_with_trained_tokens_labelled(name, data):
    req = data.draw(requests(name))
    messages = req["messages"]
    for j in data.draw(st.sets(st.integers(0, max(0, len(messages) - 1)), max_size=2)):
        if messages and messages[j].get("role") == "assistant":
            messages[j] = {**messages[j], "train": False}
    policy = data.draw(st.sampled_from(["text", "special"]))
    note(repr(req))
    _check(messages, req["tools"], get_dialect(name), _tok(data.draw(st.sampled_from(["k2.6", "k2"]))),
           req["options"], policy)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=60)
@given(req=k3_requests(refusals=False), policy=st.sampled_from(["text", "special"]))
def test_k3_official_sample_is_the_rendering_with_trained_tokens_labelled(req, policy):
    note(repr(req))
    options = {k: v for k, v in req["kwargs"].items() if k not in ("add_generation_prompt", "image_prompts")}
    _check(req["messages"], req["tools"], get_dialect("kimi-k3"), _tok("k3"), options, policy)
