"""``kimi-chat data-report``: the data report of finished ``kimi-chat prepare`` runs, read from their output
directories (the manifest and the findings each run saved): per dataset and per sample, the reasoning the
official template drops, bad rows, overlong samples and what was done, suspicious tool calls and marker text.
"""

from __future__ import annotations

import argparse
import sys

from ._io import fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "data-report",
        help="the data report of `kimi-chat prepare` output directories",
        description="Print what `kimi-chat prepare` found in each dataset (OUTDIR: its output directory): totals "
        "per kind, then the first findings of each kind with their row, input line and sample_id. --json prints the "
        "whole report (every finding).",
    )
    p.add_argument("outdirs", metavar="OUTDIR", nargs="+", help="output directory of a finished prepare run")
    p.add_argument("--json", action="store_true", help="print the report as JSON (every finding)")
    p.add_argument("--examples", type=int, default=5, metavar="N",
                   help="findings listed per kind in the summary (default 5)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..data.parquet import OutputError
    from ..data.report import DatasetReport, summary_text, write_json

    examples = max(args.examples, 0)
    try:
        reports = [DatasetReport.load(o, examples) for o in args.outdirs]
    except (OutputError, ValueError, OSError) as e:
        return fail(str(e))
    if args.json:
        write_json(reports, sys.stdout)
    else:
        sys.stdout.write(summary_text(reports, examples))
    return 0
