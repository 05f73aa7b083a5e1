"""The plain-dict fast path of message normalisation and the validated-tools cache:
well-formed plain dicts skip the pydantic round trip, tools already validated (same exact content)
are not validated again, and every input gets the same result and the same error (exception class
and message) as through the validation. ``tests/test_messages.py`` runs every test both ways too
(the ``message_paths`` fixture)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, strategies as st

from kimi_chat import messages as MSG
from kimi_chat.caches import LRUCache
from kimi_chat.testing.strategies import defective_requests, odd_requests, requests


@contextmanager
def validated_only():
    """The fast paths off: every input through the pydantic validation (the reference behaviour)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MSG, "renderable_fast", lambda msgs: False)
        mp.setattr(MSG, "tools_fast", lambda tools: False)
        mp.setattr(MSG, "_VALID_TOOLS", LRUCache(None, 0))  # keeps nothing: every tool list validated
        yield


def outcome(fn, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return "error", (type(e), str(e))


def same_both_ways(fn, value: Any) -> None:
    fast = outcome(fn, value)
    with validated_only():
        slow = outcome(fn, value)
    assert fast == slow


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=False, width=16),
                     st.text(max_size=3), st.binary(max_size=2))
_roles = st.sampled_from(["user", "assistant", "system", "tool", "developer", "", "Assistant"])
_keys = st.one_of(st.sampled_from(["type", "text", "image_url", "id", "name", "arguments", "function", "index",
                                   "role", "content", "tool_calls", "tool_call_id", "reasoning_content",
                                   "reasoning", "thinking", "description", "parameters", "x"]),
                  st.integers(0, 1), st.none())


def _dicts(values: st.SearchStrategy[Any], keys: st.SearchStrategy[Any] = _keys) -> st.SearchStrategy[Any]:
    return st.dictionaries(keys, values, max_size=4)


_values = st.recursive(st.one_of(_scalars, _roles),
                       lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner), _dicts(inner)),
                       max_leaves=6)
_function = st.one_of(_dicts(_values), st.fixed_dictionaries(
    {"name": st.one_of(st.text(max_size=3), _scalars)}, optional={"arguments": _values, "x": _values}))
_call = st.one_of(_dicts(_values), st.fixed_dictionaries(
    {"function": _function}, optional={"id": st.one_of(st.text(max_size=3), _scalars), "type": _values,
                                       "index": _values}))
_part = st.one_of(_dicts(_values), st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "x"])},
                                                         optional={"text": _values, "image_url": _values}))
_content = st.one_of(st.text(max_size=3), st.lists(_part, max_size=3), _scalars, st.tuples(_part))
_message = st.one_of(
    _dicts(_values),
    st.fixed_dictionaries({"role": st.one_of(_roles, _scalars)}, optional={
        "content": _content, "name": st.one_of(st.text(max_size=3), _scalars),
        "tool_calls": st.one_of(st.lists(_call, max_size=2), _scalars, st.tuples(_call)),
        "tool_call_id": _values, "reasoning_content": st.one_of(st.text(max_size=3), _scalars),
        "reasoning": _scalars, "thinking": _scalars, 1: _values, "extra": _values}),
)
_tool = st.one_of(_dicts(_values), st.fixed_dictionaries(
    {"type": st.one_of(st.just("function"), _scalars)},
    optional={"function": st.one_of(_scalars, st.fixed_dictionaries(
        {"name": st.one_of(st.text(max_size=3), _scalars)},
        optional={"description": st.one_of(st.text(max_size=3), _scalars),
                  "parameters": st.one_of(_scalars, _dicts(_values)), 0: _values}))}))


@given(st.one_of(st.lists(_message, max_size=4), st.builds(lambda r: r["messages"], requests()),
                 st.builds(lambda r: r["messages"], odd_requests()),
                 st.builds(lambda r: r["messages"], defective_requests())))
def test_messages_same_result_and_errors_with_and_without_the_fast_path(msgs):
    same_both_ways(MSG.normalize_messages, msgs)


@given(st.one_of(st.lists(_tool, max_size=3), st.builds(lambda r: r["tools"], requests())))
def test_tools_same_result_and_errors_with_and_without_the_fast_path(tools):
    same_both_ways(MSG.normalize_tools, tools)


@given(st.builds(lambda r: r["tools"], requests()))
def test_ordinary_tools_take_the_fast_path(tools):
    """The tool lists of the oracle strategies are well-formed plain dicts: a fresh one is not run through
    the pydantic validation (no cache holds its result yet)."""
    fast = tools is None or MSG.tools_fast(MSG.plain_items(tools, "tools"))
    assert fast


@given(st.builds(lambda r: r["messages"], requests()))
def test_ordinary_plain_messages_take_the_fast_path(msgs):
    """The ordinary requests of the oracle strategies are well-formed plain dicts: no validation."""
    assert MSG.renderable_fast(MSG.normalize_messages(msgs))


def test_tools_validated_once_per_content(monkeypatch):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    from kimi_chat import caches

    caches.clear_all()
    MSG.normalize_tools(tools)  # read once: validated, not keyed (a tool list seen once is not cached)
    MSG.normalize_tools(tools)  # read again: keyed, and its validation recorded
    calls = []
    monkeypatch.setattr(MSG, "_TOOLS", type("Spy", (), {"validate_python": lambda self, *a, **k: calls.append(a)})())
    assert MSG.normalize_tools(tools) == tools and not calls  # the same content: not validated again
    tools[0]["function"]["name"] = 5  # changed in place: a new key, validated again
    assert MSG.normalize_tools(tools) == tools and len(calls) == 1


@pytest.mark.parametrize("msgs", [
    [{"role": "user", "content": b"bytes"}],
    [{"role": 1, "content": "x"}],
    [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}],
    [{"role": "assistant", "tool_calls": [{"id": 3, "function": {"name": "f", "arguments": "{}"}}]}],
    [{"role": "assistant", "tool_calls": ({"function": {"name": "f", "arguments": "{}"}},)}],
    [{"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}],
    [{"role": "user", "content": "x", 1: "y"}],
    [{"role": "assistant", "reasoning_content": 5}],
    [{"content": "no role"}],
])
def test_invalid_messages_are_not_taken_by_the_fast_path(msgs):
    assert not MSG.renderable_fast(msgs)
    same_both_ways(MSG.normalize_messages, msgs)
