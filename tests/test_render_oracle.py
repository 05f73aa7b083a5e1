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
