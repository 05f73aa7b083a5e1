"""The CLI's common error handling: one line ``kimi-chat COMMAND: error: ...``
and exit 2 for bad input in every subcommand, never a traceback; the subcommand's usage for an unknown
option; ``--version``; ``-``/``<stdin>``; ``parse --chunk`` needs ``--stream``; ``run`` on a missing file."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kimi_chat
from kimi_chat.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool_conversation.json"
OUTPUT = ROOT / "examples" / "output_tool_call.txt"
SURROGATE = '{"messages": [{"role": "user", "content": "a \\ud800 b"}]}'  # JSON text: the escape, no pair
TOOLS_SURROGATE = '[{"type": "function", "function": {"name": "f\\udfff", "parameters": {}}}]'


def _err_line(capsys, cmd: str) -> str:
    """The one error line of a failed subcommand (and nothing on stdout); notes and progress lines the
    subcommand printed before failing (e.g. which dialect the request's model picked) are not errors."""
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if not ln.startswith(("kimi-chat: note: ", "kimi-chat: progress: "))]
    assert len(lines) == 1, out.err
    assert lines[0].startswith(f"kimi-chat {cmd}: error: "), lines[0]
    assert out.out == ""
    return lines[0]


@pytest.fixture
def surrogate_request(tmp_path: Path) -> Path:
    p = tmp_path / "req.json"
    p.write_text(SURROGATE, encoding="ascii")
    return p


# ------------------------------------------------------------------ item 15: lone surrogates


@pytest.mark.parametrize("cmd", ["render", "count", "lint", "run"])
def test_lone_surrogate_in_a_request(cmd, surrogate_request, capsys):
    argv = [cmd, str(surrogate_request)] if cmd != "run" else [cmd, "model.gguf", str(surrogate_request)]
    assert main(argv) == 2
    line = _err_line(capsys, cmd)
    assert f"{surrogate_request}: messages[0].content: lone surrogate U+D800" in line


def test_lone_surrogate_in_render_tokens(surrogate_request, capsys):
    assert main(["render", "--tokens", str(surrogate_request)]) == 2
    assert "lone surrogate U+D800" in _err_line(capsys, "render")


def test_lone_surrogate_on_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SURROGATE.encode())))
    assert main(["render", "-"]) == 2
    assert "<stdin>: messages[0].content: lone surrogate" in _err_line(capsys, "render")


@pytest.mark.parametrize("cmd", ["render", "count", "parse"])
def test_lone_surrogate_in_a_tools_file(cmd, tmp_path, capsys):
    tools = tmp_path / "tools.json"
    tools.write_text(TOOLS_SURROGATE, encoding="ascii")
    src = OUTPUT if cmd == "parse" else EXAMPLE
    assert main([cmd, str(src), "--tools", str(tools)]) == 2
    assert f"{tools}: [0].function.name: lone surrogate U+DFFF" in _err_line(capsys, cmd)


def test_lone_surrogate_in_a_key_and_in_kwargs(tmp_path, capsys):
    p = tmp_path / "k.json"
    p.write_text('{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"\\ud83d": 1}}')
    assert main(["render", str(p)]) == 2
    assert f"{p}: chat_template_kwargs.\\ud83d: lone surrogate U+D83D" in _err_line(capsys, "render")
    assert main(["parse", str(OUTPUT), "--kwargs", '{"x": "\\udc00"}']) == 2
    assert "--kwargs: x: lone surrogate U+DC00" in _err_line(capsys, "parse")


def test_a_surrogate_pair_is_text(tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text('{"messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}', encoding="ascii")
    assert main(["render", "-q", str(p)]) == 0
    assert "\U0001f600" in capsys.readouterr().out


@pytest.mark.parametrize("cmd", ["inspect", "verify"])
def test_lone_surrogate_in_a_template(cmd, tmp_path, capsys):
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text('{"chat_template": "x \\ud800 {{ messages }}"}', encoding="ascii")
    argv = [cmd, str(cfg)] + (["-d", "kimi-k2-instruct", "-n", "1"] if cmd == "verify" else [])
    assert main(argv) == 2
    line = _err_line(capsys, cmd)
    assert str(cfg) in line and "lone surrogate U+D800" in line


# ------------------------------------------------------------------ item 18: deep nesting


@pytest.fixture
def deep_request(tmp_path: Path) -> Path:
    p = tmp_path / "deep.json"
    p.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="ascii")
    return p


@pytest.mark.parametrize("cmd", ["render", "count", "lint", "run"])
def test_deep_request(cmd, deep_request, capsys):
    argv = [cmd, str(deep_request)] if cmd != "run" else [cmd, "model.gguf", str(deep_request)]
    assert main(argv) == 2
    assert f"{deep_request}: JSON nested too deeply to read" in _err_line(capsys, cmd)


def test_deep_tools_and_template(deep_request, capsys):
    assert main(["parse", str(OUTPUT), "--tools", str(deep_request)]) == 2
    assert f"{deep_request}: JSON nested too deeply" in _err_line(capsys, "parse")
    assert main(["inspect", str(deep_request)]) == 2
    assert f"{deep_request}: " in _err_line(capsys, "inspect")


def test_deep_request_in_a_fresh_interpreter(deep_request):
    # the console entry point, as a user runs it: one line, exit 2, no traceback
    p = subprocess.run([sys.executable, "-m", "kimi_chat.cli", "render", str(deep_request)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [f"kimi-chat render: error: {deep_request}: JSON nested too deeply to read "
                                     f"(more than about {sys.getrecursionlimit()} levels)"]


def test_safety_net_for_recursion_past_the_reader(monkeypatch, capsys):
    # input the JSON reader accepts but a later stage recurses on too deeply: still one line, naming the file
    import kimi_chat.cli.render as cli_render

    def recurse(*a, **k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cli_render, "render", recurse)
    assert main(["render", str(EXAMPLE)]) == 2
    assert f"{EXAMPLE}: input nested too deeply to process" in _err_line(capsys, "render")


def test_safety_net_lets_other_encode_errors_through(monkeypatch):
    import kimi_chat.cli.render as cli_render

    def bad(*a, **k):
        raise UnicodeEncodeError("ascii", "é", 0, 1, "ordinal not in range")

    monkeypatch.setattr(cli_render, "render", bad)
    with pytest.raises(UnicodeEncodeError):
        main(["render", str(EXAMPLE)])


# ------------------------------------------------------------------ item 19: usage, version, stdin, --chunk, run


_POSITIONALS = {"inspect": ["x.gguf"], "verify": ["t.jinja"], "run": ["m.gguf"], "tiny-model": ["o.gguf"],
                "conformance": ["m.gguf"], "serve": ["m.gguf"],
                "prepare": ["in.jsonl", "-d", "kimi-k2.6", "-o", "out"], "data-report": ["out"]}


@pytest.mark.parametrize("cmd", sorted(build_parser()._subparsers._group_actions[0].choices))  # type: ignore[union-attr]
def test_unknown_option_prints_the_subcommand_usage(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, *_POSITIONALS.get(cmd, []), "--no-such-option"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: kimi-chat {cmd} ")
    assert err.splitlines()[-1] == f"kimi-chat {cmd}: error: unrecognized arguments: --no-such-option"


def test_unknown_top_level_option_prints_the_top_level_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--no-such-option", "dialects"])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith("usage: kimi-chat [-h]")


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"kimi-chat {kimi_chat.__version__}\n"


def test_stdin_has_one_name(monkeypatch, capsys):
    for cmd, data in (("render", b"[1,"), ("parse", b"ok \xff")):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert main([cmd, "-"]) == 2
        assert _err_line(capsys, cmd).startswith(f"kimi-chat {cmd}: error: <stdin>:")


def test_parse_chunk_needs_stream(capsys):
    assert main(["parse", "--chunk", "8", str(OUTPUT)]) == 2
    assert "--chunk needs --stream" in _err_line(capsys, "parse")
    assert main(["parse", "--stream", "--chunk", "8", str(OUTPUT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[-1])["finish_reason"] == "tool_calls"


def test_parse_error_style_is_the_common_one(capsys):
    assert main(["parse", str(OUTPUT), "--dialect", "kimi-k9"]) == 2
    assert "unknown dialect 'kimi-k9'" in _err_line(capsys, "parse")


def test_run_on_a_missing_model_says_it_is_missing(tmp_path, capsys):
    # checked before the native extra is needed: the file is what is wrong
    assert main(["run", "-q", str(tmp_path / "missing.gguf")]) == 2
    assert f"{tmp_path / 'missing.gguf'}: no such GGUF file" in _err_line(capsys, "run")
    assert main(["run", "-q", str(tmp_path)]) == 2
    assert f"{tmp_path}: not a file" in _err_line(capsys, "run")


def test_run_on_a_missing_request_says_it_is_missing(tmp_path, capsys):
    assert main(["run", "-q", str(tmp_path / "m.gguf"), str(tmp_path / "missing.json")]) == 2
    line = _err_line(capsys, "run")
    assert f"{tmp_path / 'missing.json'}: cannot read: No such file or directory" in line


@pytest.mark.parametrize("cmd", ["render", "count", "lint", "run"])
@pytest.mark.parametrize("body", ['{"model": "x"}', '"hello"', "3"])
def test_a_request_that_is_not_one_names_the_file(cmd, body, tmp_path, capsys):
    p = tmp_path / "req.json"
    p.write_text(body, encoding="utf-8")
    argv = [cmd, str(p)] if cmd != "run" else [cmd, str(tmp_path / "m.gguf"), str(p)]
    assert main(argv) == 2
    assert f"{p}: expected a chat.completions request" in _err_line(capsys, cmd)
