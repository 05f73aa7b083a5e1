"""Shared test configuration: hypothesis profiles and the reference-data (oracle) fixture.

Without the official reference data (every file of :data:`kimi_chat.reference.REQUIRED_FILES`) the
tests that need it skip with the reason, locally; under ``CI`` (set and not ``0``/``false``/``no``) the
run fails at once with the reason instead, so a CI whose data went missing cannot pass with the oracle
tests skipped. The one exception is CI's own run of the suite without any reference data (``.ci/run``),
which says so with ``KIMI_CHAT_TEST_WITHOUT_REFERENCE=1``.
In the same way, under ``CI`` a missing optional engine fails its tests (:func:`require_in_ci`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kimi_chat.reference import ENV_VAR, reference_dir, unavailable_reason

# The suite's default for the reference data: ../shared/reference beside this repository (the library
# itself looks only where $KIMI_CHAT_REFERENCE_DIR or an argument says; subprocesses inherit this).
_REPO_REFERENCE = Path(__file__).resolve().parent.parent.parent / "shared" / "reference"
if not os.environ.get(ENV_VAR) and _REPO_REFERENCE.is_dir():
    os.environ[ENV_VAR] = str(_REPO_REFERENCE)

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
"""Whether this run is CI (``$CI``, as CI services set it)."""

WITHOUT_REFERENCE_VAR = "KIMI_CHAT_TEST_WITHOUT_REFERENCE"
"""Set to ``1``: a run that is meant to have no reference data (CI's fresh-clone step): under ``CI``
the missing data is then not an error and the tests that need it skip, as they do locally."""
WITHOUT_REFERENCE = os.environ.get(WITHOUT_REFERENCE_VAR, "") == "1"

# `ci`: at least 300 examples per dialect for the oracle properties (the formatter's floor);
# `dev` (default): quick; `deep`: a long local run.
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "dev"))

_UNAVAILABLE = unavailable_reason()
REFERENCE = reference_dir() if _UNAVAILABLE is None else None
"""The reference directory, when it holds every file the tests need (else ``None``)."""
REFERENCE_MISSING = None if _UNAVAILABLE is None else (
    f"official reference data not found ({_UNAVAILABLE}); oracle tests need the official templates"
)
needs_reference = pytest.mark.skipif(REFERENCE is None, reason=REFERENCE_MISSING or "")


def skip_without_reference() -> None:
    """Skip the calling test or fixture with the reason when the reference data is missing (for a
    fixture that builds something from it, such as the tiny GGUF, where a mark cannot go)."""
    if REFERENCE_MISSING is not None:
        pytest.skip(REFERENCE_MISSING)


def require_in_ci(available: bool, what: str) -> None:
    """At a test module's import: under ``CI``, fail the module when ``what`` (an optional package
    CI installs, named with its install command) is not ``available``; locally its tests skip."""
    if IN_CI and not available:
        pytest.fail(f"CI=true: {what} is not installed", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    if IN_CI and REFERENCE_MISSING is not None and not WITHOUT_REFERENCE:
        raise pytest.UsageError(
            f"CI=true: {REFERENCE_MISSING}; refusing to let the oracle tests skip "
            f"(a run meant to have no reference data sets {WITHOUT_REFERENCE_VAR}=1)"
        )


@pytest.fixture(scope="module", params=["caches cold", "caches warm"])
def cache_state(request):
    """Run a module's tests twice (caches must not change any output): ``caches cold``,
    with every cache of :data:`kimi_chat.caches.REGISTRY` emptied and every lookup a miss (each
    example computes everything), then ``caches warm``, emptied once and used as a server uses them
    (examples that repeat a tool list hit). Module-scoped: hypothesis refuses function-scoped
    fixtures. Use with ``pytestmark = pytest.mark.usefixtures("cache_state")``."""
    from kimi_chat import caches

    caches.clear_all()
    if request.param == "caches cold":
        with caches.bypassed():
            yield request.param
    else:
        yield request.param
    caches.clear_all()


@pytest.fixture(scope="module", params=["fast path", "validated"])
def message_paths(request):
    """Run a module's tests with the plain-dict fast path of :mod:`kimi_chat.messages` and its
    validated-tools cache on (the default) and off (every input through the pydantic validation): the
    results and errors must be the same."""
    from kimi_chat import caches, messages

    with pytest.MonkeyPatch.context() as mp:
        if request.param == "validated":
            mp.setattr(messages, "renderable_fast", lambda msgs: False)
            mp.setattr(messages, "_VALID_TOOLS", caches.LRUCache(None, 0))  # keeps nothing: tools validated
        yield request.param


@pytest.fixture(scope="module")
def tokenizer():
    """The official K2 tokenizer (the serve tests' scripted engines speak it; a module that means another
    defines its own ``tokenizer``). Needs the reference data: mark the module ``needs_reference``."""
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k2")
