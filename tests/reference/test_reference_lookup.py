"""Where the library looks for the reference data: only where it is told
(``$KIMI_CHAT_REFERENCE_DIR``, or an explicit directory), never relative to the current directory or
to where the package lies. Each case runs in a fresh interpreter whose environment has no
``$KIMI_CHAT_REFERENCE_DIR`` (the suite's conftest sets it for the tests themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kimi_chat
from kimi_chat.reference import ENV_VAR

PACKAGE_PARENT = Path(kimi_chat.__file__).resolve().parent.parent

_PROBE = """
from kimi_chat.reference import missing_reason, reference_dir, reference_file
from kimi_chat.errors import ReferenceDataError
from kimi_chat.tokens.tokenizer import KimiTokenizer
print(reference_dir(), reference_file("tokenizer/tiktoken.model"))
print(missing_reason())
try:
    KimiTokenizer.from_reference()
except ReferenceDataError as e:
    print("ReferenceDataError:", e)
"""


def _probe(cwd: Path, **env: str) -> list[str]:
    full = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    full.update(env)
    full["PYTHONPATH"] = str(PACKAGE_PARENT)  # this checkout's kimi_chat
    p = subprocess.run([sys.executable, "-c", _PROBE], cwd=cwd, env=full, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def _fake_reference(root: Path) -> Path:
    ref = root / "shared" / "reference"
    (ref / "tokenizer").mkdir(parents=True)
    (ref / "tokenizer" / "tiktoken.model").write_text("not read\n")
    return ref


def test_not_found_beside_the_current_directory(tmp_path):
    _fake_reference(tmp_path)
    cwd = tmp_path / "project"
    cwd.mkdir()  # cwd/../shared/reference exists
    found, reason, error = _probe(cwd)
    assert found == "None None"
    assert reason == f"reference directory not found: ${ENV_VAR} is not set (the directory holding tokenizer/tiktoken.model ...)"
    assert error == f"ReferenceDataError: {reason}"


def test_not_found_beside_the_package(tmp_path):
    """Whatever lies at <package parent>/../shared/reference (this repository's own data) is not used."""
    found, _, error = _probe(tmp_path)
    assert found == "None None" and error.startswith("ReferenceDataError:")


def test_found_where_the_variable_says(tmp_path):
    ref = _fake_reference(tmp_path / "elsewhere")
    found, _, _ = _probe(tmp_path, **{ENV_VAR: str(ref)})
    assert found == f"{ref} {ref / 'tokenizer' / 'tiktoken.model'}"
