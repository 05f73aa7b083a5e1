"""Golden files: inputs + prompts produced by the OFFICIAL templates (fixtures/golden/regenerate.py).
These run without the reference data; the last test checks, where the reference is present, that the
committed goldens still are what the official templates render."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import render
from kimi_chat.oracle import render_official

from conftest import needs_reference

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "golden"
CASES = sorted(p for p in GOLDEN.glob("*/*.json") if p.parent.name in DIALECTS)  # K3 goldens: tests/test_k3_render.py


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
