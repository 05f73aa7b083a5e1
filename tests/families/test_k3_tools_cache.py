"""The K3 tools-JSON cache: keyed by exact content, bounded, least recently used out.
Every expected text is the uncached computation of the same tools (``deep_sort_dict`` then compact
JSON, what the official encoder writes); the render tests check that text against the oracle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kimi_chat.prompt import render
from kimi_chat.families.k3 import inputs as K

K3 = "kimi-k3"
USER = [{"role": "user", "content": "hi"}]


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties}}}


def uncached(tools: Any) -> str:
    return K.dumps(K.sorted_keys(tools, None, "tools"), None, "tools", compact=True)


class ToolObject(Mapping):
    """A tool given as a Mapping object with a constant repr (a default repr is an address, which a
    later object may reuse)."""

    def __init__(self, d: Mapping[str, Any]) -> None:
        self._d = d

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return "ToolObject()"


def system_tools(tools: Any) -> list[dict[str, Any]]:
    """Tools declared in a system message (the encoder renders them as it finds them)."""
    return [{"role": "system", "content": "", "tools": tools}, *USER]


def test_objects_with_the_same_repr_are_not_confused():
    weather, search = tool("weather"), tool("search")
    first = render(system_tools([ToolObject(weather)]), dialect=K3)
    second = render(system_tools([ToolObject(search)]), dialect=K3)
    assert first == render(system_tools([weather]), dialect=K3)
    assert second == render(system_tools([search]), dialect=K3) and second != first


def test_a_tuple_is_not_a_list():
    """deep_sort_dict sorts a dict inside a list, not inside a tuple: same JSON, different text."""
    in_tuple = [tool("f", x={"enum": ({"b": 1, "a": 2},)})]
    in_list = [tool("f", x={"enum": [{"b": 1, "a": 2}]})]
    for tools in (in_tuple, in_list, in_tuple):
        assert K.tools_json(tools, None, "tools") == uncached(tools)
    assert uncached(in_tuple) != uncached(in_list)


def test_int_and_str_keys_and_bool_and_int_values_are_told_apart():
    cases = [[tool("f", x={"default": 1})], [tool("f", x={"default": True})], [tool("f", x={"default": 1.0})],
             [tool("f", x={"default": {1: "a"}})], [tool("f", x={"default": {"1": "a"}})]]
    for tools in cases + cases:
        assert K.tools_json(tools, None, "tools") == uncached(tools)


def test_bounded_least_recently_used():
    hot = [tool("hot")]
    K.tools_json(hot, None, "tools")
    hot_key = K._tools_key(hot)
    for i in range(K._TOOLS_JSON.maxsize * 2):
        K.tools_json([tool(f"t{i}")], None, "tools")
        K.tools_json(hot, None, "tools")  # used all along: stays
        assert len(K._TOOLS_JSON) <= K._TOOLS_JSON.maxsize
    assert K._TOOLS_JSON.get(("", hot_key)) == uncached(hot)  # keyed (head, tools key)
    assert K._TOOLS_JSON.get(("", K._tools_key([tool("t0")]))) is None  # the least recently used went


def test_a_declaration_head_is_part_of_the_text_and_of_the_key():
    tools = [tool("f")]
    for _ in range(2):  # cold, then warm
        assert K.tools_json(tools, None, "tools", head="HEAD\n") == "HEAD\n" + uncached(tools) + "\n```"
        assert K.tools_json(tools, None, "tools") == uncached(tools)


def test_big_tools_are_not_kept():
    big = [tool("big", x={"description": "x" * K._TOOLS_JSON_MAX_KEY})]
    assert K._tools_key(big) is None
    K._TOOLS_JSON.clear()
    assert K.tools_json(big, None, "tools") == uncached(big)
    assert len(K._TOOLS_JSON) == 0
