"""What kimi_chat's tools need of the Kimi-K3 family: ``inspect``'s hint,
``identify``'s K3 probes, the tokenizer of a model snapshot (the family record's hooks of the checks and
the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import markers as M
from ...dialect_records import DialectRecord as Dialect
from ...errors import ReferenceDataError
from ...tokens.tokenizer import K3_CONFIG, TIKTOKEN_MODEL_FILE, TOKENIZER_CONFIG_FILE, KimiTokenizer
from ..probe import USER, WEATHER_TOOL, Probe, tool_call

__all__ = ["K3_FIX_HINT", "inspected_markers", "PROBES", "snapshot_tokenizer"]

K3_FIX_HINT = (
    "Kimi-K3 ships no chat template (its tokenizer renders chats in Python) and kimi_chat has none: render "
    "K3 prompts with the official tokenizer's apply_chat_template (trust_remote_code; vLLM and SGLang's K3 "
    "support) or with kimi_chat (kimi_chat.render(messages, dialect=\"kimi-k3\"), kimi-chat render -d "
    "kimi-k3, render_tokens for ids); with llama.cpp's port, parse string arguments in the host (llama.cpp "
    "does) and never send thinking_effort=\"medium\""
)
"""The fix hint of a Kimi-K3 port (there is no template to replace it with)."""


def inspected_markers(d: Dialect) -> tuple[M.Marker, ...]:
    """The markers a K3 model has at their official ids: every one of :data:`~kimi_chat.markers.K3_MARKERS`."""
    return M.K3_MARKERS


PROBES: tuple[Probe, ...] = (
    Probe("thinking effort low", (USER,), options={"thinking_effort": "low"}),
    Probe("thinking off", (
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "reasoning_content": "Greet back.", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ), options={"thinking": False}),
    Probe("lazy-loaded tools, tool choice, response format", (
        {"role": "system", "content": "", "tools": [WEATHER_TOOL]}, USER,
    ), options={"tool_choice": "required", "response_format": {"type": "json_object"}}),
    Probe("arguments that are not JSON", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [tool_call("call_1", "get_weather", "Paris, please")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
    )),
    Probe("thinking effort medium", (USER,), options={"thinking_effort": "medium"},
          problem="accepts-medium-effort"),
    Probe("string arguments, the host passing them as given", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [tool_call("call_1", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
    ), problem="needs-parsed-arguments", parse_arguments=False),
    Probe("arguments a JSON string, not an object", (
        USER,
        {"role": "assistant", "content": "", "tool_calls": [tool_call("call_1", "get_weather", '"Paris"')]},
    ), problem="accepts-non-object-arguments"),
    Probe("mixed-case schema keys", (USER,), tools=({
        "type": "function",
        "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "Units": {"type": "string"}}}},
    },), problem="case-insensitive-key-sort"),
)
"""The K3 probes of ``identify``: its options, its refusals, the known problems of llama.cpp's port
(compared with K3 dialects only)."""


def snapshot_tokenizer(directory: Path, config: str | None) -> KimiTokenizer:
    """A Kimi-K3 snapshot's tokenizer: 256 special ids; its ``tokenizer_config.json`` (or ``config``), else
    the K3 special tokens of the reference recipe (:data:`~kimi_chat.tokens.tokenizer.K3_CONFIG`).
    :class:`~kimi_chat.errors.ReferenceDataError` when ``directory`` is not a directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ReferenceDataError(f"{directory}: model snapshot directory not found")
    cfg: Any = Path(config) if config else directory / TOKENIZER_CONFIG_FILE
    if not config and not cfg.is_file():
        cfg = K3_CONFIG
    return KimiTokenizer.from_files(directory / TIKTOKEN_MODEL_FILE, cfg, num_special=M.K3_NUM_RESERVED_SPECIAL)
