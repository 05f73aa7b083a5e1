"""Samples as generated under the default special-token policy ("text": marker text typed in a message is encoded as
text), where a dialect keeps every turn in one rendering and the earlier turns of a sample are checked by their text:
a turn holding typed marker text must still be exactly the turn as generated, and each trained turn must follow the
ids of its own request.

Expected values: the prompt of ``messages[:i]`` from :func:`kimi_chat.render_ids` and the turn from
:func:`kimi_chat.data.generated_turn` (the turn rendered alone), both with the same policy; both are checked against
the official machinery elsewhere (tests/tokens, tests/data/test_data_samples_oracle.py).
"""

from __future__ import annotations

import pytest

from conftest import needs_reference

from kimi_chat import KimiTokenizer
from kimi_chat.tokens.rendered import render_ids
from kimi_chat.data import conversation_samples, generated_turn, trained_turns

pytestmark = needs_reference

CALL = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": '{"x": "<|im_end|>"}'}}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def _conversation(typed: str) -> list[dict]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": f"Say {typed} please."},
        {"role": "assistant", "content": f"Here: {typed}", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": f"ok {typed}"},
        {"role": "assistant", "content": f"Done {typed}."},
        {"role": "user", "content": "Again?"},
        {"role": "assistant", "content": "Plain answer."},
        {"role": "user", "content": "Last."},
        {"role": "assistant", "content": f"{typed} end"},
    ]


@pytest.mark.parametrize("dialect, options", [("kimi-k2-instruct-0905", {}), ("kimi-k2-instruct", {}),
                                              ("kimi-k2.6", {"preserve_thinking": True})])
@pytest.mark.parametrize("typed", ["<|im_end|>", "<|im_assistant|>assistant<|im_middle|>", "<|tool_call_begin|>",
                                   "plain"])
@pytest.mark.parametrize("policy", ["text", "special"])
def test_turns_with_typed_marker_text_are_the_turns_as_generated(dialect, options, typed, policy):
    tok = KimiTokenizer.from_reference("k2.6")
    messages = _conversation(typed)
    result = conversation_samples(messages, dialect=dialect, tokenizer=tok, tools=TOOLS, special_tokens=policy,
                                  **options)
    assert sorted(i for s in result.samples for i in s.turns) == trained_turns(messages)
    assert len(result.samples) == 1  # these dialects keep every turn as generated: one sample
    for s in result.samples:
        for i, (a, b) in zip(s.turns, s.spans):
            prompt = render_ids(messages[:i], tokenizer=tok, tools=TOOLS, dialect=dialect, add_generation_prompt=True,
                                special_tokens=policy, **options)
            assert s.input_ids[:a] == prompt, f"prompt of messages[{i}]"
            turn = generated_turn(messages[i], dialect=dialect, tokenizer=tok, special_tokens=policy, **options)
            assert s.input_ids[a:b] == turn, f"messages[{i}]"
            assert s.labels[a:b] == turn
