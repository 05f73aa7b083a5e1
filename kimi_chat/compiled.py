"""The modules compiled with mypyc, and the import hook that runs them only while they are current.

:data:`MODULES` are pure Python: the package runs from their sources as they are. ``setup.py`` also
compiles them with mypyc, as one group, into ``kimi_chat/_compiled/``: the group's library and one
extension per module, every file named with the :func:`source_digest` of the sources it was built from
(``kimi_chat__families__k3__prompt_pass__<digest>.cpython-311-x86_64-linux-gnu.so``). Python's own import
never finds those names; the finder :func:`install` puts first in ``sys.meta_path``
(``kimi_chat/__init__.py`` does, before anything else is imported) imports a module of :data:`MODULES`
from its extension when there is one built from the current sources, and leaves it to the source
otherwise:

* no build for this Python (mypyc missing, a failed compile, a source checkout not installed, a build
  for another Python version): the sources;
* a build from other sources (an editable install edited since): the sources, with a warning naming
  the rebuild. The digest covers every module of the group, as compiled modules call each other
  directly: one edited module sends the whole group back to the sources;
* ``KIMI_CHAT_PURE_PYTHON=1`` in the environment: the sources (and ``setup.py`` builds none).

:func:`describe` says which, for ``kimi-chat --version``; CI checks that it runs the compiled modules.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = ["MODULES", "PURE_ENV", "decide", "describe", "install", "source_digest", "source_module"]

log = logging.getLogger(__name__)

MODULES = ("kimi_chat.caches", "kimi_chat.message_shapes", "kimi_chat.families.k2.render",
           "kimi_chat.families.k3.inputs", "kimi_chat.families.k3.prompt_pass")
"""The modules ``setup.py`` compiles (this module imports only the standard library: ``setup.py`` reads
it). Their annotations must be exact: mypyc checks them at run time."""
PURE_ENV = "KIMI_CHAT_PURE_PYTHON"
"""``1``: run the sources, build nothing."""
DIRECTORY = "_compiled"
"""Where the build puts the group, in the package directory."""
_PACKAGE_DIR = Path(__file__).resolve().parent
_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
"""This Python's extension suffix (``.cpython-311-x86_64-linux-gnu.so``): a build is for one Python."""


def source_digest(package_dir: Path) -> str:
    """The digest of the sources of :data:`MODULES` under ``package_dir`` (the ``kimi_chat`` directory):
    what the build names its files with and the finder looks for."""
    h = hashlib.sha256()
    for name in MODULES:
        h.update(name.encode() + b"\0" + _source_path(package_dir, name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def group_name(digest: str) -> str:
    """mypyc's group name of a build (its library: ``<group>__mypyc``, in :data:`DIRECTORY`)."""
    return f"kimi_chat.{DIRECTORY}.g{digest}"


def extension_stem(name: str, digest: str) -> str:
    """The name (in :data:`DIRECTORY`, without the extension suffix) of the extension of module ``name``
    built from sources of ``digest``."""
    return f"{name.replace('.', '__')}__{digest}"


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`MODULES` in the extensions built from their current sources."""

    def __init__(self, directory: Path, digest: str | None) -> None:
        self.directory, self.digest = directory, digest  # digest None: every module from its source

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in MODULES or self.digest is None:
            return None
        location = str(self.directory / (extension_stem(name, self.digest) + _SUFFIX))
        return importlib.util.spec_from_file_location(
            name, location, loader=importlib.machinery.ExtensionFileLoader(name, location))


_state = "not installed"


def decide(package_dir: Path) -> tuple[str, str | None]:
    """Whether the compiled group in ``package_dir`` (the ``kimi_chat`` directory) runs: ``(state, digest)``,
    ``digest`` that of the build to load (``None``: the sources run, ``state`` says why)."""
    directory = package_dir / DIRECTORY
    if os.environ.get(PURE_ENV) == "1":
        return f"pure Python ({PURE_ENV}=1)", None
    built = sorted(directory.glob("*" + _SUFFIX)) if directory.is_dir() else []
    if not built:
        return "pure Python (not compiled for this Python)", None
    try:
        digest = source_digest(package_dir)
    except OSError:  # installed without its sources: the build is what there is
        digest = built[0].name[: -len(_SUFFIX)].rpartition("__")[2]
    if all((directory / (extension_stem(n, digest) + _SUFFIX)).is_file() for n in MODULES):
        return "compiled (mypyc)", digest
    log.warning("kimi_chat: the compiled modules in %s were built from other sources than these; running the "
                "sources (rebuild: pip install -e .)", directory)
    return "pure Python (compiled from other sources: rebuild with pip install -e .)", None


def install() -> None:
    """Put the finder first in ``sys.meta_path`` (once), with :func:`decide`'s choice."""
    global _state
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    _state, digest = decide(_PACKAGE_DIR)
    sys.meta_path.insert(0, _Finder(_PACKAGE_DIR / DIRECTORY, digest))


def describe() -> str:
    """How the package runs, for an operator: ``"compiled (mypyc)"``, or ``"pure Python (why)"``."""
    return _state


def source_module(name: str) -> ModuleType:
    """The module ``name`` of :data:`MODULES` run from its source, whether or not it runs compiled (not
    entered in ``sys.modules``: what the tests compare the compiled module with)."""
    spec = importlib.util.spec_from_file_location(name, _source_path(_PACKAGE_DIR, name))
    if spec is None or spec.loader is None:
        raise ImportError(f"no source of {name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _source_path(package_dir: Path, name: str) -> Path:
    return package_dir.joinpath(*name.split(".")[1:]).with_suffix(".py")
