"""Shared test configuration: hypothesis profiles and the reference-data (oracle) fixture."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from kimi_chat.reference import ENV_VAR, reference_dir

# `ci`: at least 300 examples per dialect for the oracle properties (the formatter issue's floor);
# `dev` (default): quick; `deep`: a long local run.
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

REFERENCE = reference_dir()
needs_reference = pytest.mark.skipif(
    REFERENCE is None,
    reason=f"official reference data not found (set ${ENV_VAR} or provide ../shared/reference); "
    "oracle tests need the official templates",
)
