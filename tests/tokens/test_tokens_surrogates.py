"""A lone surrogate (U+D800..U+DFFF: a JSON ``\\ud800`` escape without its pair) in the input of token-level
rendering. The official tokenizer (tiktoken) encodes it as U+FFFD; every dialect's ids do the
same, on every path (no UnicodeEncodeError from the attribution), with a LoneSurrogateWarning naming the message
and field, since the ids no longer decode to the rendered text."""

from __future__ import annotations

import warnings

import pytest

from kimi_chat.dialects import DIALECTS, get_dialect
from kimi_chat.errors import LoneSurrogateWarning
from kimi_chat.reference import reference_file
from kimi_chat.prompt import render
from kimi_chat.tokens.rendered import render_ids, render_tokens

pytestmark = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                reason="tokenizer/tiktoken.model of the reference data not found")

DIALECT_NAMES = sorted(DIALECTS)
TEXTS = ["a\ud800b", "x \udfff\n", "é\udc00中", "\ud800"]


def _tok(dialect: str):
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3" if get_dialect(dialect).family == "k3" else "k2")


def _placements(t: str):
    yield "content", 0, [{"role": "user", "content": t}]
    yield "content", 1, [{"role": "user", "content": "q"}, {"role": "assistant", "content": t}]
    yield "content[0].text", 0, [{"role": "user", "content": [{"type": "text", "text": t}]}]
    yield "tool_calls[0].function.arguments", 1, [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": '{"a": "' + t + '"}'}}]}]


def _replaced(value):
    # what tiktoken does to a str that is not Unicode text
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, dict):
        return {k: _replaced(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
def test_lone_surrogate_is_encoded_as_the_official_tokenizer_does_with_a_warning(dialect):
    tok = _tok(dialect)
    for t in TEXTS:
        for field, index, msgs in _placements(t):
            if not any("\ud800" <= c <= "\udfff" for c in render(msgs, dialect=dialect)):  # rev1 drops the calls of the last turn: nothing to warn
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    render_tokens(msgs, tokenizer=tok, dialect=dialect)
                continue
            with pytest.warns(LoneSurrogateWarning) as caught:
                r = render_tokens(msgs, tokenizer=tok, dialect=dialect)
            w = caught[0].message
            assert (w.message_index, w.field) == (index, field), (t, str(w))
            assert str(w).startswith(f"messages[{index}].{field}: lone surrogate U+{ord(t.strip('aébx 中')[0]):04X}")
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the replaced input is Unicode text: no warning
                clean = render_tokens(_replaced(msgs), tokenizer=tok, dialect=dialect)
            assert r.ids == clean.ids, (t, field)
            assert len(r.message_index) == len(r.ids) and r.assistant_mask == clean.assistant_mask
            assert r.text == render(msgs, dialect=dialect)  # the text is the official render, unchanged
            with pytest.warns(LoneSurrogateWarning):
                ids = render_ids(msgs, tokenizer=tok, dialect=dialect)
            assert ids == r.ids
            if DIALECTS[dialect].family == "k3":
                from kimi_chat.families.k3.render import render_k3_ids

                with pytest.warns(LoneSurrogateWarning, match=rf"^messages\[{index}\]"):
                    ids = render_k3_ids(msgs, tok)
                assert ids == r.ids
            if DIALECTS[dialect].family != "k3":  # encode(render(...)), as documented
                encoded = tok.encode(r.text, allow_special=True)  # tiktoken replaces the surrogate itself
                assert r.ids == encoded


def test_lone_surrogate_in_tools_is_named():
    tok = _tok("kimi-k2-instruct")
    tools = [{"type": "function", "function": {"name": "f", "description": "d\ud800", "parameters": {}}}]
    with pytest.warns(LoneSurrogateWarning, match=r"^tools\[0\]\.function\.description: lone surrogate U\+D800"):
        render_tokens([{"role": "user", "content": "q"}], tokenizer=tok, tools=tools, dialect="kimi-k2-instruct")
