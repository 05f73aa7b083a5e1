"""Locating the official reference data (a model snapshot's files, laid out as ``../shared/reference``).

The reference files are never copied into this project. The library finds them only where it is told:
``$KIMI_CHAT_REFERENCE_DIR``, or a directory passed explicitly (``KimiTokenizer.from_reference(...,
reference_dir=)``, ``--tokenizer`` of the CLI); never relative to the current directory or to where the
package is installed. (The test suite defaults ``$KIMI_CHAT_REFERENCE_DIR`` to ``../shared/reference``
beside the repository, in ``tests/conftest.py``.)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "reference_dir", "reference_file", "missing_reason"]

ENV_VAR = "KIMI_CHAT_REFERENCE_DIR"


def reference_dir() -> Path | None:
    """The directory ``$KIMI_CHAT_REFERENCE_DIR`` names, or ``None`` when it is unset or not a directory."""
    env = os.environ.get(ENV_VAR)
    if env:
        p = Path(env)
        return p if p.is_dir() else None
    return None


def missing_reason() -> str:
    """Why :func:`reference_dir` finds nothing (``$KIMI_CHAT_REFERENCE_DIR`` is unset or names no
    directory): one line for an error or a skip reason."""
    env = os.environ.get(ENV_VAR)
    if env:
        return f"reference directory not found: ${ENV_VAR}={env} is not a directory"
    return f"reference directory not found: ${ENV_VAR} is not set (the directory holding tokenizer/tiktoken.model ...)"


def reference_file(relpath: str) -> Path | None:
    """A file of the reference directory, or ``None`` when the directory or the file is absent."""
    d = reference_dir()
    if d is None:
        return None
    p = d / relpath
    return p if p.is_file() else None
