"""The probe record of ``identify`` and the pieces the probes are built of: :mod:`kimi_chat.families.probe` (in the
family contract, so a family lists its own probes without importing the checks), re-exported here."""

from __future__ import annotations

from ..families.probe import USER, WEATHER_TOOL, Probe, tool_call

__all__ = ["Probe", "WEATHER_TOOL", "USER", "tool_call"]
