"""`kimi-chat render` / `kimi-chat dialects`: byte-exact output, exit statuses, error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_chat.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tool_conversation.json"
GOLDEN = ROOT / "fixtures" / "golden"


def _run(capsysbinary, *argv):
    status = main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out, out.err.decode()


def test_render_example_default_dialect_is_the_official_prompt(capsysbinary):
    status, out, _ = _run(capsysbinary, "render", str(EXAMPLE))
    assert status == 0
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()


@pytest.mark.parametrize("dialect", ["kimi-k2-thinking@rev1", "kimi-k2-instruct@rev2", "kimi-k2.5"])
def test_render_example_other_dialects(capsysbinary, dialect):
    status, out, _ = _run(capsysbinary, "render", "--dialect", dialect, str(EXAMPLE))
    assert status == 0
    assert out == (GOLDEN / dialect / "tool_loop.txt").read_bytes()


def test_bare_list_stdin_no_generation_prompt(capsysbinary, monkeypatch, tmp_path):
    f = tmp_path / "m.json"
    f.write_text(json.dumps([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]))
    status, out, _ = _run(capsysbinary, "render", str(f), "--no-generation-prompt", "-d", "kimi-k2-instruct-0905")
    assert status == 0
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "no_generation_prompt.txt").read_bytes()


def test_tools_file_and_kwargs(capsysbinary, tmp_path):
    req = json.loads((GOLDEN / "kimi-k2.5" / "k25_thinking_off.json").read_text())
    (tmp_path / "req.json").write_text(json.dumps({"messages": req["messages"]}))
    (tmp_path / "tools.json").write_text(json.dumps(req["tools"]))
    status, out, _ = _run(capsysbinary, "render", str(tmp_path / "req.json"), "--tools", str(tmp_path / "tools.json"),
                          "-d", "kimi-k2.5", "--kwargs", '{"thinking": false}')
    assert status == 0
    assert out == (GOLDEN / "kimi-k2.5" / "k25_thinking_off.txt").read_bytes()


def test_bad_json_reports_line_and_column(capsysbinary, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"messages": [\n  {"role": "user",}]}')
    status, out, err = _run(capsysbinary, "render", str(f))
    assert status == 2 and out == b""
    assert f"{f}:2:19: invalid JSON" in err


def test_invalid_message_reports_index_and_field(capsysbinary, tmp_path):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]}))
    status, _, err = _run(capsysbinary, "render", str(f))
    assert status == 2
    assert "messages[1].tool_call_id" in err


@pytest.mark.parametrize("argv, needle", [
    (["--dialect", "nope"], "unknown dialect 'nope'"),
    (["--kwargs", '{"thinking": false}'], "takes no option 'thinking'"),
    (["--kwargs", "[1]"], "--kwargs must be a JSON object"),
])
def test_bad_options(capsysbinary, argv, needle):
    status, _, err = _run(capsysbinary, "render", str(EXAMPLE), *argv)
    assert status == 2 and needle in err


def test_missing_file(capsysbinary):
    status, _, err = _run(capsysbinary, "render", "/nonexistent/x.json")
    assert status == 2 and "/nonexistent/x.json: cannot read" in err


def test_dialects_lists_status_and_oracle(capsysbinary):
    status, out, _ = _run(capsysbinary, "dialects", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["kimi-k2-instruct@rev1"]["status"] == "verified"
    assert rows["kimi-k2.5"]["status"] == "reconstructed"
    assert rows["kimi-k2-instruct-0905"]["aliases"] == ["kimi-k2-instruct"]
    assert rows["kimi-k2-thinking@rev1"]["oracle"] == "Kimi-K2-Thinking/chat_template.rev1.jinja"


def test_tools_file_may_be_a_request_body(capsysbinary, tmp_path):
    req = json.loads(EXAMPLE.read_text())
    (tmp_path / "m.json").write_text(json.dumps(req["messages"]))
    (tmp_path / "t.json").write_text(json.dumps({"tools": req["tools"]}))
    status, out, _ = _run(capsysbinary, "render", str(tmp_path / "m.json"), "--tools", str(tmp_path / "t.json"))
    assert status == 0
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()


def test_chat_template_kwargs_must_be_an_object(capsysbinary, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]}))
    status, _, err = _run(capsysbinary, "render", str(f))
    assert status == 2 and "chat_template_kwargs must be a JSON object" in err


def test_provenance_note_on_stderr_only_for_unverified_or_reconstructed(capsysbinary):
    status, out, err = _run(capsysbinary, "render", str(EXAMPLE))
    assert status == 0 and "kimi-k2-instruct-0905 is checked against an unverified oracle" in err
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()  # stdout stays exact
    _, _, err = _run(capsysbinary, "render", "-d", "kimi-k2.5", str(EXAMPLE))
    assert "reconstructed oracle" in err
    _, _, err = _run(capsysbinary, "render", "-d", "kimi-k2-instruct@rev1", str(EXAMPLE))
    assert err == ""
    _, _, err = _run(capsysbinary, "render", "-q", str(EXAMPLE))
    assert err == ""
