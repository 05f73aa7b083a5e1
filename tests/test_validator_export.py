"""``kimi_chat.Validator`` and ``kimi_chat.Mode``: the one validator, exported at the top level, is the one of
:mod:`kimi_chat.validation`, and refuses the same bad input with the same finding as ``render(strict=True)``."""

from __future__ import annotations

import pytest

import kimi_chat
from kimi_chat import Mode, StrictModeError, Validator, render
from kimi_chat import validation
from kimi_chat.errors import RequestError
from kimi_chat.validation import findings_of

MSGS = [{"role": "user", "content": "hi"}]
NO_FUNCTION = [{"type": "function"}]  # a function tool without its function


def test_exported_at_the_top_level() -> None:
    assert Validator is validation.Validator and Mode is validation.Mode
    assert {"Validator", "Mode"} <= set(kimi_chat.__all__)
    assert [m.value for m in Mode] == ["parity", "strict", "api"]


def test_strict_refuses_what_render_strict_refuses_with_the_same_finding() -> None:
    with pytest.raises(StrictModeError) as by_validator:
        Validator("moonshotai/Kimi-K2.6", Mode.STRICT).check(MSGS, tools=NO_FUNCTION)
    with pytest.raises(StrictModeError) as by_render:
        render(MSGS, tools=NO_FUNCTION, dialect="kimi-k2.6", strict=True)
    found = [(f.code, f.path) for f in findings_of(by_validator.value)]
    assert found == [("tool-without-function", "tools[0].function")]
    assert [(f.code, f.path) for f in findings_of(by_render.value)] == found


def test_the_modes_differ_as_documented() -> None:
    # parity: only what the official rendering refuses (the template renders this tool list)
    assert Validator("kimi-k2.6").check(MSGS, tools=NO_FUNCTION) == []
    # api: Moonshot's contract, a request error naming the same finding
    with pytest.raises(RequestError) as api:
        Validator("kimi-k2.6", "api").check(MSGS, tools=NO_FUNCTION)
    assert [(f.code, f.path) for f in findings_of(api.value)] == [("tool-without-function", "tools[0].function")]
    with pytest.raises(ValueError):
        Validator("kimi-k2.6", "lenient")
