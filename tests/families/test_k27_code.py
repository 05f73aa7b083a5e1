"""Kimi-K2.7-Code: Kimi-K2.6's format with reasoning always on and every turn's reasoning kept (no ``thinking`` or
``preserve_thinking`` option), the servers choosing it by name, and the call ids it copies from
sanitised histories (``functions_get_weather_1``) read back against the declared tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_chat import Status, StreamParser, get_dialect, lint, parse, render
from kimi_chat import markers as M
from kimi_chat.families.k2.calls import read_sanitised_id

ROOT = Path(__file__).resolve().parents[2]
K27 = "kimi-k2.7-code"

CALL = {"role": "assistant", "content": "", "reasoning": "need the weather",
        "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"}
HISTORY = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "r1"},
           {"role": "user", "content": "Q2"}, CALL, RESULT, {"role": "assistant", "content": "A2", "reasoning": "r2"},
           {"role": "user", "content": "Q3"}]


def test_every_turn_keeps_its_reasoning_and_the_prompt_opens_think() -> None:
    a, mid, end = M.IM_ASSISTANT.text, M.IM_MIDDLE.text, M.IM_END.text
    think = lambda r: M.THINK_BEGIN.text + r + M.THINK_END.text  # noqa: E731
    text = render(HISTORY, dialect=K27)
    # K2.6 (no preserve_thinking) empties A1's reasoning (A2 is a later plain turn); K2.7-Code keeps all three
    assert f"{a}assistant{mid}{think('r1')}A1{end}" in text
    assert f"{a}assistant{mid}{think('need the weather')}{M.TOOL_CALLS_SECTION_BEGIN.text}" in text
    assert f"{a}assistant{mid}{think('r2')}A2{end}" in text
    assert text.endswith(f"{a}assistant{mid}{M.THINK_BEGIN.text}")
    assert text == render(HISTORY, dialect="kimi-k2.6", preserve_thinking=True)
    assert f"{think('')}A1" in render(HISTORY, dialect="kimi-k2.6")


def test_the_switches_are_not_read() -> None:
    plain = render(HISTORY, dialect=K27)
    assert render(HISTORY, dialect=K27, thinking=False, preserve_thinking=False) == plain  # ignored, as unread
    unread = [w.field for w in lint(HISTORY, dialect=K27, thinking=False) if w.code == "unread-kwarg"]
    assert unread == ["thinking"]
    with pytest.raises(TypeError, match="takes no render option 'thinking'"):
        parse("x", dialect=K27, thinking=False)
    with pytest.raises(TypeError, match="preserve_thinking"):
        StreamParser(K27, preserve_thinking=True)


def test_the_output_starts_inside_reasoning() -> None:
    msg = get_dialect(K27).parse(f"plan{M.THINK_END.text}done")
    assert (msg.reasoning_content, msg.content) == ("plan", "done")


def test_lint_wants_every_tool_turns_reasoning() -> None:
    # the tool-call turn before a later plain turn is kept too, so a missing reasoning there is reported
    msgs = [{"role": "user", "content": "Q"}, {**CALL, "reasoning": ""}, RESULT,
            {"role": "assistant", "content": "A", "reasoning": "r"}, {"role": "user", "content": "Q2"}]
    assert [w.message_index for w in lint(msgs, dialect=K27) if w.code == "missing-reasoning"] == [1]
    assert [w for w in lint(msgs, dialect="kimi-k2.6") if w.code == "missing-reasoning"] == []


# -- sanitised call ids --

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}} for n in ("get_weather", "get_weather_1")]


def _section(call_id: str, args: str = '{"city": "Paris"}') -> str:
    return (f"plan{M.THINK_END.text}{M.TOOL_CALLS_SECTION_BEGIN.text}{M.TOOL_CALL_BEGIN.text}{call_id}"
            f"{M.TOOL_CALL_ARGUMENT_BEGIN.text}{args}{M.TOOL_CALL_END.text}{M.TOOL_CALLS_SECTION_END.text}")


@pytest.mark.parametrize("call_id, name", [
    ("functions_get_weather_1", "get_weather"),  # get_weather, index 1 (get_weather_1 would need an index too)
    ("functions_get_weather_1_0", "get_weather_1"),  # get_weather_1, index 0
    ("functions_get_weather_12", "get_weather"),
])
def test_a_sanitised_id_names_the_declared_tool(call_id: str, name: str) -> None:
    msg = parse(_section(call_id), dialect=K27, tools=TOOLS)
    assert [(c.id, c.name, c.status.value) for c in msg.tool_calls] == [(call_id, name, "ok")]
    assert msg.warnings == []
    p = StreamParser(K27, tools=TOOLS)
    text = _section(call_id)
    for i in range(0, len(text), 3):
        p.feed(text[i:i + 3])
    p.finish()
    assert p.message == msg


def test_a_declared_name_with_a_dot_is_read_back() -> None:
    tools = [{"type": "function", "function": {"name": "web.search", "parameters": {"type": "object"}}}]
    msg = parse(_section("functions_web_search_2", "{}"), dialect=K27, tools=tools)
    assert [c.name for c in msg.tool_calls] == ["web.search"]
    assert read_sanitised_id("functions_web_search_2", "functions.", ["web_search", "web.search"]) == ("web_search", True)
    assert read_sanitised_id("functions_web_search_2", "functions.", ["websearch"]) == (None, False)


def test_without_tools_the_best_reading_with_a_warning() -> None:
    msg = parse(_section("functions_get_weather_1"), dialect=K27)
    assert [(c.id, c.name) for c in msg.tool_calls] == [("functions_get_weather_1", "get_weather")]
    assert [w.kind for w in msg.warnings] == ["name_inferred"]
    assert "functions_get_weather_1" in msg.warnings[0].message


def test_other_ids_are_read_as_before() -> None:
    assert read_sanitised_id("functions.get_weather:1", "functions.", None) == (None, False)
    assert read_sanitised_id("call_abc", "functions.", None) == (None, False)
    assert read_sanitised_id("functions_get_weather", "functions.", None) == (None, False)  # no index
    msg = parse(_section("functions.get_weather:1"), dialect=K27, tools=TOOLS)
    assert [(c.name, c.status.value) for c in msg.tool_calls] == [("get_weather", "ok")]


def test_model_names_choose_it() -> None:
    d = get_dialect(K27)
    assert d.model_names == ("moonshotai/Kimi-K2.7-Code",)
    for name in ("moonshotai/Kimi-K2.7-Code", "Kimi-K2.7-Code", "kimi-k2.7-code", "Kimi K2.7 Code"):
        assert get_dialect(name) is d
    assert d.status is Status.RECONSTRUCTED and d.options == ()


@pytest.mark.parametrize("name, served", [("Kimi K2.7 Code", "kimi-k2.7-code"), ("Kimi K2.6", "kimi-k2.6"),
                                          ("", "kimi-k2.6")])
def test_a_gguf_names_what_its_template_cannot_tell(name: str, served: str) -> None:
    # what `kimi-chat serve` loads: a GGUF of Kimi-K2.7-Code embedding K2.6's template is served as K2.7-Code
    from types import SimpleNamespace

    from kimi_chat.engines.native import NativeModel
    from kimi_chat.templates import template_text

    llama = SimpleNamespace(_model=SimpleNamespace(vocab=None),
                            metadata={"general.name": name, "tokenizer.chat_template": template_text("kimi-k2.6")})
    model = NativeModel(llama, Path("model.gguf"), lib=SimpleNamespace(llama_vocab_n_tokens=lambda vocab: 163840))
    assert model.dialect.name == served, model.dialect_source


def test_a_request_asking_to_keep_every_reasoning_is_what_it_does(capsysbinary, tmp_path: Path) -> None:
    # Moonshot's thinking object: keep "all" is K2.7-Code's own policy (no warning); a thinking switch it has not
    from kimi_chat.cli import main

    golden = ROOT / "fixtures" / "golden" / K27 / "k27_history_reasoning_kept"
    case = json.loads(golden.with_suffix(".json").read_text(encoding="utf-8"))
    for thinking, warned in (({"keep": "all"}, None),
                             ({"type": "disabled"}, "has no thinking switch; ignored")):
        body = tmp_path / "req.json"
        body.write_text(json.dumps({"model": "moonshotai/Kimi-K2.7-Code", "messages": case["messages"],
                                    "tools": case["tools"], "thinking": thinking}))
        assert main(["render", "-q", str(body)]) == 0
        out = capsysbinary.readouterr()
        assert out.out == golden.with_suffix(".txt").read_bytes()
        err = out.err.decode()
        assert (err == "") if warned is None else (warned in err), err


def test_thinking_enabled_is_what_k27_code_does_and_disabled_is_said_to_be_ignored() -> None:
    from kimi_chat.servers.contract import read_chat_request

    user = [{"role": "user", "content": "Hi"}]
    on = read_chat_request({"model": "kimi", "messages": user, "thinking": {"type": "enabled"}}, dialect=K27, contract="open")
    assert not on.warnings and on.render_options == {}
    off = read_chat_request({"model": "kimi", "messages": user, "thinking": {"type": "disabled"}}, dialect=K27, contract="open")
    assert off.render_options == {}
    assert [w for w in off.warnings if "cannot turn reasoning off" in w and "always thinks" in w], off.warnings
    # a dialect with no reasoning at all keeps the plain "no switch" warning for "enabled"
    plain = read_chat_request({"model": "kimi", "messages": user, "thinking": {"type": "enabled"}}, dialect="kimi-k2-instruct-0905",
                              contract="open")
    assert any("has no thinking switch" in w for w in plain.warnings)
