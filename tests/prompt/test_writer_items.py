"""Writing by items (kimi_chat.prompt.writer: Run, Literal, Writer.items): the Layout unfolded from the items
is the one the same prompt written part by part gives, a run's text has one split, and the segment encoder
gives the same ids from the items as from each part of the unfolded Layout encoded on its own."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from kimi_chat import markers as M
from kimi_chat.prompt.writer import Literal, Run, Writer
from kimi_chat.reference import reference_file
from kimi_chat.testing.strategies_k3 import k3_requests

OPEN, SEP, CLOSE, EOM = M.K3_OPEN.text, M.K3_SEP.text, M.K3_CLOSE.text, M.K3_END_OF_MSG.text
HEAD = (OPEN, "message", " role", '="', "user", '"', SEP)
END = (CLOSE, "message", SEP, EOM)


def _texts(pieces: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(k for k, p in enumerate(pieces) if p not in (OPEN, SEP, CLOSE, EOM))


def test_a_run_text_has_one_split():
    head = Run(HEAD, _texts(HEAD))
    assert str(head) == "".join(HEAD) and head.pieces == HEAD
    assert Run(HEAD, _texts(HEAD)) == head  # the same split again: fine
    joined = (OPEN, "message role", '="', "user", '"', SEP)  # the same text, cut elsewhere
    with pytest.raises(ValueError, match="another split"):
        Run(joined, _texts(joined))


def _by_items(marked: bool) -> Writer:
    w = Writer(marked=marked)
    items, marks = w.items()
    if marks is not None:
        marks.append((0, 0, False))
    items += [Run(HEAD, _texts(HEAD)), "hello ", Literal("<image>"), " there", Run(END, _texts(END))]
    if marks is not None:
        marks.append((len(items), -1, False))
    items.append(Run(HEAD, _texts(HEAD)))
    if marks is not None:
        marks.append((len(items), -1, False))  # a mark at the very end: an empty piece
    return w


def _by_parts() -> Writer:
    w = Writer(marked=True)
    w.mark(0, False)
    for k, p in enumerate(HEAD):
        (w.emit_text if k in _texts(HEAD) else w.emit)(p)
    w.emit_text("hello ")
    w.emit("<image>")
    w.emit_text(" there")
    for k, p in enumerate(END):
        (w.emit_text if k in _texts(END) else w.emit)(p)
    w.mark(-1, False)
    for k, p in enumerate(HEAD):
        (w.emit_text if k in _texts(HEAD) else w.emit)(p)
    w.mark(-1, False)
    return w


def test_the_layout_unfolded_from_items_is_the_one_written_part_by_part():
    by_items, by_parts = _by_items(True).layout(), _by_parts().layout()
    assert by_items == by_parts
    assert all(type(p) is str for p in by_items.parts)  # a Literal unfolds to its plain text
    assert by_items.text == "".join(_by_items(False).parts)  # plain mode: the items are the parts
    assert _by_items(True).segments() == _by_parts().segments()


def test_written_items_of_a_parts_writer_mark_its_literals():
    items, marks = _by_parts().written_items()
    lay = _by_parts().layout()
    assert items == lay.parts and marks == lay.marks
    assert [k for k, p in enumerate(items) if type(p) is not Literal] == lay.texts


def test_cut_unfolds_the_items_first():
    w, ref = _by_items(True), _by_parts()
    w.cut(len("".join(HEAD)) + 3)
    ref.cut(len("".join(HEAD)) + 3)
    assert w.layout() == ref.layout()


needs_k3_tokenizer = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                        reason="tokenizer/tiktoken.model of the reference data not found")


@pytest.fixture(scope="module")
def k3_tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3")


@needs_k3_tokenizer
def test_items_and_parts_encode_alike(k3_tok):
    from kimi_chat.tokens.segments import encode_items

    items, marks = _by_items(True).written_items()
    parts, part_marks = _by_parts().written_items()
    ids, ends = encode_items(items, k3_tok, [m[0] for m in marks[1:]] + [len(items)])
    assert (ids, ends) == encode_items(parts, k3_tok, [m[0] for m in part_marks[1:]] + [len(parts)])
    assert ids[:2] == [k3_tok.special_tokens[OPEN], *k3_tok.encode("message")]


@needs_k3_tokenizer
@settings(max_examples=60)
@given(req=k3_requests())
def test_k3_items_encode_as_their_layout_part_by_part(k3_tok, req):
    """The K3 pass's items (runs encoded once per tokenizer) give the ids of its unfolded Layout, each part
    encoded on its own (a literal part with special tokens allowed): the segment-wise definition."""
    from kimi_chat.errors import RenderError
    from kimi_chat.families.k3.render import _write
    from kimi_chat.messages import InvalidMessagesError
    from kimi_chat.tokens.segments import encode_items

    messages, tools, options = req["messages"], req["tools"], req["kwargs"]
    w = Writer(marked=True)
    try:
        _write(w, messages, tools, options)
    except (RenderError, InvalidMessagesError, TypeError):
        return
    items, marks = w.written_items()
    lay = w.layout()
    texts = set(lay.texts)
    expected = []
    for k, p in enumerate(lay.parts):
        if p:
            expected += k3_tok.encode(p, allow_special=k not in texts)
    assert encode_items(items, k3_tok)[0] == expected
    assert "".join(items) == lay.text
