"""The package's import graph, read from the source with :mod:`ast`: every ``import`` and ``from ... import``
in ``kimi_chat/``, at module level, inside functions (lazy) and under ``if TYPE_CHECKING:`` (type-only).

No cycle may run through it: a type-only import is an edge like any other, since a type checker, a docs
build or a refactoring that turns the annotation into a runtime use follows it. A module's import of its own
package ``__init__`` (which Python runs first) is not counted: a package re-exporting its submodules would
otherwise be a cycle by construction. None is allowed: the stages import the dialect records
(:mod:`kimi_chat.dialect_records`), and only the handle (:mod:`kimi_chat.dialects`) imports the stages.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kimi_chat

ROOT = Path(kimi_chat.__file__).parent
SOURCES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _module(path: Path) -> str:
    parts = ["kimi_chat", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in SOURCES}
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``source`` imports ``target`` (a kimi_chat module), at ``line``."""

    source: str
    target: str
    line: int
    kind: str
    """``"module"`` (runs on import), ``"lazy"`` (inside a function) or ``"type"`` (under ``TYPE_CHECKING``)."""


def _owner(name: str) -> str | None:
    """The kimi_chat module a dotted name imports (``kimi_chat.markers.Marker`` -> ``kimi_chat.markers``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str) -> Iterator[Import]:
    tree = TREES[name]
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    kinds: dict[int, str] = {}

    def mark(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = kind
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for b in child.body:
                    for n in ast.walk(b):
                        kinds[id(n)] = "type"
                for b in child.orelse:
                    mark(b, kind)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                here = "lazy" if kind == "module" else kind
            kinds.setdefault(id(child), here)
            mark(child, here)

    mark(tree, "module")
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        for t in targets:
            owner = _owner(t) if t.startswith("kimi_chat") else None
            if owner is None or owner == name or name.startswith(owner + "."):
                continue
            yield Import(name, owner, node.lineno, kinds.get(id(node), "module"))


EDGES = [imp for name in MODULES for imp in _imports(name)]

def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for e in EDGES:
        graph[e.source].add(e.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def _describe(comp: list[str]) -> str:
    inside = set(comp)
    lines = [f"{e.source} -> {e.target} ({e.kind}, line {e.line})" for e in EDGES
             if e.source in inside and e.target in inside]
    return "\n  ".join(sorted(set(lines)))


def test_the_reader_sees_every_kind_of_import() -> None:
    """The graph holds module-level, lazy and type-only imports (the reader is not blind to any)."""
    kinds = {(e.source, e.target): e.kind for e in EDGES}
    assert kinds[("kimi_chat.dialects", "kimi_chat.errors")] == "module"
    assert kinds[("kimi_chat.prompt.template", "kimi_chat.validation")] == "lazy"
    assert kinds[("kimi_chat.dialects", "kimi_chat.tokens.tokenizer")] == "type"


def test_no_import_cycle_lazy_and_type_only_imports_included() -> None:
    comps = cycles(_graph())
    assert not comps, "import cycles:\n" + "\n".join(f"{c}:\n  {_describe(c)}" for c in comps)


FAMILY_FORBIDDEN = ("kimi_chat.checks", "kimi_chat.servers", "kimi_chat.testing")

FAMILY_REACH_ALLOWED: dict[tuple[str, str], str] = {}
"""Family imports from checks/servers/testing not yet moved out, each with why. Only shrinks."""


def test_families_import_nothing_from_checks_servers_or_testing() -> None:
    reach = {(e.source, e.target): f"{e.source} -> {e.target} ({e.kind}, line {e.line})" for e in EDGES
             if e.source.startswith("kimi_chat.families")
             and any(e.target == f or e.target.startswith(f + ".") for f in FAMILY_FORBIDDEN)}
    bad = sorted(v for k, v in reach.items() if k not in FAMILY_REACH_ALLOWED)
    assert not bad, "families reach into checks/servers/testing:\n" + "\n".join(bad)
    stale = sorted(set(FAMILY_REACH_ALLOWED) - set(reach))
    assert not stale, f"no longer imported, remove from FAMILY_REACH_ALLOWED: {stale}"


PATH_LOADERS = {"kimi_chat.families", "kimi_chat.errors"}
"""Modules allowed to call ``import_module``: the family registry (family name -> package) and
:func:`kimi_chat.errors.import_extra` (an optional extra's third-party module, named by the caller)."""

def _path_loads(name: str, tree: ast.AST) -> set[tuple[str, str]]:
    """``(name, "import_module")`` for a call of ``import_module``/``__import__``, ``(name, PATH)`` for a string
    (not a docstring) naming a kimi_chat submodule."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in {"import_module", "__import__"}:
                out.add((name, "import_module"))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
              and node.value.startswith("kimi_chat.") and node.value in MODULES):
            out.add((name, node.value))
    return out


def test_no_module_is_loaded_by_a_path_string_outside_the_registry() -> None:
    found = {hit for name, tree in TREES.items() for hit in _path_loads(name, tree)}
    registry = {hit for hit in found if hit[0] in PATH_LOADERS}
    bad = sorted(found - registry)
    assert not bad, f"modules loaded by a path string: {bad}"


FAMILY_OF_ALLOWED: dict[str, str] = {
    "kimi_chat.families": "the registry itself",
    "kimi_chat.dialect_records": "DialectRecord.family_parts: where a name has become a dialect",
    "kimi_chat.cli.count": "the CLI: a name from the command line",
    "kimi_chat.cli.tiny_model": "the CLI: a name from the command line",
    "kimi_chat.servers.family": "the server plugins' entry: a family chosen from a tokenizer or an override",
    "kimi_chat.servers.hooks": "the server plugins' entry: serving_of(family or name)",
    "kimi_chat.servers.vllm.tokenizer": "the vLLM plugin's entry: a family chosen from a tokenizer",
}
"""The modules that may name ``family_of``: the registry, and the edges where a name becomes a dialect or
a family. Every stage takes its family's parts from :attr:`kimi_chat.dialect_records.DialectRecord.family_parts`."""


def _names_family_of(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "family_of":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "family_of":
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "family_of" for a in node.names):
            return True
    return False


def test_family_of_only_at_the_edges() -> None:
    users = {name for name, tree in TREES.items() if _names_family_of(tree)}
    bad = sorted(users - set(FAMILY_OF_ALLOWED))
    assert not bad, f"family_of outside the edges (take Dialect.family_parts instead): {bad}"
    stale = sorted(set(FAMILY_OF_ALLOWED) - users)
    assert not stale, f"no longer naming family_of, remove from FAMILY_OF_ALLOWED: {stale}"


def test_a_familys_records_are_reached_through_the_registry() -> None:
    """A family's ``dialects`` module (its built-in records) imports the record class, so no kimi_chat module
    imports it: :mod:`kimi_chat.dialect_records` registers the records through the family registry
    (:func:`kimi_chat.families.family_dialects`)."""
    records = {name for name in MODULES if name.startswith("kimi_chat.families.") and name.endswith(".dialects")}
    assert {"kimi_chat.families.k2.dialects", "kimi_chat.families.k3.dialects"} <= records
    importers = sorted(f"{e.source} -> {e.target} ({e.kind}, line {e.line})" for e in EDGES if e.target in records)
    assert not importers, "a family's records imported by name:\n" + "\n".join(importers)
