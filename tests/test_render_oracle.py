"""Property: for every dialect, render() == the official template rendered by transformers."""

from __future__ import annotations

import pytest
from hypothesis import given, note, strategies as st

from kimi_chat import DIALECTS, render
from kimi_chat.messages import InvalidMessagesError
from kimi_chat.oracle import render_official
from kimi_chat.testing.strategies import requests

from conftest import needs_reference

pytestmark = [pytest.mark.oracle, needs_reference]


def _official_or_error(req, dialect):
    try:
        return render_official(req["messages"], tools=req["tools"], dialect=dialect,
                               add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except Exception as e:  # the official template crashed on this input
        return e


@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_render_equals_official(dialect, data):
    req = data.draw(requests(dialect))
    note(repr(req))
    official = _official_or_error(req, dialect)
    if isinstance(official, Exception):
        # where the official template crashes, render must refuse too (never a silently different prompt)
        with pytest.raises(ValueError):
            render(req["messages"], tools=req["tools"], dialect=dialect,
                   add_generation_prompt=req["add_generation_prompt"], **req["options"])
        return
    ours = render(req["messages"], tools=req["tools"], dialect=dialect,
                  add_generation_prompt=req["add_generation_prompt"], **req["options"])
    assert ours == official


def test_openai_sdk_style_inputs_match_official():
    """Values the OpenAI SDK / numpy pipelines produce: None-valued tool fields, numpy scalars."""
    np = pytest.importorskip("numpy", reason="numpy comes with the test dependencies")
    msgs = [{"role": "user", "content": np.str_("hi")},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "functions.f:0", "type": "function",
             "function": {"name": "f", "arguments": {"n": np.int64(3)}}}]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"}]
    tools = [{"type": "function", "function": {"name": "f", "description": None,
              "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    for dialect in DIALECTS:
        assert render(msgs, tools=tools, dialect=dialect) == render_official(msgs, tools=tools, dialect=dialect), dialect
