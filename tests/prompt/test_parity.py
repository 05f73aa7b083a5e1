"""Official parity by default, ``strict=True`` and the lint codes behind it.

The default renders every odd-but-real input the official template renders (``test_render_oracle``
checks the bytes against the oracle); here: ``lint`` reports each odd input with its code, message
index and field, ``strict=True`` refuses exactly the lint errors, naming them, and accepts every
ordinary request unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import given, note, strategies as st

from kimi_chat.dialects import K2_DIALECTS
from kimi_chat import StrictModeError, get_dialect, lint, render, render_tokens
from kimi_chat.checks.lint import ERROR_CODES
from kimi_chat.prompt import render_layout, render_segments
from kimi_chat.testing.strategies import odd_requests, requests

ALL = list(K2_DIALECTS)  # K3 parity/strict: tests/families/test_k3_render.py


def _expected_finding(dialect: str, kind: str) -> bool:
    """Whether an odd input of ``kind`` is a lint error in ``dialect`` (reasoned from the templates:
    rev1 writes no tool-result header, rev1 drops tool calls and rev2 regenerates their ids)."""
    d = get_dialect(dialect)
    if kind == "tool result without tool_call_id":
        return d.spec.tool_result_header is not None
    if kind == "tool call without id":
        return d.spec.tool_calls and d.spec.tool_call_ids == "given"
    return True


def _location(w) -> str:
    if w.message_index is None:
        return w.field
    return f"messages[{w.message_index}].{w.field}"


@pytest.mark.parametrize("dialect", ALL)
@given(data=st.data())
def test_lint_reports_and_strict_refuses_each_odd_input(dialect, data):
    req = data.draw(odd_requests(dialect))
    note(repr(req))
    args = dict(tools=req["tools"], dialect=dialect, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    errors = [w for w in lint(req["messages"], **args) if w.severity == "error"]
    found = {_location(w) for w in errors}
    for kind, where in req["odd"]:
        if _expected_finding(dialect, kind):
            assert where in found, f"{kind} at {where} not reported: {[str(w) for w in errors]}"
    render(req["messages"], **args)  # parity: renders
    if not errors:
        assert render(req["messages"], strict=True, **args) == render(req["messages"], **args)
        return
    with pytest.raises(StrictModeError) as e:
        render(req["messages"], strict=True, **args)
    assert e.value.problems == errors  # strict is "lint errors raise": the same findings
    for w in errors:
        assert f"{_location(w)}: " in str(e.value)


@pytest.mark.parametrize("dialect", ALL)
@given(data=st.data())
def test_strict_accepts_ordinary_requests_unchanged(dialect, data):
    req = data.draw(requests(dialect))
    note(repr(req))
    args = dict(tools=req["tools"], dialect=dialect, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    assert [w for w in lint(req["messages"], **args) if w.severity == "error"] == []
    assert render(req["messages"], strict=True, **args) == render(req["messages"], **args)


ODD = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_strict_is_a_keyword_of_every_view():
    tok = pytest.importorskip("kimi_chat").KimiTokenizer
    for call in (render, render_segments, render_layout):
        call(ODD)
        with pytest.raises(StrictModeError, match=r"developer-role: messages\[0\]\.role: "):
            call(ODD, strict=True)
    try:
        t = tok.from_reference("k2")
    except Exception as e:  # the reference data is absent: render_tokens needs its tokenizer
        pytest.skip(f"no reference tokenizer: {e}")
    assert render_tokens(ODD, tokenizer=t).text == render(ODD)
    with pytest.raises(StrictModeError, match=r"messages\[0\]\.role"):
        render_tokens(ODD, tokenizer=t, strict=True)


def test_strict_must_be_a_bool():
    with pytest.raises(TypeError, match="strict must be a bool"):
        render(ODD, strict="yes")


# -- the lint codes parity and strict mode rest on -----------------------------------------------------------------


def _codes(ws):
    return [(w.code, w.message_index, w.field) for w in ws]


@pytest.mark.parametrize("kwarg, value", [("enable_thinking", False), ("reasoning_effort", "low")])
def test_thinking_kwargs_a_template_does_not_read(kwarg, value):
    ws = lint([{"role": "user", "content": "hi"}], dialect="kimi-k2.5", **{kwarg: value})
    assert _codes(ws) == [("unread-thinking-kwarg", None, kwarg)]
    assert "reads 'thinking'" in ws[0].text and "thinking stays on" in ws[0].text
    assert ws[0].severity == "error"
    # and the prompt is what the template renders: thinking on
    assert render([{"role": "user", "content": "hi"}], dialect="kimi-k2.5", **{kwarg: value}).endswith("<think>")


def test_preserve_thinking_to_a_dialect_without_it():
    ws = lint([{"role": "user", "content": "hi"}], dialect="kimi-k2-thinking", preserve_thinking=True)
    assert _codes(ws) == [("unread-preserve-thinking", None, "preserve_thinking")]
    assert "has no preserve_thinking" in ws[0].text


def test_other_unread_kwarg():
    ws = lint([{"role": "user", "content": "hi"}], dialect="kimi-k2-instruct", thinking=True)
    assert _codes(ws) == [("unread-kwarg", None, "thinking")]
    assert str(ws[0]).startswith("unread-kwarg: thinking: ")


def test_developer_role_says_how_the_template_renders_it():
    name_or_role = lint(ODD, dialect="kimi-k2-instruct-0905")
    assert _codes(name_or_role) == [("developer-role", 0, "role")]
    assert "<|im_system|>developer<|im_middle|>" in name_or_role[0].text
    fixed = lint(ODD, dialect="kimi-k2-instruct@rev2")
    assert _codes(fixed) == [("developer-role", 0, "role")] and "no header" in fixed[0].text
    assert render(ODD, dialect="kimi-k2-instruct@rev2").startswith(
        "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>Be brief.<|im_end|>")


def test_other_roles_are_unknown_role():
    ws = lint([{"role": "function", "name": "f", "content": "r"}, {"role": "user", "content": "hi"}])
    assert _codes(ws) == [("unknown-role", 0, "role")]
    # the rest of such a message is still checked (as the system turn the template makes of it)
    ws = lint([{"role": "developer", "metadata": {}}, {"role": "user", "content": "hi"}])
    assert _codes(ws) == [("developer-role", 0, "role"), ("missing-content", 0, "content"), ("unknown-field", 0, "metadata")]


def _call(call_id):
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_tool_result_matching_no_pending_call():
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [_call("functions.f:0")]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "1"},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "again"},
            {"role": "tool", "tool_call_id": "functions.g:9", "content": "?"}]
    ws = [w for w in lint(msgs) if w.code == "unknown-tool-call-id"]
    assert _codes(ws) == [("unknown-tool-call-id", 3, "tool_call_id"), ("unknown-tool-call-id", 4, "tool_call_id")]
    assert "already has its result" in ws[0].text and "matches no earlier tool call" in ws[1].text
    assert all(w.severity == "warning" for w in ws)  # the template renders these as given: not refused
    render(msgs, strict=True)


def test_missing_content_and_ids():
    msgs = [{"role": "user"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "content": "r"}]
    assert _codes(lint(msgs, dialect="kimi-k2-thinking")) == [
        ("missing-content", 0, "content"), ("missing-tool-call-id", 2, "tool_call_id"),
        ("missing-tool-call-id", 1, "tool_calls[0].id"), ("missing-reasoning", 1, None)]
    # rev2 regenerates call ids; rev1 writes neither ids nor the result header
    assert [c for c, _, _ in _codes(lint(msgs, dialect="kimi-k2-instruct@rev2"))] == ["missing-content", "missing-tool-call-id"]
    assert [c for c, _, _ in _codes(lint(msgs, dialect="kimi-k2-instruct@rev1"))] == ["missing-content", "tool-calls-dropped"]


def test_error_codes_are_documented():
    from kimi_chat.checks import lint as module  # (kimi_chat.lint is the function)

    for code in ERROR_CODES:
        assert f"``{code}``" in module.__doc__, code
