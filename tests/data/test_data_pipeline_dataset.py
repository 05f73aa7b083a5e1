"""``kimi_chat.data.render_dataset``: the batch core over a ``datasets.Dataset`` with ``map(num_proc=N)``, the
samples the core makes, a deterministic fingerprint (a second run is served from the cache; another option or
input renders again)."""

from __future__ import annotations

import os

import pytest

datasets = pytest.importorskip("datasets", reason="render_dataset needs datasets (pip install -e '.[data]' in the checkout)")

from conftest import needs_reference  # noqa: E402
from data_pipeline_support import batch_samples, conversations  # noqa: E402

from kimi_chat.data import render_dataset  # noqa: E402
from kimi_chat.data.batch import SCHEMA  # noqa: E402
from kimi_chat.data.options import RenderOptions  # noqa: E402

pytestmark = needs_reference  # the reference tokenizers

DIALECT = "kimi-k2.6"


@pytest.fixture()
def saved(tmp_path):
    """A dataset read from disk (what the cache needs: an in-memory dataset has no cache files), rows 2 and 5
    without an id (their sample_id is the row index)."""
    rows = conversations(6)
    for i in (2, 5):
        del rows[i]["id"]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    return rows, datasets.load_from_disk(str(tmp_path / "ds"))


def _sorted(rows):
    return sorted(rows, key=lambda r: (r["sample_id"], r["turns"]))


def test_render_dataset_gives_the_batch_cores_samples(saved):
    rows, ds = saved
    out = render_dataset(ds, dialect=DIALECT, num_proc=2, batch_size=2)
    assert out.column_names == SCHEMA.names
    assert out.features == datasets.Features.from_arrow_schema(SCHEMA)
    expected = _sorted(batch_samples(rows, RenderOptions.make(DIALECT)))
    assert {s["sample_id"] for s in expected} >= {"2", "5"}  # row indices, across the map's shards
    assert _sorted(out.to_list()) == expected


def test_a_second_run_is_served_from_the_cache(saved):
    rows, ds = saved
    first = render_dataset(ds, dialect=DIALECT, batch_size=3)
    files = [f["filename"] for f in first.cache_files]
    stamps = [os.stat(f).st_mtime_ns for f in files]
    again = render_dataset(ds, dialect=DIALECT, batch_size=3)
    assert again._fingerprint == first._fingerprint
    assert [f["filename"] for f in again.cache_files] == files
    assert [os.stat(f).st_mtime_ns for f in files] == stamps  # read back, not written again
    other = render_dataset(ds, dialect=DIALECT, batch_size=3, reasoning="official")
    assert other._fingerprint != first._fingerprint
    assert [f["filename"] for f in other.cache_files] != files
    smaller = render_dataset(ds.select(range(3)), dialect=DIALECT, batch_size=3)
    assert smaller._fingerprint != first._fingerprint
    assert len(_sorted(other.to_list())) < len(first)  # official: one sample per conversation


def test_render_dataset_refuses_what_it_cannot_render(saved):
    from kimi_chat.errors import UnsupportedOptionError

    _, ds = saved
    with pytest.raises(UnsupportedOptionError):
        render_dataset(ds, dialect="kimi-k2.5", reasoning="keep")
    with pytest.raises(ValueError, match="no 'messages' column"):
        render_dataset(ds.rename_column("messages", "chat"), dialect=DIALECT)


def test_the_findings_are_kept_beside_the_samples(tmp_path):
    """A row the dialect refuses gives no sample and is not lost: it is a ``bad_row`` finding with its index and
    the error naming the field; the other findings (the reasoning K2.6's official template drops) are there too,
    in row order, cached with the samples; ``render_dataset`` warns how many rows gave no sample."""
    from kimi_chat.data import KINDS, render_dataset_with_findings

    import json

    rows = conversations(5)
    rows[3] = {"id": "robot", "messages": [{"role": "user", "content": 3}], "tools": rows[3]["tools"]}
    # messages and tools as JSON strings (a column of any shape), as the sources read them too
    as_json = [{"id": r["id"], "messages": json.dumps(r["messages"]), "tools": json.dumps(r["tools"])} for r in rows]
    datasets.Dataset.from_list(as_json).save_to_disk(str(tmp_path / "ds"))
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    out = render_dataset_with_findings(ds, dialect=DIALECT, num_proc=2, batch_size=2)
    good = [r for r in rows if r["id"] != "robot"]
    assert _sorted(out.samples.to_list()) == _sorted(batch_samples(good, RenderOptions.make(DIALECT)))
    assert out.samples.column_names == SCHEMA.names
    (bad,) = out.bad_rows().to_list()
    assert (bad["row"], bad["sample_id"]) == (3, "robot")
    assert "messages[0].content" in bad["message"]
    expected = RenderOptions.make(DIALECT).render(rows).findings  # the batch core's findings of the same rows
    assert out.findings.to_list() == [f.to_dict() for f in expected]
    assert set(out.totals()) <= set(KINDS) and out.totals()["bad_row"] == 1
    assert out.totals()["reasoning_dropped"] == sum(f.count for f in expected if f.kind == "reasoning_dropped")
    with pytest.warns(UserWarning, match=r"1 row\(s\) of the dataset give no sample"):
        samples = render_dataset(ds, dialect=DIALECT, num_proc=2, batch_size=2)
    assert _sorted(samples.to_list()) == _sorted(out.samples.to_list())
