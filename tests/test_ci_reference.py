"""Issue 11 items 4 and 12: where the reference data comes from, and what a run does without it.

Under ``CI=true`` a missing reference directory fails the run at once, with the reason; locally
(``CI`` unset) the oracle tests skip with the reason. Each case runs pytest in a fresh interpreter
on a tiny test directory that uses this suite's own ``conftest.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE, needs_reference
from kimi_chat.reference import ENV_VAR, missing_reason, reference_dir

HERE = Path(__file__).resolve().parent

_TINY_TEST = '''
from conftest import needs_reference

@needs_reference
def test_oracle():
    pass

def test_plain():
    pass
'''


def _pytest(tmp_path: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    d = tmp_path / "suite"
    d.mkdir()
    shutil.copy(HERE / "conftest.py", d / "conftest.py")
    (d / "test_tiny.py").write_text(_TINY_TEST, encoding="utf-8")
    full = dict(os.environ)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(d)],
                          cwd=d, env=full, capture_output=True, text=True, timeout=300)


def test_ci_without_reference_data_fails_the_run_with_the_reason(tmp_path):
    absent = tmp_path / "absent"
    p = _pytest(tmp_path, CI="true", **{ENV_VAR: str(absent)})
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, p.stdout + p.stderr
    assert f"${ENV_VAR}={absent} is not a directory" in p.stderr
    assert "passed" not in p.stdout and "skipped" not in p.stdout  # nothing ran


@pytest.mark.parametrize("ci", [None, "false"])
def test_locally_without_reference_data_oracle_tests_skip_with_the_reason(tmp_path, ci):
    absent = tmp_path / "absent"
    p = _pytest(tmp_path, CI=ci, **{ENV_VAR: str(absent)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 1 skipped" in p.stdout
    assert f"official reference data not found (reference directory not found: ${ENV_VAR}={absent} " \
           "is not a directory)" in p.stdout


@needs_reference
def test_ci_with_reference_data_runs_the_oracle_tests(tmp_path):
    p = _pytest(tmp_path, CI="true", **{ENV_VAR: str(REFERENCE)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 passed" in p.stdout and "skipped" not in p.stdout


def test_missing_reason_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "x"))
    assert reference_dir() is None
    assert missing_reason() == f"reference directory not found: ${ENV_VAR}={tmp_path / 'x'} is not a directory"
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert reference_dir() == tmp_path
