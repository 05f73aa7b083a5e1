"""The embedded engine behind ``kimi-chat serve`` (the tiny Kimi models in llama.cpp): a vocabulary without
the dialect's markers is refused at load; a constraint that fails mid-generation fails the request once
(no traceback per token); the KV cache of the previous request's prompt is reused; the sampling fields and
log probabilities are real llama.cpp ones; ``kimi-chat tiny-model -d kimi-k2.6`` writes the vocabulary its
dialect needs, saying its progress; ``--upstream`` llama-server with ``-np`` slots runs two requests at
once."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from conftest import require_in_ci, skip_without_reference

pytest.importorskip("starlette", reason="kimi-chat serve needs the serve extra (pip install 'kimi-chat[serve]')")
httpx = pytest.importorskip("httpx")

from kimi_chat import markers as M  # noqa: E402

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False
require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")

needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed "
                                 "(pip install 'kimi-chat[native]')")


@pytest.fixture(scope="module")
def k26_made(tmp_path_factory) -> tuple[Path, str]:
    """``kimi-chat tiny-model -d kimi-k2.6``: the GGUF and what the command wrote to stderr."""
    import os
    import subprocess
    import sys

    skip_without_reference()
    pytest.importorskip("gguf")
    out = tmp_path_factory.mktemp("k26") / "k26.gguf"
    proc = subprocess.run([sys.executable, "-m", "kimi_chat.cli", "tiny-model", "-d", "kimi-k2.6", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


@pytest.fixture(scope="module")
def k26_gguf(k26_made) -> Path:
    return k26_made[0]


def test_tiny_model_k26_has_the_markers_of_its_dialect_and_says_its_progress(k26_made):
    import gguf

    gguf_path, stderr = k26_made
    reader = gguf.GGUFReader(str(gguf_path))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    types = reader.fields["tokenizer.ggml.token_type"]

    def token(i: int) -> tuple[str, int]:
        return (bytes(tokens.parts[tokens.data[i]]).decode("utf-8"), int(types.parts[types.data[i]][0]))

    control = gguf.TokenType.CONTROL
    # K2.6 writes reasoning between <think> and </think>, each one special id (reference/PROVENANCE.md)
    assert token(M.THINK_BEGIN.id) == (M.THINK_BEGIN.text, control)
    assert token(M.THINK_END.id) == (M.THINK_END.text, control)
    progress = [line for line in stderr.splitlines() if line.startswith("kimi-chat: ")]
    assert len(progress) >= 4  # the tokenizer, the vocabulary, the weights, the file; then "wrote"
    assert any("vocabulary" in line for line in progress) and progress[-1].startswith("kimi-chat: wrote")

