"""`kimi-chat render` / `kimi-chat dialects`: byte-exact output, exit statuses, error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import needs_reference

from kimi_chat.cli import main

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("dialect", ["kimi-k2-thinking@rev1", "kimi-k2-instruct@rev2", "kimi-k2.5", "kimi-k2.6"])
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


def test_k26_preserve_thinking_kwargs(capsysbinary, tmp_path):
    req = json.loads((GOLDEN / "kimi-k2.6" / "k25_preserve_thinking.json").read_text())
    (tmp_path / "req.json").write_text(json.dumps({"messages": req["messages"]}))
    status, out, _ = _run(capsysbinary, "render", str(tmp_path / "req.json"), "-d", "kimi-k2.6",
                          "--kwargs", '{"preserve_thinking": true}')
    assert status == 0
    assert out == (GOLDEN / "kimi-k2.6" / "k25_preserve_thinking.txt").read_bytes()
    assert b"<think>7*13</think>" in out


def test_bad_json_reports_line_and_column(capsysbinary, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"messages": [\n  {"role": "user",}]}')
    status, out, err = _run(capsysbinary, "render", str(f))
    assert status == 2 and out == b""
    assert f"{f}:2:19: invalid JSON" in err


def test_invalid_message_reports_index_and_field(capsysbinary, tmp_path):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]}))
    status, out, _ = _run(capsysbinary, "render", str(f))
    assert status == 0 and b"## Return of \n    r" in out  # parity: as the official template renders it
    status, _, err = _run(capsysbinary, "render", "--strict", str(f))
    assert status == 2
    assert "missing-tool-call-id: messages[1].tool_call_id" in err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": 5}]}))
    status, _, err = _run(capsysbinary, "render", str(bad))
    assert status == 2 and "messages[0].content" in err


@needs_reference  # count loads the reference tokenizer
def test_count_strict_reports_index_and_field(capsysbinary, tmp_path):
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}]}))
    status, _, err = _run(capsysbinary, "count", "--strict", str(f))
    assert status == 2 and "messages[1].tool_call_id" in err


@pytest.mark.parametrize("argv, needle", [
    (["--dialect", "nope"], "unknown dialect 'nope'"),
    (["--strict", "--kwargs", '{"thinking": false}'], "template does not read 'thinking'"),
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
    assert rows["kimi-k2.5"]["oracle"] == "unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja"
    assert rows["kimi-k2.6"]["status"] == "reconstructed"
    assert rows["kimi-k2.6"]["oracle"] == "unverified/Kimi-K2.6.chat_template.reconstructed.jinja"
    assert rows["kimi-k2-instruct-0905"]["aliases"] == ["kimi-k2-instruct"]
    assert rows["kimi-k2-thinking@rev1"]["oracle"] == "Kimi-K2-Thinking/chat_template.rev1.jinja"
    assert rows["kimi-k2.7-code"]["model_names"] == ["moonshotai/Kimi-K2.7-Code"]
    assert rows["kimi-k2.7-code"]["reasoning"] == "all" and rows["kimi-k2.6"]["reasoning"] == "history-split-or-all"


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


def test_provenance_note_on_stderr_only_for_unverified_or_reconstructed(capsysbinary, tmp_path):
    status, out, err = _run(capsysbinary, "render", str(EXAMPLE))
    assert status == 0 and "kimi-k2-instruct-0905 is checked against an unverified oracle" in err
    assert out == (GOLDEN / "kimi-k2-instruct-0905" / "tool_loop.txt").read_bytes()  # stdout stays exact
    _, _, err = _run(capsysbinary, "render", "-d", "kimi-k2.5", str(EXAMPLE))
    assert "checked against a reconstructed oracle" in err and "an reconstructed" not in err
    no_model = tmp_path / "r.json"
    no_model.write_text(json.dumps({k: v for k, v in json.loads(EXAMPLE.read_text()).items() if k != "model"}))
    _, _, err = _run(capsysbinary, "render", "-d", "kimi-k2-instruct@rev1", str(no_model))
    assert "checked against" not in err  # a verified dialect: only its lint finding (rev1 drops the tool calls)
    assert len(err.splitlines()) == 1 and err.startswith("kimi-chat: lint warning: tool-calls-dropped: messages[2]: ")
    _, _, err = _run(capsysbinary, "render", "-q", str(EXAMPLE))
    assert err == ""


def test_an_unread_option_is_reported_once_on_the_command_line(capsysbinary, tmp_path):
    """The CLI prints lint's finding for an option the template does not read; render's UserWarning for
    the same finding (what Python callers get) is not printed a second time."""
    f = tmp_path / "m.json"
    f.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    status, _, err = _run(capsysbinary, "render", "-d", "kimi-k2.6", "--kwargs", '{"thinkng": false}', str(f))
    assert status == 0 and err.count("'thinkng'") == 1 and "UserWarning" not in err
    assert "did you mean 'thinking'?" in err


class _Terminal:
    """Standard input on a terminal: isatty() is true; what is typed is ``data``."""

    def __init__(self, data: bytes) -> None:
        import io

        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return True


def test_render_on_a_terminal_says_it_reads_standard_input(capsysbinary, monkeypatch):
    """No file and stdin a terminal: the user is told what the command waits for (it used to wait
    silently); piped input gets no such line."""
    body = json.dumps([{"role": "user", "content": "Hi"}]).encode()
    monkeypatch.setattr("sys.stdin", _Terminal(body))
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k2-instruct@rev1")
    assert status == 0 and out.endswith(b"<|im_assistant|>assistant<|im_middle|>")
    assert "reading the input from standard input" in err and "Ctrl-D" in err


PREFILL = {"messages": [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Sure, "}]}


def _body(tmp_path, **fields):
    f = tmp_path / "req.json"
    f.write_text(json.dumps({**PREFILL, **fields}))
    return str(f)


def test_request_continue_final_message_and_add_generation_prompt(capsysbinary, tmp_path):
    """The body's add_generation_prompt and continue_final_message are read, not dropped (item 16)."""
    from kimi_chat import render

    msgs = PREFILL["messages"]
    d = "kimi-k2-instruct@rev2"
    status, out, _ = _run(capsysbinary, "render", "-d", d, _body(tmp_path, add_generation_prompt=False))
    assert status == 0 and out.decode() == render(msgs, dialect=d, add_generation_prompt=False)
    assert out.decode().endswith("Sure, <|im_end|>")
    continued = render(msgs, dialect=d, continue_final_message=True)
    assert continued.endswith("<|im_middle|>Sure, ")
    for fields, argv in [({"add_generation_prompt": False, "continue_final_message": True}, []),
                         ({"continue_final_message": True}, []), ({}, ["--continue-final-message"])]:
        status, out, err = _run(capsysbinary, "render", "-d", d, _body(tmp_path, **fields), *argv)
        assert status == 0 and out.decode() == continued, (fields, argv, err)
    status, _, err = _run(capsysbinary, "render", _body(tmp_path, add_generation_prompt=True, continue_final_message=True))
    assert status == 2 and "not compatible" in err
    status, _, err = _run(capsysbinary, "render", _body(tmp_path, add_generation_prompt="no"))
    assert status == 2 and "add_generation_prompt must be true or false" in err


@needs_reference  # count loads the reference tokenizer
def test_count_reads_continue_final_message(capsysbinary, tmp_path):
    status, _, err = _run(capsysbinary, "count", "-d", "kimi-k2-instruct@rev2",
                          _body(tmp_path, continue_final_message=True), "--json")
    assert status == 0, err


def test_request_model_picks_or_is_reported(capsysbinary, tmp_path):
    from kimi_chat import render

    msgs = PREFILL["messages"]
    status, out, err = _run(capsysbinary, "render", _body(tmp_path, model="moonshotai/Kimi-K2-Thinking"))
    assert status == 0 and out.decode() == render(msgs, dialect="kimi-k2-thinking@rev1")
    assert "model 'moonshotai/Kimi-K2-Thinking' -> dialect kimi-k2-thinking@rev1" in err
    status, out, err = _run(capsysbinary, "render", "-d", "kimi-k2.5", _body(tmp_path, model="moonshotai/Kimi-K2-Thinking"))
    assert out.decode() == render(msgs, dialect="kimi-k2.5")
    assert "warning: the request's model 'moonshotai/Kimi-K2-Thinking' implies dialect kimi-k2-thinking@rev1; ignored" in err
    status, out, err = _run(capsysbinary, "render", "-q", _body(tmp_path, model="gpt-4o"))
    assert status == 0 and out.decode() == render(msgs)
    assert "warning: the request's model 'gpt-4o' does not tell which Kimi template it uses; ignored" in err
    _, _, err = _run(capsysbinary, "render", "-q", _body(tmp_path, model="kimi-k2.5"))
    assert err == ""  # the note is silenced by -q (the dialect's own note too)


@pytest.mark.parametrize("field", ["functions", "function_call"])
def test_legacy_function_fields_are_refused(capsysbinary, tmp_path, field):
    value = [{"name": "f", "parameters": {}}] if field == "functions" else "auto"
    for cmd in ("render", "count"):
        status, out, err = _run(capsysbinary, cmd, _body(tmp_path, **{field: value}))
        assert status == 2 and out == b""
        assert f"the request's '{field}' field is not supported" in err


def test_request_chat_template_is_reported(capsysbinary, tmp_path):
    status, _, err = _run(capsysbinary, "render", _body(tmp_path, chat_template="{{ messages }}"))
    assert status == 0 and "warning: the request's 'chat_template' is ignored" in err


def test_deeply_nested_request_is_one_clear_line(capsysbinary, tmp_path):
    f = tmp_path / "deep.json"
    f.write_text('{"messages": [{"role": "user", "content": "x"}], "tools": ' + "[" * 100_000 + "]" * 100_000 + "}")
    status, out, err = _run(capsysbinary, "render", str(f))
    assert status == 2 and out == b""
    assert err == f"kimi-chat render: error: {f}: JSON nested too deeply to read (more than about 1000 levels)\n"
