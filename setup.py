"""Build: pyproject.toml holds the metadata; this file compiles ``kimi_chat.compiled.MODULES`` with mypyc.

The modules are pure Python (the package runs from them as they are). When the build has mypyc
(``pyproject.toml`` lists it in ``build-system.requires``) and ``KIMI_CHAT_PURE_PYTHON`` is not ``1``,
they are compiled as one group into ``kimi_chat/_compiled/``, every file named with the digest of the
sources (:func:`kimi_chat.compiled.source_digest`), so that the package's import hook runs them only
while the sources are those (:mod:`kimi_chat.compiled`). A compile that fails leaves the package pure
Python (the extensions are optional), with the compiler's message.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _compiled() -> ModuleType:
    """``kimi_chat/compiled.py``, read on its own (the package's dependencies are not in the build)."""
    spec = importlib.util.spec_from_file_location("_kimi_chat_compiled", ROOT / "kimi_chat" / "compiled.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("kimi_chat/compiled.py not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


C = _compiled()
DIGEST = C.source_digest(ROOT / "kimi_chat")
BUILDING = bool({"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"} & set(sys.argv[1:]))
"""Whether this run builds (pip also runs this file for the requirements and the metadata, which the
extensions do not change): mypyc runs only then."""


class BuildCompiled(build_ext):
    """``build_ext`` removing the files of other builds from ``kimi_chat/_compiled/`` first (in-place and
    editable builds)."""

    def run(self) -> None:
        if self.inplace or getattr(self, "editable_mode", False):  # the extensions go beside the sources
            directory = ROOT / "kimi_chat" / C.DIRECTORY
            directory.mkdir(exist_ok=True)
            for old in directory.iterdir():
                if DIGEST not in old.name:
                    old.unlink() if old.is_file() else shutil.rmtree(old)
        super().run()


def _extensions() -> list:
    if os.environ.get(C.PURE_ENV) == "1" or not BUILDING:
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("kimi-chat: mypyc is not available; the package is built as pure Python")
        return []
    cwd = os.getcwd()
    os.chdir(ROOT)  # module names from the package layout
    try:
        # mypy options first: the modules' imports from outside the group are not read (their names are Any:
        # called as Python), and need not be installed in the build
        options = ["--follow-imports=skip", "--ignore-missing-imports"]
        extensions = mypycify(options + [name.replace(".", "/") + ".py" for name in C.MODULES], opt_level="3",
                              group_name=C.group_name(DIGEST), target_dir=str(ROOT / "build" / "mypyc"))
    finally:
        os.chdir(cwd)
    for ext in extensions:
        ext.optional = True  # a failed compile leaves the pure-Python modules
        if ext.name in C.MODULES:  # found by the package's import hook only (kimi_chat.compiled), by digest
            ext.name = f"kimi_chat.{C.DIRECTORY}.{C.extension_stem(ext.name, DIGEST)}"
    return extensions


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildCompiled})
