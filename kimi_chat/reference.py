"""Locating the official reference data (a model snapshot or ``../shared/reference``).

The reference files are never copied into this project: tests and tools find them at
``$KIMI_CHAT_REFERENCE_DIR`` when it is set, else at ``../shared/reference`` relative to the project
root (or the current directory).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "reference_dir", "reference_file", "missing_reason"]

ENV_VAR = "KIMI_CHAT_REFERENCE_DIR"
_PROJECT_ROOT = Path(__file__).resolve().parent.parent


def reference_dir() -> Path | None:
    """The reference directory, or ``None`` when it cannot be found."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return p if p.is_dir() else None
    for base in (_PROJECT_ROOT, Path.cwd()):
        p = (base / ".." / "shared" / "reference").resolve()
        if p.is_dir():
            return p
    return None


def missing_reason() -> str:
    """Why :func:`reference_dir` finds nothing (``$KIMI_CHAT_REFERENCE_DIR`` names no directory, or it is
    unset and there is no ``../shared/reference``): one line for an error or a skip reason."""
    env = os.environ.get(ENV_VAR)
    if env:
        return f"reference directory not found: ${ENV_VAR}={env} is not a directory"
    return f"reference directory not found: set ${ENV_VAR} or provide ../shared/reference"


def reference_file(relpath: str) -> Path | None:
    """A file of the reference directory, or ``None`` when the directory or the file is absent."""
    d = reference_dir()
    if d is None:
        return None
    p = d / relpath
    return p if p.is_file() else None
