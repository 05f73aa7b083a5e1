"""The Ray engine of ``kimi-chat prepare`` (``--engine ray``) and the building block of a ``ray.data`` pipeline of
one's own: the batch core as a Ray Data ``map_batches`` with a callable class, so that each actor loads its
tokenizer once.

* :func:`run_ray` (the engine): a Ray dataset of the input's chunk records (:meth:`kimi_chat.data.sources.Source.plan`:
  a few numbers per chunk); each :class:`ChunkRenderer` actor reads its chunk from the input path itself,
  renders it exactly as the local engine does (:func:`kimi_chat.data.pipeline.render_chunk_data`: same rows, same
  ``sample_id``, same findings), saves the chunk's findings beside the output, and returns the samples, which
  Ray Data writes as Parquet (``Dataset.write_parquet``). The input path and OUTDIR must be visible to every
  node (a shared filesystem), as for any Ray Data file output.
* :class:`KimiSamples` (the recipe, docs/training-data.md): for a Ray dataset of conversations read by Ray itself
  (``ray.data.read_parquet``...), ``ds.map_batches(KimiSamples, fn_constructor_kwargs={...}, compute=ray.data.ActorPoolStrategy(size=N),
  batch_format="pyarrow")`` gives the samples. Ray Data has no global row number: give every row an ``id``
  (the ``sample_id``), as the local engine's row numbers are not known there.

Ray is started by whoever runs this (``ray.init()``); :func:`run_ray` starts a local one on 127.0.0.1 when none is
running and ``$RAY_ADDRESS`` names none.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from . import parquet
from .options import RenderOptions, TokenizerSpec
from .pipeline import RunResult, manifest, render_chunk_data
from .report import totals_by_kind
from .sources import Source, normalize_row

__all__ = ["ChunkRenderer", "KimiSamples", "run_ray"]


def _samples_table(batches: list[Any], fingerprint: str | None = None) -> Any:
    import pyarrow as pa

    from .batch import SCHEMA

    schema = SCHEMA if fingerprint is None else SCHEMA.with_metadata(
        {**(SCHEMA.metadata or {}), parquet.FINGERPRINT_KEY: fingerprint.encode()})
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches([b.cast(SCHEMA) if b.schema != SCHEMA else b for b in batches], schema=SCHEMA
                                 ).replace_schema_metadata(schema.metadata)


class ChunkRenderer:
    """Ray Data callable class of :func:`run_ray`: a batch of chunk records in, those chunks' samples out
    (one tokenizer per actor, loaded in ``__init__``)."""

    def __init__(self, options: RenderOptions, path: str, kind: str, chunk_rows: int, outdir: str,
                 fingerprint: str) -> None:
        self.options = options
        self.source = Source(path, kind, chunk_rows)
        self.outdir = Path(outdir)
        self.fingerprint = fingerprint
        options.tokenizer.load()

    def __call__(self, entries: Any) -> Any:
        batches: list[Any] = []
        for entry in entries.to_pylist():
            chunk = self.source.read_chunk(entry)
            b, findings, record = render_chunk_data(self.options, chunk)
            findings.append({"kind": "_chunk", **record})  # the chunk's counts, read back by run_ray
            parquet.write_findings(self.outdir, chunk.index, findings)
            batches += [x for x in b if x.num_rows]
        return _samples_table(batches, self.fingerprint)


class KimiSamples:
    """Ray Data callable class for a pipeline of one's own: a ``pyarrow`` batch of conversations (columns
    ``messages``, optional ``tools`` and ``id``; nested or as JSON strings) in, their samples out (the columns of
    :data:`kimi_chat.data.batch.SCHEMA`). Constructor keywords: ``dialect``, ``tokenizer_dir`` (``None``: the
    dialect's reference tokenizer), ``reasoning``, ``max_length``, ``overlong``. Rows the core cannot render are
    left out; the core's findings are not kept here (``kimi-chat prepare`` reports them)."""

    def __init__(self, dialect: str, tokenizer_dir: str | None = None, reasoning: str = "as-sampled",
                 max_length: int | None = None, overlong: str = "drop") -> None:
        tok = None
        if tokenizer_dir is not None:
            from ..dialects import get_dialect

            tok = get_dialect(dialect).family_parts.tokens.snapshot_tokenizer(Path(tokenizer_dir), None)
        self.options = RenderOptions.make(dialect, tok, reasoning=reasoning, max_length=max_length,
                                          overlong=overlong)

    def __call__(self, batch: Any) -> Any:
        rows = [normalize_row(r) for r in batch.to_pylist()]
        if not rows:
            return _samples_table([])
        return _samples_table([self.options.render(rows).batch])


def _ensure_ray(workers: int) -> None:
    """Connect to the Ray cluster this process already uses or ``$RAY_ADDRESS`` names, else start a local one
    on the loopback interface only, with ``workers`` CPUs, no dashboard and no usage statistics sent."""
    import ray

    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init()
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)


def run_ray(source: Source, outdir: str | Path, options: RenderOptions, *, workers: int | None = None,
            progress: bool = True) -> RunResult:
    """Render ``source`` into ``outdir`` with Ray Data (``workers`` actors; default: the cluster's CPUs)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import ray

    from .options import default_workers

    out = Path(outdir)
    if out.exists() and any(out.iterdir()):
        raise parquet.OutputError(f"{out}: not empty: Ray Data writes into an empty directory (remove it, or "
                                  "choose another)")
    out.mkdir(parents=True, exist_ok=True)
    _ensure_ray((workers or default_workers()) + 1)  # a CPU more than actors: see below
    # the actors, and a CPU left for Ray Data's own tasks (the write): all CPUs held by actors would deadlock it
    spare = max(1, int(ray.cluster_resources().get("CPU", 1)) - 1)
    workers = min(workers, spare) if workers else spare
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    fingerprint = options.fingerprint(f"chunk_rows={source.chunk_rows}")
    started = time.perf_counter()
    plan = source.plan()
    if isinstance(options.tokenizer, TokenizerSpec):
        options.tokenizer.files_hash()  # fail here on a missing file, not in an actor
    if plan:
        ds = ray.data.from_items(plan, override_num_blocks=len(plan))
        ds = ds.map_batches(
            ChunkRenderer,
            fn_constructor_args=(options, str(source.path), source.kind, source.chunk_rows, str(out), fingerprint),
            batch_size=1,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=min(workers, len(plan))),
            num_cpus=1,
        )
        # writing is I/O: its tasks take no CPU, so the actors still held when they start cannot starve them
        ds.write_parquet(str(out), ray_remote_args={"num_cpus": 0})
    result = RunResult()
    records = [{k: v for k, v in f.items() if k != "kind"}
               for f in parquet.read_findings(out, internal=True) if f.get("kind") == "_chunk"]
    result.totals = totals_by_kind(parquet.read_findings(out))
    for rec in sorted(records, key=lambda r: r["index"]):
        result.rows += rec["rows"]
        result.errors += rec["errors"]
    files = parquet.sample_files(out)
    for p in files:
        t = pq.read_table(p, columns=["length", "assistant_masks"])
        result.samples += t.num_rows
        if t.num_rows:
            result.tokens += int(pc.sum(t.column("length")).as_py() or 0)
            result.trained_tokens += int(pc.sum(pc.list_flatten(t.column("assistant_masks"))).as_py() or 0)
    result.shards = [{"file": p.name} for p in files]
    result.seconds = time.perf_counter() - started
    result.manifest = manifest(source.name, options, fingerprint, result, engine="ray", workers=workers)
    parquet.write_manifest(out, result.manifest)
    return result
