"""Tests of the vLLM / SGLang adapters, run against the real frameworks in their own venv.

They are collected only when ``KIMI_CHAT_ADAPTER_TESTS=1`` (the main test run, in the project venv
without the frameworks, does not collect them). When they are collected, a missing framework is an
import error, i.e. a failure, never a skip::

    bash .ci/install-adapters.sh /work/venvs/adapters
    KIMI_CHAT_ADAPTER_TESTS=1 /work/venvs/adapters/bin/python -m pytest -q tests/adapters
"""

from __future__ import annotations

import os

import pytest

ENABLE_ENV = "KIMI_CHAT_ADAPTER_TESTS"

if os.environ.get(ENABLE_ENV) != "1":
    collect_ignore_glob = ["test_*.py"]
else:
    from .adapter_support import hf_tokenizer  # noqa: E402  (imports transformers: fail loudly)

    @pytest.fixture(scope="session")
    def tok_reasoning():
        """HF fast tokenizer of the K2.5/K2.6 vocabulary (``<think>``/``</think>`` are tokens)."""
        return hf_tokenizer("k2.6")

    @pytest.fixture(scope="session")
    def tok_instruct():
        """HF fast tokenizer of the July-2025 Kimi-K2-Instruct vocabulary (``<think>`` is text)."""
        return hf_tokenizer("k2")
