"""The local engine of ``kimi-chat prepare``: an input (:mod:`.sources`) streamed in chunks through the batch core
in a process pool (``concurrent.futures.ProcessPoolExecutor``, one tokenizer per worker process, loaded once),
each chunk written as one Parquet shard (:mod:`.parquet`), the findings kept beside it, a manifest last.

The workers read their chunks themselves: the driver only scans the input for where each chunk starts
(:meth:`~.sources.Source.iter_plan`: a JSONL file's lines are counted, not parsed) and sends each worker a
record of a few numbers; the worker reads and parses that chunk (:meth:`~.sources.Source.read_chunk`), renders
it and writes its shard. So the work that grows with the data (decoding, parsing, rendering, writing) is all
in the workers, and the shards are the same as with one worker, whichever worker renders which chunk.

Memory is bounded: at most two chunks per worker are in flight, each held only by the worker reading it. A row the
batch core cannot render is a finding (``on_error="record"``) or stops the run naming it (``"raise"``); an
unexpected exception in a worker stops the run naming the row it was on; a worker process that dies (killed, out of
memory, a crash in native code) stops the run naming the row it was rendering, found again by rendering the rows it
had in hand one by one in a fresh process. Finished shards stay finished: ``resume=True`` continues without redoing
them.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import batch, parquet
from .options import RenderOptions, default_workers
from .report import totals_by_kind
from .sources import Chunk, Source

__all__ = ["PipelineError", "RunResult", "run_local", "render_chunk", "render_chunk_data", "render_entry",
           "prepare_outdir", "finding_dicts", "manifest", "finish_run",
           "RUN_ROWS"]

RUN_ROWS = 64
"""Rows a worker hands the batch core at once (and the granularity of "the row it was on" when a worker dies)."""


class PipelineError(RuntimeError):
    """The run stopped (a bad row under ``on_error="raise"``, a worker's exception or death); the message names
    the row, its line where the input has lines, its sample id, and what to do."""


@dataclass
class RunResult:
    """What a run did: totals over every shard (resumed ones included), the findings' totals per kind (the
    findings themselves stay in OUTDIR: :class:`kimi_chat.data.report.DatasetReport` reads them), and the manifest
    it wrote."""

    rows: int = 0
    samples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    errors: int = 0
    driver_cpu_seconds: float = 0.0
    """CPU time of the process that ran the engine (the workers' own is each shard's ``cpu_seconds``)."""
    shards: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _sample_id(row: Mapping[str, Any] | None, index: int) -> str:
    if isinstance(row, Mapping) and row.get("id") is not None:
        return str(row["id"])
    return str(index)


def finding_dicts(findings: Iterable[Any], line_of: Callable[[int | None], int | None] | None = None) -> list[dict[str, Any]]:
    """The batch core's findings as plain dicts, each with ``line`` (the 1-based input line of its row, where
    the input has lines; else ``None``)."""
    out = []
    for f in findings:
        d = dict(f.to_dict())
        d["line"] = line_of(d.get("row")) if line_of is not None else None
        out.append(d)
    return out


def _where(chunk: Chunk, row: int) -> str:
    k = row - chunk.first_row
    r = chunk.rows[k] if 0 <= k < len(chunk.rows) else None
    line = chunk.line_of(row)
    return f"row {row}" + (f" (line {line})" if line is not None else "") + f", sample_id {_sample_id(r, row)!r}"


# ------------------------------------------------------------------------------------------ the worker side

_SLOTS: Any = None
_SLOT: int = -1


_SOURCES: dict[tuple[str, str, int], Source] = {}
"""This worker's open inputs (a ``datasets`` directory is opened once per process, not once per chunk)."""


def _init_worker(slots: Any, counter: Any, options: RenderOptions | None = None) -> None:
    """Process-pool initializer: claim a slot of ``slots`` (where this worker says which rows it is on) and
    load the tokenizer of ``options`` (once per worker, before its first chunk)."""
    global _SLOTS, _SLOT
    _SLOTS = slots
    with counter.get_lock():
        _SLOT = counter.value
        counter.value += 1
    if options is not None:
        options.tokenizer.load()


def _worker_source(source: Source) -> Source:
    key = (source.name, source.kind, source.chunk_rows)
    if key not in _SOURCES:
        _SOURCES[key] = source
    return _SOURCES[key]


def render_entry(options: RenderOptions, source: Source, entry: Mapping[str, int], outdir: str,
                 fingerprint: str) -> dict[str, Any]:
    """Read the chunk of plan record ``entry`` from ``source`` (in this process), render it and write it as a
    shard of ``outdir``: :func:`render_chunk` of the chunk read here; its ``cpu_seconds`` count the reading."""
    cpu = time.process_time()
    chunk = _worker_source(source).read_chunk(entry)
    record = render_chunk(options, chunk, outdir, fingerprint)
    record["cpu_seconds"] = round(time.process_time() - cpu, 3)
    return record


def _mark(first: int, count: int) -> None:
    if _SLOTS is not None and _SLOT >= 0:
        _SLOTS[2 * _SLOT] = first
        _SLOTS[2 * _SLOT + 1] = count


def _render_rows(options: RenderOptions, chunk: Chunk) -> tuple[list[Any], list[Any]]:
    """Batches and findings of a chunk's readable rows, ``RUN_ROWS`` at a time."""
    batches, findings = [], []
    for first, rows in chunk.runs():
        for k in range(0, len(rows), RUN_ROWS):
            part = rows[k : k + RUN_ROWS]
            _mark(first + k, len(part))
            try:
                result = options.render(part, first_row=first + k)
            except Exception as e:  # noqa: BLE001 - named with its row below, then raised
                raise PipelineError(_locate(options, chunk, first + k, part, e)) from None
            batches.append(result.batch)
            findings.extend(result.findings)
    _mark(-1, 0)
    return batches, findings


def _locate(options: RenderOptions, chunk: Chunk, first: int, rows: list[Any], error: Exception) -> str:
    """The message of ``error``, raised by the core on ``rows`` (input rows ``first`` on), naming the row."""
    for k, row in enumerate(rows):
        try:
            options.render([row], first_row=first + k)
        except Exception as e:  # noqa: BLE001
            return f"{_where(chunk, first + k)}: {type(e).__name__}: {e}"
    return f"rows {first}..{first + len(rows) - 1}: {type(error).__name__}: {error}"


def render_chunk_data(options: RenderOptions, chunk: Chunk) -> tuple[list[Any], list[dict[str, Any]], dict[str, Any]]:
    """Render one chunk: its sample batches, its findings (plain dicts: the unreadable rows and the core's), and
    its record (index, first_row, rows, samples, tokens, trained_tokens, errors)."""
    import pyarrow.compute as pc

    if options.on_error == "raise" and chunk.bad:
        first_bad = chunk.bad[0]
        k = first_bad.row - chunk.first_row
        _render_rows(options, Chunk(chunk.index, chunk.first_row, chunk.rows[:k], [], chunk.lines[:k]))
        raise PipelineError(f"{_where(chunk, first_bad.row)}: {first_bad.message}")
    batches, core_findings = _render_rows(options, chunk)
    findings = [{"kind": "bad_row", "row": b.row, "sample_id": str(b.row), "message": b.message, "path": None,
                 "count": 1, "line": b.line} for b in chunk.bad]
    findings += finding_dicts(core_findings, chunk.line_of)
    findings.sort(key=lambda d: (d.get("row") is None, d.get("row") or 0))
    samples = sum(b.num_rows for b in batches)
    tokens = sum(int(pc.sum(b.column("length")).as_py() or 0) for b in batches if b.num_rows)
    trained = sum(int(pc.sum(pc.list_flatten(b.column("assistant_masks"))).as_py() or 0) for b in batches if b.num_rows)
    errors = sum(1 for f in findings if f["kind"] == "bad_row")
    record = {"index": chunk.index, "file": parquet.shard_name(chunk.index), "first_row": chunk.first_row,
              "rows": chunk.size, "samples": samples, "tokens": tokens, "trained_tokens": trained, "errors": errors}
    return batches, findings, record


def render_chunk(options: RenderOptions, chunk: Chunk, outdir: str, fingerprint: str) -> dict[str, Any]:
    """Render one chunk and write it as a shard of ``outdir`` (findings first, then the shard); returns the
    shard's record."""
    out = Path(outdir)
    cpu = time.process_time()
    batches, findings, record = render_chunk_data(options, chunk)
    record["cpu_seconds"] = round(time.process_time() - cpu, 3)  # this worker's CPU time on the chunk
    parquet.write_findings(out, chunk.index, findings)
    parquet.write_shard(out, chunk.index, batches, fingerprint, record)
    return record


# ------------------------------------------------------------------------------------------ the driver side


def _mp_context() -> Any:
    """The start method of the worker processes: a fork server that has imported the batch core once (each
    worker starts in milliseconds, and no thread of this process is forked), else spawn. Preloaded too: what
    a worker's first chunk would import (pyarrow imports pandas, when installed, on its first record batch;
    the fork server skips a module that is not installed)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([batch.__name__, __name__, "pyarrow", "pyarrow.parquet", "pandas", "tiktoken"])
        return ctx
    return multiprocessing.get_context("spawn")  # pragma: no cover - Windows


def _pin_crash(options: RenderOptions, rows: list[tuple[Chunk, int]]) -> str | None:
    """Render each of ``rows`` (chunk, row number) alone in a fresh process; where that process dies, name the row."""
    ex = ProcessPoolExecutor(1, mp_context=_mp_context())
    try:
        for chunk, row in rows:
            r = chunk.rows[row - chunk.first_row]
            if r is None:
                continue
            try:
                ex.submit(options.render, [r], row).result()
            except BrokenProcessPool:
                return _where(chunk, row)
            except Exception:  # noqa: BLE001 - an ordinary error there is not the crash
                continue
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    return None


def _in_hand(slots: Any, source: Source,
             pending: Mapping[Future[Any], Mapping[str, int]]) -> list[tuple[Chunk, int]]:
    """The rows the workers said they were on, with their chunks (read again here, from the input)."""
    out = []
    for s in range(len(slots) // 2):
        first, count = slots[2 * s], slots[2 * s + 1]
        if first < 0:
            continue
        for entry in pending.values():
            if entry["first_row"] <= first < entry["first_row"] + source.chunk_rows:
                chunk = source.read_chunk(entry)
                out += [(chunk, r) for r in range(first, first + count)]
    return out


def run_local(
    source: Source,
    outdir: str | Path,
    options: RenderOptions,
    *,
    workers: int | None = None,
    resume: bool = False,
    progress: bool = True,
) -> RunResult:
    """Render ``source`` into ``outdir`` with ``workers`` processes (default: the cores; 1 renders in this
    process). ``resume``: keep the shards an interrupted run of the same options finished. ``progress``: a
    tqdm bar on stderr where it is a terminal (conversations/s, tokens/s)."""
    from tqdm.auto import tqdm

    out = Path(outdir)
    workers = workers or default_workers()
    if workers < 1:
        raise ValueError(f"workers={workers}: give at least 1")
    fingerprint = options.fingerprint(f"chunk_rows={source.chunk_rows}")
    done = prepare_outdir(out, fingerprint, resume)
    started = time.perf_counter()
    driver_cpu = time.process_time()
    result = RunResult()
    records: dict[int, dict[str, Any]] = dict(done)
    total = source.num_rows()
    bar = tqdm(total=total, unit="conv", desc="prepare", disable=True if not progress else None, dynamic_ncols=True)
    tokens_done = 0

    def finished(rec: dict[str, Any]) -> None:
        nonlocal tokens_done
        records[rec["index"]] = rec
        tokens_done += rec["tokens"]
        bar.update(rec["rows"])
        elapsed = max(time.perf_counter() - started, 1e-9)
        bar.set_postfix_str(f"{tokens_done / elapsed:,.0f} tok/s", refresh=False)

    for rec in done.values():
        bar.update(rec["rows"])
    try:
        if workers == 1:
            for chunk in source.chunks(frozenset(done)):
                if chunk.index not in done:
                    finished(render_chunk(options, chunk, str(out), fingerprint))
        else:
            _run_pool(options, source, frozenset(done), out, fingerprint, workers, finished)
    finally:
        bar.close()
    result.seconds = time.perf_counter() - started
    result.driver_cpu_seconds = time.process_time() - driver_cpu
    return finish_run(result, records, out, source, options, fingerprint, engine="local", workers=workers)


def finish_run(result: RunResult, records: Mapping[int, dict[str, Any]], out: Path, source: Source,
               options: RenderOptions, fingerprint: str, *, engine: str, workers: int) -> RunResult:
    """End a run of either engine: ``result`` given the shards' ``records`` (by chunk index, in order), their
    totals and the findings' counts read back from ``out``, and the manifest written there last (a
    directory with a manifest holds a finished run). Returns ``result``."""
    result.shards = [records[i] for i in sorted(records)]
    result.totals = totals_by_kind(parquet.read_findings(out, records))
    for rec in result.shards:
        result.rows += rec["rows"]
        result.samples += rec["samples"]
        result.tokens += rec["tokens"]
        result.trained_tokens += rec["trained_tokens"]
        result.errors += rec["errors"]
    result.manifest = manifest(source.name, options, fingerprint, result, engine=engine, workers=workers)
    parquet.write_manifest(out, result.manifest)
    return result


def _run_pool(options: RenderOptions, source: Source, skip: frozenset[int], out: Path, fingerprint: str,
              workers: int, finished: Callable[[dict[str, Any]], None]) -> None:
    """Each chunk of ``source`` (but ``skip``) rendered by a worker that reads it itself (:func:`render_entry`)."""
    ctx = _mp_context()
    slots = ctx.Array("q", [-1, 0] * workers, lock=False)
    counter = ctx.Value("i", 0)
    pending: dict[Future[Any], Mapping[str, int]] = {}
    ex = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(slots, counter, options))

    def collect(block: bool) -> None:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED, timeout=None if block else 0)
        for fut in done:
            try:
                rec = fut.result()
            except BrokenProcessPool:
                raise  # handled below, with every chunk in hand still pending
            del pending[fut]
            finished(rec)

    try:
        for entry in source.iter_plan(skip):
            while len(pending) >= 2 * workers:
                collect(True)
            pending[ex.submit(render_entry, options, source, entry, str(out), fingerprint)] = entry
            collect(False)
        while pending:
            collect(True)
    except BrokenProcessPool:
        ex.shutdown(wait=False, cancel_futures=True)
        in_hand = _in_hand(slots, source, pending)
        where = _pin_crash(options, in_hand) if in_hand else None
        rows = (f"{where}" if where else "rows " + ", ".join(
            f"{e['first_row']}..{e['first_row'] + source.chunk_rows - 1}" for e in pending.values()))
        raise PipelineError(f"a worker process died while rendering {rows}; the shards finished so far are kept: "
                            "fix or remove that row and run again with --resume") from None
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def prepare_outdir(out: Path, fingerprint: str, resume: bool) -> dict[int, dict[str, Any]]:
    """Make ``out`` ready for a run of ``fingerprint``: an empty or new directory, or with ``resume`` one holding
    shards of the same run (returned by index: their records), its old manifest removed. An
    :class:`~.parquet.OutputError` names the fix otherwise."""
    if out.exists() and not out.is_dir():
        raise parquet.OutputError(f"{out}: exists and is not a directory (give a directory for the shards)")
    out.mkdir(parents=True, exist_ok=True)
    has_manifest = (out / parquet.MANIFEST).exists()
    shards = list(out.glob("shard-*.parquet"))
    if not resume:
        if has_manifest or shards:
            raise parquet.OutputError(
                f"{out}: holds the output of {'a finished' if has_manifest else 'an unfinished'} run: "
                f"{'write to an empty directory' if has_manifest else 'continue it with --resume'}, "
                "or remove it first")
        return {}
    done = parquet.finished_shards(out, fingerprint)
    if has_manifest:
        (out / parquet.MANIFEST).unlink()  # rewritten at the end of this run
    return done


def manifest(input_name: str, options: RenderOptions, fingerprint: str, result: RunResult, *, engine: str,
             workers: int) -> dict[str, Any]:
    """The manifest of a run (what ``kimi-chat data-report`` reads back)."""
    from .. import __version__
    return {
        "format": "kimi-chat samples",
        "kimi_chat": __version__,
        "input": input_name,
        "fingerprint": fingerprint,
        "engine": engine,
        "workers": workers,
        "options": options.settings(),
        "rows": result.rows,
        "samples": result.samples,
        "tokens": result.tokens,
        "trained_tokens": result.trained_tokens,
        "errors": result.errors,
        "findings": result.totals,
        "shards": result.shards,
    }
