"""The probes: a fixed set of conversations whose renderings tell the known template revisions apart
(rendered by :func:`kimi_chat.checks.verification.identify`): the ones every family shares, then each
family's own (its record's ``probes``; the record itself is :class:`kimi_chat.checks.probe.Probe`)."""

from __future__ import annotations

from dataclasses import replace

from ...families import registered_families
from ..probe import USER, WEATHER_TOOL, Probe, tool_call

__all__ = ["Probe", "PROBES", "SHARED_PROBES", "WEATHER_TOOL", "USER", "tool_call"]


_REASONING_HISTORY = (
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "reasoning_content": "Add again.", "content": "6"},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "reasoning_content": "Use the tool.", "content": "", "tool_calls": [
        tool_call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
)

SHARED_PROBES: tuple[Probe, ...] = (
    Probe("user turn", ({"role": "user", "content": "Hello"},)),
    Probe("system prompt given", ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"})),
    Probe("multi-turn", (
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Tell me a joke."},
    )),
    Probe("finished conversation, no generation prompt", (
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
    ), add_generation_prompt=False),
    Probe("user turn, no generation prompt", ({"role": "user", "content": "Hi"},), add_generation_prompt=False),
    Probe("tools declared", (USER,), tools=(WEATHER_TOOL,)),
    Probe("tool call, string arguments, call_ id", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [tool_call("call_abc", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 °C"},
    ), tools=(WEATHER_TOOL,)),
    Probe("tool call, object arguments", (
        USER,
        {"role": "assistant", "tool_calls": [tool_call("functions.get_weather:0", "get_weather", {"city": "Paris"})]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("two tool rounds", (
        USER,
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            tool_call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
        {"role": "assistant", "content": "", "tool_calls": [
            tool_call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}'),
            tool_call("functions.get_weather:2", "get_weather", '{"city": "Nice"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "20 °C"},
        {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "23 °C"},
    )),
    Probe("tool results out of order", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [
            tool_call("functions.get_weather:0", "get_weather", '{"city": "Paris"}'),
            tool_call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "20 °C"},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("reasoning in history", _REASONING_HISTORY),
    # Kimi-K2.6 keeps every turn's reasoning; K2.5 (which does not read the flag) still splits
    Probe("reasoning in history, preserve_thinking", _REASONING_HISTORY, options={"preserve_thinking": True}),
    Probe("names", (
        {"role": "user", "name": "alice", "content": "Hi"},
        {"role": "assistant", "name": "kimi", "content": "Hello, Alice."},
        {"role": "user", "content": "Bye"},
    )),
    Probe("image and text parts", (
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
    )),
    Probe("tool message with name", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [
            tool_call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
)
"""The conversations :func:`identify` renders through a template and every dialect."""

PROBES: tuple[Probe, ...] = SHARED_PROBES + tuple(
    replace(p, families=(family.name,)) for family in registered_families() for p in family.checks.probes)
"""Every probe: :data:`SHARED_PROBES`, then each registered family's own (its record's ``probes``), compared
with that family's dialects only."""
