"""Locating the official reference data (a model snapshot's files, laid out as ``../shared/reference``).

The reference files are never copied into this project. The library finds them only where it is told:
``$KIMI_CHAT_REFERENCE_DIR``, or a directory passed explicitly (``KimiTokenizer.from_reference(...,
reference_dir=)``, ``--tokenizer`` of the CLI); never relative to the current directory or to where the
package is installed. (The test suite defaults ``$KIMI_CHAT_REFERENCE_DIR`` to ``../shared/reference``
beside the repository, in ``tests/conftest.py``.)

:data:`REQUIRED_FILES` lists every file of the reference directory that kimi_chat's tests and tools
read (the one list: the test suite's CI guard and ``.ci/run`` check it). Run this module as a script
(``python3 kimi_chat/reference/__init__.py``, no dependencies, the package is not imported) to check a reference
directory: it prints the directory, or what is missing and exits 1.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "ENV_VAR", "REQUIRED_FILES", "reference_dir", "reference_file", "missing_reason", "missing_files",
    "unavailable_reason",
]

ENV_VAR = "KIMI_CHAT_REFERENCE_DIR"


REQUIRED_FILES: tuple[str, ...] = (
    # the tokenizer (every Kimi model's tiktoken.model is this file) and the token configs
    "tokenizer/tiktoken.model",
    "Kimi-K2-Instruct/tokenizer_config.json",
    "unverified/Kimi-K2.6-derived.tokenizer_config.json",
    # the oracle of every dialect (kimi_chat.dialects), and the other known template texts (known_problems)
    "Kimi-K2-Instruct/chat_template.rev1.jinja",
    "Kimi-K2-Instruct/chat_template.rev1-crlf.jinja",
    "Kimi-K2-Instruct/chat_template.rev2.jinja",
    "unverified/Kimi-K2-Instruct-0905.chat_template.candidate-A.jinja",
    "unverified/Kimi-K2-Instruct-0905.chat_template.candidate-B.jinja",
    "Kimi-K2-Thinking/chat_template.rev1.jinja",
    "unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja",
    "unverified/Kimi-K2.5.chat_template.reconstructed.jinja",
    "unverified/Kimi-K2.6.chat_template.reconstructed.jinja",
    "unverified/Kimi-K2.6-derived.chat_template.jinja",
    "llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja",
    "llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Thinking.jinja",
    "llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Instruct.jinja",
    "llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja",
    # the official tokenizer code: Kimi-K2.6 (tools_ts_str) and Kimi-K3 (its Python encoder)
    "Kimi-K2.6/tokenization_kimi.py",
    "Kimi-K2.6/tool_declaration_ts.py",
    "Kimi-K3/tokenization_kimi.py",
    "Kimi-K3/encoding_k3.py",
    # K2.5 TypeScript tool declarations (outputs of a port of the official encoder)
    "unverified/k25_tools_ts.golden.jsonl",
)
"""Every file of the reference directory the tests and tools read, relative to it (where each comes
from: README, "Reference data"). A test of ``tests/reference/test_ci_reference.py`` checks that no path the code
or the tests name is missing here."""


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


def missing_files(root: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The :data:`REQUIRED_FILES` absent from ``root`` (default: :func:`reference_dir`); all of them
    when there is no reference directory."""
    d = Path(root) if root is not None else reference_dir()
    if d is None or not d.is_dir():
        return REQUIRED_FILES
    return tuple(rel for rel in REQUIRED_FILES if not (d / rel).is_file())


def unavailable_reason() -> str | None:
    """``None`` when the reference directory is found and holds every file of :data:`REQUIRED_FILES`;
    else one line saying why not (no directory: :func:`missing_reason`; else the missing files)."""
    d = reference_dir()
    if d is None:
        return missing_reason()
    missing = missing_files(d)
    if not missing:
        return None
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    return f"reference data incomplete: {d} lacks {len(missing)} of the {len(REQUIRED_FILES)} files needed ({shown})"


if __name__ == "__main__":  # `python3 kimi_chat/reference/__init__.py`: check the reference data (stdlib only)
    import sys

    _why = unavailable_reason()
    if _why is not None:
        print(f"!! {_why}", file=sys.stderr)
        sys.exit(1)
    print(f"reference data: {reference_dir()} ({len(REQUIRED_FILES)} files)")
