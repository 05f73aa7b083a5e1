"""``kimi-chat prepare --engine ray`` and the documented ``ray.data`` recipe, on a local Ray cluster this module
starts (``kimi_chat.data.ray_engine.local_cluster``: 4 logical CPUs, bound to 127.0.0.1 only, no dashboard, no
usage statistics) and stops: the same samples, sample ids and findings as the local engine, ``--resume``
keeping the shards an interrupted run finished, and no Ray server listening beyond the loopback interface."""

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
    from kimi_chat.data.ray_engine import local_cluster

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("RAY_ADDRESS", raising=False)
        with local_cluster(4):
            yield


def _descendants(pid: int) -> set[int]:
    """The processes started under ``pid`` (Ray's servers and workers, for the driver's pid), from /proc."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in out]
        out.update(kids)
        todo += kids
    return out


def _listening(pids: set[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket the processes ``pids`` listen on (/proc/net/tcp and tcp6)."""
    import ipaddress

    inodes: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as f:
            for line in list(f)[1:]:
                cols = line.split()
                local, state, inode = cols[1], cols[3], cols[9]
                if state != "0A" or inode not in inodes:  # 0A: LISTEN
                    continue
                hexaddr, port = local.split(":")
                raw = bytes.fromhex(hexaddr)
                # the kernel prints each 32-bit word of the address in host (little-endian) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                ip = ipaddress.ip_address(raw)
                ip = getattr(ip, "ipv4_mapped", None) or ip  # ::ffff:127.0.0.1 is 127.0.0.1
                out.append((inodes[inode], str(ip), int(port, 16)))
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/net"), reason="reads the listening sockets from Linux's /proc")
def test_the_local_cluster_listens_on_the_loopback_interface_only(cluster):
    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    sockets = _listening(_descendants(os.getpid()) | {os.getpid()})
    assert sockets, "no listening socket found for the Ray processes"
    assert [s for s in sockets if s[1] not in ("127.0.0.1", "::1")] == []


def test_ray_resume_keeps_the_finished_shards(tmp_path, cluster):
    from kimi_chat.cli import main
    from kimi_chat.data import parquet

    rows = conversations(7)
    src = write_jsonl(tmp_path / "in.jsonl", [rows[0], "{not json", *rows[1:]])
    common = [str(src), "-d", DIALECT, "--shard-rows", "2", "-q"]
    assert main(["prepare", *common, "-o", str(tmp_path / "local"), "--workers", "1"]) == 0
    part = tmp_path / "part"
    assert main(["prepare", *common, "-o", str(part), "--engine", "ray"]) == 0
    # interrupted: no manifest, shard 3 missing, shard 2 half-written
    (part / parquet.MANIFEST).unlink()
    (part / parquet.shard_name(3)).unlink()
    (part / parquet.shard_name(2)).rename(part / f".{parquet.shard_name(2)}.tmp")
    kept = {i: os.stat(part / parquet.shard_name(i)).st_mtime_ns for i in (0, 1)}
    assert main(["prepare", *common, "-o", str(part), "--engine", "ray"]) == 2  # not without --resume
    assert main(["prepare", *common, "-o", str(part), "--engine", "ray", "--resume",
                 "--report", str(tmp_path / "r.json")]) == 0
    assert {i: os.stat(part / parquet.shard_name(i)).st_mtime_ns for i in (0, 1)} == kept
    assert sorted(p.name for p in part.glob("*.parquet")) == [parquet.shard_name(i) for i in range(4)]
    assert read_samples(part) == read_samples(tmp_path / "local")
    assert list(parquet.read_findings(part)) == list(parquet.read_findings(tmp_path / "local"))
    manifest = json.loads((part / parquet.MANIFEST).read_text())
    assert (manifest["engine"], manifest["rows"], manifest["errors"]) == ("ray", 8, 1)
    assert json.loads((tmp_path / "r.json").read_text())["totals"]["bad_row"] == 1


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
