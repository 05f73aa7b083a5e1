"""The data report: what a run of ``kimi-chat prepare`` found in its input, per dataset and per sample.

Built from the findings each shard saved (:mod:`.parquet`) and the run's manifest: totals per kind
(:data:`KINDS` says what each kind means), and every finding with its row, its input line where the input has
lines, its ``sample_id`` and the message (which names the field and what was done: a row skipped, a sample
dropped or truncated at a turn boundary). :func:`build_report` gives the JSON document (``--report FILE``,
``kimi-chat data-report --json``), :func:`summary_text` the human-readable summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "totals_by_kind", "dataset_report", "build_report", "summary_text", "load_report"]

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


def dataset_report(manifest: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], outdir: str | None = None) -> dict[str, Any]:
    """The report of one dataset: its run's counts and options (from ``manifest``), totals per kind, and every
    finding."""
    opts = manifest.get("options", {})
    return {
        "input": manifest.get("input"),
        "outdir": outdir,
        "dialect": opts.get("dialect"),
        "reasoning": opts.get("reasoning"),
        "max_length": opts.get("max_length"),
        "rows": manifest.get("rows", 0),
        "samples": manifest.get("samples", 0),
        "tokens": manifest.get("tokens", 0),
        "trained_tokens": manifest.get("trained_tokens", 0),
        "errors": manifest.get("errors", 0),
        "totals": totals_by_kind(findings),
        "findings": [dict(f) for f in findings],
    }


def build_report(datasets: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report over several datasets (each a :func:`dataset_report`): theirs, and the totals of all."""
    totals: Counter[str] = Counter()
    for d in datasets:
        totals.update(d["totals"])
    return {"kinds": KINDS, "totals": totals_by_kind({"kind": k, "count": n} for k, n in totals.items()),
            "datasets": [dict(d) for d in datasets]}


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


def summary_text(report: Mapping[str, Any], examples: int = EXAMPLES) -> str:
    """The report for a reader: per dataset its counts, then each kind's total and its first ``examples``
    findings."""
    lines = []
    for d in report["datasets"]:
        head = (f"{d['input']}: {d['rows']:,} conversations -> {d['samples']:,} samples, {d['tokens']:,} tokens "
                f"({d['trained_tokens']:,} trained); dialect {d['dialect']}, reasoning {d['reasoning']}")
        if d.get("max_length"):
            head += f", max length {d['max_length']:,}"
        lines.append(head)
        if not d["totals"]:
            lines.append("  no findings")
        by_kind: dict[str, list[Mapping[str, Any]]] = {}
        for f in d["findings"]:
            by_kind.setdefault(str(f.get("kind")), []).append(f)
        for kind, n in d["totals"].items():
            lines.append(f"  {kind:<25} {n:>8,}  {KINDS.get(kind, '')}")
            items = by_kind.get(kind, [])
            for f in items[:examples]:
                lines.append(f"      {_where(f)}: {f.get('message', '')}")
            if len(items) > examples:
                lines.append(f"      ... and {len(items) - examples:,} more (the JSON report lists every one)")
    return "\n".join(lines) + "\n"


def load_report(outdirs: Sequence[str | Path]) -> dict[str, Any]:
    """The report of the runs in ``outdirs`` (each the OUTDIR of a finished ``kimi-chat prepare``), read from
    the manifest and the findings each run saved there."""
    from . import parquet

    datasets = []
    for o in outdirs:
        p = Path(o)
        m = parquet.read_manifest(p)
        datasets.append(dataset_report(m, list(parquet.read_findings(p)), outdir=str(o)))
    return build_report(datasets)
