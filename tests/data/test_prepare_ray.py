"""``kimi-chat prepare --engine ray`` and the documented ``ray.data`` recipe, on a local Ray cluster this module
starts (4 logical CPUs: two actors and Ray Data's list and write tasks; advertised on 127.0.0.1, no dashboard,
no usage statistics) and stops: the same samples, sample ids and
findings as the local engine."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import needs_reference, require_in_ci

try:
    import ray
    import ray.data  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    ray = None
require_in_ci(ray is not None, "ray[data] (pip install -e '.[test]')")
pytestmark = [needs_reference, pytest.mark.skipif(ray is None, reason="needs ray[data] (pip install -e '.[ray]' in the checkout)")]

from data_pipeline_support import conversations, read_samples, write_jsonl, write_parquet  # noqa: E402

DIALECT = "kimi-k2.6"
DOC = Path(__file__).resolve().parents[2] / "docs" / "training-data.md"


@pytest.fixture(scope="module")
def cluster():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        mp.delenv("RAY_ADDRESS", raising=False)
        ray.init(num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


def test_ray_engine_writes_the_local_engines_samples(tmp_path, cluster):
    from kimi_chat.cli import main

    rows = conversations(7)
    src = write_jsonl(tmp_path / "in.jsonl", [rows[0], "", "{not json", *rows[1:4],
                                              {"id": "wrong-type", "messages": [{"role": "user", "content": 3}]},
                                              *rows[4:]])
    common = [str(src), "-d", DIALECT, "--shard-rows", "3", "-q"]
    assert main(["prepare", *common, "-o", str(tmp_path / "local"), "--workers", "1",
                 "--report", str(tmp_path / "local.json")]) == 0
    assert main(["prepare", *common, "-o", str(tmp_path / "ray"), "--engine", "ray",
                 "--report", str(tmp_path / "ray.json")]) == 0
    assert read_samples(tmp_path / "ray") == read_samples(tmp_path / "local")
    local, by_ray = (json.loads((tmp_path / f"{n}.json").read_text())["datasets"][0] for n in ("local", "ray"))
    for key in ("rows", "samples", "tokens", "trained_tokens", "errors", "totals"):
        assert by_ray[key] == local[key], key

    def key(f):
        return f["row"], f["kind"]

    assert sorted(by_ray["findings"], key=key) == sorted(local["findings"], key=key)
    assert [(f["row"], f["line"]) for f in local["findings"] if f["kind"] == "bad_row"] == [(1, 3), (5, 7)]
    # Ray Data's files carry the run's fingerprint as the local shards do
    import pyarrow.parquet as pq

    manifest = json.loads((tmp_path / "ray" / "_manifest.json").read_text())
    files = sorted((tmp_path / "ray").glob("*.parquet"))
    assert files and {pq.read_schema(p).metadata[b"kimi_chat.fingerprint"].decode() for p in files} == {
        manifest["fingerprint"]}


def test_the_documented_ray_recipe_runs(tmp_path, cluster):
    text = DOC.read_text(encoding="utf-8")
    recipe = re.search(r"<!-- ray-recipe[^>]*-->\n```python\n(.*?)```", text, re.S)
    assert recipe is not None, "docs/training-data.md lost its ray-recipe block"
    rows = conversations(5)
    write_parquet(tmp_path / "conversations.parquet", rows)
    code = recipe.group(1).replace('"/data/', f'"{tmp_path}/')  # the page's example paths, here
    exec(compile(code, str(DOC), "exec"), {})
    from data_pipeline_support import batch_samples

    from kimi_chat.data.options import RenderOptions

    expected = batch_samples(rows, RenderOptions.make(DIALECT, max_length=32768))
    assert read_samples(Path(tmp_path / "samples")) == expected
    assert os.listdir(tmp_path / "samples")
