"""render_segments: the pieces join to render(), none is empty, neighbours differ in attribution, and
the attribution follows the format (headers and history <think></think> are not trainable)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import render, render_segments
from kimi_chat.prompt import render_layout
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


@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_layout_is_the_render(dialect, data):
    """render_layout: its pieces join to render(), and carry render_segments' attribution."""
    req = data.draw(requests(dialect))
    kw = dict(tools=req["tools"], dialect=dialect, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    try:
        text = render(req["messages"], **kw)
    except ValueError:
        return
    lay = render_layout(req["messages"], **kw)
    pieces = list(lay.pieces())
    assert lay.text == text == "".join(p.text for p in pieces)
    assert all(p.text for p in pieces)
    flat = [(s.message_index, s.trainable) for s in render_segments(req["messages"], **kw) for _ in s.text]
    assert flat == [(p.message_index, p.trainable) for p in pieces for _ in p.text]


def _replace_strings(value, old, new):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replace_strings(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, old, new) for v in value]
    return value


def test_layout_flags_input_text_and_template_literals():
    """Every string from the input is written as text, every marker as a literal: marker-like text typed
    in content, names, ids, arguments, tool results, reasoning and tools lands in text pieces only, and
    the literal pieces do not change when the input strings do."""
    typed = "<|im_typed|>"
    tools = [{"type": "function", "function": {"name": "f", "description": typed}}]
    msgs = [
        {"role": "system", "content": typed},
        {"role": "user", "content": [{"type": "text", "text": typed}, {"type": "image_url", "image_url": {"url": "u"}}],
         "name": typed},
        {"role": "assistant", "content": typed, "reasoning_content": typed, "tool_calls": [
            {"id": typed, "type": "function", "function": {"name": "f", "arguments": typed}}]},
        {"role": "tool", "tool_call_id": typed, "content": typed},
        {"role": "assistant", "content": "done", "reasoning_content": typed},
    ]
    other = _replace_strings(msgs, typed, "zz")
    for dialect in DIALECTS:
        lay = render_layout(msgs, tools=tools, dialect=dialect)
        pieces = list(lay.pieces())
        literal = [p.text for p in pieces if p.literal]
        text = "".join(p.text for p in pieces if not p.literal)
        assert not any(typed in t for t in literal), dialect
        assert text.count(typed) == lay.text.count(typed) >= 5, dialect
        assert any(t.startswith("<|im_user|>") for t in literal) and any("<|media" in t for t in literal), dialect
        assert literal == [p.text for p in render_layout(other, tools=tools, dialect=dialect).pieces() if p.literal]


def test_a_family_is_one_renderer_entry(monkeypatch):
    """Dispatch by Dialect.family: a new template family is one registry entry whose record's write_prompt
    wraps its renderer (template_writer), and every view (render, render_segments, render_layout) goes
    through it, after the shared validation."""
    import dataclasses
    import sys
    import types

    from kimi_chat.families import REGISTRY, family_of
    from kimi_chat.prompt.template import template_writer

    def fake(w, d, msgs, tools, add_generation_prompt, options, tools_key):
        for i, m in enumerate(msgs):
            w.mark(i, m["role"] == "assistant")
            w.emit("<|open|>" + m["role"] + "<|sep|>")
            w.emit_text(m["content"])
        if add_generation_prompt:
            w.mark(-1, False)
            w.emit("<|open|>assistant<|sep|>")

    module = types.ModuleType("kx_family")
    module.FAMILY = dataclasses.replace(family_of("k2"), name="kx", write_prompt=template_writer(fake))
    monkeypatch.setitem(sys.modules, "kx_family", module)
    monkeypatch.setitem(REGISTRY, "kx", "kx_family")
    d = dataclasses.replace(DIALECTS["kimi-k2-thinking@rev1"], name="fake-kx", family="kx")  # a made-up family
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert render(msgs, dialect=d) == "<|open|>user<|sep|>hi<|open|>assistant<|sep|>yo<|open|>assistant<|sep|>"
    assert render(msgs, dialect=d, continue_final_message=True) == "<|open|>user<|sep|>hi<|open|>assistant<|sep|>yo"
    assert [(p.text, p.literal) for p in render_layout(msgs, dialect=d, add_generation_prompt=False).pieces()] == [
        ("<|open|>user<|sep|>", True), ("hi", False), ("<|open|>assistant<|sep|>", True), ("yo", False)]
    assert render_segments(msgs, dialect=d, add_generation_prompt=False)[1].trainable
    with pytest.raises(Exception, match=r"messages\[0\]\.content"):
        render([{"role": "tool", "content": 5}], dialect=d)  # the shared validation ran first
