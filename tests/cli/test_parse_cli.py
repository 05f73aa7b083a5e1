"""``kimi-chat parse``: the README example, streaming, and bad input (exit 2 with a clear message)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kimi_chat.cli import main
from kimi_chat.output import Delta, ToolCallDelta, parse
from parse_helpers import UNTHINK, Merged, call, section

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "output_tool_call.txt"


def test_parse_example_file(capsys):
    assert main(["parse", str(EXAMPLE)]) == 0
    out, err = capsys.readouterr()
    msg = json.loads(out)
    assert msg["role"] == "assistant"
    assert msg["content"].startswith("I'll check")
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather", "get_weather"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in msg["tool_calls"]] == ["Paris", "Tōkyō"]
    assert msg == parse(EXAMPLE.read_text(encoding="utf-8")).to_openai()
    assert "stop_reason: tool_calls" in err
    assert "warning" not in err


def test_parse_stdin(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("héllo".encode())))
    assert main(["parse", "-"]) == 0
    assert json.loads(capsys.readouterr().out) == {"role": "assistant", "content": "héllo"}


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_parse_stream(capsys, chunk):
    assert main(["parse", "--stream", "--chunk", str(chunk), str(EXAMPLE)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["delta"]["role"] == "assistant"
    assert [x["finish_reason"] for x in lines] == [None] * (len(lines) - 1) + ["tool_calls"]
    merged = Merged()
    for x in lines:
        d = x["delta"]
        merged.add(Delta(
            content=d.get("content"),
            reasoning_content=d.get("reasoning_content"),
            tool_calls=[ToolCallDelta(t["index"], t.get("id"), t.get("function", {}).get("name"),
                                      t.get("function", {}).get("arguments")) for t in d.get("tool_calls", [])],
        ))
    msg = parse(EXAMPLE.read_text(encoding="utf-8"))
    assert merged.as_tuple() == (msg.content, msg.reasoning_content,
                                 [(c.index, c.id, c.name, c.arguments) for c in msg.tool_calls])


def test_parse_with_tools_and_warnings(tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text(section(call("call_0", '{"q": 1}')), encoding="utf-8")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{"type": "function", "function": {
        "name": "search", "parameters": {"properties": {"q": {}}}}}]}), encoding="utf-8")
    assert main(["parse", str(out), "--tools", str(tools)]) == 0
    o, err = capsys.readouterr()
    assert json.loads(o)["tool_calls"][0]["function"]["name"] == "search"
    assert "warning: tool name 'search' inferred" in err


def test_parse_thinking_prefilled_flag(tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("hmm" + UNTHINK + "Hi", encoding="utf-8")
    assert main(["parse", str(out), "--thinking-prefilled"]) == 0
    assert json.loads(capsys.readouterr().out) == {"role": "assistant", "content": "Hi", "reasoning_content": "hmm"}


def test_missing_file(capsys):
    assert main(["parse", "/nonexistent/out.txt"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent/out.txt: cannot read" in err and "No such file" in err


def test_bad_tools_json_names_line_and_column(tmp_path, capsys):
    tools = tmp_path / "tools.json"
    tools.write_text('[\n  {"name": "f",\n   "parameters": }\n]', encoding="utf-8")
    assert main(["parse", str(EXAMPLE), "--tools", str(tools)]) == 2
    err = capsys.readouterr().err
    assert f"{tools}:3:18: invalid JSON" in err


@pytest.mark.parametrize("content", ['{"tools": 3}', '"x"', '[3]'])
def test_tools_of_the_wrong_shape(tmp_path, capsys, content):
    tools = tmp_path / "tools.json"
    tools.write_text(content, encoding="utf-8")
    assert main(["parse", str(EXAMPLE), "--tools", str(tools)]) == 2
    assert "error:" in capsys.readouterr().err


def test_missing_tools_file(capsys):
    assert main(["parse", str(EXAMPLE), "--tools", "/nonexistent/tools.json"]) == 2
    assert "/nonexistent/tools.json: cannot read" in capsys.readouterr().err


def test_unknown_dialect(capsys):
    assert main(["parse", str(EXAMPLE), "--dialect", "kimi-k9"]) == 2
    assert "unknown dialect 'kimi-k9'" in capsys.readouterr().err


def test_invalid_utf8(tmp_path, capsys):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"ok \xff")
    assert main(["parse", str(f)]) == 2
    assert "not valid UTF-8 at byte 3" in capsys.readouterr().err


def test_bad_chunk(capsys):
    assert main(["parse", "--stream", "--chunk", "0", str(EXAMPLE)]) == 2
    assert "--chunk" in capsys.readouterr().err


def test_kwargs_thinking_off_for_k25(capsys, tmp_path):
    f = tmp_path / "out.txt"
    f.write_text("The answer is 4.<|im_end|>", encoding="utf-8")
    assert main(["parse", str(f), "-d", "kimi-k2.5"]) == 0
    assert json.loads(capsys.readouterr().out)["reasoning_content"] == "The answer is 4."
    assert main(["parse", str(f), "-d", "kimi-k2.5", "--kwargs", '{"thinking": false}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["content"] == "The answer is 4." and "reasoning_content" not in out


def test_kwargs_must_be_an_object(capsys):
    assert main(["parse", str(EXAMPLE), "-d", "kimi-k2.5", "--kwargs", "[1]"]) == 2
    assert "--kwargs must be a JSON object" in capsys.readouterr().err
