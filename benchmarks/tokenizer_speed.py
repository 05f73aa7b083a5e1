"""Encode throughput of KimiTokenizer vs plain tiktoken (same ranks, pat_str and specials) vs the Hugging
Face ``tokenizers`` conversion of the same file (transformers' TikTokenConverter), in one process.

    python benchmarks/tokenizer_speed.py [--mb 4] [--doc-chars 8000] [--repeat 3]

The corpus is built in-process (no download): Python standard-library source (code and English
comments) interleaved with multilingual prose, emoji, numbers and whitespace runs, cut into documents
of ``--doc-chars`` chars. Every tokenizer encodes the same documents one call at a time (single
thread); the ids are checked to agree before timing. Needs the reference data
(``$KIMI_CHAT_REFERENCE_DIR``).
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import sys
import time

MULTI = [
    "你好，世界！月之暗面发布了 Kimi K2 模型，上下文长度为 128K。我们在这里测试中文分词的速度。",
    "日本語の文章：東京タワーは333メートルです。カタカナ、ひらがな、漢字が混ざっています。",
    "한국어 문장입니다. 서울은 대한민국의 수도입니다. ",
    "Привет, мир! Это тестовый текст на русском языке. Ελληνικά γράμματα. مرحبا بالعالم ",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈 numbers 1234567 3.14159 -2e10 ",
    "   \t\t  \n\n\n    \r\n\r\n",
    "The quick brown fox jumps over the lazy dog; it's what they'LL say. ",
]


def build_corpus(mb: float, doc_chars: int) -> list[str]:
    rnd = random.Random(0)
    files = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "**", "*.py"), recursive=True))
    rnd.shuffle(files)
    target = int(mb * 1_000_000)
    parts: list[str] = []
    size = 0
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                code = fh.read(20_000)
        except (OSError, UnicodeDecodeError):
            continue
        prose = "".join(rnd.choice(MULTI) for _ in range(20))
        parts += [code, prose]
        size += len(code.encode()) + len(prose.encode())
        if size >= target:
            break
    text = "".join(parts)
    return [text[i : i + doc_chars] for i in range(0, len(text), doc_chars)]


def bench(fn, docs, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for d in docs:
            fn(d)
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--doc-chars", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    import tiktoken

    from kimi_chat.tokens.tokenizer import PAT_STR, KimiTokenizer

    ours = KimiTokenizer.from_reference("k2")
    plain = tiktoken.Encoding(
        "plain", pat_str=PAT_STR, mergeable_ranks=dict(ours.mergeable_ranks), special_tokens=dict(ours.special_tokens)
    )
    hf = None
    try:
        from tokenizers import AddedToken
        from transformers.convert_slow_tokenizer import TikTokenConverter

        hf = TikTokenConverter(vocab_file=str(ours.model_path), pattern=PAT_STR).converted()
        names = sorted(ours.special_tokens, key=ours.special_tokens.__getitem__)
        hf.add_special_tokens([AddedToken(n, normalized=False, special=True) for n in names])
    except ImportError as e:  # pragma: no cover
        print(f"tokenizers/transformers unavailable ({e}); skipping the HF conversion", file=sys.stderr)

    docs = build_corpus(args.mb, args.doc_chars)
    nbytes = sum(len(d.encode()) for d in docs)
    specials = set(ours.special_tokens)

    def f_ours(d):
        return ours.encode(d)

    def f_plain(d):
        return plain.encode(d, allowed_special=specials, disallowed_special=())

    def f_hf(d):
        return hf.encode(d, add_special_tokens=False).ids

    ntok = 0
    for d in docs:
        a = f_ours(d)
        ntok += len(a)
        assert a == f_plain(d), "ours != plain tiktoken"
        if hf is not None:
            assert a == f_hf(d), "ours != tokenizers conversion"

    rows = [("kimi_chat KimiTokenizer", bench(f_ours, docs, args.repeat)),
            ("plain tiktoken (same ranks)", bench(f_plain, docs, args.repeat))]
    if hf is not None:
        rows.append(("HF tokenizers (TikTokenConverter)", bench(f_hf, docs, args.repeat)))
    print(f"corpus: {len(docs)} docs, {nbytes / 1e6:.2f} MB UTF-8, {ntok} tokens, ids identical across all")
    base = rows[0][1]
    for name, t in rows:
        print(f"{name:36s} {nbytes / t / 1e6:7.2f} MB/s  {ntok / t / 1e6:6.2f} Mtok/s  speed relative to ours {base / t:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
