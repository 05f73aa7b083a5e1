"""The package layout: families behind one record, stages that know no family by name, no import
cycle, no public name hiding a submodule, no module over 700 lines. Static checks over ``kimi_chat/``'s source."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import kimi_chat
from kimi_chat.families import REGISTRY, family_of

ROOT = Path(kimi_chat.__file__).parent
SOURCES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _module(path: Path) -> str:
    parts = ["kimi_chat", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in SOURCES}


def _family_names() -> set[str]:
    return set(REGISTRY)


def _names_a_family(node: ast.AST, families: set[str]) -> bool:
    """A comparison (``==``, ``!=``, ``in``) or a dict/match key whose one side is a family's name."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        return any(isinstance(o, ast.Constant) and o.value in families for o in operands)
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value in families for k in node.keys)
    if isinstance(node, ast.MatchValue):
        return isinstance(node.value, ast.Constant) and node.value.value in families
    return False


def test_no_module_outside_families_names_a_family() -> None:
    """Outside ``kimi_chat/families/`` and ``dialect_records.py`` no code compares a family's name or keys a table by
    it (docstrings and messages may name a family; code does not decide by it)."""
    families = _family_names()
    found = []
    for name, path in MODULES.items():
        if name.startswith("kimi_chat.families") or name == "kimi_chat.dialect_records":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if _names_a_family(node, families):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not found, f"{len(found)} places decide by a family's name: " + ", ".join(found)


PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_name_hides_a_submodule(package: str) -> None:
    """``P.X`` for a public X of a package P (its ``__all__``, the lazily imported names included) is never a
    function or class standing where a submodule ``P.X`` is: no name means two things."""
    path = MODULES[package].parent
    subs = {m.name for m in pkgutil.iter_modules([str(path)])}
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    public: set[str] = set()
    for node in ast.walk(tree):  # __all__ = [...], and _LAZY-style tuples of names __getattr__ serves
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            if any(isinstance(t, ast.Name) and (t.id == "__all__" or t.id.isupper()) for t in node.targets):
                public |= {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    clash = sorted(public & subs)
    assert not clash, f"public names of {package} that hide a submodule: {clash}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size(name: str) -> None:
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= 700, f"{name}: {lines} lines (the house limit is ~700)"


@pytest.mark.parametrize("family", sorted(REGISTRY))
def test_every_registered_family_has_its_record(family: str) -> None:
    record = family_of(family)
    assert record.name == family and record.output_format is not None and record.markers.all


@pytest.mark.parametrize("old", ["kimi_chat.runtime", "kimi_chat.integrations", "kimi_chat.oracle",
                                 "kimi_chat.oracle_k3", "kimi_chat.tokenizer"])
def test_pre_layout_paths_are_gone(old: str) -> None:
    # no release published the paths from before the package was laid out by stage: no alias keeps them
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
