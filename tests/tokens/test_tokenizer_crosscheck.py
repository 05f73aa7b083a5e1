"""Cross-check KimiTokenizer against an independent implementation: the Hugging Face ``tokenizers``
library, with transformers' ``TikTokenConverter`` turning the same ``tiktoken.model`` into a fast
tokenizer (Kimi's pat_str as a ``Split`` pre-tokenizer, byte-level BPE with merges recovered from the
ranks, the 258 special tokens as added tokens).

Findings (all asserted below, so a change upstream is noticed):

* ids agree on mixed text, on every Unicode scalar value in context, and on random text;
* the conversion has no long-input cuts: on runs of more than 25,000 (non-)whitespace chars it gives
  what unsplit tiktoken gives, while the official tokenizer (and ours) cut the run first, which can
  change ids (``"1" * 25_001``);
* ``tokenizers`` refuses a ``str`` holding a lone surrogate (``TypeError``), where tiktoken (and ours)
  encodes it as U+FFFD.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
pytest.importorskip("tokenizers", reason="Hugging Face `tokenizers` is not installed")
convert = pytest.importorskip(
    "transformers.convert_slow_tokenizer", reason="transformers (TikTokenConverter) is not installed"
)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kimi_chat import markers  # noqa: E402
from kimi_chat.tokens.tokenizer import PAT_STR, KimiTokenizer  # noqa: E402

from conftest import needs_reference  # noqa: E402

pytestmark = [
    pytest.mark.oracle,
    needs_reference,  # the reference tokenizers (the skip reason names what is missing)
]

CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 5 o'clock; they're LATE, I'M told, we'VE gone.",
    "def fib(n: int) -> int:\r\n    if n < 2:\r\n        return n\r\n    return fib(n - 1) + fib(n - 2)\r\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot\n\tif (x != NULL && *x) return -1;\n",
    '{"name": "get_weather", "arguments": {"city": "Paris", "units": ["c", "f"], "n": 3.5e-7}}',
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC;",
    "你好，世界！月之暗面发布了 Kimi K2 模型，上下文长度为 128K。",
    "日本語の文章：東京タワーは333メートルです。カタカナ、ひらがな、漢字。",
    "한국어 문장입니다. 서울은 대한민국의 수도입니다.",
    "Привет, мир! Ёлка и щука.  Ελληνικά γράμματα.  שלום עולם  مرحبا بالعالم  नमस्ते दुनिया  สวัสดีชาวโลก",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈🇫🇷 flags and ZWJ ✔︎ ★ ☃",
    "numbers 0 7 42 123 1234 12345 1,234,567.89 -3.14159 1e10 0x1F ½ ² ٣٤٥ ١٢٣ 一二三",
    "whitespace   runs\t\t\tand\n\n\nnewlines \r\n\r\n   \n  \u00a0\u2003\u3000 end   ",
    "line one\r\nline two\r\n\r\nline four\rold mac\n",
    "Ünïcödé façade naïve café résumé ÀÉÎÕÜ Straße Ωμέγα x\u0301\u0302 combining",
    "𠀀𪜀𫝀 CJK ext B-F, 〇〆々, ㄅㄆㄇ, ꙮ, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, 𝟘𝟙𝟚",
    "<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>hi<|im_end|>",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
    "[BOS][EOS][EOT]<|reserved_token_163700|><|start_header_id|>x<|end_header_id|>",
    "",
    " ",
    "\n",
    "a",
]


@pytest.fixture(scope="module")
def ours() -> KimiTokenizer:
    return KimiTokenizer.from_reference("k2")


@pytest.fixture(scope="module")
def hf(ours: KimiTokenizer):
    from tokenizers import AddedToken

    tok = convert.TikTokenConverter(vocab_file=str(ours.model_path), pattern=PAT_STR).converted()
    names = sorted(ours.special_tokens, key=ours.special_tokens.__getitem__)
    tok.add_special_tokens([AddedToken(n, normalized=False, special=True) for n in names])
    assert [tok.token_to_id(n) for n in names] == [ours.special_tokens[n] for n in names]
    return tok


def hf_ids(hf, text: str, *, allow_special: bool = True) -> list[int]:
    hf.encode_special_tokens = not allow_special
    try:
        return hf.encode(text, add_special_tokens=False).ids
    finally:
        hf.encode_special_tokens = False


def test_vocabulary_strings_agree(ours, hf):
    assert hf.get_vocab_size() == ours.vocab_size
    assert [hf.id_to_token(i) for i in range(ours.vocab_size)] == [ours.id_to_token(i) for i in range(ours.vocab_size)]


def test_corpus(ours, hf):
    for text in CORPUS:
        ids = ours.encode(text)
        assert ids == hf_ids(hf, text), text
        assert ours.encode(text, allow_special=False) == hf_ids(hf, text, allow_special=False), text
        assert hf.decode(ids, skip_special_tokens=False) == ours.decode(ids) == text


def test_every_code_point_in_context(ours, hf):
    # every Unicode scalar value, in runs of 256 neighbours and each one between letters and a digit
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = ["".join(map(chr, cps[i : i + 256])) for i in range(0, len(cps), 256)]
    texts += [" ".join(f"a{chr(c)}1" for c in cps[i : i + 256]) for i in range(0, 0x30000, 256)]
    got = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    bad = [t[:8] for t, g in zip(texts, got) if ours.encode(t) != g]
    assert bad == []


_FRAGMENTS = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "'s", "'LL", "123", "4", "..", "!!", "😀", "👍🏽",
     "中文", "字", "é", "x\u0301", "Hello", "wORLD", "ΣΑΣ", "<|im_end|>", "<think>", "{\"a\": 1}"]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(_FRAGMENTS, st.text(st.characters(exclude_categories=("Cs",)), max_size=12)), max_size=25
    ).map("".join)
)
def test_random_text(ours, hf, text):
    assert ours.encode(text) == hf_ids(hf, text)
    assert ours.encode(text, allow_special=False) == hf_ids(hf, text, allow_special=False)


def test_known_divergence_no_long_input_cuts_in_conversion(ours, hf):
    # The official tokenizer cuts runs of more than 25,000 (non-)whitespace chars before BPE; the
    # converted fast tokenizer does not, so it agrees with *unsplit* tiktoken instead. If this starts
    # failing, the conversion learned the cuts (or lost the agreement with tiktoken): re-check.
    text = "1" * 25_001  # digits group by 3, so the cut at 25,000 changes the last tokens
    unsplit = ours.encoding.encode_ordinary(text)
    assert hf_ids(hf, text) == unsplit
    assert ours.encode(text) != unsplit
    assert ours.encode(text) == ours.encoding.encode_ordinary("1" * 25_000) + [ours.token_to_id(b"1")]
    # below the limit there is no difference
    assert hf_ids(hf, "1" * 25_000) == ours.encode("1" * 25_000)


def test_known_divergence_lone_surrogate(ours, hf):
    # tiktoken (hence ours) replaces a lone surrogate by U+FFFD; tokenizers refuses the str.
    assert ours.encode("a\ud800b") == ours.encode("a\ufffdb")
    with pytest.raises(TypeError):
        hf.encode("a\ud800b", add_special_tokens=False)


def test_think_is_ordinary_text_in_july_config(ours, hf):
    # sanity of the setup: the added tokens are exactly the config's special range
    assert hf_ids(hf, markers.THINK_BEGIN.text) == ours.encode(markers.THINK_BEGIN.text) == [27, 39964, 29]
    assert hf_ids(hf, markers.IM_END.text) == [markers.IM_END.id]
