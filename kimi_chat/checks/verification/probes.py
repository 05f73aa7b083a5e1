"""The probes: a fixed set of conversations whose renderings tell the known template revisions apart
(rendered by :func:`kimi_chat.checks.verification.identify`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...dialects import Dialect

__all__ = ["Probe", "PROBES"]


@dataclass(frozen=True)
class Probe:
    """A fixed request rendered by :func:`identify`."""

    name: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] | None = None
    add_generation_prompt: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)
    """Template kwargs passed to the template; a dialect that does not read one renders as its
    template does, ignoring it (e.g. ``preserve_thinking``, read by Kimi-K2.6 and not by K2.5)."""
    families: tuple[str, ...] = ("k2", "k3")
    """The format families (:attr:`Dialect.family`) whose dialects the probe is compared with."""
    problem: str | None = None
    """A diagnostic probe: a difference here is the known problem with this code
    (:data:`~kimi_chat.checks.known_problems.PROBLEMS`), reported as such and not counted in the scores. The
    dialect may refuse the probe (``None`` expected): then a template that renders it has the problem."""
    parse_arguments: bool = True
    """K3: whether the host parses tool-call arguments JSON strings before rendering (llama.cpp
    does); ``False`` renders them as given."""

    def applies_to(self, dialect: Dialect) -> bool:
        """Whether the probe is compared with ``dialect``."""
        return dialect.family in self.families

    def options_for(self, dialect: Dialect) -> dict[str, Any]:
        """The probe's options that ``dialect`` reads: what its expected rendering is rendered with
        (the template ignores the others)."""
        return {k: v for k, v in self.options.items() if k in dialect.options}


_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
    },
}


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


_USER = {"role": "user", "content": "What's the weather in Paris?"}

_REASONING_HISTORY = (
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "reasoning_content": "Add again.", "content": "6"},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "reasoning_content": "Use the tool.", "content": "", "tool_calls": [
        _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
)

PROBES: tuple[Probe, ...] = (
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
    Probe("tools declared", (_USER,), tools=(_WEATHER_TOOL,)),
    Probe("tool call, string arguments, call_ id", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [_call("call_abc", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 °C"},
    ), tools=(_WEATHER_TOOL,)),
    Probe("tool call, object arguments", (
        _USER,
        {"role": "assistant", "tool_calls": [_call("functions.get_weather:0", "get_weather", {"city": "Paris"})]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("two tool rounds", (
        _USER,
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}'),
            _call("functions.get_weather:2", "get_weather", '{"city": "Nice"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "20 °C"},
        {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "23 °C"},
    )),
    Probe("tool results out of order", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}'),
            _call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}')]},
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
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    # Kimi-K3 (its options, its refusals, llama.cpp's port's known problems)
    Probe("thinking effort low", (_USER,), options={"thinking_effort": "low"}, families=("k3",)),
    Probe("thinking off", (
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "reasoning_content": "Greet back.", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ), options={"thinking": False}, families=("k3",)),
    Probe("lazy-loaded tools, tool choice, response format", (
        {"role": "system", "content": "", "tools": [_WEATHER_TOOL]}, _USER,
    ), options={"tool_choice": "required", "response_format": {"type": "json_object"}}, families=("k3",)),
    Probe("arguments that are not JSON", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "get_weather", "Paris, please")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
    ), families=("k3",)),
    Probe("thinking effort medium", (_USER,), options={"thinking_effort": "medium"}, families=("k3",),
          problem="accepts-medium-effort"),
    Probe("string arguments, the host passing them as given", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
    ), families=("k3",), problem="needs-parsed-arguments", parse_arguments=False),
    Probe("arguments a JSON string, not an object", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "get_weather", '"Paris"')]},
    ), families=("k3",), problem="accepts-non-object-arguments"),
    Probe("mixed-case schema keys", (_USER,), tools=({
        "type": "function",
        "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "Units": {"type": "string"}}}},
    },), families=("k3",), problem="case-insensitive-key-sort"),
)
"""The conversations :func:`identify` renders through a template and every dialect."""
