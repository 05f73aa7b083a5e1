"""Token ids make markers certain: a marker spelled by ordinary tokens is text, a
marker given by its special id is a marker, with the real tokenizer.

The completions are rendered to ids by ``render_tokens`` (markers special, text as text: the
official tokenizers' own encoding), then fed back with their ids. Without ids the same text parses
the way the format says plain text must: a spelled closer closes the element.
"""

from __future__ import annotations

import codecs
import json

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from kimi_chat import markers as M
from kimi_chat.output import StreamParser, parse
from kimi_chat.output.ids import token_bytes
from kimi_chat.reference import reference_file
from test_k3_parse_properties import broken_turns

pytestmark = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                reason="tokenizer/tiktoken.model of the reference data not found")

K3 = "kimi-k3"
K2 = "kimi-k2-instruct-0905"
USER = [{"role": "user", "content": "echo this"}]
TOOLS = [{"type": "function", "function": {"name": "echo", "parameters": {
    "type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}}}}}]
OPEN, CLOSE, SEP, EOM = M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text
ARG_CLOSER = f"{CLOSE}argument{SEP}"
MSG_CLOSER = f"{CLOSE}message{SEP}{EOM}"
K2_END = M.TOOL_CALL_END.text


@pytest.fixture(scope="module")
def k3tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3")


@pytest.fixture(scope="module")
def k2tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k2")


def completion(tok, dialect, args, content="ok", reasoning="thinking"):
    """The ids (and text) the model writes for an assistant turn calling ``echo(**args)``: the full
    render minus the generation prompt's render."""
    from kimi_chat.tokens.rendered import render_tokens

    msg = {"role": "assistant", "content": content, "tool_calls": [{
        "id": "functions.echo:0", "type": "function",
        "function": {"name": "echo", "arguments": json.dumps(args, ensure_ascii=False)}}]}
    if dialect == K3:
        msg["reasoning_content"] = reasoning
    prompt = render_tokens(USER, tokenizer=tok, tools=TOOLS, dialect=dialect).ids
    full = render_tokens(USER + [msg], tokenizer=tok, tools=TOOLS, dialect=dialect, add_generation_prompt=False).ids
    assert full[:len(prompt)] == prompt
    ids = full[len(prompt):]
    return ids, tok.decode(ids)


def stream(dialect, tok, ids, cuts, *, decoder=True, as_bytes=False):
    """Feed ``ids`` cut at ``cuts`` (token boundaries), each chunk with its ids; the text of a chunk
    is what an incremental detokenizer gives (an incomplete character waits for the next chunk)."""
    p = StreamParser(dialect, tools=TOOLS, tokenizer=tok if decoder else None)
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    bounds = [0, *sorted(set(cuts)), len(ids)]
    for a, b in zip(bounds, bounds[1:]):
        chunk = ids[a:b]
        data = tok.decode_bytes(chunk)
        p.feed(data if as_bytes else utf8.decode(data), chunk)
    if not as_bytes:
        p.feed(utf8.decode(b"", final=True))
    p.finish()
    return p.message


def kinds(msg):
    return [w.kind for w in msg.warnings]


@pytest.mark.parametrize("value", [f"a{ARG_CLOSER}b", f"a{MSG_CLOSER}b", f"Zürich {ARG_CLOSER}{OPEN}x{SEP}"])
def test_k3_typed_closer_in_a_string_argument(k3tok, value):
    args = {"s": value, "n": 3}
    ids, text = completion(k3tok, K3, args)
    assert value in text  # the typed closer is in the text, spelled exactly as the real one
    one_by_one = list(range(1, len(ids)))
    for msg in (parse(text, dialect=K3, tools=TOOLS, token_ids=ids, tokenizer=k3tok),
                stream(K3, k3tok, ids, one_by_one),
                stream(K3, k3tok, ids, one_by_one, as_bytes=True),
                stream(K3, k3tok, ids, one_by_one, decoder=False)):  # one token per chunk: exact without a decoder
        assert json.loads(msg.tool_calls[0].arguments) == args
        assert msg.tool_calls[0].status.value == "ok"
        assert (msg.content, msg.reasoning_content, msg.stop_reason.value) == ("ok", "thinking", "tool_calls")
        assert msg.warnings == []
    # the same text without ids: the spelled closer closes the argument (plain text cannot tell)
    plain = parse(text, dialect=K3, tools=TOOLS)
    assert json.loads(plain.tool_calls[0].arguments)["s"] == value[:value.index(CLOSE)]
    assert plain.warnings


def test_k3_plain_text_message_closer_ends_the_turn(k3tok):
    args = {"s": f"a{MSG_CLOSER}b", "n": 3}
    ids, text = completion(k3tok, K3, args)
    plain = parse(text, dialect=K3, tools=TOOLS)
    # "<|close|>message<|sep|>" closes the argument and the message; the rest is ignored
    assert json.loads(plain.tool_calls[0].arguments) == {"s": "a"}
    assert "text_after_end" in kinds(plain)
    exact = parse(text, dialect=K3, tools=TOOLS, token_ids=ids, tokenizer=k3tok)
    assert json.loads(exact.tool_calls[0].arguments) == args and "text_after_end" not in kinds(exact)


def test_k2_typed_tool_call_end_in_an_argument(k2tok):
    args = {"s": f"a{K2_END}{M.TOOL_CALLS_SECTION_END.text} b"}
    ids, text = completion(k2tok, K2, args)
    assert args["s"] in text
    for msg in (parse(text, dialect=K2, tools=TOOLS, token_ids=ids, tokenizer=k2tok),
                stream(K2, k2tok, ids, range(1, len(ids)), decoder=False),
                stream(K2, k2tok, ids, range(2, len(ids), 3))):
        assert json.loads(msg.tool_calls[0].arguments) == args
        assert (msg.content, msg.tool_calls[0].status.value, msg.warnings) == ("ok", "ok", [])
    plain = parse(text, dialect=K2, tools=TOOLS)
    # without ids the typed <|tool_call_end|> ends the call: its arguments are cut (not JSON)
    assert plain.tool_calls[0].arguments == '{"s": "a' and plain.tool_calls[0].status.value == "invalid_json"


def test_k2_typed_marker_opens_nothing(k2tok):
    text = f"see {M.TOOL_CALLS_SECTION_BEGIN.text}{M.TOOL_CALL_BEGIN.text} typed"
    ids = k2tok.encode(text, allow_special=False)  # all ordinary tokens: a chunk with no special id
    msg = parse(text, dialect=K2, token_ids=ids)
    assert (msg.content, msg.tool_calls, msg.warnings) == (text, [], [])
    assert parse(text, dialect=K2).tool_calls  # as plain text they are markers


@st.composite
def k3_values(draw):
    pieces = st.sampled_from([OPEN, CLOSE, SEP, EOM, "argument", "message", "call", "think", " ", "x", "é",
                              '"', "<|", "|>", "東京", "\n"])
    return "".join(draw(st.lists(pieces, max_size=12)))


@given(value=k3_values(), data=st.data())
def test_chunking_invariance_with_ids(k3tok, value, data):
    args = {"s": value, "n": 1}
    ids, text = completion(k3tok, K3, args)
    whole = parse(text, dialect=K3, tools=TOOLS, token_ids=ids, tokenizer=k3tok)
    assert json.loads(whole.tool_calls[0].arguments) == args and whole.warnings == []
    cuts = data.draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=len(ids)), label="cuts")
    note(f"ids={ids} cuts={sorted(set(cuts))}")
    assert stream(K3, k3tok, ids, cuts) == whole
    assert stream(K3, k3tok, ids, cuts, as_bytes=True) == whole
    # without a decoder, one token per chunk is exact too
    assert stream(K3, k3tok, ids, range(1, len(ids)), decoder=False) == whole


@st.composite
def k2_values(draw):
    pieces = st.sampled_from([M.TOOL_CALL_END.text, M.TOOL_CALLS_SECTION_END.text, M.TOOL_CALL_BEGIN.text,
                              M.TOOL_CALL_ARGUMENT_BEGIN.text, M.IM_END.text, "[EOS]", " ", "x", "é", "<|", "|>"])
    return "".join(draw(st.lists(pieces, max_size=10)))


@given(value=k2_values(), data=st.data())
def test_chunking_invariance_with_ids_k2(k2tok, value, data):
    args = {"s": value}
    ids, text = completion(k2tok, K2, args)
    whole = parse(text, dialect=K2, tools=TOOLS, token_ids=ids, tokenizer=k2tok)
    assert json.loads(whole.tool_calls[0].arguments) == args and whole.warnings == []
    cuts = data.draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=len(ids)), label="cuts")
    assert stream(K2, k2tok, ids, cuts) == whole
    assert stream(K2, k2tok, ids, range(1, len(ids)), decoder=False) == whole


@pytest.mark.parametrize("step", [2, 3, 7, 1000])
def test_without_decoder_chunks_with_no_typed_copy_are_exact(k3tok, step):
    args = {"s": "Zürich, 東京 <b>|x|</b>", "n": 3}
    ids, text = completion(k3tok, K3, args)
    want = parse(text, dialect=K3, tools=TOOLS)  # no typed marker: plain text says the same
    assert json.loads(want.tool_calls[0].arguments) == args
    assert stream(K3, k3tok, ids, range(step, len(ids), step), decoder=False) == want
    assert parse(text, dialect=K3, tools=TOOLS, token_ids=ids) == want


def test_without_decoder_several_tokens_per_chunk_is_warned(k3tok):
    args = {"s": f"a{ARG_CLOSER}b"}
    ids, text = completion(k3tok, K3, args)
    msg = parse(text, dialect=K3, tools=TOOLS, token_ids=ids)
    assert "ambiguous_marker" in kinds(msg)  # one chunk holds a typed and a real <|close|>: a guess


def test_text_lagging_its_ids(k3tok):
    """A detokenizer that holds text back (a possible stop string) sends a marker's text a chunk after
    its id: the credit waits for it."""
    args = {"s": f"a{ARG_CLOSER}b", "n": 2}
    ids, text = completion(k3tok, K3, args)
    for decoder in (True, False):
        p = StreamParser(K3, tools=TOOLS, tokenizer=k3tok if decoder else None)
        held = ""
        for i in ids:
            t = held + k3tok.decode([i])
            held, t = t[-3:], t[:-3]  # the last 3 characters always wait for the next chunk
            p.feed(t, [i])
        p.feed(held, [])
        p.finish()
        assert json.loads(p.message.tool_calls[0].arguments) == args and p.message.warnings == []


def test_ids_spelling_more_than_the_text_fall_back_to_order(k2tok):
    """A server that hands the text after ``</think>`` to the tool parser with all the chunk's ids: that
    chunk is resolved in order; the next chunks are exact again (a typed closer stays text)."""
    args = {"s": f"a{K2_END}b"}
    ids, text = completion(k2tok, K2, args)
    think_end = [M.THINK_END.id]
    first = ids[:3]
    p = StreamParser(K2, tools=TOOLS, tokenizer=k2tok)
    p.feed(k2tok.decode(first), think_end + first)  # the ids spell "</think>" + the text
    rest = ids[3:]
    for a in range(0, len(rest), 4):  # then chunks of 4 tokens with their own ids
        p.feed(k2tok.decode(rest[a:a + 4]), rest[a:a + 4])
    p.finish()
    assert json.loads(p.message.tool_calls[0].arguments) == args and p.message.warnings == []


def test_chunks_without_ids_are_decided_by_their_text(k2tok):
    ids, text = completion(k2tok, K2, {"s": "v"})
    cut = text.index(M.TOOL_CALL_BEGIN.text)
    p = StreamParser(K2, tools=TOOLS, tokenizer=k2tok)
    p.feed(text[:cut])  # no ids: the text decides (the section begin is a marker)
    rest = ids[len(k2tok.encode(text[:cut])):]
    p.feed(k2tok.decode(rest), rest)  # the decoder's count restarts at this chunk
    p.finish()
    assert json.loads(p.message.tool_calls[0].arguments) == {"s": "v"} and p.message.warnings == []


def test_tokenizer_forms(k3tok):
    class HF:  # what a transformers byte-level tokenizer gives: byte-level token strings, names of specials
        def convert_ids_to_tokens(self, i):
            return k3tok.id_to_token(i)

    for ids in ([M.K3_OPEN.id], k3tok.encode("Zürich 東京 <|close|>", allow_special=False)):
        want = k3tok.decode_bytes(ids)
        assert b"".join(map(token_bytes(HF()), ids)) == want
        assert b"".join(map(token_bytes(k3tok), ids)) == want
        assert b"".join(map(token_bytes(k3tok.id_to_bytes), ids)) == want
    with pytest.raises(TypeError, match="tokenizer="):
        token_bytes(3)


@given(item=broken_turns())
def test_cut_and_malformed_tags_by_token_ids(k3tok, item):
    """Cut and malformed tags, by token ids: a turn with a tag cut short or a <|sep|> dropped, encoded (markers
    special) and fed one id at a time, reads as its whole text does (no typed marker: the ids agree)."""
    text, kw, _ = item
    ids = k3tok.encode(text, allow_special=True)
    assert k3tok.decode(ids) == text
    whole = parse(text, dialect=K3, tools=TOOLS, **kw)
    assert parse(text, dialect=K3, tools=TOOLS, token_ids=ids, tokenizer=k3tok, **kw) == whole
    for decoder in (True, False):
        p = StreamParser(K3, tools=TOOLS, tokenizer=k3tok if decoder else None, **kw)
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for i in ids:
            p.feed(utf8.decode(k3tok.decode_bytes([i])), [i])
        p.finish()
        assert p.message == whole


def _lagging(tok, dialect, ids, lag, decoder):
    """Each id in its own chunk, the text ``lag`` characters behind the ids (a detokenizer holding
    back a possible stop string); the last text in a chunk without ids."""
    p = StreamParser(dialect, tools=TOOLS, tokenizer=tok if decoder else None)
    held = ""
    for i in ids:
        t = held + tok.decode([i])
        held, t = (t[-lag:], t[:-lag]) if lag else ("", t)
        p.feed(t, [i])
    p.feed(held, [])
    p.finish()
    return p.message


@pytest.mark.parametrize("lag", [0, 1, 3, 6, 12, 20])
def test_text_lagging_its_ids_with_a_typed_end_of_turn(k2tok, k3tok, lag):
    """The model types ``<|im_end|>`` (K3: the message close) as text, then really ends the
    turn; the text lags the ids. With a decoder the typed copy stays text (the whole parse's answer);
    without one the guess is never silent: exact, or warned ``ambiguous_marker``."""
    cases = [(k2tok, K2, k2tok.encode(f"say {M.IM_END.text} ok", allow_special=False) + [M.IM_END.id]),
             (k3tok, K3, k3tok.encode(f"r{CLOSE}think{SEP}{OPEN}response{SEP}", allow_special=True)
              + k3tok.encode(f"say {MSG_CLOSER} ok", allow_special=False)
              + k3tok.encode(f"{CLOSE}response{SEP}{MSG_CLOSER}", allow_special=True))]
    for tok, dialect, ids in cases:
        text = tok.decode(ids)
        whole = parse(text, dialect=dialect, tools=TOOLS, token_ids=ids, tokenizer=tok)
        assert whole.content == f"say {M.IM_END.text if dialect == K2 else MSG_CLOSER} ok"
        assert _lagging(tok, dialect, ids, lag, True) == whole
        plain = _lagging(tok, dialect, ids, lag, False)
        assert plain.content == whole.content or "ambiguous_marker" in kinds(plain), (dialect, plain)


@given(value=k3_values(), lag=st.integers(0, 40))
def test_lagging_text_with_a_decoder_is_exact(k3tok, value, lag):
    """With tokenizer=, text lagging its ids by any number of characters reads as the
    whole parse (typed markers in a string argument stay text)."""
    args = {"s": value, "n": 1}
    ids, _ = completion(k3tok, K3, args)
    p = StreamParser(K3, tools=TOOLS, tokenizer=k3tok)
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    sent, full = 0, ""
    for i in ids:
        full += utf8.decode(k3tok.decode_bytes([i]))
        upto = max(sent, len(full) - lag)
        p.feed(full[sent:upto], [i])
        sent = upto
    p.feed(full[sent:], [])
    p.finish()
    assert json.loads(p.message.tool_calls[0].arguments) == args and p.message.warnings == []


@pytest.mark.parametrize("decoder", [True, False])
def test_a_marker_id_whose_text_was_stripped_is_warned_at_the_end(decoder):
    # a relay that decodes with skip_special_tokens drops </think>'s text but passes its id: the
    # text is read without the marker (the next </think> in the text would take the id), and the
    # end of the input says so instead of leaving reasoning and answer silently joined
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2.6")
    pieces = ["The user greets.", M.THINK_END.text, "Hello!", M.IM_END.text]
    chunks = [(p, tok.encode(p)) for p in pieces]
    assert [len(ids) for _, ids in chunks][1::2] == [1, 1]  # both markers are one special token

    def run(strip):
        p = StreamParser("kimi-k2.6", tokenizer=tok if decoder else None)
        for text, ids in chunks:
            p.feed("" if strip and text.startswith("<") else text, ids)
        p.finish()
        return p.message

    intact, stripped = run(False), run(True)
    assert (intact.reasoning_content, intact.content, intact.warnings) == ("The user greets.", "Hello!", [])
    assert (stripped.reasoning_content, stripped.content) == ("The user greets.Hello!", None)
    missing = [w for w in stripped.warnings if w.kind == "marker_without_text"]
    # where it stood: with a decoder the ids place it after the reasoning; without, the end of the text
    at = len("The user greets.") if decoder else len("The user greets.Hello!")
    assert [(w.text, w.offset) for w in missing] == [(M.THINK_END.text, at)]
    # the end-of-turn id ends the turn by itself: never reported as missing
    assert stripped.stop_reason.value == "end_turn"
