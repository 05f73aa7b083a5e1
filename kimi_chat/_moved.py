"""Old module paths kept working after the package was laid out by pipeline stage.

The README and the plugins' configurations name a few modules by their old paths; each stays importable as
an alias of the module that now holds its code (the same module object, so attributes, ``isinstance`` and
patches agree). :data:`ALIASES` is the one table; a name below an aliased package is aliased too
(``kimi_chat.integrations.vllm`` is ``kimi_chat.servers.vllm``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["ALIASES", "install"]

ALIASES: dict[str, str] = {
    "kimi_chat.integrations": "kimi_chat.servers",
    "kimi_chat.runtime": "kimi_chat.engines.native",
    "kimi_chat.runtime_ik": "kimi_chat.engines.ik",
    "kimi_chat.oracle": "kimi_chat.reference.oracle",
    "kimi_chat.oracle_k3": "kimi_chat.families.k3.oracle",
    "kimi_chat.tokenizer": "kimi_chat.tokens.tokenizer",
}
"""Old module path -> the module that holds its code now."""


def _target(fullname: str) -> str | None:
    for old, new in ALIASES.items():
        if fullname == old:
            return new
        if fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:  # the target ran already
        return None


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = _target(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


_FINDER = _AliasFinder()


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once; :mod:`kimi_chat` does it on import)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)  # before the path finders: an old path has no file of its own
