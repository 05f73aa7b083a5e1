"""Reading the pipeline's inputs: JSONL, Parquet and ``datasets`` directories, streamed in chunks with the right
row numbers (and line numbers for JSONL), unreadable lines kept as bad rows, and random access by chunk for the
Ray engine giving the same chunks as the stream."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")

from data_pipeline_support import conversations, write_jsonl, write_parquet  # noqa: E402

from kimi_chat.data.sources import SourceError, normalize_row, open_source  # noqa: E402


def _ids(chunk):
    return [None if r is None else r.get("id", "?") for r in chunk.rows]


def test_jsonl_rows_are_numbered_without_blank_lines_and_bad_lines_are_kept(tmp_path):
    rows = conversations(5)
    path = write_jsonl(tmp_path / "in.jsonl", [rows[0], "", "{not json", rows[1], "7", rows[2], rows[3], rows[4]])
    src = open_source(path, chunk_rows=3)
    assert src.kind == "jsonl"
    chunks = list(src.chunks())
    # 7 non-blank lines -> rows 0..6, in chunks of 3
    assert [(c.index, c.first_row, c.size) for c in chunks] == [(0, 0, 3), (1, 3, 3), (2, 6, 1)]
    assert _ids(chunks[0]) == ["conv-0", None, "conv-1"]
    assert chunks[0].lines == [1, 3, 4]  # line 2 is blank
    bad = chunks[0].bad + chunks[1].bad
    assert [(b.row, b.line) for b in bad] == [(1, 3), (3, 5)]
    assert bad[0].message.startswith("invalid JSON")
    assert "got int" in bad[1].message
    assert chunks[0].line_of(2) == 4 and chunks[1].line_of(4) == 6
    # the readable stretches the batch core gets, with their first row numbers
    assert [(first, [r["id"] for r in rs]) for first, rs in chunks[0].runs()] == [(0, ["conv-0"]), (2, ["conv-1"])]


def test_jsonl_random_access_gives_the_streamed_chunks(tmp_path):
    rows = conversations(8)
    path = write_jsonl(tmp_path / "in.jsonl", [rows[0], "", "[]", *rows[1:6], "", "oops", *rows[6:]])
    src = open_source(path, chunk_rows=3)
    streamed = list(src.chunks())
    plan = src.plan()
    assert [e["index"] for e in plan] == [c.index for c in streamed]
    for entry, c in zip(plan, streamed):
        again = src.read_chunk(entry)
        assert (again.first_row, again.rows, again.lines, again.bad) == (c.first_row, c.rows, c.lines, c.bad)


def test_skipped_chunks_are_counted_but_not_parsed(tmp_path):
    rows = conversations(7)
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    chunks = list(open_source(path, chunk_rows=3).chunks(skip=frozenset({0, 2})))
    assert [(c.index, c.first_row, c.size) for c in chunks] == [(0, 0, 0), (1, 3, 3), (2, 6, 0)]
    assert _ids(chunks[1]) == ["conv-3", "conv-4", "conv-5"]


@pytest.mark.parametrize("as_json", [True, False], ids=["json-strings", "nested"])
def test_parquet_rows_read_back_as_written(tmp_path, as_json):
    rows = conversations(7)
    path = write_parquet(tmp_path / "in.parquet", rows, as_json=as_json)  # row groups of 3
    src = open_source(path, chunk_rows=4)
    assert src.kind == "parquet" and src.num_rows() == 7
    chunks = list(src.chunks())
    assert [(c.first_row, c.size) for c in chunks] == [(0, 4), (4, 3)]
    # nested columns: the keys Arrow adds to every message (None where a message had none) are dropped again
    assert [r for c in chunks for r in c.rows] == rows
    assert [src.read_chunk(e).rows for e in src.plan()] == [c.rows for c in chunks]


def test_datasets_directory_is_read_in_order(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = conversations(5)
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    src = open_source(tmp_path / "ds", chunk_rows=2)
    assert src.kind == "datasets" and src.num_rows() == 5
    chunks = list(src.chunks())
    assert [r for c in chunks for r in c.rows] == rows
    assert [src.read_chunk(e).rows for e in src.plan()] == [c.rows for c in chunks]


def test_inputs_that_cannot_be_read_are_named(tmp_path):
    with pytest.raises(SourceError, match="no such file"):
        open_source(tmp_path / "missing.jsonl")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "t.parquet")
    with pytest.raises(SourceError, match="no 'messages' column"):
        list(open_source(tmp_path / "t.parquet").chunks())


def test_normalize_row_parses_json_columns_and_drops_arrow_nulls():
    msgs = [{"role": "user", "content": "hi", "tool_calls": None}]
    assert normalize_row({"messages": json.dumps(msgs), "tools": None, "id": None}) == {
        "messages": [{"role": "user", "content": "hi"}]}
    # a string that is not JSON stays for the batch core to refuse, naming the field
    assert normalize_row({"messages": "not json"})["messages"] == "not json"
