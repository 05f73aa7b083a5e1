"""``families.lazy_module``: the accessor a family record holds for its serving and constraint modules imports
the module on its first call, not when the record is built, and returns that module on every call."""

from __future__ import annotations

import importlib

import pytest

from kimi_chat.families import REGISTRY, family_of, lazy_module


@pytest.mark.parametrize("family", sorted(REGISTRY))
def test_a_records_accessors_give_its_packages_modules(family: str) -> None:
    record = family_of(family)
    package = REGISTRY[family].rpartition(".")[0]
    hooks = record.serving.hooks()
    assert hooks is importlib.import_module(f"{package}.serving")
    assert record.serving.hooks() is hooks


def test_the_module_is_imported_on_the_first_call_only() -> None:
    missing = lazy_module("kimi_chat.families.k2", "no_such_module")  # building the accessor imports nothing
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        missing()
    usage = lazy_module("kimi_chat.families.k2", "usage")
    assert usage() is importlib.import_module("kimi_chat.families.k2.usage")
    assert usage.__name__ == "lazy_module('kimi_chat.families.k2', 'usage')"


def test_a_module_without_a_package_is_refused() -> None:
    with pytest.raises(ValueError, match="__package__"):
        lazy_module(None, "serving")
