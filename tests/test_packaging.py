"""Packaging: every package directory is listed in pyproject.toml, and the templates ship."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_directory_is_listed():
    listed = set(_config()["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "kimi_chat").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_templates_are_package_data():
    cfg = _config()["tool"]["setuptools"]
    assert cfg["package-dir"]["kimi_chat.templates_data"] == "templates"
    assert "*.jinja" in cfg["package-data"]["kimi_chat.templates_data"]
    from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # K2: the families with templates

    for name in DIALECTS:
        assert (ROOT / "templates" / f"{name}.jinja").is_file(), name
