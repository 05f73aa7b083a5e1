"""Deeply nested tools and arguments: the iterative deep_sort_dict (the same result as the official
tokenizer's recursive function, at any depth) and render's clear error where JSON serialisation
itself runs out of recursion."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kimi_chat import InvalidMessagesError, KimiChatError, RenderError, render
from kimi_chat.nesting import deep_sort_dict, deepest_path
from kimi_chat.reference.oracle import deep_sort_dict as oracle_deep_sort_dict


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """Python's default recursion limit for each test here (another test module raises it for the
    whole process; deep data is about that limit)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(limit)


def recursive_deep_sort_dict(obj):
    """The later tokenization_kimi.py's function (and kimi_chat's before it went iterative)."""
    if isinstance(obj, Mapping):
        return {k: recursive_deep_sort_dict(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [recursive_deep_sort_dict(v) for v in obj]
    return obj


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
_keys = st.text(max_size=3)


def _containers(children):
    return (
        st.lists(children, max_size=4)
        | st.dictionaries(_keys, children, max_size=4)
        | st.dictionaries(_keys, children, max_size=3).map(MappingProxyType)  # a Mapping, not a dict
        | st.lists(children, max_size=3).map(tuple)  # kept as it is, not descended into
    )


NESTED = st.recursive(_scalars, _containers, max_leaves=40)
# keys of mixed types: sorting them fails, in both versions
MIXED = st.dictionaries(st.integers() | st.text(max_size=2), _scalars, min_size=2, max_size=4)


def _same(a, b) -> bool:
    """Equal, with dict key order and container types included (repr shows both; NaN reprs alike)."""
    return type(a) is type(b) and repr(a) == repr(b)


@given(NESTED)
def test_deep_sort_dict_is_the_recursive_function(data):
    assert _same(deep_sort_dict(data), recursive_deep_sort_dict(data))


@given(st.lists(MIXED, min_size=1, max_size=2))
def test_deep_sort_dict_fails_where_the_recursive_function_fails(data):
    try:
        expected = recursive_deep_sort_dict(data)
    except TypeError:
        with pytest.raises(TypeError):
            deep_sort_dict(data)
    else:
        assert _same(deep_sort_dict(data), expected)


def test_oracle_reexports_the_one_function():
    assert oracle_deep_sort_dict is deep_sort_dict


def test_deep_sort_dict_copies_and_keeps_shared_parts_apart():
    shared = {"b": 1, "a": [2]}
    out = deep_sort_dict({"y": shared, "x": shared})
    assert list(out) == ["x", "y"] and list(out["x"]) == ["a", "b"]
    assert out["x"] == out["y"] and out["x"] is not out["y"] and out["x"] is not shared


def _schema(levels: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(levels):
        s = {"type": "object", "properties": {"x": s}}
    return s


def test_deep_sort_dict_past_the_recursion_limit():
    data = _schema(3000)  # 6001 dicts deep
    with pytest.raises(RecursionError):
        recursive_deep_sort_dict(data)
    out = deep_sort_dict(data)
    node, depth = out, 0
    while node.get("properties"):
        assert list(node) == ["properties", "type"]
        node, depth = node["properties"]["x"], depth + 1
    assert depth == 3000 and node == {"type": "string"}


def test_deep_sort_dict_refuses_what_contains_itself():
    loop: dict = {"type": "object"}
    loop["properties"] = {"x": loop}
    with pytest.raises(RenderError, match="circular reference"):
        deep_sort_dict([loop])
    # a longer cycle, reached after a few levels, inside a list
    a: dict = {"k": []}
    b = {"k": [{"k": a}]}
    a["k"].append(b)
    with pytest.raises(RenderError, match="circular reference"):
        deep_sort_dict({"x": {"y": {"z": [a]}}})


def test_deepest_path():
    assert deepest_path(3) == (0, [])
    assert deepest_path({"a": 1}) == (1, [])
    assert deepest_path({"a": [1, {"b": {}}], "c": {"d": {}}}) == (4, ["a", 1, "b"])
    assert deepest_path(_schema(2)) == (5, ["properties", "x", "properties", "x"])


# -- render: what JSON serialisation cannot take is a clear error naming where -------------------------

_USER = [{"role": "user", "content": "hi"}]
_SHALLOW = {"type": "function", "function": {"name": "g", "parameters": _schema(1)}}


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct@rev1", "kimi-k2-instruct-0905", "kimi-k2-thinking"])
def test_render_names_the_tool_nested_too_deeply(dialect):
    deep = {"type": "function", "function": {"name": "f", "parameters": _schema(1000)}}
    with pytest.raises(InvalidMessagesError) as info:
        render(_USER, tools=[_SHALLOW, deep], dialect=dialect)
    message = str(info.value)
    assert message.startswith("invalid tools: tools[1].function.parameters.properties.x")
    assert "2003 levels deep, too deep to serialise as JSON" in message
    # and a schema as deep as JSON serialisation allows still renders (sorted where the dialect sorts)
    assert '"name":' in render(_USER, tools=[_SHALLOW, {"type": "function", "function": {
        "name": "f", "parameters": _schema(400)}}], dialect=dialect)


def test_render_names_the_arguments_nested_too_deeply():
    msgs = _USER + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": _schema(5000)}}]}]
    with pytest.raises(RenderError) as info:
        render(msgs, dialect="kimi-k2.5")
    assert isinstance(info.value, KimiChatError) and info.value.message_index == 1
    assert str(info.value).startswith("messages[1].tool_calls[0].function.arguments: nested 10001 levels deep")
