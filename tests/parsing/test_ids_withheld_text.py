"""A chunk whose text is the start of what its ids spell: servers leave the stop token's
text out of the last delta (vLLM), or their text lags the ids. With ``tokenizer=``, the markers within
the text are still placed exactly, so a ``</think>`` typed as text next to the real one stays text."""

from __future__ import annotations

import pytest

from kimi_chat import markers as M
from kimi_chat.output import StreamParser, parse
from kimi_chat.reference import reference_file

pytestmark = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                reason="tokenizer/tiktoken.model of the reference data not found")

K26 = "kimi-k2.6"


@pytest.fixture(scope="module")
def tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k2.6")


def output(tok):
    """K2.6 output (``<think>`` pre-filled): reasoning that mentions ``</think>`` as ordinary tokens, the
    real ``</think>``, the answer, ``<|im_end|>``."""
    enc = lambda s: tok.encode(s, allow_special=False)  # noqa: E731
    ids = enc(f"I could write {M.THINK_END.text} here") + [M.THINK_END.id] + enc("Answer.") + [M.IM_END.id]
    assert ids.count(M.THINK_END.id) == 1
    return ids, f"I could write {M.THINK_END.text} here", "Answer."


def test_one_chunk_without_the_stop_tokens_text(tok):
    ids, reasoning, content = output(tok)
    text = tok.decode(ids[:-1])  # the server's text: the stop token's is left out
    p = StreamParser(K26, tokenizer=tok)
    p.feed(text, ids)
    p.finish()
    m = p.message
    assert (m.reasoning_content, m.content, m.stop_reason.value) == (reasoning, content, "end_turn")
    assert m.warnings == []
    # the same ids with the stop token's text: the same parse
    assert parse(tok.decode(ids), dialect=K26, token_ids=ids, tokenizer=tok) == m


def test_text_lagging_its_ids(tok):
    """The first chunk's text stops short of its ids (the rest comes with the next chunk)."""
    ids, reasoning, content = output(tok)
    k = ids.index(M.THINK_END.id) + 2
    full = tok.decode(ids)
    first = tok.decode(ids[:k])
    cut = first.index(M.THINK_END.text, first.index(M.THINK_END.text) + 1)  # before the real </think>
    p = StreamParser(K26, tokenizer=tok)
    p.feed(first[:cut], ids[:k])
    p.feed(full[cut:], ids[k:])
    p.finish()
    m = p.message
    assert (m.reasoning_content, m.content) == (reasoning, content)
