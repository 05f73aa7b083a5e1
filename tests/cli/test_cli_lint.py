"""``kimi-chat lint`` and the lint findings ``render`` / ``count`` print on stderr
by default (item 15): a typo in an option or a non-bool option keeps parity (the prompt is the official
one) but the user sees it; ``-q`` silences them."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from kimi_chat.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool_conversation.json"
GOLDEN = ROOT / "fixtures" / "golden"


def _run(capsysbinary, *argv):
    status = main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out.decode(), out.err.decode()


def _file(tmp_path, value) -> str:
    f = tmp_path / "req.json"
    f.write_text(json.dumps(value))
    return str(f)


DEVELOPER = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_lint_clean_request_exits_0_and_prints_nothing(capsysbinary):
    status, out, _ = _run(capsysbinary, "lint", "-q", str(EXAMPLE))
    assert status == 0 and out == ""


def test_lint_prints_findings_and_exits_1_on_an_error(capsysbinary, tmp_path):
    status, out, err = _run(capsysbinary, "lint", _file(tmp_path, DEVELOPER))
    assert status == 1, err
    lines = out.splitlines()
    assert lines and lines[0].startswith("error: developer-role: messages[0].role: ")
    # exactly the errors --strict refuses
    status, _, err = _run(capsysbinary, "render", "--strict", _file(tmp_path, DEVELOPER))
    assert status == 2 and "developer-role: messages[0].role" in err


def test_lint_warnings_only_exit_0(capsysbinary):
    status, out, _ = _run(capsysbinary, "lint", "-q", "-d", "kimi-k2-instruct@rev1", str(EXAMPLE))
    assert status == 0
    assert out.startswith("warning: tool-calls-dropped: messages[2]: ")


def test_lint_json(capsysbinary, tmp_path):
    status, out, _ = _run(capsysbinary, "lint", "--json", "--kwargs", '{"add_generaton_prompt": false}',
                          _file(tmp_path, DEVELOPER))
    assert status == 1
    found = json.loads(out)
    assert {(f["code"], f["field"], f["severity"]) for f in found} >= {
        ("unread-kwarg", "add_generaton_prompt", "error"), ("developer-role", "role", "error")}
    assert all(set(f) == {"code", "message_index", "field", "severity", "text"} for f in found)
    status, out, _ = _run(capsysbinary, "lint", "--json", "-q", str(EXAMPLE))
    assert status == 0 and json.loads(out) == []


def test_lint_takes_renders_input_forms(capsysbinary, monkeypatch, tmp_path):
    req = json.loads(EXAMPLE.read_text())
    (tmp_path / "t.json").write_text(json.dumps(req["tools"]))
    calls = [{"id": "x", "type": "function", "function": {"name": "nope", "arguments": "{}"}}]
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(msgs).encode())))
    status, out, _ = _run(capsysbinary, "lint", "-", "--tools", str(tmp_path / "t.json"), "--no-generation-prompt")
    assert status == 0
    assert "warning: undeclared-tool: messages[1]: " in out


def test_lint_refuses_what_the_renderer_refuses(capsysbinary, tmp_path):
    status, out, err = _run(capsysbinary, "lint", _file(tmp_path, [{"role": "user", "content": 5}]))
    assert status == 2 and out == ""
    assert "kimi-chat lint: error: " in err and "messages[0].content" in err


def test_lint_has_no_strict_flag_and_strict_help_names_it(capsys):
    with pytest.raises(SystemExit) as e:
        main(["lint", "--strict", str(EXAMPLE)])
    assert e.value.code == 2
    assert "unrecognized arguments: --strict" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["render", "--help"])
    assert "`kimi-chat lint`" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as e:
        main(["lint", "--help"])
    assert e.value.code == 0 and "usage: kimi-chat lint" in capsys.readouterr().out


def test_render_prints_lint_findings_on_stderr_keeping_parity(capsysbinary, tmp_path):
    f = _file(tmp_path, {"messages": [{"role": "user", "content": "Hi"}]})
    _, plain, _ = _run(capsysbinary, "render", "-d", "kimi-k2.5", f)
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k2.5", f,
                            "--kwargs", '{"add_generaton_prompt": false, "thinking": "false"}')
    assert status == 0
    assert out == plain  # the official template ignores the typo and reads "false" as true
    lint_lines = [ln for ln in err.splitlines() if ln.startswith("kimi-chat: lint ")]
    assert any(ln.startswith("kimi-chat: lint error: unread-kwarg: add_generaton_prompt: ") for ln in lint_lines), err
    assert any(ln.startswith("kimi-chat: lint error: non-bool-option: thinking: ") for ln in lint_lines), err
    status, out, err = _run(capsysbinary, "render", "-q", "-d", "kimi-k2.5", f,
                            "--kwargs", '{"add_generaton_prompt": false, "thinking": "false"}')
    assert status == 0 and out == plain and err == ""


def test_render_tokens_flag_for_ids_options(capsysbinary, tmp_path):
    f = _file(tmp_path, {"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"tokenize": True}})
    status, out, err = _run(capsysbinary, "render", f)
    assert status == 2 and out == ""
    assert "'tokenize' asks for token ids: use `kimi-chat render --tokens`" in err


def test_count_prints_lint_findings_and_q_silences_them(capsysbinary, tmp_path):
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    from kimi_chat.reference import reference_file

    if reference_file("tokenizer/tiktoken.model") is None or reference_file("Kimi-K2-Instruct/tokenizer_config.json") is None:
        pytest.skip("reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference")
    f = _file(tmp_path, DEVELOPER)
    status, out, err = _run(capsysbinary, "count", f)
    assert status == 0 and int(out) > 0
    assert "kimi-chat: lint error: developer-role: messages[0].role: " in err
    status, out2, err = _run(capsysbinary, "count", "-q", f)
    assert status == 0 and out2 == out and err == ""


@pytest.mark.parametrize("case", ["flat_tool_call", "empty_arguments"])
def test_input_lint_cannot_take_still_renders(capsysbinary, tmp_path, case):
    """The K3 encoder renders these (a call without "function", a function without "arguments");
    the findings are printed after the render, and lint refusing them does not fail it."""
    g = json.loads((GOLDEN / "kimi-k3" / f"{case}.json").read_text())
    body = {"messages": g["messages"], **({"tools": g["tools"]} if g.get("tools") is not None else {})}
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k3", "--kwargs", json.dumps(g["options"]),
                            _file(tmp_path, body))
    assert status == 0, err
    assert out.encode() == (GOLDEN / "kimi-k3" / f"{case}.txt").read_bytes()
