"""``kimi-chat prepare`` with the local engine and ``kimi-chat data-report``: the samples written are the batch
core's (and their prompts the official ones), every assistant message trained once, bad lines reported with
their line numbers and never lost, ``--on-error raise`` stops at the first, shards written atomically and
``--resume`` redoing none of the finished ones, a dying worker named with its row, the same samples from JSONL,
Parquet and ``datasets`` inputs and from 1 or 2 workers."""

from __future__ import annotations

import json
import os

import pytest

pa = pytest.importorskip("pyarrow", reason="the data pipeline needs pyarrow (pip install -e '.[data]' in the checkout)")
pytest.importorskip("tqdm")

from conftest import needs_reference  # noqa: E402
from data_pipeline_support import (CrashingOptions, batch_samples, conversations, read_samples,  # noqa: E402
                                   write_jsonl, write_parquet)

from kimi_chat.cli import main  # noqa: E402
from kimi_chat.data import parquet  # noqa: E402
from kimi_chat.data.options import RenderOptions  # noqa: E402
from kimi_chat.data.pipeline import PipelineError, run_local  # noqa: E402
from kimi_chat.data.sources import open_source  # noqa: E402

pytestmark = needs_reference  # the reference tokenizers

DIALECT = "kimi-k2.6"
BAD_TYPE = {"id": "wrong-type", "messages": [{"role": "user", "content": 3}]}


@pytest.fixture(scope="module")
def options():
    return RenderOptions.make(DIALECT)


@pytest.fixture(scope="module")
def rows():
    return conversations(7)


def _input(tmp_path, rows):
    """rows 0..8 on lines 1..11: a blank line 2, invalid JSON on line 3 (row 1), a wrong type on line 5 (row 3)."""
    return write_jsonl(tmp_path / "in.jsonl", [rows[0], "", "{not json", rows[1], BAD_TYPE, "", *rows[2:]])


def _good(rows):
    """(first_row, row) of the readable rows of :func:`_input`."""
    return [(0, rows[0]), (2, rows[1]), (3, BAD_TYPE)] + [(4 + k, r) for k, r in enumerate(rows[2:])]


def test_prepare_writes_the_batch_cores_samples_and_reports_bad_lines(tmp_path, rows, options, capsys):
    out = tmp_path / "out"
    status = main(["prepare", str(_input(tmp_path, rows)), "-d", DIALECT, "-o", str(out), "--workers", "1",
                   "--shard-rows", "4", "--report", str(tmp_path / "report.json")])
    assert status == 0
    expected = sorted((s for first, r in _good(rows) for s in batch_samples([r], options, first)),
                      key=lambda s: (s["sample_id"], s["turns"]))
    assert read_samples(out) == expected
    assert {s["sample_id"] for s in expected} == {f"conv-{i}" for i in range(7)}
    # three shards of 4 rows (9 rows), each with the run's fingerprint; the manifest last
    assert sorted(p.name for p in out.glob("*.parquet")) == [parquet.shard_name(i) for i in range(3)]
    manifest = json.loads((out / parquet.MANIFEST).read_text())
    assert {parquet.shard_info(out / parquet.shard_name(i))[0] for i in range(3)} == {manifest["fingerprint"]}
    assert (manifest["rows"], manifest["samples"], manifest["errors"]) == (9, len(expected), 2)
    assert manifest["tokens"] == sum(s["length"] for s in expected)
    assert not list(out.glob(".*"))  # no temporary file left
    report = json.loads((tmp_path / "report.json").read_text())
    (ds,) = report["datasets"]
    bad = [(f["row"], f["line"], f["sample_id"]) for f in ds["findings"] if f["kind"] == "bad_row"]
    assert bad == [(1, 3, "1"), (3, 5, "wrong-type")]
    wrong = next(f for f in ds["findings"] if f["sample_id"] == "wrong-type")
    assert "messages[0].content" in wrong["message"]  # the kimi_chat error names the field
    assert report["totals"]["bad_row"] == 2
    # K2.6's official rendering drops the reasoning of earlier turns: counted for every conversation
    assert {f["sample_id"] for f in ds["findings"] if f["kind"] == "reasoning_dropped"} == {f"conv-{i}" for i in range(7)}
    err = capsys.readouterr().err
    assert "line 3, row 1: invalid JSON" in err and "bad_row" in err


def test_trained_tokens_follow_the_official_prompts(tmp_path, rows):
    """Each sample starts with the official ids of the request that produced its first trained message (the
    reference template rendered by transformers, then the official encode), and every assistant message of the
    input is trained in exactly one sample."""
    pytest.importorskip("transformers")
    from kimi_chat.reference.oracle import render_official
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2.6")
    out = tmp_path / "out"
    assert main(["prepare", str(write_jsonl(tmp_path / "in.jsonl", rows[:3])), "-d", DIALECT, "-o", str(out),
                 "--workers", "1", "-q"]) == 0
    samples = read_samples(out)
    for i, row in enumerate(rows[:3]):
        mine = [s for s in samples if s["sample_id"] == row["id"]]
        trained = sorted(t for s in mine for t in s["turns"])
        assert trained == [k for k, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        for s in mine:
            first = next(k for k, lab in enumerate(s["labels"]) if lab != -100)
            prompt = render_official(row["messages"][: s["turns"][0]], tools=row["tools"], dialect=DIALECT,
                                     add_generation_prompt=True)
            assert s["input_ids"][:first] == tok.encode(prompt)
            assert s["assistant_masks"] == [int(lab != -100) for lab in s["labels"]]
            assert [lab for lab in s["labels"] if lab != -100] == [t for t, m in zip(s["input_ids"], s["assistant_masks"]) if m]


def test_on_error_raise_stops_at_the_first_bad_line(tmp_path, rows, capsys):
    status = main(["prepare", str(_input(tmp_path, rows)), "-d", DIALECT, "-o", str(tmp_path / "out"),
                   "--workers", "1", "--on-error", "raise", "-q"])
    assert status == 2
    err = capsys.readouterr().err
    assert "row 1 (line 3), sample_id '1': invalid JSON" in err
    assert not (tmp_path / "out" / parquet.MANIFEST).exists()


def test_resume_keeps_finished_shards_and_redoes_the_rest(tmp_path, rows, options):
    src = _input(tmp_path, rows)
    full, part = tmp_path / "full", tmp_path / "part"
    run_local(open_source(src, 2), full, options, workers=1, progress=False)
    run_local(open_source(src, 2), part, options, workers=1, progress=False)
    # an interrupted run: the manifest never written, the last two shards not finished (one half-written)
    (part / parquet.MANIFEST).unlink()
    (part / parquet.shard_name(4)).unlink()
    (part / parquet.shard_name(3)).rename(part / f".{parquet.shard_name(3)}.tmp")
    kept = {i: os.stat(part / parquet.shard_name(i)).st_mtime_ns for i in range(3)}
    with pytest.raises(parquet.OutputError, match="--resume"):
        run_local(open_source(src, 2), part, options, workers=1, progress=False)
    result = run_local(open_source(src, 2), part, options, workers=1, resume=True, progress=False)
    assert {i: os.stat(part / parquet.shard_name(i)).st_mtime_ns for i in range(3)} == kept
    assert read_samples(part) == read_samples(full)
    assert result.manifest["rows"] == 9 and result.errors == 2 and result.totals["bad_row"] == 2
    assert [f["row"] for f in parquet.read_findings(part) if f["kind"] == "bad_row"] == [1, 3]
    assert list(parquet.read_findings(part)) == list(parquet.read_findings(full))
    # other options: the finished shards are not this run's
    other = RenderOptions.make(DIALECT, reasoning="official")
    with pytest.raises(parquet.OutputError, match="other options"):
        run_local(open_source(src, 2), part, other, workers=1, resume=True, progress=False)


def test_a_finished_run_is_not_overwritten(tmp_path, rows, capsys):
    src = str(write_jsonl(tmp_path / "in.jsonl", rows[:1]))
    args = ["prepare", src, "-d", DIALECT, "-o", str(tmp_path / "out"), "--workers", "1", "-q"]
    assert main(args) == 0
    assert main(args) == 2
    assert "finished run" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["parquet-json", "parquet-nested", "datasets"])
def test_every_input_format_gives_the_same_samples(tmp_path, rows, options, fmt):
    expected = read_samples(_run(tmp_path / "jsonl", write_jsonl(tmp_path / "in.jsonl", rows), options))
    if fmt == "datasets":
        datasets = pytest.importorskip("datasets")
        datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
        src = tmp_path / "ds"
    else:
        src = write_parquet(tmp_path / "in.parquet", rows, as_json=fmt == "parquet-json")
    assert read_samples(_run(tmp_path / "out", src, options)) == expected


def _run(out, src, options, workers=1):
    run_local(open_source(src, 3), out, options, workers=workers, progress=False)
    return out


def test_two_workers_write_what_one_writes(tmp_path, rows, options):
    src = _input(tmp_path, rows)
    one = run_local(open_source(src, 2), tmp_path / "one", options, workers=1, progress=False)
    two = run_local(open_source(src, 2), tmp_path / "two", options, workers=2, progress=False)
    assert read_samples(tmp_path / "two") == read_samples(tmp_path / "one")
    assert list(parquet.read_findings(tmp_path / "two")) == list(parquet.read_findings(tmp_path / "one"))
    assert two.totals == one.totals
    def counts(shards):
        return [{k: v for k, v in s.items() if k != "cpu_seconds"} for s in shards]

    assert counts(two.shards) == counts(one.shards)


def test_a_dying_worker_fails_the_run_naming_its_row(tmp_path, rows, options):
    data = [*rows[:5], {"id": "crash", "messages": rows[5]["messages"]}, rows[6]]
    src = write_jsonl(tmp_path / "in.jsonl", ["", *data])  # row 5 on line 7
    crashing = CrashingOptions(options.dialect, options.tokenizer)
    with pytest.raises(PipelineError) as e:
        run_local(open_source(src, 3), tmp_path / "out", crashing, workers=2, progress=False)
    assert "row 5 (line 7), sample_id 'crash'" in str(e.value)
    assert "--resume" in str(e.value)
    assert not (tmp_path / "out" / parquet.MANIFEST).exists()
    assert not (tmp_path / "out" / parquet.shard_name(1)).exists()  # the chunk of rows 3..5 is not finished


def test_data_report_reads_the_run_back(tmp_path, rows, capsys):
    out = tmp_path / "out"
    assert main(["prepare", str(_input(tmp_path, rows)), "-d", DIALECT, "-o", str(out), "--workers", "1",
                 "--report", str(tmp_path / "r.json"), "-q"]) == 0
    assert capsys.readouterr().err == ""  # -q: no progress, no summary
    assert main(["data-report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((tmp_path / "r.json").read_text())
    assert main(["data-report", str(out), "--examples", "1"]) == 0
    text = capsys.readouterr().out
    assert "9 conversations" in text and "line 3, row 1: invalid JSON" in text
    assert "and 1 more" in text  # the second bad row is in the JSON report
    assert main(["data-report", str(tmp_path / "nothing")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_no_tokenizer_anywhere_names_the_fix(tmp_path, rows, monkeypatch, capsys):
    monkeypatch.setenv("KIMI_CHAT_REFERENCE_DIR", str(tmp_path / "empty"))
    status = main(["prepare", str(write_jsonl(tmp_path / "in.jsonl", rows[:1])), "-d", DIALECT, "-o",
                   str(tmp_path / "out")])
    assert status == 2
    assert "--tokenizer DIR" in capsys.readouterr().err


def test_a_policy_the_dialect_cannot_do_is_refused_before_any_work(tmp_path, rows, capsys):
    status = main(["prepare", str(write_jsonl(tmp_path / "in.jsonl", rows[:1])), "-d", "kimi-k2.5", "-o",
                   str(tmp_path / "out"), "--reasoning", "keep"])
    assert status == 2
    assert "--reasoning keep" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_workers_read_their_chunks_the_driver_parses_nothing(tmp_path, rows, options, monkeypatch):
    """With a pool, the driver only finds where each chunk starts; the workers read and parse the rows (the
    work that grows with the data is all in the workers). Here the driver cannot parse a row at all; the
    workers (other processes) can, and the shards are those of one worker."""
    from kimi_chat.data import sources

    src = _input(tmp_path, rows)
    run_local(open_source(src, 2), tmp_path / "one", options, workers=1, progress=False)

    def no_parsing(*args, **kwargs):
        raise AssertionError("the driver parsed a row")

    monkeypatch.setattr(sources, "_parse_line", no_parsing)
    monkeypatch.setattr(sources, "normalize_row", no_parsing)
    two = run_local(open_source(src, 2), tmp_path / "two", options, workers=2, progress=False)
    assert read_samples(tmp_path / "two") == read_samples(tmp_path / "one")
    assert list(parquet.read_findings(tmp_path / "two")) == list(parquet.read_findings(tmp_path / "one"))
    assert (two.rows, two.errors) == (9, 2)
