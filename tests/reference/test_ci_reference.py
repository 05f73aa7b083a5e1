"""Where the reference data comes from, and what a run does without it.

Under ``CI=true`` a missing reference directory, or one missing any file the tests need
(:data:`kimi_chat.reference.REQUIRED_FILES`), fails the run at once, with the reason, unless the run
says it is meant to have no data (``KIMI_CHAT_TEST_WITHOUT_REFERENCE=1``, CI's fresh-clone step);
locally (``CI`` unset) the tests that need the data skip with the reason. Under ``CI=true`` a missing
engine (llama-cpp-python, ik-llama-cpp-python) fails its test modules. Each case runs pytest in a fresh
interpreter on a tiny test directory that uses this suite's own ``conftest.py``."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE, WITHOUT_REFERENCE_VAR, needs_reference
from kimi_chat.reference import ENV_VAR, REQUIRED_FILES, missing_files, missing_reason, reference_dir

HERE = Path(__file__).resolve().parents[1]  # tests/

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
    d.mkdir(parents=True)
    shutil.copy(HERE / "conftest.py", d / "conftest.py")
    (d / "test_tiny.py").write_text(_TINY_TEST, encoding="utf-8")
    full = dict(os.environ)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    full.pop("PYTEST_ADDOPTS", None)
    if WITHOUT_REFERENCE_VAR not in env:
        full.pop(WITHOUT_REFERENCE_VAR, None)  # CI's no-data step sets it: each case here says its own
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


def _partial_reference(tmp_path: Path, leave_out: str) -> Path:
    """A reference directory with every required file (links to the real ones) but ``leave_out``."""
    d = tmp_path / "partial"
    for rel in REQUIRED_FILES:
        if rel != leave_out:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).symlink_to(REFERENCE / rel)
    return d


@needs_reference
def test_ci_with_a_required_file_missing_fails_the_run_naming_it(tmp_path):
    # without tokenizer/tiktoken.model, 145 tests once skipped silently in CI
    partial = _partial_reference(tmp_path, "tokenizer/tiktoken.model")
    assert missing_files(partial) == ("tokenizer/tiktoken.model",)
    p = _pytest(tmp_path, CI="true", **{ENV_VAR: str(partial)})
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, p.stdout + p.stderr
    assert f"reference data incomplete: {partial} lacks 1 of the {len(REQUIRED_FILES)} files needed " \
           "(tokenizer/tiktoken.model)" in p.stderr
    assert "passed" not in p.stdout and "skipped" not in p.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_locally_an_empty_reference_dir_skips_with_the_missing_files(tmp_path, ci):
    # a directory that exists is not data: the oracle tests used to run on it and fail
    empty = tmp_path / "empty"
    empty.mkdir()
    p = _pytest(tmp_path, CI=ci, **{ENV_VAR: str(empty)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 1 skipped" in p.stdout
    assert f"reference data incomplete: {empty} lacks {len(REQUIRED_FILES)} of the {len(REQUIRED_FILES)} " \
           "files needed (tokenizer/tiktoken.model, " in p.stdout


def test_ci_run_meant_without_reference_data_skips(tmp_path):
    absent = tmp_path / "absent"
    p = _pytest(tmp_path, CI="true", **{ENV_VAR: str(absent), WITHOUT_REFERENCE_VAR: "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed, 1 skipped" in p.stdout and f"${ENV_VAR}={absent} is not a directory" in p.stdout
    p = _pytest(tmp_path / "again", CI="true", **{ENV_VAR: str(absent), WITHOUT_REFERENCE_VAR: "0"})
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, p.stdout + p.stderr


_BLOCK_ENGINES = '''
import sys

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("llama_cpp", "ik_llama_cpp"):
            raise ImportError(f"blocked by the test: {name}")
        return None

sys.meta_path.insert(0, _Block())
'''
ENGINE_MODULES = ["engines/test_native.py", "engines/test_native_k3.py", "engines/test_native_ik.py", "engines/test_conformance.py"]


@pytest.mark.parametrize("ci, status", [("true", pytest.ExitCode.INTERRUPTED), (None, pytest.ExitCode.OK)])
def test_engine_test_modules_fail_under_ci_when_the_engine_does_not_import(tmp_path, ci, status):
    (tmp_path / "block_engines.py").write_text(_BLOCK_ENGINES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "CI")}
    env.update({WITHOUT_REFERENCE_VAR: "1", "PYTHONPATH": os.pathsep.join(
        [str(tmp_path), str(HERE.parent), env.get("PYTHONPATH", "")])})
    if ci:
        env["CI"] = ci
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "block_engines", "-p", "no:cacheprovider",
                        *[str(HERE / m) for m in ENGINE_MODULES]], cwd=HERE.parent, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == status, p.stdout + p.stderr
    if ci:
        summary = {line.split()[1]: line for line in p.stdout.splitlines() if line.startswith("ERROR tests/")}
        assert sorted(summary) == sorted(f"tests/{m}" for m in ENGINE_MODULES), p.stdout
        for module, line in summary.items():
            package = "ik-llama-cpp-python (.ci/install-native-ik.sh" if "_ik" in module else \
                "llama-cpp-python (.ci/install-native.sh"
            assert f"CI=true: {package} installs it) is not installed" in line, line


_REFERENCE_PATH = re.compile(r"^(?:tokenizer|Kimi-K[\w.-]*|unverified|llama\.cpp-adaptations)/[\w.@+-]+\.\w+$")


def _reference_paths_named_in(root: Path) -> set[str]:
    """String constants of the Python files under ``root`` that are paths into the reference directory."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _REFERENCE_PATH.match(node.value):
                found.add(node.value)
    return found


def test_required_files_list_every_reference_file_the_code_and_tests_read():
    from kimi_chat.dialects import DIALECTS
    from kimi_chat.checks.known_problems import KNOWN_TEMPLATES
    from kimi_chat.tokens.tokenizer import REFERENCE_CONFIGS

    read = ({d.oracle for d in DIALECTS.values()} | {t.source for t in KNOWN_TEMPLATES}
            | set(REFERENCE_CONFIGS.values()) | _reference_paths_named_in(HERE.parent / "kimi_chat")
            | _reference_paths_named_in(HERE))
    assert "tokenizer/tiktoken.model" in read and "Kimi-K3/tokenization_kimi.py" in read
    assert sorted(read - set(REQUIRED_FILES)) == []
    assert len(set(REQUIRED_FILES)) == len(REQUIRED_FILES)


@needs_reference
def test_the_reference_module_checks_a_directory_as_a_script(tmp_path):
    # .ci/run runs it on the bare python3, before any venv exists
    script = HERE.parent / "kimi_chat" / "reference" / "__init__.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ok = subprocess.run([sys.executable, "-S", str(script)], env={**env, ENV_VAR: str(REFERENCE)},
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and f"{REFERENCE} ({len(REQUIRED_FILES)} files)" in ok.stdout, ok.stderr
    partial = _partial_reference(tmp_path, "Kimi-K3/encoding_k3.py")
    bad = subprocess.run([sys.executable, "-S", str(script)], env={**env, ENV_VAR: str(partial)},
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "lacks 1 of" in bad.stderr and "Kimi-K3/encoding_k3.py" in bad.stderr
