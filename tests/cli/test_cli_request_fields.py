"""The request-body fields that change the prompt besides messages and tools:
``tool_choice``, ``response_format``, ``reasoning_effort`` and Moonshot's ``thinking`` object reach the
Kimi-K3 prompt as the official encoder writes them (expected bytes: the K3 goldens, rendered by the
official tokenizer, ``fixtures/golden/regenerate_k3.py``); for a K2 dialect each field its template does
not read is reported on stderr, not dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_chat.cli import main
from kimi_chat.cli.run import run_options
from kimi_chat.dialects import get_dialect

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "fixtures" / "golden"
K3 = GOLDEN / "kimi-k3"
EXAMPLE = ROOT / "examples" / "tool_conversation.json"


def _run(capsysbinary, *argv):
    status = main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out, out.err.decode()


def _body(tmp_path, case: Path, **fields) -> str:
    """A request body with the messages and tools of golden ``case`` (its options left out) and ``fields``."""
    g = json.loads(case.read_text())
    body = {"messages": g["messages"], **({"tools": g["tools"]} if g.get("tools") is not None else {}), **fields}
    f = tmp_path / "req.json"
    f.write_text(json.dumps(body))
    return str(f)


_SCHEMA = json.loads((K3 / "response_format_json_schema.json").read_text())["options"]["response_format"]

K3_CASES = [
    # (golden case, body fields, a warning that must be printed or None)
    ("tool_choice_required", {"tool_choice": "required"}, None),
    ("tool_choice_none", {"tool_choice": "none"}, None),
    ("response_format_json_object", {"response_format": {"type": "json_object"}}, None),
    ("response_format_json_schema", {"response_format": _SCHEMA}, None),
    ("thinking_off", {"thinking": {"type": "disabled"}}, None),
    ("effort_low", {"thinking": {"type": "enabled", "keep": "all", "effort": "low"}}, None),
    ("effort_high", {"reasoning_effort": "high"}, None),
    ("effort_high", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}, None),
    # Moonshot: thinking.effort wins over reasoning_effort
    ("effort_low", {"thinking": {"effort": "low"}, "reasoning_effort": "max"},
     "the request's reasoning_effort \"max\" is ignored: thinking.effort \"low\" is given"),
    # effort is not read with thinking disabled (Moonshot's API, and the encoder)
    ("thinking_off_medium_ignored", {"thinking": {"type": "disabled", "effort": "medium"}},
     "the request's thinking.effort is ignored: thinking is disabled"),
]


@pytest.mark.parametrize("case, fields, warning", K3_CASES, ids=[f"{c}-{'-'.join(f)}" for c, f, _ in K3_CASES])
def test_k3_body_fields_reach_the_prompt(capsysbinary, tmp_path, case, fields, warning):
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k3", _body(tmp_path, K3 / f"{case}.json", **fields))
    assert status == 0, err
    assert out == (K3 / f"{case}.txt").read_bytes()
    # the field changes the prompt: without it, the CLI renders something else
    _, plain, _ = _run(capsysbinary, "render", "-d", "kimi-k3", _body(tmp_path, K3 / f"{case}.json"))
    assert plain != out
    warnings = [ln for ln in err.splitlines() if ln.startswith("kimi-chat: warning: ")]
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith(f"kimi-chat: warning: {warning}"), err


@pytest.mark.parametrize("case, fields", [("tool_choice_auto", {"tool_choice": "auto"}),
                                          ("response_format_text", {"response_format": {"type": "text"}}),
                                          ("effort_max", {"thinking": {"type": "enabled", "keep": "all"}})])
def test_k3_default_values_say_nothing(capsysbinary, tmp_path, case, fields):
    status, out, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k3", _body(tmp_path, K3 / f"{case}.json", **fields))
    assert status == 0 and out == (K3 / f"{case}.txt").read_bytes()
    assert err == ""


def test_k3_named_tool_choice_is_reported(capsysbinary, tmp_path):
    named = {"type": "function", "function": {"name": "get_weather"}}
    status, out, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k3",
                            _body(tmp_path, K3 / "tool_choice_auto.json", tool_choice=named))
    assert status == 0 and out == (K3 / "tool_choice_auto.txt").read_bytes()  # the encoder writes no message for it
    assert "the request's tool_choice {\"type\": \"function\"" in err and "does not change the prompt of kimi-k3" in err


def test_k3_count_reads_the_fields(capsysbinary, tmp_path):
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    from kimi_chat.reference import reference_file

    if reference_file("tokenizer/tiktoken.model") is None:
        pytest.skip("reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference")
    status, out, err = _run(capsysbinary, "count", "-d", "kimi-k3",
                            _body(tmp_path, K3 / "tool_choice_required.json", tool_choice="required"))
    assert status == 0, err
    assert int(out) == len(json.loads((K3 / "tool_choice_required.ids.json").read_text()))


@pytest.mark.parametrize("fields, needle", [
    ({"thinking": True}, "the request's thinking must be an object"),
    ({"thinking": {"type": "off"}}, 'the request\'s thinking.type must be "enabled" or "disabled", got "off"'),
    ({"reasoning_effort": "medium"}, "the request's reasoning_effort must be one of low, high, max"),
    ({"thinking": {"effort": "none"}}, "the request's thinking.effort must be one of low, high, max"),
    ({"thinking": {"type": "disabled"}, "chat_template_kwargs": {"thinking": True}},
     "the request's thinking.type (false for kimi-k3's 'thinking') and chat_template_kwargs.thinking (true) disagree"),
    ({"tool_choice": "none", "chat_template_kwargs": {"tool_choice": "required"}},
     "the request's tool_choice (\"none\" for kimi-k3's 'tool_choice') and chat_template_kwargs.tool_choice"),
])
def test_k3_bad_fields_are_refused_naming_them(capsysbinary, tmp_path, fields, needle):
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k3", _body(tmp_path, K3 / "basic.json", **fields))
    assert status == 2 and out == b""
    assert needle in err


def test_kwargs_flag_is_merged_over_the_fields(capsysbinary, tmp_path):
    status, out, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k3", "--kwargs", '{"thinking_effort": "low"}',
                            _body(tmp_path, K3 / "effort_low.json", reasoning_effort="high"))
    assert status == 0 and out == (K3 / "effort_low.txt").read_bytes(), err


K2_FIELDS = {"tool_choice": "required", "response_format": {"type": "json_object"}, "reasoning_effort": "low",
             "thinking": {"type": "disabled"}}


def test_k2_fields_its_template_does_not_read_are_reported(capsysbinary, tmp_path):
    body = json.loads(EXAMPLE.read_text())
    f = tmp_path / "req.json"
    f.write_text(json.dumps({**body, **K2_FIELDS}))
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k2-instruct-0905", str(f))
    assert status == 0
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()  # the prompt is unchanged
    warned = [ln for ln in err.splitlines() if ln.startswith("kimi-chat: warning: the request's ")]
    for field in ("tool_choice \"required\"", "response_format \"json_object\"", "reasoning_effort",
                  "thinking.type \"disabled\""):
        assert [ln for ln in warned if f"the request's {field}" in ln and
                "does not change the prompt of kimi-k2-instruct-0905" in ln], (field, err)
    assert len(warned) == 4, err


def test_k2_default_values_say_nothing(capsysbinary, tmp_path):
    body = json.loads(EXAMPLE.read_text())
    f = tmp_path / "req.json"
    f.write_text(json.dumps({**body, "tool_choice": "auto", "response_format": {"type": "text"}}))
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k2-instruct-0905", str(f))
    assert status == 0 and out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()
    assert "warning" not in err


@pytest.mark.parametrize("dialect, case, fields, warning", [
    ("kimi-k2.5", "k25_thinking_off", {"thinking": {"type": "disabled"}}, None),
    ("kimi-k2.6", "k25_preserve_thinking", {"thinking": {"type": "enabled", "keep": "all"}}, None),
    ("kimi-k2.5", "k25_thinking_off", {"thinking": {"type": "disabled"}, "reasoning_effort": "low"},
     "the request's reasoning_effort does not change the prompt of kimi-k2.5"),
])
def test_k25_k26_read_the_thinking_object(capsysbinary, tmp_path, dialect, case, fields, warning):
    """Moonshot's thinking object: type is the template's thinking switch, keep "all" K2.6's
    preserve_thinking (the open-source equivalent Moonshot's verifier sends)."""
    status, out, err = _run(capsysbinary, "render", "-q", "-d", dialect, _body(tmp_path, GOLDEN / dialect / f"{case}.json",
                                                                                  **fields))
    assert status == 0, err
    assert out == (GOLDEN / dialect / f"{case}.txt").read_bytes()
    _, plain, _ = _run(capsysbinary, "render", "-q", "-d", dialect, _body(tmp_path, GOLDEN / dialect / f"{case}.json"))
    assert plain != out
    assert (warning is None and err == "") or (warning is not None and warning in err)


def test_k25_keep_is_reported(capsysbinary, tmp_path):
    status, _, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k2.5",
                          _body(tmp_path, GOLDEN / "kimi-k2.5" / "k25_thinking_off.json", thinking={"keep": "all"}))
    assert status == 0
    assert "the request's thinking.keep \"all\" does not change the prompt of kimi-k2.5" in err


def test_run_reads_the_prompt_fields_but_not_tool_choice():
    """``kimi-chat run`` passes tool_choice on its own (it constrains generation in every dialect); the
    prompt fields become options as for render."""
    body = {"messages": [], "tool_choice": "required", "response_format": {"type": "json_object"},
            "thinking": {"type": "enabled", "effort": "low"}}
    k3, k25 = run_options(body, get_dialect("kimi-k3")), run_options(body, get_dialect("kimi-k2.5"))
    assert k3 == {"thinking": True, "thinking_effort": "low", "response_format": {"type": "json_object"}}
    assert k25 == {"thinking": True}


def test_thinking_without_type_does_not_contradict_the_kwargs(capsysbinary, tmp_path):
    """No thinking.type is Moonshot's default (enabled), not a value that disagrees with
    chat_template_kwargs."""
    status, out, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k3",
                            _body(tmp_path, K3 / "thinking_off.json", thinking={"keep": "all"},
                                  chat_template_kwargs={"thinking": False}))
    assert status == 0 and out == (K3 / "thinking_off.txt").read_bytes(), err
