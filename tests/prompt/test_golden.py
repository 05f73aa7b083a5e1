"""Golden files: inputs + prompts produced by the OFFICIAL templates (fixtures/golden/regenerate.py).
These run without the reference data; the last tests check, where the reference is present, that the
committed goldens still are what the official templates render, and that regenerating every dialect's
goldens (``fixtures/golden/regenerate*.py``) reproduces the committed files exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_chat.dialects import DIALECTS as ALL_DIALECTS
from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import render
from kimi_chat.reference.oracle import render_official

from conftest import needs_reference

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
CASES = sorted(p for p in GOLDEN.glob("*/*.json") if p.parent.name in DIALECTS)  # K3 goldens: tests/families/test_k3_render.py


def _load(path: Path):
    request = json.loads(path.read_text(encoding="utf-8"))
    expected = path.with_suffix(".txt").read_bytes().decode("utf-8")
    return request, expected


def test_every_dialect_has_goldens():
    for dialect in DIALECTS:
        assert len(list((GOLDEN / dialect).glob("*.json"))) >= 20, dialect


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path):
    request, expected = _load(path)
    ours = render(request["messages"], tools=request["tools"], dialect=path.parent.name,
                  add_generation_prompt=request["add_generation_prompt"], **request["options"])
    assert ours == expected


@pytest.mark.oracle
@needs_reference
@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden_is_official(path):
    request, expected = _load(path)
    official = render_official(request["messages"], tools=request["tools"], dialect=path.parent.name,
                               add_generation_prompt=request["add_generation_prompt"], **request["options"])
    assert official == expected


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.oracle
@needs_reference
def test_regenerating_every_golden_changes_nothing(tmp_path):
    # regression: regenerate.py once rendered Kimi-K3's encoder source as a Jinja template over the K3 goldens
    pytest.importorskip("transformers", reason="the official renderings need transformers (the verify extra)")
    scripts = sorted(GOLDEN.glob("regenerate*.py"))
    assert [p.name for p in scripts] == ["regenerate.py", "regenerate_k3.py"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(GOLDEN.parent.parent), os.environ.get("PYTHONPATH", "")])}
    for script in scripts:
        p = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], env=env, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
    committed = {d.name for d in GOLDEN.iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert {d.name for d in tmp_path.iterdir()} == committed
    assert committed == set(ALL_DIALECTS)
    for name in sorted(committed):
        regenerated, golden = _tree(tmp_path / name), _tree(GOLDEN / name)
        assert sorted(regenerated) == sorted(golden), name
        changed = [f for f in golden if regenerated[f] != golden[f]]
        assert changed == [], f"{name}: regeneration changes {changed[:5]}"


K3_CASES = sorted((GOLDEN / "kimi-k3").glob("*.json"))
K3_CASES = [p for p in K3_CASES if not p.name.endswith(".ids.json")]


@pytest.mark.oracle
@needs_reference
def test_render_official_knows_every_family():
    # regression: render_official once rendered Kimi-K3's encoder source as a Jinja template
    pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers (the verify extra)")
    from kimi_chat.reference.oracle import NoOracleTemplateError, oracle_template

    assert len(K3_CASES) >= 30
    for path in K3_CASES:
        request, expected = _load(path)
        official = render_official(request["messages"], tools=request["tools"], dialect="kimi-k3",
                                   add_generation_prompt=request["add_generation_prompt"], **request["options"])
        assert official == expected, path.stem
    with pytest.raises(NoOracleTemplateError, match="kimi-k3 has no Jinja oracle template"):
        oracle_template("kimi-k3")
