"""The data report: what a run of ``kimi-chat prepare`` found in its input, per dataset and per sample.

Built from the findings each shard saved (:mod:`.parquet`) and the run's manifest: totals per kind
(:data:`KINDS` says what each kind means), and every finding with its row, its input line where the input has
lines, its ``sample_id`` and the message (which names the field and what was done: a row skipped, a sample
dropped or truncated at a turn boundary). :class:`DatasetReport` reads a run back, :func:`write_json` writes the
JSON document (``--report FILE``, ``kimi-chat data-report --json``; the findings streamed from the run's files),
:func:`summary_text` the human-readable summary.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = ["KINDS", "DatasetReport", "totals_by_kind", "write_json", "summary_text"]

from .findings import KINDS  # every kind the batch core reports, and what it counts


EXAMPLES = 5
"""Findings listed per kind in the summary (the JSON report holds all of them)."""


def _count(f: Mapping[str, Any]) -> int:
    c = f.get("count", 1)
    return int(c) if isinstance(c, int) and c > 0 else 1


def totals_by_kind(findings: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many of each kind (a finding's ``count`` is how many it stands for), in :data:`KINDS` order."""
    c: Counter[str] = Counter()
    for f in findings:
        c[str(f.get("kind"))] += _count(f)
    order = list(KINDS) + sorted(k for k in c if k not in KINDS)
    return {k: c[k] for k in order if c[k]}


class DatasetReport:
    """The report of one dataset, a finished run's OUTDIR: its counts and options (from the manifest), totals per
    kind and the first findings of each kind, gathered in one pass; :meth:`findings` streams every finding again
    from the files the run saved (a million-row run's findings are never all in memory)."""

    def __init__(self, manifest: Mapping[str, Any], outdir: str | Path, examples: int = EXAMPLES) -> None:
        opts = manifest.get("options", {})
        self.outdir = Path(outdir)
        self.header: dict[str, Any] = {
            "input": manifest.get("input"),
            "outdir": str(outdir),
            "dialect": opts.get("dialect"),
            "reasoning": opts.get("reasoning"),
            "max_length": opts.get("max_length"),
            **{k: manifest.get(k, 0) for k in ("rows", "samples", "tokens", "trained_tokens", "errors")},
        }
        totals: Counter[str] = Counter()
        self.examples: dict[str, list[dict[str, Any]]] = {}
        self.listed: Counter[str] = Counter()
        for f in self.findings():
            kind = str(f.get("kind"))
            totals[kind] += _count(f)
            self.listed[kind] += 1
            if len(self.examples.setdefault(kind, [])) < examples:
                self.examples[kind].append(f)
        self.totals = totals_by_kind({"kind": k, "count": n} for k, n in totals.items())

    @classmethod
    def load(cls, outdir: str | Path, examples: int = EXAMPLES) -> "DatasetReport":
        """The report of the finished run in ``outdir`` (an :class:`~.parquet.OutputError` if there is none)."""
        from . import parquet

        return cls(parquet.read_manifest(Path(outdir)), outdir, examples)

    def findings(self) -> Iterator[dict[str, Any]]:
        """Every finding, shard by shard, as saved."""
        from . import parquet

        return parquet.read_findings(self.outdir)


def write_json(reports: Sequence[DatasetReport], out: TextIO) -> None:
    """The JSON report of ``reports``: ``{"kinds", "totals", "datasets": [{counts, options, "totals",
    "findings": [...]}]}``, the findings streamed from the runs' files."""
    totals: Counter[str] = Counter()
    for r in reports:
        totals.update(r.totals)
    out.write('{"kinds": ' + json.dumps(KINDS, ensure_ascii=False))
    out.write(', "totals": ' + json.dumps(totals_by_kind({"kind": k, "count": n} for k, n in totals.items())))
    out.write(', "datasets": [')
    for i, r in enumerate(reports):
        head = json.dumps({**r.header, "totals": r.totals}, ensure_ascii=False)
        out.write((", " if i else "") + head[:-1] + ', "findings": [')
        for k, f in enumerate(r.findings()):
            out.write(("," if k else "") + "\n  " + json.dumps(f, ensure_ascii=False))
        out.write("]}")
    out.write("]}\n")


def _where(f: Mapping[str, Any]) -> str:
    parts = []
    if f.get("line") is not None:
        parts.append(f"line {f['line']}")
    if f.get("row") is not None:
        parts.append(f"row {f['row']}")
    if f.get("sample_id") is not None and str(f.get("sample_id")) != str(f.get("row")):
        parts.append(f"sample_id {f['sample_id']!r}")
    if f.get("path"):
        parts.append(str(f["path"]))
    return ", ".join(parts) or "dataset"


def summary_text(reports: Sequence[DatasetReport], examples: int = EXAMPLES) -> str:
    """The report for a reader: per dataset its counts, then each kind's total and its first ``examples``
    findings."""
    lines = []
    for r in reports:
        d = r.header
        head = (f"{d['input']}: {d['rows']:,} conversations -> {d['samples']:,} samples, {d['tokens']:,} tokens "
                f"({d['trained_tokens']:,} trained); dialect {d['dialect']}, reasoning {d['reasoning']}")
        if d.get("max_length"):
            head += f", max length {d['max_length']:,}"
        lines.append(head)
        if not r.totals:
            lines.append("  no findings")
        for kind, n in r.totals.items():
            lines.append(f"  {kind:<25} {n:>8,}  {KINDS.get(kind, '')}")
            items = r.examples.get(kind, [])[:examples]
            for f in items:
                lines.append(f"      {_where(f)}: {f.get('message', '')}")
            if r.listed[kind] > len(items):
                lines.append(f"      ... and {r.listed[kind] - len(items):,} more (the JSON report lists every one)")
    return "\n".join(lines) + "\n"
