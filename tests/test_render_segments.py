"""render_segments: the pieces join to render(), none is empty, neighbours differ in attribution, and
the attribution follows the format (headers and history <think></think> are not trainable)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kimi_chat import DIALECTS, render, render_segments
from kimi_chat.testing.strategies import requests


@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_segments_join_to_render(dialect, data):
    req = data.draw(requests(dialect))
    kw = dict(tools=req["tools"], dialect=dialect, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    try:
        text = render(req["messages"], **kw)
    except ValueError:
        return
    segs = render_segments(req["messages"], **kw)
    assert "".join(s.text for s in segs) == text
    assert all(s.text for s in segs)
    assert all((a.message_index, a.trainable) != (b.message_index, b.trainable) for a, b in zip(segs, segs[1:]))
    # message indices never go backwards, and only assistant messages have trainable text
    indices = [s.message_index for s in segs if s.message_index >= 0]
    assert indices == sorted(indices)
    for s in segs:
        if s.trainable:
            assert req["messages"][s.message_index]["role"] == "assistant"


def test_thinking_history_scaffolding_is_not_trainable():
    msgs = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "reasoning_content": "r1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2", "reasoning_content": "r2",
         "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ]
    segs = render_segments(msgs, dialect="kimi-k2-thinking", add_generation_prompt=False)
    by_msg = {(s.message_index, s.trainable): s.text for s in segs}
    assert by_msg[(1, False)] == "<|im_assistant|>assistant<|im_middle|><think></think>"
    assert by_msg[(1, True)] == "A1<|im_end|>"
    assert by_msg[(3, False)] == "<|im_assistant|>assistant<|im_middle|>"
    assert by_msg[(3, True)].startswith("<think>r2</think>A2<|tool_calls_section_begin|>")
    assert by_msg[(3, True)].endswith("<|tool_calls_section_end|><|im_end|>")
    assert (-1, False) in by_msg  # default system prompt
