"""The two-generation cache (:class:`kimi_chat.caches.Generations`) of long text pieces and the ids it holds
(:class:`kimi_chat.tokens.text_ids.TextIds`: a piece kept from its second encoding on): bounded, thread-safe,
and every id the official encode's."""

from __future__ import annotations

import random
import threading


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
