"""The output directory of ``kimi-chat prepare``: sharded Parquet (written with pyarrow), the findings of each
shard, and a manifest written last.

Layout of ``OUTDIR``::

    shard-00000.parquet ...      the samples (the columns of kimi_chat.data.batch.SCHEMA), one file per chunk
                                 of input rows; file metadata: the run's fingerprint and the shard's counts
    _findings/shard-00000.jsonl  the findings of that chunk (one JSON object a line), written before its shard
    _manifest.json               written last: the options, the fingerprint, every shard, the totals

The names starting with ``_`` (and the temporary ``.NAME.tmp``) are what Parquet readers skip, so the directory
reads as one dataset: ``pyarrow.parquet.read_table(OUTDIR)``, ``datasets.load_dataset("parquet",
data_dir=OUTDIR)``, ``ray.data.read_parquet(OUTDIR)``.

Nothing half-written looks finished: every file is written under a temporary name (``.NAME.tmp``) and renamed
when complete (:func:`atomic_write`), a shard's findings before the shard itself, the manifest after every
shard. A shard file that exists is finished, which is what ``--resume`` relies on; a run is finished when its
manifest exists.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "MANIFEST", "FINDINGS_DIR", "FINGERPRINT_KEY", "SHARD_KEY", "shard_name", "atomic_write", "write_shard",
    "shard_info", "finished_shards", "write_findings", "read_findings", "write_manifest", "read_manifest",
    "sample_files", "OutputError",
]

MANIFEST = "_manifest.json"
FINDINGS_DIR = "_findings"
FINGERPRINT_KEY = b"kimi_chat.fingerprint"
"""Parquet file-metadata key of the run's fingerprint (:meth:`kimi_chat.data.options.RenderOptions.fingerprint`)."""
SHARD_KEY = b"kimi_chat.shard"
"""Parquet file-metadata key of the shard's own record (JSON: index, first_row, rows, samples, tokens, ...)."""


class OutputError(ValueError):
    """The output directory cannot be used as asked (a finished run there, another run's shards); the
    message names the fix."""


def shard_name(index: int) -> str:
    """The file name of shard ``index``."""
    return f"shard-{index:05d}.parquet"


@contextmanager
def atomic_write(path: Path) -> Iterator[BinaryIO]:
    """Write ``path`` through a temporary file beside it, renamed over ``path`` only when the block ends
    without an error (the temporary file is removed otherwise)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_shard(outdir: Path, index: int, batches: Iterable[Any], fingerprint: str, record: Mapping[str, Any]) -> Path:
    """Write the samples ``batches`` (``pyarrow.RecordBatch`` of the batch core's schema) as shard ``index``,
    with ``fingerprint`` and ``record`` in the file metadata; returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .batch import SCHEMA

    schema = SCHEMA.with_metadata({**(SCHEMA.metadata or {}), FINGERPRINT_KEY: fingerprint.encode(),
                                   SHARD_KEY: json.dumps(dict(record)).encode()})
    table = pa.Table.from_batches([b.cast(SCHEMA) if b.schema != SCHEMA else b for b in batches], schema=SCHEMA)
    path = outdir / shard_name(index)
    with atomic_write(path) as f:
        pq.write_table(table.replace_schema_metadata(schema.metadata), f)
    return path


def shard_info(path: Path) -> tuple[str | None, dict[str, Any]]:
    """``(fingerprint, record)`` from a shard's file metadata (``None`` / ``{}`` where absent)."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    fp = meta.get(FINGERPRINT_KEY)
    rec = meta.get(SHARD_KEY)
    return (fp.decode() if fp else None), (json.loads(rec) if rec else {})


def finished_shards(outdir: Path, fingerprint: str) -> dict[int, dict[str, Any]]:
    """The shards already in ``outdir`` by index (their records), checked to be of the run ``fingerprint``;
    a shard of another run is an :class:`OutputError`."""
    done: dict[int, dict[str, Any]] = {}
    for p in sorted(outdir.glob("shard-*.parquet")):
        fp, rec = shard_info(p)
        if fp != fingerprint:
            raise OutputError(
                f"{p}: written by a run with other options or another kimi_chat/tokenizer (fingerprint {fp}, "
                f"this run {fingerprint}): resume with the same options, or write to an empty directory")
        done[int(rec["index"])] = rec
    return done


def write_findings(outdir: Path, index: int, findings: Iterable[Mapping[str, Any]]) -> None:
    """Write shard ``index``'s findings (plain dicts) as JSON lines."""
    d = outdir / FINDINGS_DIR
    d.mkdir(exist_ok=True)
    with atomic_write(d / f"shard-{index:05d}.jsonl") as f:
        for item in findings:
            f.write(json.dumps(item, ensure_ascii=False).encode() + b"\n")


def read_findings(outdir: Path, indices: Iterable[int] | None = None, *, internal: bool = False) -> Iterator[dict[str, Any]]:
    """The findings saved in ``outdir`` (of the shards ``indices``, or all), shard by shard; ``internal``: also
    the engine's own records kept there (a kind starting with ``_``), which are no findings."""
    d = outdir / FINDINGS_DIR
    paths = (sorted(d.glob("*.jsonl")) if indices is None
             else [d / f"shard-{i:05d}.jsonl" for i in sorted(indices)])
    for p in paths:
        if not p.is_file():
            continue
        with open(p, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    item = json.loads(line)
                    if internal or not str(item.get("kind", "")).startswith("_"):
                        yield item


def write_manifest(outdir: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest.json`` (last: its presence means the run finished)."""
    with atomic_write(outdir / MANIFEST) as f:
        f.write(json.dumps(manifest, indent=1, ensure_ascii=False).encode() + b"\n")


def read_manifest(outdir: Path) -> dict[str, Any]:
    """The manifest of a finished run in ``outdir``; an :class:`OutputError` naming what is wrong otherwise."""
    p = outdir / MANIFEST
    if not outdir.is_dir():
        raise OutputError(f"{outdir}: no such directory (give the OUTDIR of a `kimi-chat prepare` run)")
    if not p.is_file():
        if any(outdir.glob("shard-*.parquet")):
            raise OutputError(f"{outdir}: the run there did not finish (no {MANIFEST}): finish it with "
                              "`kimi-chat prepare ... --resume`")
        raise OutputError(f"{outdir}: no {MANIFEST} (give the OUTDIR of a `kimi-chat prepare` run)")
    return dict(json.loads(p.read_text(encoding="utf-8")))


def sample_files(outdir: Path) -> list[Path]:
    """The Parquet files of samples in ``outdir`` (the local engine's shards or Ray Data's files)."""
    return sorted(p for p in outdir.glob("*.parquet") if not p.name.startswith("."))
