"""continue_final_message against transformers' own continue_final_message (the oracle), and the
flags render type-checks."""

from __future__ import annotations

import pytest
from hypothesis import given, note, strategies as st

from kimi_chat import RenderError, render, render_segments
from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # K3: no continue_final_message
from kimi_chat.reference.oracle import render_official
from kimi_chat.testing.strategies import requests

from conftest import needs_reference

PREFILL = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Sure, "}]
CONTINUED = [
    PREFILL,
    [{"role": "user", "content": "hi"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "reasoning_content": "r"}],
    [{"role": "user", "content": "hi"},
     {"role": "assistant", "content": "calling", "reasoning_content": "hm", "tool_calls": [
         {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
    [{"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "image_url", "image_url": {"url": "x"}},
                                  {"type": "text", "text": "b "}, {"type": "image_url", "image_url": {"url": "y"}}]}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
     {"role": "assistant", "content": "A1", "reasoning_content": "r1"}],
]


def _official(msgs, dialect, **kw):
    try:
        return render_official(msgs, dialect=dialect, add_generation_prompt=False, continue_final_message=True, **kw)
    except Exception as e:  # the official machinery refuses
        return e


@pytest.mark.oracle
@needs_reference
@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("msgs", CONTINUED, ids=range(len(CONTINUED)))
def test_continue_final_message_examples_match_official(dialect, msgs):
    official = _official(msgs, dialect)
    assert not isinstance(official, Exception), official
    assert render(msgs, dialect=dialect, continue_final_message=True) == official
    assert render(msgs, dialect=dialect, add_generation_prompt=False, continue_final_message=True) == official
    segs = render_segments(msgs, dialect=dialect, continue_final_message=True)
    assert "".join(s.text for s in segs) == official


@pytest.mark.oracle
@needs_reference
@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_continue_final_message_equals_official(dialect, data):
    req = data.draw(requests(dialect))
    note(repr(req))
    official = _official(req["messages"], dialect, tools=req["tools"], **req["options"])
    kw = dict(tools=req["tools"], dialect=dialect, continue_final_message=True, **req["options"])
    if isinstance(official, Exception):
        with pytest.raises(ValueError):
            render(req["messages"], **kw)
        return
    assert render(req["messages"], **kw) == official


def test_prefill_is_continued_not_closed():
    text = render(PREFILL, continue_final_message=True)
    assert text.endswith("<|im_assistant|>assistant<|im_middle|>Sure, ")
    # without it, the prefill is a closed turn (rev2 closes every turn)
    assert render(PREFILL, dialect="kimi-k2-instruct@rev2", add_generation_prompt=False).endswith("Sure, <|im_end|>")
    assert render(PREFILL, dialect="kimi-k2-instruct@rev2", continue_final_message=True).endswith("middle|>Sure, ")
    with pytest.raises(RenderError, match="not compatible"):
        render(PREFILL, continue_final_message=True, add_generation_prompt=True)
    with pytest.raises(RenderError, match=r"messages\[1\]\.content: continue_final_message is set"):
        render([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [
            {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
            continue_final_message=True)


@pytest.mark.parametrize("flag", ["add_generation_prompt", "continue_final_message"])
@pytest.mark.parametrize("value", ["no", 0, 1, "false"])
def test_flags_must_be_bool(flag, value):
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        render(PREFILL, **{flag: value})


def test_unknown_option_names_it_under_strict():
    from kimi_chat.errors import StrictModeError

    assert render(PREFILL, thinking=False) == render(PREFILL)  # parity: the template ignores it
    with pytest.raises(StrictModeError, match=r"thinking: kimi-k2-instruct-0905's template does not read 'thinking'"):
        render(PREFILL, thinking=False, strict=True)
    with pytest.raises(StrictModeError, match="option 'thinking' should be a bool"):
        render(PREFILL, dialect="kimi-k2.5", thinking="no", strict=True)


@pytest.mark.parametrize("model, dialect", [
    ("moonshotai/Kimi-K2-Thinking", "kimi-k2-thinking@rev1"),
    ("kimi-k2-thinking-turbo", "kimi-k2-thinking@rev1"),
    ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2-instruct-0905"),
    ("kimi-k2-0905-preview", "kimi-k2-instruct-0905"),
    ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
    ("Kimi K2.6", "kimi-k2.6"),
    ("moonshotai/Kimi-K2.6", "kimi-k2.6"),
    ("moonshotai/Kimi-K2-Instruct", None),  # several template revisions: not told by the name
    ("gpt-4o", None),
])
def test_dialect_for_model(model, dialect):
    from kimi_chat.dialects import K2_DIALECTS as ALL, dialect_for_model

    assert dialect_for_model(model) == dialect
    assert dialect is None or dialect in ALL
