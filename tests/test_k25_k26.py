"""Kimi-K2.5 and Kimi-K2.6 as two dialects: the rules that tell them apart, each
checked against both oracle templates (``unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja``
and ``unverified/Kimi-K2.6.chat_template.reconstructed.jinja``) and against our own templates."""

from __future__ import annotations

import pytest

from kimi_chat import get_dialect, render
from kimi_chat.dialects import dialect_for_model
from kimi_chat.reference.oracle import render_official, render_template
from kimi_chat.templates import template_text

from conftest import needs_reference

K25, K26 = "kimi-k2.5", "kimi-k2.6"

HISTORY = [
    {"role": "user", "content": "Is 91 prime?"},
    {"role": "assistant", "content": "No.", "reasoning_content": "7*13"},
    {"role": "user", "content": "Is 97?"},
    {"role": "assistant", "content": "Yes.", "reasoning_content": "no divisor up to 9"},
]
BOTH_KEYS = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "A", "reasoning": "via reasoning", "reasoning_content": "via content"},
]


def _ours_template(dialect, msgs, **options):
    return render_template(template_text(dialect), msgs, **options)


def test_records():
    k25, k26 = get_dialect(K25), get_dialect(K26)
    assert k25.oracle == "unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja"
    assert k26.oracle == "unverified/Kimi-K2.6.chat_template.reconstructed.jinja"
    assert (k25.status.value, k26.status.value) == ("reconstructed", "reconstructed")
    assert k25.options == ("thinking",) and not k25.reads_preserve_thinking
    assert k26.options == ("thinking", "preserve_thinking") and k26.reads_preserve_thinking
    for d in (k25, k26):
        assert d.prefills_think() and d.prefills_think(thinking=True) and not d.prefills_think(thinking=False)


@pytest.mark.parametrize("model, dialect", [
    ("moonshotai/Kimi-K2.5", K25), ("kimi-k2.5", K25), ("Kimi_K25", K25),
    ("moonshotai/Kimi-K2.6", K26), ("kimi-k2.6", K26), ("Kimi-K2-6-GGUF", K26),
])
def test_model_names(model, dialect):
    assert dialect_for_model(model) == dialect


@needs_reference
@pytest.mark.parametrize("dialect", [K25, K26])
@pytest.mark.parametrize("msgs", [HISTORY, BOTH_KEYS], ids=["history", "both_keys"])
@pytest.mark.parametrize("options", [{}, {"thinking": False}, {"thinking": True}, {"preserve_thinking": True},
                                     {"thinking": False, "preserve_thinking": True}])
@pytest.mark.parametrize("agp", [True, False])
def test_against_oracle(dialect, msgs, options, agp):
    """render == the dialect's oracle, for every option mix; an option the dialect does not read is
    ignored by its oracle, and render either refuses it (before the parity change) or ignores it too."""
    official = render_official(msgs, dialect=dialect, add_generation_prompt=agp, **options)
    read = {k: v for k, v in options.items() if k in get_dialect(dialect).options}
    if read != options:
        assert official == render_official(msgs, dialect=dialect, add_generation_prompt=agp, **read)
        try:
            ours = render(msgs, dialect=dialect, add_generation_prompt=agp, **options)
        except TypeError as e:
            assert "preserve_thinking" in str(e)
        else:
            assert ours == official
        options = read
    assert render(msgs, dialect=dialect, add_generation_prompt=agp, **options) == official
    assert _ours_template(dialect, msgs, add_generation_prompt=agp, **options) == official


def test_k25_suffix_assistant_thinking_off_gets_empty_think():
    # the last assistant turn is in the history (no tool calls): force a suffix turn with a tool call
    msgs = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "reasoning_content": "need a tool",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    on = render(msgs, dialect=K25)
    off = render(msgs, dialect=K25, thinking=False)
    assert "<think>need a tool</think>" in on
    assert "<think>need a tool</think>" not in off and off.count("<think></think>") == 2
    # K2.6: the same unless preserve_thinking keeps it
    assert render(msgs, dialect=K26, thinking=False) == off
    assert "<think>need a tool</think>" in render(msgs, dialect=K26, thinking=False, preserve_thinking=True)


def test_preserve_thinking_keeps_history_on_k26_only():
    kept = render(HISTORY, dialect=K26, preserve_thinking=True)
    assert "<think>7*13</think>" in kept and "<think>no divisor up to 9</think>" in kept
    split = render(HISTORY, dialect=K26)
    assert "<think>7*13</think>" not in split and "<think>no divisor up to 9</think>" not in split
    assert render(HISTORY, dialect=K25) == split


def test_reasoning_key_order():
    # the last assistant turn carries its reasoning only if it is in the suffix: add a user turn after
    msgs = [BOTH_KEYS[0], {**BOTH_KEYS[1], "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    assert "<think>via content</think>" in render(msgs, dialect=K25)
    assert "<think>via reasoning</think>" in render(msgs, dialect=K26)
    # only `reasoning`: transformers copies it to reasoning_content, so K2.5 shows it too
    only = [msgs[0], {k: v for k, v in msgs[1].items() if k != "reasoning_content"}]
    assert "<think>via reasoning</think>" in render(only, dialect=K25)


@needs_reference
def test_reasoning_key_order_against_oracle():
    msgs = [BOTH_KEYS[0], {**BOTH_KEYS[1], "thinking": "via thinking", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    for dialect in (K25, K26):
        for drop in ((), ("reasoning_content",), ("reasoning",), ("reasoning_content", "thinking")):
            m = [msgs[0], {k: v for k, v in msgs[1].items() if k not in drop}]
            assert render(m, dialect=dialect) == render_official(m, dialect=dialect), (dialect, drop)


TS_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}]
GROUP_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"g": {"$ref": "#/$defs/group/items"}},
    "$defs": {"group": {"type": "object", "properties": {"items": {"type": "string"}}}}}}}]


@needs_reference
@pytest.mark.parametrize("dialect", [K25, K26])
def test_oracle_computes_tools_ts_with_the_official_encoder(dialect, monkeypatch):
    """The oracle's tools_ts_str comes from Moonshot's tool_declaration_ts.py (reference
    data), not from kimi_chat's encoder: breaking ours leaves the official rendering as it was."""
    import kimi_chat.families.k2.tools_ts as ours
    from kimi_chat.reference.oracle import official_tools_ts_encoder

    msgs = [{"role": "user", "content": "Weather?"}]
    official = render_official(msgs, dialect=dialect, tools=TS_TOOLS)
    assert official_tools_ts_encoder()(TS_TOOLS) in official  # the official encoder's text, as the template puts it
    monkeypatch.setattr(ours, "tools_to_typescript", lambda tools: "BROKEN")
    monkeypatch.setattr(ours, "typescript_or_none", lambda tools: "BROKEN")
    assert render_official(msgs, dialect=dialect, tools=TS_TOOLS) == official


@needs_reference
@pytest.mark.parametrize("dialect", [K25, K26])
def test_tools_the_official_encoder_refuses_render_as_official(dialect):
    """The official tokenizer catches the encoder's failure and its template declares the tools as JSON;
    render does the same (it raised ToolSchemaError before)."""
    msgs = [{"role": "user", "content": "Weather?"}]
    official = render_official(msgs, dialect=dialect, tools=GROUP_TOOLS)
    assert "namespace functions" not in official
    assert render(msgs, dialect=dialect, tools=GROUP_TOOLS) == official
    # one failing tool among good ones: the whole list is declared as JSON, as the official does
    both = TS_TOOLS + GROUP_TOOLS
    assert render(msgs, dialect=dialect, tools=both) == render_official(msgs, dialect=dialect, tools=both)
