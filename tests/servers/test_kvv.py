"""Moonshot's Kimi Vendor Verifier (KVV) against ``kimi-chat serve``: its API-contract suites, UNCHANGED from
``../shared/kvv`` (beside this repository, or ``$KIMI_CHAT_KVV_DIR``), run as Moonshot runs them (SOURCE.md)
against the server on the terse tiny model (``kimi-chat tiny-model --terse``) on a loopback port, under
``--contract moonshot``:

* Kimi-K3: ``tests/params`` (``--think-mode kimi``), ``tests/k3_features`` (every test plain and streamed, by
  its own conftest) and ``tests/tool_call_json_schema`` on the schemas of ``tests/data/kvv_cases``;
* every K2 dialect (:data:`K2_RUNS`: K2.6, K2.5, K2-Thinking, 0905, K2-Instruct rev2 and rev1): ``tests/params`` with
  ``--think-mode opensource`` (``chat_template_kwargs``) where the dialect thinks and ``none`` for the
  instruct dialects, and ``tests/k3_features`` less the dynamic tools (a K3 feature,
  :data:`K2_NOT_APPLICABLE`).

Left out (deselected), in one place (:data:`DESELECTED`): the tests that judge what a model
writes of its own accord, with its reasons. Every other test must pass; a suite's own skips (Moonshot's
"not pass" marks) stay skips. Skipped without the KVV copy, the reference data (the tiny model's vocabulary),
llama-cpp-python or the serve extra; under CI their absence fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import IN_CI, WITHOUT_REFERENCE, require_in_ci, skip_without_reference

ROOT = Path(__file__).resolve().parents[2]
KVV_ENV = "KIMI_CHAT_KVV_DIR"
KVV_DIR = Path(os.environ.get(KVV_ENV) or ROOT.parent / "shared" / "kvv")
CASES = ROOT / "tests" / "data" / "kvv_cases"

DESELECTED: dict[str, str] = {
    "test_tool_choice_auto_may_call": "auto may call: whether a model calls a tool of its own accord",
    "test_tool_choice_auto_may_not_call": "auto may not call: whether a model answers in text of its own accord",
    "test_effort_omitted_returns_reasoning": "asks the model to report its effort",
    "test_reasoning_effort_ignored_when_effort_present": "asks the model to report its effort",
    "test_reasoning_effort_effective_when_effort_absent": "asks the model to report its effort",
    "test_json_object": "json_object: a key the prompt asks for, with no schema to enforce it",
    "test_text_default": "needs the model to write a whole free-form turn by itself",
    "test_basic_enabled_returns_reasoning": "needs the model to write a whole free-form turn by itself",
    "test_default_type_is_enabled": "needs the model to write a whole free-form turn by itself",
    "test_effort_stream_returns_reasoning_chunks": "needs the model to write a whole free-form turn by itself",
    "test_tool_choice_without_tools_field_accepted": "needs the model to write a whole free-form turn by itself",
    # also left out here, for the reason given beside each:
    "test_global_and_dynamic_tools_coexist": "which of two tools fits the prompt (a forced call must pick the "
    "weather tool for a weather question) is the model's judgment: the tiny model picks one at random (KVV "
    "marks it flaky); the forced calls with dynamic tools are checked by the other dynamic-tool tests",
}
"""KVV tests that judge what a model writes of its own accord, by name, with the reason."""

K2_NOT_APPLICABLE: dict[str, str] = {
    "test_dynamic_tools.py": "tools declared in a system message are Kimi-K3's (the K2 templates ignore them: a "
    "K2 dialect answers such a request with a 400 naming messages[i].tools)",
    "test_response_format_prompt_tokens_without": "its ground truth (36) counts a Kimi-K3 prompt",
    "test_response_format_with": "its ground truth (119) counts a Kimi-K3 prompt",
}
"""KVV files (``.py``) and tests that check a K3 fact, left out on the K2 dialects."""

K2_RUNS: dict[str, str] = {
    "kimi-k2.6": "opensource",
    "kimi-k2.5": "opensource",
    "kimi-k2-thinking@rev1": "opensource",
    "kimi-k2-instruct-0905": "none",
    "kimi-k2-instruct@rev2": "none",
    "kimi-k2-instruct@rev1": "none",
}
"""Every K2 dialect, with the ``--think-mode`` of its ``tests/params`` run: ``opensource``
(``chat_template_kwargs.thinking``) where the dialect thinks (K2-Thinking's template has no switch: the kwarg
is a warning, dropped), ``none`` (no thinking field) for the instruct dialects. ``tests/k3_features`` sends
Moonshot's ``thinking`` object itself (a K2 template without the switch: a warning)."""

RUNS = [
    pytest.param("kimi-k3", "params", "kimi", id="k3-params"),
    pytest.param("kimi-k3", "k3_features", "kimi", id="k3-k3_features"),
    pytest.param("kimi-k3", "tool_call_json_schema", "kimi", id="k3-tool_call_json_schema"),
    *(pytest.param(d, suite, mode if suite == "params" else "kimi", id=f"{d.removeprefix('kimi-')}-{suite}")
      for d, mode in K2_RUNS.items() for suite in ("params", "k3_features")),
]
MODEL_NAME = "kimi-tiny-terse"
KEY = "kvv-test-key"


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


_NEEDS = {"llama_cpp": "llama-cpp-python (.ci/install-native.sh)", "starlette": "the serve extra",
          "uvicorn": "the serve extra", "openai": "openai (the test extra)", "httpx": "httpx (the test extra)",
          "jsonschema": "jsonschema (the test extra)"}
_MISSING = [what for module, what in _NEEDS.items() if not _have(module)]
require_in_ci(not _MISSING, ", ".join(_MISSING))
if IN_CI and not WITHOUT_REFERENCE and not (KVV_DIR / "tests").is_dir():  # (CI's no-data step: it skips)
    pytest.fail(f"CI=true: the KVV copy is not at {KVV_DIR} (${KVV_ENV})", pytrace=False)
pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}"),
    pytest.mark.skipif(not (KVV_DIR / "tests").is_dir(),
                       reason=f"Moonshot's KVV copy not found at {KVV_DIR} (set ${KVV_ENV})"),
]


def _wait(proc: subprocess.Popen, port: int, log: Path, seconds: float = 180.0) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"kimi-chat serve exited ({proc.returncode}): {log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"kimi-chat serve did not come up in {seconds:.0f}s: {log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory):
    """dialect -> base URL of a `kimi-chat serve --contract moonshot` on its terse tiny model (started on use)."""
    from kimi_chat.testing.tiny_model import build_tiny_model
    from serve_support import listening_port

    skip_without_reference()
    started: dict[str, tuple[subprocess.Popen, str]] = {}
    logs = tmp_path_factory.mktemp("kvv-serve")

    def get(dialect: str) -> str:
        if dialect not in started:
            model = build_tiny_model(logs / f"{dialect}.gguf", dialect=dialect, terse=True)
            log = logs / f"{dialect}.log"
            with open(log, "wb") as out:  # (--port 0: the kernel's free port, said in the log)
                proc = subprocess.Popen(
                    [sys.executable, "-m", "kimi_chat.cli", "serve", str(model), "-d", dialect, "--port", "0",
                     "--api-key", KEY, "--contract", "moonshot", "--name", MODEL_NAME, "--n-ctx", "4096"],
                    stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
            started[dialect] = (proc, "")
            port = listening_port(log, proc, 180.0)
            started[dialect] = (proc, f"http://127.0.0.1:{port}/v1")
            _wait(proc, port, log)
        return started[dialect][1]

    yield get
    for proc, _ in started.values():
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _deselect(dialect: str, suite: str) -> list[str]:
    names = list(DESELECTED)
    k2 = dialect != "kimi-k3" and suite == "k3_features"
    if k2:
        names += [n for n in K2_NOT_APPLICABLE if not n.endswith(".py")]
    args = ["-k", " and ".join(f"not {n}" for n in names)]
    if k2:
        args += [f"--ignore=tests/{suite}/{f}" for f in K2_NOT_APPLICABLE if f.endswith(".py")]
    return args


def run_kvv(base_url: str, dialect: str, suite: str, think_mode: str, out: Path) -> dict[str, list[str]]:
    """Run one KVV suite against ``base_url``; return its test ids by outcome (passed, failed, skipped)."""
    junit = out / f"{dialect}-{suite}.xml"
    args = [sys.executable, "-m", "pytest", f"tests/{suite}", "-q", "-p", "no:cacheprovider", "--rootdir", str(KVV_DIR),
            "--base-url", base_url, "--api-key", KEY, "--smoke-model", MODEL_NAME, "--think-mode", think_mode,
            f"--junitxml={junit}", *_deselect(dialect, suite)]
    if suite == "tool_call_json_schema":
        args += ["--case-dir", str(CASES), "--max-tokens", "512", "--tool-json-report", str(out / "tool-report.json")]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)  # (KVV's own conftest does not read it; our conftest is not on its path)
    proc = subprocess.run(args, cwd=KVV_DIR, env=env, capture_output=True, text=True, timeout=3600)
    outcomes: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}
    if not junit.exists():
        raise AssertionError(f"KVV {suite} did not run ({proc.returncode}): {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        kind = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcomes[kind].append(name)
    (out / f"{dialect}-{suite}.log").write_text(proc.stdout + proc.stderr)
    return outcomes


@pytest.mark.parametrize("dialect, suite, think_mode", RUNS)
def test_kvv_suite_passes(servers, tmp_path, dialect, suite, think_mode):
    outcomes = run_kvv(servers(dialect), dialect, suite, think_mode, tmp_path)
    print(json.dumps({"dialect": dialect, "suite": suite, **{k: len(v) for k, v in outcomes.items()}}))
    failed = outcomes["failed"]
    log = (tmp_path / f"{dialect}-{suite}.log").read_text()
    assert not failed, f"{len(failed)} KVV tests failed: {failed}\n{log[-6000:]}"
    assert outcomes["passed"], log[-3000:]


def test_deselected_tests_exist_in_kvv():
    """The deselection list names KVV tests that exist (a renamed test must not slip out of the run)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in (KVV_DIR / "tests").rglob("test_*.py"))
    missing = [name for name in [*DESELECTED, *K2_NOT_APPLICABLE] if f"def {name}(" not in text
               and not (KVV_DIR / "tests" / "k3_features" / name).is_file()]
    assert not missing


def test_case_dir_holds_valid_schemas():
    import jsonschema

    suites = sorted(p for p in CASES.iterdir() if p.is_dir())
    assert suites
    for suite in suites:
        for line in (suite / "valid.jsonl").read_text().splitlines():
            jsonschema.Draft202012Validator.check_schema(json.loads(line))
