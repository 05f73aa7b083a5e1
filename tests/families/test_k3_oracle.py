"""Kimi-K3 against the official K3 tokenizer (oracle tests: need transformers and the reference data).

Properties over generated K3 conversations: ``render_k3 == apply_chat_template(tokenize=False)``,
``render_k3_ids == apply_chat_template(tokenize=True)``, ``render_k3_segments`` == the official
``build_chat_segments`` (text and special flag, piece by piece), and refusal parity: where the
official encoder raises, kimi_chat raises a RenderError / InvalidMessagesError.
"""

from __future__ import annotations

import copy
import sys

import pytest
from hypothesis import event, given, note

from kimi_chat import markers as M
from kimi_chat.errors import RenderError
from kimi_chat.families.k3.render import render_k3, render_k3_ids, render_k3_segments
from kimi_chat.messages import InvalidMessagesError
from kimi_chat.testing.strategies_k3 import k3_requests

from conftest import needs_reference

pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers (the verify extra)")

from kimi_chat.families.k3.oracle import official_k3_ids, official_k3_render, official_k3_segments  # noqa: E402
from kimi_chat.tokens.tokenizer import KimiTokenizer  # noqa: E402

pytestmark = [pytest.mark.oracle, needs_reference, pytest.mark.usefixtures("cache_state")]


@pytest.fixture(scope="module")
def tok():
    return KimiTokenizer.from_reference("k3")


def _official(fn, req):
    try:
        return fn(copy.deepcopy(req["messages"]), copy.deepcopy(req["tools"]), **copy.deepcopy(req["kwargs"]))
    except Exception as e:  # noqa: BLE001 - the official encoder refused this input
        return e


def _effort_refused(kwargs) -> bool:
    # the official check is an `assert`: under `python -O` the official encoder does not refuse
    effort = kwargs.get("thinking_effort", "max")
    return kwargs.get("thinking", True) and effort is not None and effort not in M.K3_THINKING_EFFORTS


def _check(req, ours_fn, official_fn):
    note(repr(req))
    official = _official(official_fn, req)
    if isinstance(official, Exception) or _effort_refused(req["kwargs"]):
        note(f"official: {official!r}")
        event(f"refused: {type(official).__name__}")
        if _effort_refused(req["kwargs"]) and not sys.flags.optimize:
            assert isinstance(official, Exception)  # its AssertionError, or an error it meets first
        with pytest.raises((RenderError, InvalidMessagesError)):
            ours_fn()
        return None
    event("rendered")
    return official


@given(k3_requests())
def test_render_equals_official(req):
    official = _check(req, lambda: render_k3(req["messages"], req["tools"], **req["kwargs"]), official_k3_render)
    if official is not None:
        assert render_k3(req["messages"], req["tools"], **req["kwargs"]) == official


@given(k3_requests(refusals=False))
def test_ids_equal_official(tok, req):
    official = _check(req, lambda: render_k3_ids(req["messages"], tok, req["tools"], **req["kwargs"]), official_k3_ids)
    if official is not None:
        assert render_k3_ids(req["messages"], tok, req["tools"], **req["kwargs"]) == official


@given(k3_requests(max_turns=4))
def test_segments_equal_official(req):
    def official_segments(messages, tools, **kwargs):
        kwargs.setdefault("thinking_effort", "max")  # what apply_chat_template adds
        return official_k3_segments(messages, tools, **kwargs)

    official = _check(req, lambda: render_k3_segments(req["messages"], req["tools"], **req["kwargs"]),
                      official_segments)
    if official is not None:
        ours = render_k3_segments(req["messages"], req["tools"], **req["kwargs"])
        assert [(s.text, s.special) for s in ours] == [(s.text, s.allow_special) for s in official]


def test_oracle_is_the_reference_tokenizer():
    """The harness builds K3's TikTokenTokenizer with the ids of PROVENANCE.md (256 special ids)."""
    from kimi_chat.families.k3.oracle import official_k3_tokenizer

    official = official_k3_tokenizer()
    assert official.vocab_size == M.NUM_BASE_TOKENS + M.K3_NUM_RESERVED_SPECIAL
    for m in M.K3_MARKERS:
        assert official.encode(m.text) == [m.id]
    assert official.encode("<|im_end|>") != [M.IM_END.id]  # K2's spelling is no token of K3


def test_tokenizer_matches_official_on_markers_and_text(tok):
    from kimi_chat.families.k3.oracle import official_k3_tokenizer

    official = official_k3_tokenizer()
    text = 'héllo <|open|>message role="user"<|sep|> 中文 <|reserved_token_163700|> [EOS] <|end_of_msg|>'
    assert tok.encode(text) == official.encode(text)
    assert tok.encode(text, allow_special=False) == official.encode(text, allow_special_tokens=False)
    assert tok.vocab_size == official.vocab_size


EDGES = [
    # tool calls as a tuple (the encoder's id index only reads lists: results stay in order)
    ([{"role": "assistant", "tool_calls": ({"id": "a", "function": {"name": "f", "arguments": '{"x":1}'}},)},
      {"role": "tool", "tool_call_id": "a", "content": "r"}], None, {}),
    ([{"role": "user", "content": ({"type": "text", "text": "a"}, {"type": "image"})}], None, {}),
    ([{"role": "user", "content": "x", "name": 5}], None, {}),
    ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {
        "name": None, "arguments": {1: "a", "b": 2.0, "c": -0.0, "d": 1e300, "e": float("nan")}}}]}], None, {}),
    ([{"role": "assistant", "content": "c", "reasoning_content": 0, "reasoning": "r"}], None, {}),
    ([{"role": "user", "content": "x"}], None, {"response_format": {"json_schema": {"schema": {"a": 1}}}}),
    ([{"role": "user", "content": "x"}], {"b": {"y": 1, "x": 2}, "a": 1}, {}),
    ([{"role": "user", "content": "x"}], None, {"response_format": {"type": "json_schema"}}),
    ([{"role": "user", "content": [{"type": "image_url"}]}], None, {"image_prompts": ("<|open|>",)}),
    ([{"role": "tool", "content": "r", "tool": ""}], None, {}),
    ([{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}, {"id": "1", "function": {"name": "g"}}]},
      {"role": "tool", "tool_call_id": 1, "content": "r"}], None, {}),
    ([{"role": "system", "content": "x", "tools": []}], None, {}),
    ([{"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "r", "name": "n"}], None, {}),
    ([{"role": "user", "content": "a" * 30000 + " " * 30000 + "b"}], None, {}),
    ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '\ufeff{"a":1}'}}]}], None, {}),
    ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ' {"a":1}\n'}}]}], None, {}),
    ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": '{"a":1,"a":2}'}}]}], None, {}),
]


@pytest.mark.parametrize("messages, tools, kwargs", EDGES)
def test_edge_cases_equal_official(tok, messages, tools, kwargs):
    assert render_k3(messages, tools, **kwargs) == official_k3_render(messages, tools, **kwargs)
    assert render_k3_ids(messages, tok, tools, **kwargs) == official_k3_ids(messages, tools, **kwargs)


def test_tool_declarations_cached_only_for_equal_inputs():
    """The declaration cache tells apart inputs whose JSON is equal but which the encoder sorts apart."""
    unsorted = {"b": 1, "a": 2}
    variants = [
        [{"type": "function", "function": {"name": "f", "x": [unsorted]}}],
        [{"type": "function", "function": {"name": "f", "x": (unsorted,)}}],  # the encoder leaves tuples unsorted
        [{"type": "function", "function": {"name": "f", "x": {10: 1, 2: 2}}}],
        [{"type": "function", "function": {"name": "f", "x": {"10": 1, "2": 2}}}],
    ]
    msgs = [{"role": "user", "content": "hi"}, {"role": "system", "tools": variants[1]}]
    seen = set()
    for tools in variants + variants:
        official = official_k3_render(msgs, tools)
        assert render_k3(msgs, tools) == official
        seen.add(official)
    assert len(seen) == 4


@pytest.mark.parametrize("value", ["false", "", 0, 1, None, [], "no"])
def test_non_bool_thinking_renders_as_the_official_truth_value(value):
    """The official encoder reads ``thinking`` by truth value (``thinking="false"`` thinks): render
    and render_k3_ids do the same (parity) and lint reports it (``non-bool-option``, so strict refuses)."""
    import kimi_chat

    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "reasoning_content": "r"},
            {"role": "user", "content": "again"}]
    assert kimi_chat.render(msgs, dialect="kimi-k3", thinking=value) == official_k3_render(msgs, thinking=value)
    tok = KimiTokenizer.from_reference("k3")
    assert render_k3_ids(msgs, tok, thinking=value) == official_k3_ids(msgs, thinking=value)
    codes = [(w.code, w.severity) for w in kimi_chat.lint(msgs, dialect="kimi-k3", thinking=value)]
    assert ("non-bool-option", "error") in codes
