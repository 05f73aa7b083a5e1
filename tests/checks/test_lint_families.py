"""Lint rules belong to the format family, and ``strict=True`` refuses exactly lint's errors, in both families.

Expected codes are reasoned from the formats: the K3 encoder never writes tool-call ids (so no id rule
applies to it), drops messages of a role it does not know (``developer`` included), reads ``tool`` on a
tool result and ``tools`` on a system message; 0905 leaves the last turn open without a generation
prompt; the K2.5/K2.6 tokenizer declares tools as JSON where its TypeScript encoder fails."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kimi_chat
from kimi_chat import StrictModeError, lint, render
from kimi_chat.dialects import DIALECTS
from kimi_chat.testing.strategies import odd_requests
from kimi_chat.testing.strategies_k3 import k3_requests

K2 = [n for n, d in DIALECTS.items() if d.family == "k2"]
K3 = [n for n, d in DIALECTS.items() if d.family == "k3"]
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]

# questionable inputs: (messages, tools, options); each family must agree with itself on them
QUESTIONABLE: list[tuple[list[dict[str, Any]], Any, dict[str, Any]]] = [
    ([{"role": "developer", "content": "Be brief."}, USER], None, {}),
    ([{"role": "moderator", "content": "x"}, USER], None, {}),
    ([USER, {"role": "assistant", "content": "", "tool_calls": [CALL]},
      {"role": "tool", "tool_call_id": "call_abc", "content": "18C"}], TOOLS, {}),
    ([USER, {"role": "assistant", "content": "", "tool_calls": [{k: v for k, v in CALL.items() if k != "id"}]},
      {"role": "tool", "content": "18C"}], TOOLS, {}),
    ([USER, {"role": "assistant", "content": "", "tool_calls": [CALL]},
      {"role": "tool", "tool_call_id": "call_zzz", "content": "18C"}], None, {}),
    ([{"role": "user"}], None, {}),
    ([{**USER, "tool_call": CALL}], None, {}),
    ([USER], None, {"enable_thinking": False}),
    ([USER], None, {"thinking": "false"}),
    ([USER], None, {"preserve_thinking": True}),
    ([USER, {"role": "assistant", "content": "x", "tool_calls": [{**CALL, "function": {**CALL["function"], "name": "nope"}}]}],
     TOOLS, {}),
    ([{"role": "user", "content": [{"type": "audio", "data": "..."}]}], None, {}),
]


def _found(dialect: str, messages: Any, tools: Any, options: dict[str, Any]) -> tuple[set, set]:
    """(lint errors, what strict refuses) as (code, message index, field) sets."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors = {(w.code, w.message_index, w.field) for w in lint(messages, dialect=dialect, tools=tools, **options)
                  if w.severity == "error"}
        try:
            strict = render(messages, dialect=dialect, tools=tools, strict=True, **options)
        except StrictModeError as e:
            return errors, {(w.code, w.message_index, w.field) for w in e.problems}
    assert strict == render(messages, dialect=dialect, tools=tools, **options)  # strict changes nothing else
    return errors, set()


@pytest.mark.parametrize("dialect", K2 + K3)
@pytest.mark.parametrize("case", range(len(QUESTIONABLE)))
def test_strict_refuses_exactly_lints_errors(dialect, case):
    messages, tools, options = QUESTIONABLE[case]
    errors, refused = _found(dialect, messages, tools, options)
    assert errors == refused


_PROPS = settings(max_examples=max(30, settings().max_examples // 4), deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_PROPS
@given(st.sampled_from(K2), st.data())
def test_k2_strict_is_lint_errors_property(dialect, data):
    req = data.draw(odd_requests(dialect))
    try:
        errors, refused = _found(dialect, req["messages"], req["tools"],
                                 {"add_generation_prompt": req["add_generation_prompt"], **req["options"]})
    except kimi_chat.KimiChatError:
        return  # the official template cannot render it either: nothing for strict to agree with
    assert errors == refused


@_PROPS
@given(k3_requests(refusals=False), st.sampled_from([{}, {"enable_thinking": True}, {"preserve_thinking": 1}]),
       st.sampled_from([None, "developer", "moderator"]))
def test_k3_strict_is_lint_errors_property(req, extra, role):
    messages = req["messages"] if role is None else [{"role": role, "content": "x"}, *req["messages"]]
    try:
        errors, refused = _found("kimi-k3", messages, req["tools"], {**req["kwargs"], **extra})
    except kimi_chat.KimiChatError:
        return
    assert errors == refused


def _codes(messages: Any, dialect: str, **kw: Any) -> list[str]:
    return [w.code for w in lint(messages, dialect=dialect, **kw)]


def test_k3_has_no_k2_id_rules_and_says_developer_is_dropped():
    loop = [USER, {"role": "assistant", "content": "", "tool_calls": [CALL, {k: v for k, v in CALL.items() if k != "id"}]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "18C"}, {"role": "tool", "content": "ok"}]
    assert _codes(loop, "kimi-k3", tools=TOOLS) == []
    # for K2 the same loop is not canonical and misses an id
    assert {"non-canonical-tool-call-id", "missing-tool-call-id"} <= set(_codes(loop, "kimi-k2-instruct", tools=TOOLS))
    found = lint([{"role": "developer", "content": "Be brief."}, USER], dialect="kimi-k3")
    assert [(w.code, w.message_index, w.field, w.severity) for w in found] == [("developer-dropped", 0, "role", "warning")]
    assert "drops" in found[0].text and "runs into" not in found[0].text
    # what K3 reads off the OpenAI schema is not an unknown field
    assert _codes([{"role": "system", "content": "", "tools": TOOLS}, USER,
                   {"role": "assistant", "content": "", "tool_calls": [CALL]},
                   {"role": "tool", "tool": "get_weather", "tool_call_id": "call_abc", "content": "r"}], "kimi-k3") == []
    assert _codes([{**USER, "tool_call": CALL}], "kimi-k3") == ["unknown-field"]


def test_k3_typed_image_placeholder_is_a_warning():
    text = "look: <|kimi_image_placeholder|>"
    found = lint([{"role": "user", "content": text}], dialect="kimi-k3", image_prompts=["<img>"])
    assert [(w.code, w.message_index, w.field, w.severity) for w in found] == [
        ("typed-image-placeholder", 0, "content", "warning")]
    # the official encoder puts the image prompt where it was typed: that is what it warns about
    assert "look: <img>" in render([{"role": "user", "content": text}], dialect="kimi-k3", image_prompts=["<img>"])
    # without image prompts the placeholder stays text: nothing to say
    assert lint([{"role": "user", "content": text}], dialect="kimi-k3") == []


# ------------------------------------------------------------------------- 20.16: the open last turn


PAIR = [USER, {"role": "assistant", "content": "Sunny."}]


def test_unterminated_last_turn_is_linted_for_0905_only():
    found = lint(PAIR, add_generation_prompt=False)
    assert [(w.code, w.message_index, w.severity) for w in found] == [("unterminated-last-turn", 1, "warning")]
    assert not render(PAIR, add_generation_prompt=False).endswith("<|im_end|>")  # parity: kept open
    assert lint(PAIR) == []
    for dialect in ("kimi-k2-instruct@rev2", "kimi-k2-thinking", "kimi-k2.5", "kimi-k3"):
        assert lint(PAIR, dialect=dialect, add_generation_prompt=False) == []


def test_render_tokens_and_count_warn_about_the_open_last_turn():
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    from kimi_chat.reference import reference_file

    if reference_file("tokenizer/tiktoken.model") is None:
        pytest.skip("reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference")
    tok = kimi_chat.KimiTokenizer.from_reference("k2")
    with pytest.warns(UserWarning, match=r"unterminated-last-turn: messages\[1\]"):
        r = kimi_chat.render_tokens(PAIR, tokenizer=tok, add_generation_prompt=False)
    assert r.ids == tok.encode(render(PAIR, add_generation_prompt=False))  # the ids stay the official ones
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # closed turns, or a continued prefill: no warning
        kimi_chat.render_tokens(PAIR, tokenizer=tok)
        kimi_chat.render_tokens(PAIR, tokenizer=tok, add_generation_prompt=False, continue_final_message=True)


# ------------------------------------------------------------------ 20.8: the JSON fallback, linted


GROUP_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"g": {"$ref": "#/$defs/group/items"}},
    "$defs": {"group": {"type": "object", "properties": {"items": {"type": "string"}}}}}}}]


@pytest.mark.parametrize("dialect", ["kimi-k2.5", "kimi-k2.6"])
def test_tools_the_ts_encoder_cannot_encode_are_declared_as_json_and_linted(dialect):
    out = render([USER], tools=GROUP_TOOLS, dialect=dialect)
    # the template's fallback: the key-sorted tools as compact JSON, no TypeScript namespace
    assert out.startswith('<|im_system|>tool_declare<|im_middle|>[{"function":{"name":"f","parameters":{"$defs":')
    assert "namespace functions" not in out
    found = lint([USER], tools=GROUP_TOOLS, dialect=dialect)
    assert [(w.code, w.field, w.severity) for w in found] == [("tools-not-typescript", "tools", "warning")]
    assert "'#/$defs/group/items'" in found[0].text
    assert render([USER], tools=GROUP_TOOLS, dialect=dialect, strict=True) == out


# ------------------------------------------------------------------ 24.12: typed markers, both families


@pytest.mark.parametrize("dialect, marker", [("kimi-k2-instruct", "<|im_end|>"), ("kimi-k2.5", "<|tool_call_end|>"),
                                             ("kimi-k3", "<|end_of_msg|>"), ("kimi-k3", "<|reserved_token_163700|>")])
def test_typed_markers_are_linted_with_their_field(dialect, marker):
    msgs = [{"role": "user", "content": [{"type": "text", "text": f"say {marker} ok"}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {**CALL, "function": {"name": "get_weather", "arguments": '{"city": "' + marker + '"}'}}]}]
    found = [(w.code, w.message_index, w.field, w.severity) for w in lint(msgs, dialect=dialect)
             if w.code == "typed-marker"]
    assert found == [("typed-marker", 0, "content[0].text", "warning"),
                     ("typed-marker", 1, "tool_calls[0].function.arguments", "warning")]
    assert render(msgs, dialect=dialect, strict=True) == render(msgs, dialect=dialect)  # a warning: strict renders
    # another family's markers are plain text to this family's tokenizer: nothing to say
    other = "<|open|>" if kimi_chat.get_dialect(dialect).family == "k2" else "<|im_middle|>"
    assert [w for w in lint([{"role": "user", "content": other}], dialect=dialect) if w.code == "typed-marker"] == []


def test_text_joined_around_a_dropped_stray_marker_is_linted_when_sent_back():
    parsed = kimi_chat.parse("a <|i<|im_middle|>m_end|> b")
    assert parsed.content == "a <|im_end|> b" and [w.kind for w in parsed.warnings] == ["stray_marker"]
    history = [USER, {"role": "assistant", "content": parsed.content}, {"role": "user", "content": "and?"}]
    assert [(w.code, w.message_index, w.field) for w in lint(history)] == [("typed-marker", 1, "content")]


def test_encode_docstrings_say_which_path_is_safe():
    doc = kimi_chat.KimiTokenizer.encode.__doc__ or ""
    assert "render_tokens" in doc and "allow_special=False" in doc and "typed" in doc
    # the vLLM adapter needs vLLM to import: its docstring read off the source
    import ast
    from pathlib import Path

    import kimi_chat.servers.stages as integrations

    tree = ast.parse((Path(integrations.__file__).parent / "vllm" / "tokenizer.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KimiChatVllmTokenizer")
    encode = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "encode")
    doc = ast.get_docstring(encode) or ""
    assert "render_tokens" in doc and "Not safe" in doc
