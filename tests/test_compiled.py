"""The modules compiled with mypyc (``setup.py``, :mod:`kimi_chat.compiled`): CI runs them compiled, they
answer as their Python source answers, and the import hook runs a build only while the sources are the
ones it was built from (else the sources, with the reason)."""

from __future__ import annotations

import importlib.machinery
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, strategies as st

import kimi_chat
from kimi_chat import compiled

IN_CI = os.environ.get("CI") == "true"
PACKAGE = Path(kimi_chat.__file__).parent
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


@pytest.mark.skipif(not IN_CI or os.environ.get(compiled.PURE_ENV) == "1",
                    reason="a local build may be pure Python (no mypyc); CI builds the modules and runs them, but "
                    "for its step that runs the sources on purpose (KIMI_CHAT_PURE_PYTHON=1)")
def test_ci_runs_the_compiled_modules():
    assert compiled.describe() == "compiled (mypyc)"
    for name in compiled.MODULES:
        assert Path(sys.modules[name].__file__).parent == PACKAGE / compiled.DIRECTORY, name


def test_the_environment_variable_runs_the_sources():
    code = ("import sys, kimi_chat, kimi_chat.messages, kimi_chat.families.k3.render\n"
            "from kimi_chat import compiled\n"
            "print(compiled.describe()); print(all(sys.modules[n].__file__.endswith('.py') for n in compiled.MODULES))")
    env = {**os.environ, compiled.PURE_ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"pure Python ({compiled.PURE_ENV}=1)", "True"]


# ---- the compiled modules answer as their sources

# message-like values: the fields the checks read, with values of every type they tell apart (exact dict,
# list and str; subclasses, tuples, None, non-str keys), nested
_FIELDS = ["role", "name", "content", "tool_calls", "reasoning_content", "reasoning", "thinking", "function",
           "arguments", "id", "type", "text", "tool_call_id"]


class _Str(str):
    pass


class _Dict(dict):
    pass


_leaves = (st.none() | st.booleans() | st.integers() | st.sampled_from(["user", "assistant", "tool", "system", "x"])
           | st.builds(_Str, st.sampled_from(["user", "assistant"])) | st.floats(allow_nan=False))
_keys = st.sampled_from(_FIELDS) | st.integers(0, 2) | st.builds(_Str, st.sampled_from(_FIELDS))
_values = st.recursive(
    _leaves,
    lambda inner: (st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4)
                   | st.builds(_Dict, st.dictionaries(_keys, inner, max_size=3)) | st.tuples(inner)),
    max_leaves=12,
)
_messages = st.dictionaries(_keys, _values, max_size=5)


def _compiled_and_source(name: str) -> tuple[ModuleType, ModuleType]:
    if compiled.describe() != "compiled (mypyc)":
        pytest.skip(f"the package runs from its sources here ({compiled.describe()}): nothing to compare "
                    "(CI fails test_ci_runs_the_compiled_modules instead)")
    return sys.modules[name], compiled.source_module(name)


@given(st.lists(_messages | _values, max_size=4))
def test_renderable_fast_answers_as_its_source(msgs: list[Any]):
    built, source = _compiled_and_source("kimi_chat.message_shapes")
    assert built.renderable_fast(msgs) == source.renderable_fast(msgs)


@given(st.lists(_messages | _values, max_size=4))
def test_plain_dicts_answers_as_its_source(msgs: list[Any]):
    built, source = _compiled_and_source("kimi_chat.message_shapes")
    assert built.plain_dicts(msgs) == source.plain_dicts(msgs)


@given(_messages)
def test_holds_objects_answers_as_its_source(m: dict[str, Any]):
    built, source = _compiled_and_source("kimi_chat.message_shapes")
    assert built.holds_objects(m) == source.holds_objects(m)


# ---- which build the import hook takes (compiled.decide), on a copy of the sources


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of the sources of compiled.MODULES laid out as in the package, no build; the variable unset."""
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    for name in compiled.MODULES:
        rel = Path(*name.split(".")[1:]).with_suffix(".py")
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / rel, tmp_path / rel)
    return tmp_path


def _build(package: Path, digest: str) -> None:
    """The files a build from sources of ``digest`` leaves (empty: decide looks at names only)."""
    directory = package / compiled.DIRECTORY
    directory.mkdir(exist_ok=True)
    for name in compiled.MODULES:
        (directory / (compiled.extension_stem(name, digest) + SUFFIX)).write_bytes(b"")
    (directory / f"g{digest}__mypyc{SUFFIX}").write_bytes(b"")


def test_a_build_of_these_sources_runs(package):
    _build(package, compiled.source_digest(package))
    assert compiled.decide(package) == ("compiled (mypyc)", compiled.source_digest(package))


def test_no_build_runs_the_sources(package):
    assert compiled.decide(package) == ("pure Python (not compiled for this Python)", None)


def test_a_build_for_another_python_runs_the_sources(package):
    _build(package, compiled.source_digest(package))
    for f in (package / compiled.DIRECTORY).iterdir():
        f.rename(f.with_name(f.name.replace(SUFFIX, ".cpython-399-x86_64-linux-gnu.so")))
    assert compiled.decide(package) == ("pure Python (not compiled for this Python)", None)


def test_an_edited_source_runs_every_source(package, caplog):
    _build(package, compiled.source_digest(package))
    last = package / Path(*compiled.MODULES[-1].split(".")[1:]).with_suffix(".py")
    last.write_text(last.read_text() + "\n# edited\n")
    with caplog.at_level(logging.WARNING, logger="kimi_chat.compiled"):
        state, digest = compiled.decide(package)
    assert (state, digest) == ("pure Python (compiled from other sources: rebuild with pip install -e .)", None)
    assert "rebuild: pip install -e ." in caplog.text


def test_the_variable_wins_over_a_build(package, monkeypatch):
    _build(package, compiled.source_digest(package))
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    assert compiled.decide(package) == (f"pure Python ({compiled.PURE_ENV}=1)", None)


def test_the_digest_covers_every_module(package):
    before = compiled.source_digest(package)
    for name in compiled.MODULES:
        path = package / Path(*name.split(".")[1:]).with_suffix(".py")
        text = path.read_text()
        path.write_text(text + " ")
        assert compiled.source_digest(package) != before, name
        path.write_text(text)
    assert compiled.source_digest(package) == before
