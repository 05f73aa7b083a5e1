"""Shared by the data-pipeline tests: conversations as an agent loop writes them (reasoning, tool calls, tool
results, final answers), input files in every format ``kimi-chat prepare`` reads, and reading its output."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_chat.data.options import RenderOptions
from kimi_chat.tokens.tokenizer import KimiTokenizer

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@functools.cache
def reference_tokenizer(config: str) -> KimiTokenizer:
    """``KimiTokenizer.from_reference(config)``, loaded once per test process."""
    return KimiTokenizer.from_reference(config)


def agent_loop(i: int, turns: int = 2) -> dict[str, Any]:
    """Conversation ``i``: a system prompt, then ``turns`` rounds of a user question answered after a tool call
    (the call with its reasoning, the result, the final answer with its reasoning)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    n = 0
    for t in range(turns):
        city = ["Paris", "Oslo", "Lima", "Pune"][(i + t) % 4]
        messages.append({"role": "user", "content": f"Question {i}.{t}: is it warm in {city}?"})
        messages.append({"role": "assistant", "content": "", "reasoning_content": f"I should look up {city} ({i}).",
                         "tool_calls": [{"id": f"functions.get_weather:{n}", "type": "function", "function": {
                             "name": "get_weather", "arguments": json.dumps({"city": city})}}]})
        messages.append({"role": "tool", "tool_call_id": f"functions.get_weather:{n}",
                         "content": json.dumps({"city": city, "celsius": 10 + (i * 7 + t) % 20})})
        messages.append({"role": "assistant", "content": f"{city}: {10 + (i * 7 + t) % 20} C.",
                         "reasoning_content": f"The tool says {10 + (i * 7 + t) % 20} degrees for {city}."})
        n += 1
    return {"id": f"conv-{i}", "messages": messages, "tools": TOOLS}


def conversations(n: int, turns: int = 2) -> list[dict[str, Any]]:
    return [agent_loop(i, turns) for i in range(n)]


def write_jsonl(path: Path, rows: Sequence[Any]) -> Path:
    """Rows as JSON lines; a row that is a ``str`` is written as that line, verbatim (for malformed lines)."""
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def write_parquet(path: Path, rows: Sequence[dict[str, Any]], *, as_json: bool = True) -> Path:
    """Rows as Parquet: ``messages`` / ``tools`` as JSON strings (``as_json``) or as nested columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if as_json:
        rows = [{"id": r.get("id"), "messages": json.dumps(r["messages"]), "tools": json.dumps(r.get("tools"))}
                for r in rows]
    pq.write_table(pa.Table.from_pylist(list(rows)), path, row_group_size=3)
    return path


def read_samples(outdir: Path) -> list[dict[str, Any]]:
    """Every sample of a prepare output directory, sorted by (sample_id, turns)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for p in sorted(outdir.glob("*.parquet")):
        rows += pq.read_table(p).to_pylist()
    return sorted(rows, key=lambda r: (r["sample_id"], r["turns"]))


def batch_samples(rows: Sequence[dict[str, Any]], options: RenderOptions, first_row: int = 0) -> list[dict[str, Any]]:
    """The samples the batch core makes of ``rows`` directly, sorted as :func:`read_samples`."""
    out = options.render(list(rows), first_row=first_row).batch.to_pylist()
    return sorted(out, key=lambda r: (r["sample_id"], r["turns"]))


@dataclass(frozen=True)
class CrashingOptions(RenderOptions):
    """Render options whose worker process dies (``os._exit``) on a row with id ``"crash"``: a stand-in for a
    worker killed mid-row (out of memory, a crash in native code)."""

    def render(self, rows: Sequence[Any], first_row: int = 0) -> Any:
        if any(isinstance(r, dict) and r.get("id") == "crash" for r in rows):
            os._exit(3)
        return super().render(rows, first_row)
