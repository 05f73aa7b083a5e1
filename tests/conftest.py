"""Shared test configuration: hypothesis profiles and the reference-data (oracle) fixture.

Without the official reference data the oracle tests skip with the reason, locally; under ``CI``
(set and not ``0``/``false``/``no``) the run fails at once with the reason instead, so a CI whose data
went missing cannot pass with every oracle test skipped (issue 11 item 4)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kimi_chat.reference import ENV_VAR, missing_reason, reference_dir

# The suite's default for the reference data: ../shared/reference beside this repository (the library
# itself looks only where $KIMI_CHAT_REFERENCE_DIR or an argument says; subprocesses inherit this).
_REPO_REFERENCE = Path(__file__).resolve().parent.parent.parent / "shared" / "reference"
if not os.environ.get(ENV_VAR) and _REPO_REFERENCE.is_dir():
    os.environ[ENV_VAR] = str(_REPO_REFERENCE)

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
"""Whether this run is CI (``$CI``, as CI services set it)."""

# `ci`: at least 300 examples per dialect for the oracle properties (the formatter issue's floor);
# `dev` (default): quick; `deep`: a long local run.
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "dev"))

REFERENCE = reference_dir()
REFERENCE_MISSING = None if REFERENCE is not None else (
    f"official reference data not found ({missing_reason()}); oracle tests need the official templates"
)
needs_reference = pytest.mark.skipif(REFERENCE is None, reason=REFERENCE_MISSING or "")


def pytest_configure(config: pytest.Config) -> None:
    if IN_CI and REFERENCE_MISSING is not None:
        raise pytest.UsageError(f"CI=true: {REFERENCE_MISSING}; refusing to let the oracle tests skip")
