"""``kimi-chat prepare``: conversations to training samples as generated, written as sharded Parquet.

The input is JSONL (one ``{"messages", "tools", "id"}`` a line), Parquet with those columns, or a ``datasets``
``save_to_disk`` directory, streamed; the output directory gets the shards, the findings of every shard and a
manifest (:mod:`kimi_chat.data.parquet`), and ``--report FILE`` the data report as JSON
(:mod:`kimi_chat.data.report`). The engines: ``local`` (a process pool, :mod:`kimi_chat.data.pipeline`) and
``ray`` (Ray Data, :mod:`kimi_chat.data.ray_engine`). Needs ``pip install -e '.[data]' (in the checkout)`` (and ``[ray]``
for ``--engine ray``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import KimiChatError
from ._io import InputError, fail

DATA_EXTRA = "pip install -e '.[data]' (in the checkout)"


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "prepare",
        help="render a dataset of conversations into training samples (sharded Parquet)",
        description="Render every conversation of INPUT into training samples as the model generated them "
        "(every assistant message trained once, its reasoning kept, in the context the model saw) and write them "
        "to OUTDIR as sharded Parquet (input_ids, labels, assistant_masks, length, sample_id, turns), with a "
        "manifest and the data report. INPUT: JSONL (one {\"messages\", \"tools\", \"id\"} a line), Parquet with "
        "those columns, or a `datasets` save_to_disk directory. See docs/training-data.md.",
    )
    p.add_argument("input", metavar="INPUT", help="JSONL file, Parquet file or directory, or datasets directory")
    p.add_argument("-d", "--dialect", required=True, help="the dialect (or published model name) of the data")
    p.add_argument("-o", "--output", metavar="OUTDIR", required=True, help="output directory of the shards")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="worker processes (default: the cores; 1 renders in this process); with --engine ray, the "
                   "actors (default: the cluster's CPUs less one)")
    p.add_argument("--reasoning", choices=("as-sampled", "keep", "official"), default="as-sampled",
                   help="as-sampled (default): every assistant message as generated, its reasoning kept; keep: one "
                   "render with every turn's reasoning (dialects that can: K2.6 preserve_thinking, K3); official: one "
                   "full official render per conversation (drops earlier reasoning; the report counts it)")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="model snapshot directory with tiktoken.model and tokenizer_config.json (default: the "
                   "dialect's reference tokenizer in $KIMI_CHAT_REFERENCE_DIR)")
    p.add_argument("--max-length", type=int, default=None, metavar="N",
                   help="longest sample in tokens; longer ones are handled by --overlong (default: no limit)")
    p.add_argument("--overlong", choices=("drop", "truncate"), default="drop",
                   help="a sample over --max-length is dropped (default) or truncated at a turn boundary")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default): a process pool on this machine; ray: Ray Data map_batches on the Ray "
                   "cluster ray.init() finds (or a local one)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run in OUTDIR (same options, either engine): finished shards are kept")
    p.add_argument("--report", metavar="FILE", help="write the data report (JSON) to FILE")
    p.add_argument("--on-error", choices=("record", "raise"), default="record",
                   help="record (default): a bad row is reported with its line and skipped; raise: stop at the first")
    p.add_argument("--shard-rows", type=int, default=None, metavar="N",
                   help="conversations per shard (default 2000)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary on stderr")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> Any:
    from ..dialect_records import get_dialect
    from ..data.options import RenderOptions, TokenizerSpec
    from .count import load_tokenizer

    try:
        d = get_dialect(args.dialect)
    except (KimiChatError, ValueError, KeyError) as e:
        raise InputError(f"--dialect {args.dialect}: {e}") from e
    tok = load_tokenizer(argparse.Namespace(tokenizer=args.tokenizer, tokenizer_config=None), d.name)
    try:
        return RenderOptions(d.name, TokenizerSpec.of(tok), reasoning=args.reasoning, max_length=args.max_length,
                             overlong=args.overlong, on_error=args.on_error)
    except ValueError as e:
        raise InputError(str(e)) from e


def _check_options(options: Any) -> None:
    """The batch core's own refusals (a reasoning policy the dialect cannot do) before any worker starts."""
    try:
        options.render([], first_row=0)
    except (KimiChatError, ValueError) as e:
        raise InputError(f"--reasoning {options.reasoning} with --dialect {options.dialect}: {e}") from e


def run(args: argparse.Namespace) -> int:
    try:
        import pyarrow  # noqa: F401
        import tqdm  # noqa: F401
    except ImportError as e:
        return fail(f"prepare needs pyarrow and tqdm: {DATA_EXTRA} ({e})")
    from ..data import parquet, report
    from ..data.pipeline import PipelineError, run_local
    from ..data.sources import DEFAULT_CHUNK_ROWS, SourceError, open_source

    if args.workers is not None and args.workers < 1:
        return fail(f"--workers {args.workers}: give at least 1")
    if args.max_length is not None and args.max_length < 1:
        return fail(f"--max-length {args.max_length}: give a positive number of tokens")
    try:
        options = _options(args)
        _check_options(options)
        source = open_source(args.input, args.shard_rows or DEFAULT_CHUNK_ROWS)
        progress = not args.quiet
        if args.engine == "ray":
            try:
                from ..data.ray_engine import run_ray
            except ImportError as e:
                raise InputError(f"--engine ray needs Ray Data: pip install -e '.[ray]' (in the checkout) ({e})") from e
            result = run_ray(source, args.output, options, workers=args.workers, resume=args.resume,
                             progress=progress)
        else:
            result = run_local(source, args.output, options, workers=args.workers, resume=args.resume,
                               progress=progress)
    except (SourceError, parquet.OutputError, PipelineError, ValueError) as e:
        return fail(str(e))
    reports = [report.DatasetReport(result.manifest, args.output)]
    if args.report:
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                report.write_json(reports, f)
        except OSError as e:
            return fail(f"--report {args.report}: cannot write: {e.strerror or e}")
    if not args.quiet:
        sys.stderr.write(report.summary_text(reports))
        sys.stderr.write(f"wrote {len(result.shards)} shard(s) to {args.output} in {result.seconds:.1f} s "
                         f"({result.rows / max(result.seconds, 1e-9):,.0f} conversations/s, "
                         f"{result.tokens / max(result.seconds, 1e-9):,.0f} tokens/s)\n")
    return 0
