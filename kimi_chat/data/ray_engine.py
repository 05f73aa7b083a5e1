"""The Ray engine of ``kimi-chat prepare`` (``--engine ray``) and the building block of a ``ray.data`` pipeline of
one's own: the batch core as a Ray Data ``map_batches`` with a callable class, so that each actor loads its
tokenizer once.

* :func:`run_ray` (the engine): a Ray dataset of the input's chunk records
  (:meth:`kimi_chat.data.sources.Source.iter_plan`: a few numbers per chunk); each :class:`ChunkRenderer` actor
  reads its chunk from the input path itself, renders it and writes it exactly as the local engine does
  (:func:`kimi_chat.data.pipeline.render_chunk`: the same shard file, rows, ``sample_id``, findings and
  fingerprint), and returns the shard's record. So OUTDIR is laid out as the local engine's, and ``resume=True``
  skips the shards an interrupted run finished (each shard's record and fingerprint are in its file metadata:
  :func:`kimi_chat.data.parquet.finished_shards`). The input path and OUTDIR must be visible to every node (a
  shared filesystem).
* :class:`KimiSamples` (the recipe, docs/training-data.md): for a Ray dataset of conversations read by Ray itself
  (``ray.data.read_parquet``...), ``ds.map_batches(KimiSamples, fn_constructor_kwargs={...}, compute=ray.data.ActorPoolStrategy(size=N),
  batch_format="pyarrow")`` gives the samples. Ray Data has no global row number: give every row an ``id``
  (the ``sample_id``), as the local engine's row numbers are not known there.

Ray is started by whoever runs this (``ray.init()``); :func:`run_ray` starts a local one when none is running
and ``$RAY_ADDRESS`` names none: :func:`local_cluster`, bound to the loopback interface only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import parquet
from .options import RenderOptions, TokenizerSpec
from .pipeline import RunResult, finish_run, prepare_outdir, render_entry
from .sources import Source, normalize_row

__all__ = ["ChunkRenderer", "KimiSamples", "run_ray", "local_cluster", "LOOPBACK", "SINGLE_MACHINE_ENV"]

LOOPBACK = "127.0.0.1"
"""The address a local cluster started here binds and advertises."""


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
    """Ray Data callable class of :func:`run_ray`: a batch of chunk records in, each chunk read from the input,
    rendered and written as its shard of OUTDIR (:func:`kimi_chat.data.pipeline.render_entry`), the shards'
    records out (column ``record``, JSON). One tokenizer per actor, loaded in ``__init__``."""

    def __init__(self, options: RenderOptions, source: Source, outdir: str, fingerprint: str) -> None:
        self.options = options
        self.source = source
        self.outdir = outdir
        self.fingerprint = fingerprint
        options.tokenizer.load()

    def __call__(self, entries: Any) -> Any:
        import json

        import pyarrow as pa

        records = [render_entry(self.options, self.source, e, self.outdir, self.fingerprint)
                   for e in entries.to_pylist()]
        return pa.table({"record": pa.array([json.dumps(r) for r in records], pa.string())})


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
            from ..dialect_records import get_dialect

            tok = get_dialect(dialect).family_parts.tokens.snapshot_tokenizer(Path(tokenizer_dir), None)
        self.options = RenderOptions.make(dialect, tok, reasoning=reasoning, max_length=max_length,
                                          overlong=overlong)

    def __call__(self, batch: Any) -> Any:
        rows = [normalize_row(r) for r in batch.to_pylist()]
        if not rows:
            return _samples_table([])
        return _samples_table([self.options.render(rows).batch])


SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch between a cluster of machines and one machine: ``"0"`` makes Ray take the loopback address as the
node's (its default on Windows and macOS), so that its servers bind 127.0.0.1. Without it Ray replaces a
``node_ip_address`` of 127.0.0.1 by the machine's routable address and binds its gRPC servers to every interface."""


@contextmanager
def local_cluster(num_cpus: int) -> Iterator[None]:
    """A local, single-machine Ray cluster for the block, shut down after it: every server it starts (GCS,
    raylet, object manager, the workers' gRPC, the agents) bound to the loopback interface and reporting
    127.0.0.1 (:data:`SINGLE_MACHINE_ENV` set to ``"0"`` for it and the processes it starts), no dashboard, no
    usage statistics sent. ``num_cpus``: the CPUs it offers."""
    import ray
    from ray._private import ray_constants

    saved = {k: os.environ.get(k) for k in (SINGLE_MACHINE_ENV, "RAY_USAGE_STATS_ENABLED")}
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_MACHINE_ENV] = "0"  # the processes Ray starts read it
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # this process read it when it imported Ray
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address=LOOPBACK, log_to_driver=False,
                 dashboard_host=LOOPBACK)
        yield
    finally:
        ray.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _cluster(workers: int) -> Iterator[None]:
    """The Ray cluster this process already uses or ``$RAY_ADDRESS`` names, else a :func:`local_cluster` with
    ``workers`` CPUs for this run."""
    import ray

    if ray.is_initialized():
        yield
    elif os.environ.get("RAY_ADDRESS"):
        ray.init()
        yield
    else:
        with local_cluster(workers):
            yield


def run_ray(source: Source, outdir: str | Path, options: RenderOptions, *, workers: int | None = None,
            resume: bool = False, progress: bool = True) -> RunResult:
    """Render ``source`` into ``outdir`` with Ray Data (``workers`` actors; default: the cluster's CPUs less
    one). ``resume``: keep the shards an interrupted run of the same options finished (as the local engine)."""
    import json

    import ray

    from .options import default_workers

    out = Path(outdir)
    fingerprint = options.fingerprint(f"chunk_rows={source.chunk_rows}")
    if isinstance(options.tokenizer, TokenizerSpec):
        options.tokenizer.files_hash()  # fail here on a missing file, not in an actor
    done = prepare_outdir(out, fingerprint, resume)
    started = time.perf_counter()
    records: dict[int, dict[str, Any]] = dict(done)
    with _cluster((workers or default_workers()) + 1):
        # a CPU more than the actors: Ray Data's own tasks (reading the plan's blocks) must not wait for them
        spare = max(1, int(ray.cluster_resources().get("CPU", 1)) - 1)
        workers = min(workers, spare) if workers else spare
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = progress
        plan = list(source.iter_plan(frozenset(done)))  # a few numbers per chunk
        if plan:
            ds = ray.data.from_items(plan, override_num_blocks=len(plan))
            ds = ds.map_batches(
                ChunkRenderer,
                fn_constructor_args=(options, source, str(out), fingerprint),
                batch_size=1,
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=min(workers, len(plan))),
                num_cpus=1,
            )
            for row in ds.iter_rows():
                rec = json.loads(row["record"])
                records[rec["index"]] = rec
    return finish_run(RunResult(seconds=time.perf_counter() - started), records, out, source, options,
                      fingerprint, engine="ray", workers=workers)
