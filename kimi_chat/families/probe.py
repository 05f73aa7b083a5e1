"""The probe record of ``identify``: a fixed request whose renderings tell template revisions apart, and
the pieces the probes are built of. In the family contract, apart from the probes every family shares
(:mod:`kimi_chat.checks.verification.probes`), so that a family lists its own (its record's ``probes``) without
importing the checks; :mod:`kimi_chat.checks.probe` re-exports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dialect_records import DialectRecord as Dialect

__all__ = ["Probe", "WEATHER_TOOL", "USER", "tool_call"]


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
    families: tuple[str, ...] | None = None
    """The format families (:attr:`Dialect.family`) whose dialects the probe is compared with (``None``:
    every family's); a family's own probes (its record's ``probes``) are compared with its dialects."""
    problem: str | None = None
    """A diagnostic probe: a difference here is the known problem with this code
    (:data:`~kimi_chat.checks.known_problems.PROBLEMS`), reported as such and not counted in the scores. The
    dialect may refuse the probe (``None`` expected): then a template that renders it has the problem."""
    parse_arguments: bool = True
    """K3: whether the host parses tool-call arguments JSON strings before rendering (llama.cpp
    does); ``False`` renders them as given."""

    def applies_to(self, dialect: Dialect) -> bool:
        """Whether the probe is compared with ``dialect``."""
        return self.families is None or dialect.family in self.families

    def options_for(self, dialect: Dialect) -> dict[str, Any]:
        """The probe's options that ``dialect`` reads: what its expected rendering is rendered with
        (the template ignores the others)."""
        return {k: v for k, v in self.options.items() if k in dialect.options}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
    },
}
"""The tool the probes declare and call."""


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call of a probe's assistant turn."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


USER = {"role": "user", "content": "What's the weather in Paris?"}
"""A probe's user turn asking for the weather (:data:`WEATHER_TOOL`)."""
