"""RenderedTokens for trainers: pickled without its tokenizer (taken back from the live one, or the files), and
render_tokens warning once when the rendering drops reasoning the messages carry."""

from __future__ import annotations

import pickle
import warnings

import pytest
from conftest import needs_reference

from kimi_chat import KimiTokenizer, extend_tokens, render_tokens
from kimi_chat.tokens.rendered import RenderedTokens

pytestmark = needs_reference  # the reference tokenizers

CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.", "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
    {"role": "assistant", "content": "18C.", "reasoning_content": "Answer it."},
    {"role": "user", "content": "Thanks"},
    {"role": "assistant", "content": "You're welcome.", "reasoning": "Be polite."},
]


@pytest.fixture(scope="module")
def tok():
    return KimiTokenizer.from_reference("k2.6")


def test_pickles_without_the_tokenizer(tok):
    r = render_tokens(CONVERSATION[:5], tokenizer=tok, dialect="kimi-k2.6")
    blob = pickle.dumps(r)
    # the tokenizer's ranks alone are megabytes; the result is its ids, pieces and messages
    assert len(blob) < 20 * len(pickle.dumps(r.ids)) and b"mergeable" not in blob
    back = pickle.loads(blob)
    assert (back.ids, back.assistant_mask, back.message_index, back.spans, back.text) == (
        r.ids, r.assistant_mask, r.message_index, r.spans, r.text)
    assert back.tokenizer is tok  # the live tokenizer of this process, by its files
    assert back.dialect == "kimi-k2.6"
    # extend_tokens works from the unpickled prompt (it tokenizes with the taken-back tokenizer)
    nxt = extend_tokens(back, [], [{"role": "assistant", "content": "You're welcome."}])
    assert nxt is not None and nxt.ids[: len(r.ids)] == r.ids


def test_unpickled_elsewhere_loads_the_tokenizer_from_its_files(tok, monkeypatch):
    from kimi_chat.tokens import live as rendered

    r = render_tokens(CONVERSATION[:1], tokenizer=tok, dialect="kimi-k2.6")
    back = pickle.loads(pickle.dumps(r))
    monkeypatch.setattr(rendered, "_LIVE", {})  # a process that never used this tokenizer
    monkeypatch.setattr(rendered, "_LOADED", {})
    other = back.tokenizer
    assert other is not tok
    assert (other.model_path, other.config_path, other.eos_id, other.vocab_size) == (
        tok.model_path, tok.config_path, tok.eos_id, tok.vocab_size)


@pytest.mark.parametrize("dialect, dropped", [
    # the official K2-Thinking / K2.6 templates write every assistant turn up to the last one without tool calls
    # (messages[5], the last message) as <think></think>: all three reasoning blocks
    ("kimi-k2-thinking@rev1", 3), ("kimi-k2.6", 3),
    # K2-Instruct has no reasoning block at all
    ("kimi-k2-instruct-0905", 3),
])
def test_warns_once_when_the_rendering_drops_reasoning(tok, dialect, dropped):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        render_tokens(CONVERSATION, tokenizer=tok, dialect=dialect, add_generation_prompt=False)
    mine = [w for w in caught if "carry reasoning" in str(w.message)]
    assert len(mine) == 1
    assert f"{dropped} assistant message(s)" in str(mine[0].message)
    assert "kimi_chat.data" in str(mine[0].message) and "preserve_thinking" in str(mine[0].message)


@pytest.mark.parametrize("dialect, dropped", [("kimi-k2-thinking@rev1", 3), ("kimi-k2.6", 3),
                                              ("kimi-k2-instruct-0905", 3)])
def test_the_count_is_read_on_the_result(tok, dialect, dropped):
    """``reasoning_dropped``: the warning's count, without catching it (``warn=False``), kept through pickling;
    ``None`` for a request (a generation prompt), and 0 where every turn keeps its reasoning."""
    r = render_tokens(CONVERSATION, tokenizer=tok, dialect=dialect, add_generation_prompt=False, warn=False)
    assert r.reasoning_dropped == dropped
    assert pickle.loads(pickle.dumps(r)).reasoning_dropped == dropped
    assert render_tokens(CONVERSATION[:5], tokenizer=tok, dialect=dialect,
                         add_generation_prompt=True).reasoning_dropped is None
    kept = render_tokens(CONVERSATION, tokenizer=tok, dialect="kimi-k2.6", add_generation_prompt=False,
                         preserve_thinking=True)
    assert kept.reasoning_dropped == 0


def test_a_pickle_from_before_a_new_slot_reads_it_as_unknown(tok):
    """A result pickled by a kimi_chat without ``reasoning_dropped`` unpickles with it ``None`` (not known), the
    rest as pickled."""
    r = render_tokens(CONVERSATION, tokenizer=tok, dialect="kimi-k2.6", add_generation_prompt=False, warn=False)
    state = r.__getstate__()
    del state["reasoning_dropped"]
    old = RenderedTokens.__new__(RenderedTokens)
    old.__setstate__(state)
    assert old.reasoning_dropped is None
    assert (old.ids, old.spans, old.tokenizer.model_path) == (r.ids, r.spans, tok.model_path)


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct-0905", "kimi-k2.6"])
def test_warn_false_gives_no_warning_and_the_same_result(tok, dialect):
    """``warn=False``: neither the dropped-reasoning warning nor the open last turn's (0905 leaves the last
    assistant turn open without a generation prompt), and the same ids, mask and spans."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warned = render_tokens(CONVERSATION, tokenizer=tok, dialect=dialect, add_generation_prompt=False)
    assert any("carry reasoning" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = render_tokens(CONVERSATION, tokenizer=tok, dialect=dialect, add_generation_prompt=False, warn=False)
    assert (quiet.ids, quiet.assistant_mask, quiet.spans) == (warned.ids, warned.assistant_mask, warned.spans)


def test_no_warning_where_the_reasoning_is_kept(tok):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # preserve_thinking keeps every turn's reasoning; a generation prompt is a request, not training data
        render_tokens(CONVERSATION, tokenizer=tok, dialect="kimi-k2.6", add_generation_prompt=False,
                      preserve_thinking=True)
        render_tokens(CONVERSATION[:5], tokenizer=tok, dialect="kimi-k2.6", add_generation_prompt=True)
        # the tool-loop turn after the last final answer keeps its reasoning in K2-Thinking
        render_tokens(CONVERSATION[:3], tokenizer=tok, dialect="kimi-k2-thinking@rev1", add_generation_prompt=False)


def test_k3_keeps_reasoning_no_warning():
    k3 = KimiTokenizer.from_reference("k3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_tokens(CONVERSATION, tokenizer=k3, dialect="kimi-k3", add_generation_prompt=False)
