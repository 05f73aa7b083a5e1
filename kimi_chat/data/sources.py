"""Reading conversations for the data pipeline, streamed: JSONL, Parquet, or a ``datasets`` ``save_to_disk``
directory, in chunks of rows (memory bounded by the chunk, however large the input).

A row is ``{"messages": [...], "tools": [...], "id": ...}`` (``tools`` and ``id`` optional; Kimi-K3 rows may add
``image_prompts``, one per image: :mod:`kimi_chat.data.image_prompts`). Rows are
numbered from 0 in input order: in JSONL the non-blank lines (blank lines are no rows), in Parquet and
``datasets`` the table rows. That number is a sample's default ``sample_id`` and the ``row`` of a finding;
for JSONL each chunk also knows every row's 1-based line number, which the report prints.

Nested columns: Parquet / Arrow store a list of messages as a list of structs whose fields are the union
of every row's keys, a missing key read back as ``None``. :func:`normalize_row` drops those ``None`` keys (as
transformers' own ``apply_chat_template`` normalisation drops ``None``-valued keys) and parses a column held
as a JSON string (``messages`` / ``tools`` written with ``json.dumps``, the exact way to store tool
schemas, whose keys differ from tool to tool).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Chunk", "BadRow", "SourceError", "open_source", "normalize_row", "Source", "struct_json_fields",
           "warn_struct_json_fields"]

ROW_FIELDS = ("messages", "tools", "id", "image_prompts")
"""The columns a row is read from (others are not read): ``image_prompts`` is Kimi-K3's, one per image
(:mod:`kimi_chat.data.image_prompts`)."""

DEFAULT_CHUNK_ROWS = 2000
"""Rows per chunk (one output shard each) when the caller does not say."""


class SourceError(ValueError):
    """The input cannot be read at all (missing, unknown format, no ``messages`` column); the message says why."""


@dataclass(frozen=True)
class BadRow:
    """A row that could not be read as a conversation (invalid JSON, not an object): ``row`` its number,
    ``line`` its 1-based line (JSONL), ``message`` what is wrong."""

    row: int
    line: int | None
    message: str


@dataclass
class Chunk:
    """Consecutive rows ``first_row .. first_row + size - 1`` of the input. ``rows[k]`` is row
    ``first_row + k`` as a mapping, or ``None`` where it is one of ``bad`` (unreadable); ``lines[k]`` its
    1-based line number (JSONL; empty otherwise)."""

    index: int
    first_row: int
    rows: list[Mapping[str, Any] | None]
    bad: list[BadRow] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.rows)

    def line_of(self, row: int | None) -> int | None:
        """The 1-based line of input row ``row`` when this chunk holds it and the source has lines."""
        if row is None or not self.lines:
            return None
        k = row - self.first_row
        return self.lines[k] if 0 <= k < len(self.lines) else None

    def runs(self) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
        """``(first_row, rows)`` of each stretch of readable rows (what the batch core takes at once)."""
        start: int | None = None
        for k, r in enumerate(self.rows + [None]):
            if r is not None and start is None:
                start = k
            elif r is None and start is not None:
                yield self.first_row + start, self.rows[start:k]  # type: ignore[misc]
                start = None


_VERBATIM = frozenset({"arguments", "parameters"})
"""Keys whose values JSON text gives verbatim: tool-call arguments and a tool's parameter schema, where a ``null``
is data (``{"city": null}`` is what the model wrote; ``"default": null`` is part of the schema)."""


def _drop_none(value: Any, from_json: bool) -> Any:
    """``value`` without its ``None``-valued keys; ``from_json`` (parsed from JSON text, where a key is only there
    when written): except inside (and at) the :data:`_VERBATIM` keys."""
    if isinstance(value, dict):
        return {k: v if from_json and k in _VERBATIM else _drop_none(v, from_json)
                for k, v in value.items() if v is not None or (from_json and k in _VERBATIM)}
    if isinstance(value, list):
        return [_drop_none(v, from_json) for v in value]
    return value


def normalize_row(row: Mapping[str, Any], *, from_json: bool = False) -> dict[str, Any]:
    """A row as the batch core takes it: ``messages`` / ``tools`` given as JSON strings parsed, and
    ``None``-valued keys inside them dropped (how Arrow reads back a key a message did not have); a ``None``
    ``tools`` or ``id`` removed. Anything else is left for the core to judge (and report).

    A value parsed from JSON text (a JSON-string column, or ``from_json``: the row is a parsed JSONL line) keeps
    the ``null`` values of tool-call ``arguments`` and of tool ``parameters`` (there a ``null`` was written, not
    added by Arrow): ``{"city": null}`` stays the arguments the model wrote."""
    out = dict(row)
    for key in ("messages", "tools"):
        v = out.get(key)
        parsed = from_json
        if isinstance(v, (str, bytes)):
            try:
                v = json.loads(v)
                parsed = True
            except ValueError:
                pass  # left as the string: the core reports the wrong type with the field's name
        if v is None:
            out.pop(key, None)
            continue
        out[key] = _drop_none(v, parsed)
    for key in ("id", "image_prompts"):
        if out.get(key) is None:
            out.pop(key, None)
    return out


class Source:
    """An input of the pipeline: :meth:`chunks` streams it in chunks of ``chunk_rows`` rows. ``kind`` is
    ``"jsonl"``, ``"parquet"`` or ``"datasets"``; ``name`` the path as given."""

    def __init__(self, path: str | Path, kind: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.path = Path(path)
        self.name = str(path)
        self.kind = kind
        self.chunk_rows = chunk_rows

    def num_rows(self) -> int | None:
        """The number of rows when known without reading the data (Parquet, ``datasets``), else ``None``."""
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            return sum(pq.ParquetFile(p).metadata.num_rows for p in self._parquet_files())
        if self.kind == "datasets":
            return len(self._dataset())
        return None

    def warn_struct_columns(self) -> None:
        """:func:`warn_struct_json_fields` for each Parquet file's schema or the dataset's (JSONL has no
        schema: its values are read as written)."""
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            for p in self._parquet_files():
                warn_struct_json_fields(pq.read_schema(p), str(p))
        elif self.kind == "datasets":
            warn_struct_json_fields(self._dataset().data.schema, self.name)

    def chunks(self, skip: frozenset[int] = frozenset()) -> Iterator[Chunk]:
        """The input in chunks of :attr:`chunk_rows` rows, in order; chunks whose index is in ``skip``
        (finished by an earlier run) are counted past without parsing their rows (``rows`` left empty)."""
        if self.kind == "jsonl":
            yield from self._jsonl_chunks(skip)
        elif self.kind == "parquet":
            yield from self._arrow_chunks(self._parquet_batches(), skip)
        else:
            yield from self._arrow_chunks(self._dataset().with_format("arrow").iter(batch_size=self.chunk_rows), skip)

    # ---------------------------------------------------------------- random access (the Ray engine)

    def plan(self) -> list[dict[str, int]]:
        """One small record per chunk, enough for :meth:`read_chunk` to read that chunk alone (in another
        process or on another machine that sees the same path): ``index``, ``first_row``, and for JSONL the
        byte ``offset`` and ``line`` of its first row (found by one pass over the file, without parsing it)."""
        return list(self.iter_plan())

    def iter_plan(self, skip: frozenset[int] = frozenset()) -> Iterator[dict[str, int]]:
        """The records of :meth:`plan`, streamed while the file is scanned (a JSONL file is read as lines, never
        parsed: the workers that :meth:`read_chunk` parse it), less those whose index is in ``skip``."""
        n = self.chunk_rows
        if self.kind != "jsonl":
            total = self.num_rows() or 0
            yield from ({"index": k, "first_row": k * n} for k in range((total + n - 1) // n) if k not in skip)
            return
        row = 0
        offset = 0
        with open(self.path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.isspace():
                    if row % n == 0 and row // n not in skip:
                        yield {"index": row // n, "first_row": row, "offset": offset, "line": lineno}
                    row += 1
                offset += len(raw)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without an opened ``datasets`` dataset: each process opens its own."""
        return {k: v for k, v in self.__dict__.items() if k != "_ds"}

    def read_chunk(self, entry: Mapping[str, int]) -> Chunk:
        """The chunk of a :meth:`plan` record."""
        index, first = int(entry["index"]), int(entry["first_row"])
        n = self.chunk_rows
        if self.kind == "jsonl":
            rows: list[Mapping[str, Any] | None] = []
            bad: list[BadRow] = []
            lines: list[int] = []
            with open(self.path, "rb") as f:
                f.seek(int(entry["offset"]))
                for lineno, raw in enumerate(f, int(entry["line"])):
                    if len(rows) == n:
                        break
                    if not raw.strip():
                        continue
                    parsed = _parse_line(raw, first + len(rows), lineno)
                    if isinstance(parsed, BadRow):
                        bad.append(parsed)
                        rows.append(None)
                    else:
                        rows.append(parsed)
                    lines.append(lineno)
            return Chunk(index, first, rows, bad, lines)
        if self.kind == "datasets":
            ds = self._dataset()
            table = ds.with_format("arrow")[first : first + n]
            return Chunk(index, first, [normalize_row(r) for r in table.to_pylist()])
        return self._parquet_chunk(index, first, n)

    def _parquet_chunk(self, index: int, first: int, n: int) -> Chunk:
        import pyarrow.parquet as pq

        pieces = []
        start = 0  # the global row number of the current row group's first row
        end = first + n
        for p in self._parquet_files():
            pf = pq.ParquetFile(p)
            cols = [c for c in ROW_FIELDS if c in pf.schema_arrow.names]
            for g in range(pf.metadata.num_row_groups):
                size = pf.metadata.row_group(g).num_rows
                if start < end and start + size > first:
                    t = pf.read_row_group(g, columns=cols)
                    lo, hi = max(first - start, 0), min(end - start, size)
                    pieces.append(t.slice(lo, hi - lo))
                start += size
                if start >= end:
                    break
            if start >= end:
                break
        rows: list[Mapping[str, Any] | None] = []
        for t in pieces:
            rows += [normalize_row(r) for r in t.to_pylist()]
        return Chunk(index, first, rows)

    # ---------------------------------------------------------------- JSONL

    def _jsonl_chunks(self, skip: frozenset[int]) -> Iterator[Chunk]:
        n = self.chunk_rows
        index, row = 0, 0
        rows: list[Mapping[str, Any] | None] = []
        bad: list[BadRow] = []
        lines: list[int] = []
        with open(self.path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                if index not in skip:
                    parsed = _parse_line(raw, row, lineno)
                    if isinstance(parsed, BadRow):
                        bad.append(parsed)
                        rows.append(None)
                    else:
                        rows.append(parsed)
                    lines.append(lineno)
                row += 1
                if row % n == 0:
                    yield Chunk(index, row - n, rows, bad, lines)
                    index += 1
                    rows, bad, lines = [], [], []
        if row % n:
            yield Chunk(index, row - row % n, rows, bad, lines)

    # ---------------------------------------------------------------- Arrow-backed

    def _parquet_files(self) -> list[Path]:
        if self.path.is_dir():
            files = sorted(self.path.rglob("*.parquet"))
            if not files:
                raise SourceError(f"{self.name}: no .parquet files in this directory")
            return files
        return [self.path]

    def _parquet_batches(self) -> Iterator[Any]:
        import pyarrow.parquet as pq

        for p in self._parquet_files():
            pf = pq.ParquetFile(p)
            _check_columns(pf.schema_arrow.names, f"{p}")
            cols = [c for c in ROW_FIELDS if c in pf.schema_arrow.names]
            yield from pf.iter_batches(batch_size=self.chunk_rows, columns=cols)

    def _dataset(self) -> Any:
        if not hasattr(self, "_ds"):
            import datasets

            ds = datasets.load_from_disk(str(self.path))
            if isinstance(ds, datasets.DatasetDict):
                raise SourceError(f"{self.name}: a DatasetDict (splits {sorted(ds)}): give one split's directory, "
                                  f"e.g. {self.path / sorted(ds)[0]}")
            _check_columns(ds.column_names, self.name)
            self._ds = ds.select_columns([c for c in ROW_FIELDS if c in ds.column_names])
        return self._ds

    def _arrow_chunks(self, batches: Iterator[Any], skip: frozenset[int]) -> Iterator[Chunk]:
        """Re-cut Arrow batches (whatever sizes the reader gives) into chunks of exactly ``chunk_rows``."""
        import pyarrow as pa

        n = self.chunk_rows
        pending: list[Any] = []
        have = 0
        index = 0
        for b in batches:
            if isinstance(b, pa.Table):
                b = b.combine_chunks().to_batches()[0] if b.num_rows else None
            if b is None or b.num_rows == 0:
                continue
            pending.append(b)
            have += b.num_rows
            while have >= n:
                table = pa.Table.from_batches(pending)
                yield self._chunk(index, table.slice(0, n), skip)
                index += 1
                rest = table.slice(n)
                pending = rest.to_batches() if rest.num_rows else []
                have = rest.num_rows
        if have:
            yield self._chunk(index, pa.Table.from_batches(pending), skip)

    def _chunk(self, index: int, table: Any, skip: frozenset[int]) -> Chunk:
        first = index * self.chunk_rows
        if index in skip:
            return Chunk(index, first, [])
        return Chunk(index, first, [normalize_row(r) for r in table.to_pylist()])


_JSON_VALUED = ("arguments", "parameters")
"""Fields whose value is a JSON object written by someone (the model's call arguments, a tool's schema): its
keys' order and its nulls are data (the prompt writes them as they are)."""


def struct_json_fields(schema: Any) -> list[str]:
    """The paths (``messages[].tool_calls[].function.arguments``) of the fields of :data:`_JSON_VALUED` that the
    Arrow ``schema`` (of the row columns) holds as structs. A struct column has one key order for every row
    (the union of the rows' keys, in the order first seen) and reads a key a row lacks as ``null``: each row's
    own order, and a ``null`` it wrote, are gone before kimi_chat reads it."""
    import pyarrow as pa

    found: list[str] = []

    def walk(t: Any, path: str) -> None:
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(t.value_type, path + "[]")
        elif pa.types.is_struct(t):
            for f in t:
                sub = f"{path}.{f.name}"
                if f.name in _JSON_VALUED and pa.types.is_struct(f.type):
                    found.append(sub)
                else:
                    walk(f.type, sub)

    for name in ("messages", "tools"):
        if name in schema.names:
            walk(schema.field(name).type, name)
    return found


def warn_struct_json_fields(schema: Any, where: str) -> None:
    """A ``UserWarning`` naming ``where``'s :func:`struct_json_fields`, if any, and the fix."""
    import warnings

    fields = struct_json_fields(schema)
    if fields:
        warnings.warn(
            f"{where}: {', '.join(fields)} stored as an Arrow struct: every row's keys come back in one order "
            "for the whole column and a key a row lacks as null, so the samples write them in that order, not as "
            "the model (or the tool's author) wrote them; store them as JSON strings (the OpenAI form: "
            "json.dumps of each value) to keep them exact", UserWarning, stacklevel=3)


def _check_columns(names: Sequence[str], where: str) -> None:
    if "messages" not in names:
        raise SourceError(f"{where}: no 'messages' column (columns: {', '.join(names) or 'none'}); each row "
                          "needs messages, optionally tools and id")


_BOM = b"\xef\xbb\xbf"


def _parse_line(raw: bytes, row: int, lineno: int) -> Mapping[str, Any] | BadRow:
    if lineno == 1 and raw.startswith(_BOM):  # a UTF-8 byte-order mark (Windows tools write one): not the row's
        raw = raw[len(_BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return BadRow(row, lineno, f"not valid UTF-8 at byte {e.start}")
    try:
        value = json.loads(text)
    except ValueError as e:
        return BadRow(row, lineno, f"invalid JSON: {e}")
    if isinstance(value, list):  # a bare list of messages, as `kimi-chat render` accepts
        value = {"messages": value}
    if not isinstance(value, dict):
        return BadRow(row, lineno, f"expected an object with 'messages', got {type(value).__name__}")
    return normalize_row(value, from_json=True)


def open_source(path: str | Path, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Source:
    """The :class:`Source` at ``path``: a ``datasets`` ``save_to_disk`` directory (it holds
    ``dataset_info.json`` / ``state.json``), a directory of Parquet files or a ``.parquet`` file, or else
    JSONL. Raises :class:`SourceError` when the path does not exist; warns (:func:`warn_struct_json_fields`)
    when the input holds call arguments or tool schemas as Arrow structs."""
    p = Path(path)
    if not p.exists():
        raise SourceError(f"{path}: no such file or directory")
    source = Source(p, _kind(p), chunk_rows)
    source.warn_struct_columns()
    return source


def _kind(p: Path) -> str:
    if p.is_dir():
        return "datasets" if (p / "state.json").is_file() or (p / "dataset_dict.json").is_file() else "parquet"
    if p.suffix == ".parquet":
        return "parquet"
    with open(p, "rb") as f:
        return "parquet" if f.read(4) == b"PAR1" else "jsonl"
