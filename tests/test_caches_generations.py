"""The two-generation cache (:class:`kimi_chat.caches.Generations`) of long text pieces, the ids it holds
(:class:`kimi_chat.tokens.text_ids.TextIds`: a piece kept from its second encoding on) and the one-call
encoding of long prompts with only the template's special-token names allowed when no other is in the text
(:mod:`kimi_chat.tokens.prompt_ids`): bounded, thread-safe, and every id the official encode's."""

from __future__ import annotations

import random
import threading

from hypothesis import given, settings, strategies as st

from kimi_chat import caches

from conftest import needs_reference


def held(c: caches.Generations) -> dict:
    """What ``c`` holds (a snapshot: the old generation, then the young one over it)."""
    return {**c._old, **c._young}


def test_generations_stay_within_their_weight():
    c = caches.Generations(None, 1000)
    rng = random.Random(7)
    for k in range(5000):
        key = f"{k}:" + "x" * rng.randrange(0, 300)
        c.put(key, k)
        assert c.weight <= 1000 and sum(map(len, held(c))) <= 1000
        assert c.get(key) == k  # what was just put is there
    assert 0 < len(c) < 1000 // 2


def test_generations_keep_what_is_read_and_drop_what_is_not():
    c = caches.Generations(None, 100)  # generations of 50 characters
    c.put("a" * 20, "A")
    c.put("b" * 20, "B")
    c.put("c" * 20, "C")  # 60 > 50: a and b are now the old generation
    assert c.weight == 60 and len(c) == 3
    assert c.get("a" * 20) == "A"  # a hit in the old generation: promoted (young: c, a)
    c.put("d" * 20, "D")  # 60 > 50: c and a are the old generation, b is dropped
    assert c.get("b" * 20) is None
    assert c.get("a" * 20) == "A"  # read again: promoted (young: d, a)
    c.put("e" * 20, "E")  # 60 > 50: d and a old, c (not read for a generation) dropped
    assert c.get("c" * 20) is None and c.get("a" * 20) == "A" and c.get("e" * 20) == "E"
    assert c.weight <= 100
    c.put("f" * 51, "F")  # longer than a generation: not kept
    assert c.get("f" * 51) is None
    with caches.bypassed():
        assert c.get("a" * 20, "-") == "-"
    c.clear()
    assert len(c) == 0 and c.weight == 0 and c.get("a" * 20) is None


def test_generations_under_threads_stay_bounded_and_consistent():
    c = caches.Generations(None, 2000)
    barrier = threading.Barrier(8)
    errors = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        barrier.wait()
        for _ in range(20_000):
            key = str(rng.randrange(400)) * rng.randrange(1, 8)
            got = c.get(key)
            if got is None:
                c.put(key, key.upper())
            elif got != key.upper():
                errors.append((key, got))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert c.weight <= 2000 and sum(map(len, held(c))) <= 2000
    assert all(v == k.upper() for k, v in held(c).items())


@needs_reference
def test_text_ids_keep_a_long_piece_from_its_second_encoding(monkeypatch):
    from kimi_chat.tokens import text_ids as T
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2")
    monkeypatch.setattr(T, "SEEN_ENTRIES", 8)
    ids = T.TextIds(tok)
    piece = "A long piece of text, " * 5
    for k in range(3):
        assert ids.ids(piece) == tok.encoding.encode_ordinary(piece)
        assert len(ids.long) == (0 if k == 0 else 1)  # the first encoding only records it
    others = [f"{k} other long piece of text, never seen again" for k in range(50)]
    assert [ids.ids(p) for p in others] == [tok.encoding.encode_ordinary(p) for p in others]
    assert len(ids.long) == 1 and len(ids.seen) <= 8  # pieces seen once are not kept; their hashes bounded
    text = f"<|im_user|>user<|im_middle|>{piece}<|im_end|>"
    expected = tok.encoding.encode(text, allowed_special="all")
    assert ids.with_specials(text) == expected and ids.with_specials(text) == expected


_NAMES = ["<|im_end|>", "<|im_user|>", "<|im_middle|>", "<|tool_call_begin|>", "<think>", "</think>", "[BOS]", "[EOS]",
          "<|reserved_token_163700|>", "<|start_header_id|>", "<|media_pad|>", "<|im_end", "|>", "<|", "[", "<|foo|>",
          "<|reserved_token_", "[EO", "x" * 700, "Hello, world. " * 40, "東京 ", " ", "\n"]


@needs_reference
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=40), st.sampled_from(["k2", "k2.6"]),
       st.sampled_from([0, 3000, 20_000]))
def test_long_text_ids_equal_encode_with_every_name_allowed(pieces, config, pad):
    """Text past the piece-by-piece length, encoded in one call with only the template's names allowed unless
    another name may be in it, gets the ids of tiktoken's encode with every name special: text mixing the
    template's names, others, reserved ones and partial names, short and past the searched length."""
    from kimi_chat.tokens import prompt_ids
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference(config)
    text = "".join(pieces) + "y" * pad
    known = prompt_ids._Known(tok)
    assert known.encode(text) == tok.encoding.encode(text, allowed_special="all")
    assert known.encode("z" * 3000 + text) == tok.encoding.encode("z" * 3000 + text, allowed_special="all")


@needs_reference
def test_long_text_allows_only_the_template_names_when_no_other_is_in_it(monkeypatch):
    """The smaller set is what is passed when the text holds only the template's names (else every name)."""
    from kimi_chat.tokens import prompt_ids
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2.6")
    known = prompt_ids._Known(tok)
    passed = []
    encode = known._encode
    known._encode = lambda s, allowed_special, disallowed_special: passed.append(allowed_special) or encode(
        s, allowed_special=allowed_special, disallowed_special=disallowed_special)
    body = "<|im_user|>user<|im_middle|>" + "hello there " * 300 + "<|im_end|>"
    for text, names in [(body, known._template), (body + "[BOS]", tok._special_names),
                        (body + "<|reserved_token_163700|>", tok._special_names), (body * 8, tok._special_names)]:
        passed.clear()
        assert known.encode(text) == tok.encoding.encode(text, allowed_special="all")
        assert passed == [names]
    assert "<|im_end|>" in known._template and "[BOS]" not in known._template and len(known._template) < 20


@needs_reference
def test_the_longest_known_prompt_starting_a_text_is_reused():
    from kimi_chat.tokens import prompt_ids
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2")
    caches.clear_all()
    short = "<|im_user|>user<|im_middle|>hi<|im_end|>"
    longer = short + "<|im_assistant|>assistant<|im_middle|>hello<|im_end|>"
    text = longer + "<|im_user|>user<|im_middle|>bye<|im_end|>"
    for mark, p in enumerate((short, longer, "<|im_user|>user<|im_middle|>other<|im_end|>")):
        # marked ids (the role's id changed): the result shows which prompt was reused
        ids = tok.encoding.encode(p, allowed_special="all")
        assert prompt_ids.remember_prompt(tok, p, [ids[0], mark, *ids[2:]])
    got = prompt_ids.encode_whole(tok, text)
    expected = tok.encoding.encode(text, allowed_special="all")
    assert got[1] == 1 and got[:1] + got[2:] == expected[:1] + expected[2:]  # the longer one
    known = prompt_ids._KNOWN.get(tok, prompt_ids._Known)
    assert known.prompts.keys()[-1] == text  # kept, the most recently used; before it the prompt reused
    assert known.prompts.keys()[-2] == longer
    caches.clear_all()
    assert prompt_ids.encode_whole(tok, text) == tok.encoding.encode(text, allowed_special="all")
