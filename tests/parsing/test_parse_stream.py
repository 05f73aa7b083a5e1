"""Streaming input and output: mixed bytes/str chunks and incomplete UTF-8, the
incremental ``StreamParser.message`` (item 17), the marker lexer object, and the layout rule that
``kimi_chat.output.peg`` and the parser (``kimi_chat.output``) name no family's markers."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parse_helpers import AB, CB, CE, END, SB, SE, THINK, UNTHINK, call, merge, section

import kimi_chat
from kimi_chat.families.k2.format import machine
from kimi_chat.output import MarkerLexer, StreamParser, parse

THINKING = "kimi-k2-thinking"
E_ACUTE = "é".encode()  # 2 bytes
KANJI = "東".encode()  # 3 bytes


# ------------------------------------------------------------------------------ bytes and str


def test_str_after_a_pending_utf8_character_keeps_the_order():
    p = StreamParser()
    p.feed(b"a" + KANJI[:2])
    p.feed("b")
    p.feed(KANJI)
    p.finish()
    msg = p.message
    assert msg.content == "a\ufffdb東"  # it used to be "ab" + the pending bytes' character later
    (w,) = msg.warnings
    assert w.kind == "incomplete_utf8" and w.offset == 1 and "e6 9d" in w.message


def test_partial_character_at_finish_is_a_warning():
    p = StreamParser()
    p.feed(b"ok " + E_ACUTE[:1])
    p.finish()
    assert p.message.content == "ok \ufffd"
    assert [(w.kind, w.offset, w.text) for w in p.message.warnings] == [("incomplete_utf8", 3, "\ufffd")]
    assert parse(b"ok " + E_ACUTE[:1]).warnings == p.message.warnings


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct-0905", THINKING, "kimi-k3"])
def test_a_partial_character_at_finish_comes_as_a_delta(dialect):
    """The U+FFFD that ends an incomplete character at finish() is in the deltas, as in the content (the
    deltas of finish() used to drop it: the content said 'ok \ufffd', the deltas 'ok ')."""
    p = StreamParser(dialect, thinking_prefilled=False) if dialect == THINKING else StreamParser(dialect)
    deltas = p.feed(b"ok " + KANJI[:2]) + p.finish()
    text = "".join((d.content or "") + (d.reasoning_content or "") for d in deltas)
    assert text.endswith("\ufffd") and text == (p.message.content or "") + (p.message.reasoning_content or "")


def test_complete_bytes_give_no_warning():
    p = StreamParser()
    for b in [E_ACUTE[:1], E_ACUTE[1:], b"x"]:
        p.feed(b)
    p.feed("y")
    p.finish()
    assert (p.message.content, p.message.warnings) == ("éxy", [])


@given(st.text(max_size=40), st.lists(st.integers(0, 200), max_size=8), st.lists(st.booleans(), max_size=9))
def test_mixed_chunks_of_whole_characters_equal_parse(text, cuts, as_bytes):
    data = text.encode()
    points = sorted({c for c in cuts if 0 < c < len(data)})
    p = StreamParser()
    for k, (a, b) in enumerate(zip([0, *points], [*points, len(data)])):
        piece = data[a:b]
        if k < len(as_bytes) and as_bytes[k]:
            try:
                p.feed(piece.decode())  # a str chunk only where the cut is on a character boundary
                continue
            except UnicodeDecodeError:
                pass
        p.feed(piece)
    p.finish()
    expect = parse(text)
    got = p.message
    # a str chunk while a character is pending ends it: only then may the texts differ
    if not any(w.kind == "incomplete_utf8" for w in got.warnings):
        assert got == expect


# ------------------------------------------------------------------------------ message, incremental

TURN = (THINK + "let me think " * 5 + UNTHINK + "  Answer: " + "word " * 20
        + section(call("functions.f:0", '{"a": "' + "x" * 50 + '"}'), CB + "call_1" + AB + '{"b": 2}')
        + " after" + END + "tail")


@pytest.mark.parametrize("size", [1, 4, 13])
def test_message_read_after_every_feed_tracks_the_deltas(size):
    p = StreamParser(THINKING, include_invalid=True)  # calls as written: the message's calls, piece by piece
    deltas = []
    for i in range(0, len(TURN), size):
        deltas += p.feed(TURN[i:i + size])
        msg = p.message
        so_far = merge(deltas)
        assert (msg.content, msg.reasoning_content) == (so_far.content, so_far.reasoning_content)
        streamed = [c["arguments"] for _, c in sorted(so_far.calls.items())]
        # a call whose header is not read yet is in the message, not yet in the deltas
        assert [c.arguments for c in msg.tool_calls] == streamed + [""] * (len(msg.tool_calls) - len(streamed))
        assert msg.stop_reason is None or i + size >= TURN.index(END)
    deltas += p.finish()
    assert p.message == parse(TURN, dialect=THINKING)
    assert p.message is p.message  # final: built once


def test_an_old_message_is_not_changed_by_later_feeds():
    p = StreamParser(THINKING)
    p.feed(THINK + "abc")
    old = p.message
    p.feed("def" + UNTHINK + "x")
    assert old.reasoning_content == "abc" and p.message.reasoning_content == "abcdef"


# ------------------------------------------------------------------------------ the lexer object


def test_lexer_holds_back_a_partial_marker_and_never_loses_it():
    lx = MarkerLexer(machine("message_plain", think=False).markers)
    assert lx.tokens("hello <|im_") == [(None, "hello ")]
    assert lx.pending == "<|im_"
    assert lx.tokens("end|>x<|tool_call_begin|") == [("END_TURN", END), (None, "x")]
    assert lx.pending == "<|tool_call_begin|"
    assert lx.tokens(">") == [("CALL_BEGIN", CB)]
    assert lx.tokens("<|not a marker") == [(None, "<|not a marker")]
    lx.tokens("<|tool")
    assert lx.flush() == "<|tool" and lx.pending == ""


def test_lexer_stops_where_the_caller_says():
    lx = MarkerLexer(machine("message", think=True).markers)
    seen = []
    rest = lx.feed("a" + UNTHINK + "b" + END + "c" + SB + "<|im", seen.append, lambda c, s: seen.append(c) or c == "END_TURN")
    assert seen == ["a", "THINK_END", "b", "END_TURN"]
    assert rest == "c" + SB + "<|im" and lx.pending == ""


def test_lexer_is_the_parsers():
    p = StreamParser()
    p.feed("a<|tool_calls_sec")
    assert p._lexer.pending == "<|tool_calls_sec" and p.offset == 1


def test_think_is_literal_without_reasoning():
    lx = MarkerLexer(machine("message_plain", think=False).markers)
    assert lx.tokens(THINK + "x" + UNTHINK) == [(None, THINK + "x" + UNTHINK)]


# ------------------------------------------------------------------------------ layout


def _source(name: str) -> str:
    path = Path(importlib.import_module(name).__file__)
    files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def test_peg_names_no_marker():
    src = _source("kimi_chat.output.peg")
    assert "<|" not in src and "[EOS]" not in src and "<think>" not in src
    assert not [i for i in re.findall(r"^from (\S+) import", src, re.M) if i.endswith("markers")]


def test_parse_code_names_no_marker():
    code = "\n".join(line for line in _source("kimi_chat.output").splitlines()
                     if not line.lstrip().startswith((">>>", "#")))
    imports = re.findall(r"^from (\S+) import", code, re.M)
    assert not [i for i in imports if i.endswith("markers")], imports


def test_public_names_still_import():
    from kimi_chat.output import (
        Delta,
        ParsedMessage,
        ParsedToolCall,
        ParseWarning,
        StopReason,
        ToolCallDelta,
        ToolCallStatus,
    )

    assert kimi_chat.StreamParser is StreamParser and kimi_chat.parse is not None
    assert parse(section(call("functions.f:0", "{}")) + SE[:0] + CE[:0]).tool_calls[0].name == "f"


def test_the_format_comes_from_the_dialect_family():
    import dataclasses

    from kimi_chat.dialects import get_dialect
    from kimi_chat.families import REGISTRY as FAMILIES
    from kimi_chat.output.format import format_for
    from kimi_chat.families.k2.format import K2

    d = get_dialect("kimi-k2-thinking")
    assert format_for(d) is K2 and StreamParser(d).format is K2 and set(FAMILIES) >= {"k2"}

    class Later:
        name, family = "kimi-k9", "k9"

    with pytest.raises(NotImplementedError, match="kimi-k9.*'k9' family"):
        format_for(Later())
    assert dataclasses.is_dataclass(K2)
