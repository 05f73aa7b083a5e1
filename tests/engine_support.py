"""What the engine and grammar tests share (``test_native*.py``, ``test_conformance.py``, ``test_grammar*.py``):
whether llama-cpp-python is installed, the tiny model of a dialect and the engine loaded with it (pytest
fixtures), the tools both families' engine tests ask for, and a small JSON-schema check of generated arguments
written independently of ``kimi_chat.grammar``."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import skip_without_reference

def _findable(module: str) -> bool:
    """``module`` can be imported (found, not loaded); a finder that refuses it raises ImportError: not."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


HAVE_LLAMA = _findable("llama_cpp")
"""llama-cpp-python is installed (its library loads when a test uses it: the grammar tests never do)."""

LLAMA_MISSING = ("llama-cpp-python is not installed (bash .ci/install-native.sh .venv; CI installs it with "
                 ".ci/install-native.sh)")
"""Why the llama.cpp tests skip without the binding."""


def tiny_model_fixtures(dialect: str, directory: str, filename: str, *, scope: str = "module",
                        backend: str | None = None, gguf_name: str = "tiny_gguf",
                        model_name: str = "model") -> tuple[Any, Any]:
    """Two fixtures, bound by the test module to module names: ``gguf_name``, the tiny random model of
    ``dialect`` built once (``directory/filename`` under pytest's tmp; skipped without the reference data, whose
    vocabulary it has), and ``model_name``, that model loaded in ``backend`` (default llama.cpp), closed after."""

    @pytest.fixture(scope=scope, name=gguf_name)
    def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
        from kimi_chat.testing.tiny_model import build_tiny_model

        skip_without_reference()  # its vocabulary is the reference tokenizer's

        return build_tiny_model(tmp_path_factory.mktemp(directory) / filename, dialect=dialect)

    @pytest.fixture(scope=scope, name=model_name)
    def model(request: pytest.FixtureRequest) -> Iterator[Any]:
        from kimi_chat.engines.native import NativeModel

        path = request.getfixturevalue(gguf_name)
        m = NativeModel.load(path, n_ctx=2048, **({} if backend is None else {"backend": backend}))
        yield m
        m.close()

    return gguf, model


def reference_tokenizer_fixture(config: str, *, scope: str = "module", name: str = "reference_tokenizer") -> Any:
    """A fixture ``name``: ``KimiTokenizer.from_reference(config)`` (skipped without the reference data)."""

    @pytest.fixture(scope=scope, name=name)
    def tokenizer() -> Any:
        from kimi_chat.tokens.tokenizer import KimiTokenizer

        skip_without_reference()

        return KimiTokenizer.from_reference(config)

    return tokenizer


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {
                "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 999}, "minItems": 1,
                        "maxItems": 3},
                "exact": {"type": "boolean"},
                "note": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "null"}]},
            },
            "required": ["ids", "exact"],
            "additionalProperties": False,
        },
    },
}
"""A tool with an array, a boolean and a nullable string: the second tool of the engine tests."""


def weather_tool(*, days_minimum: int, description: str | None = None) -> dict[str, Any]:
    """The weather tool of the engine tests (``city`` at most 10 chars, ``unit`` an enum, both required;
    ``days`` an integer from ``days_minimum`` to 30; no other key)."""
    fn: dict[str, Any] = {"name": "get_weather"}
    if description is not None:
        fn["description"] = description
    fn["parameters"] = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 10},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": days_minimum, "maximum": 30},
        },
        "required": ["city", "unit"],
        # closed and bounded: the token masks enforce the schema exactly, and the random model
        # closes a call within max_tokens only where the schema bounds it
        "additionalProperties": False,
    }
    return {"type": "function", "function": fn}


def valid(value: Any, schema: Any) -> bool:
    """Whether ``value`` follows ``schema``, for the subset of JSON schema the test tools use (``anyOf``,
    ``enum``, objects with ``required`` and ``properties`` (none given: any keys), arrays with ``items``,
    ``minItems``, ``maxItems``, strings with ``maxLength``, integers with ``minimum``, numbers, booleans,
    null; ``True`` / ``{}``: anything)."""
    if schema in (True, {}):
        return True
    if "anyOf" in schema:
        return any(valid(value, s) for s in schema["anyOf"])
    if "enum" in schema and value not in schema["enum"]:
        return False
    t = schema.get("type")
    if t == "object":
        props = schema.get("properties")
        if not isinstance(value, dict) or not set(schema.get("required", ())) <= set(value):
            return False
        return props is None or (set(value) <= set(props) and all(valid(v, props[k]) for k, v in value.items()))
    if t == "array":
        return (isinstance(value, list) and schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", 10**9)
                and all(valid(v, schema.get("items", {})) for v in value))
    if t == "string":
        return isinstance(value, str) and len(value) <= schema.get("maxLength", 10**9)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and value >= schema.get("minimum", -(10**30))
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return t != "null" or value is None
