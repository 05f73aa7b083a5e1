"""The K2.5-line templates (Kimi-K2.5, Kimi-K2.6, Kimi-K2.7-Code) are generated from one source
(``templates/macros/kimi-k2.x.jinja.in``) by ``templates/macros/sync.py``: the committed files are its output, and a
second run changes nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _sync():
    spec = importlib.util.spec_from_file_location("_templates_sync", ROOT / "templates" / "macros" / "sync.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_committed_templates_are_the_generated_ones() -> None:
    sync = _sync()
    assert set(sync.TARGETS) == {"kimi-k2.5.jinja", "kimi-k2.6.jinja", "kimi-k2.7-code.jinja"}
    for name in sync.TARGETS:
        assert (ROOT / "templates" / name).read_text(encoding="utf-8") == sync.generate(name), (
            f"{name}: run python templates/macros/sync.py")
    assert sync.main(["--check"]) == 0


def test_generating_into_a_copy_twice_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sync = _sync()
    macros = tmp_path / "macros"
    macros.mkdir()
    for f in ("tools_ts.jinja", "kimi-k2.x.jinja.in"):
        (macros / f).write_bytes((ROOT / "templates" / "macros" / f).read_bytes())
    monkeypatch.setattr(sync, "HERE", macros)
    monkeypatch.setattr(sync, "SOURCE", macros / "tools_ts.jinja")
    monkeypatch.setattr(sync, "TEMPLATE_SOURCE", macros / "kimi-k2.x.jinja.in")
    assert sync.main([]) == 0
    first = {p.name: p.read_bytes() for p in tmp_path.glob("*.jinja")}
    assert sorted(first) == sorted(sync.TARGETS)
    assert sync.main([]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.jinja")} == first
    for name, text in first.items():
        assert text == (ROOT / "templates" / name).read_bytes(), name
