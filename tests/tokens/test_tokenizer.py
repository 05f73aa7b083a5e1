"""KimiTokenizer: facts of PROVENANCE.md, special tokens, splitting of long inputs, load errors.

Oracle tests need the reference data (``$KIMI_CHAT_REFERENCE_DIR`` or ``../shared/reference``) and skip
with the reason when it is absent; the loader and splitting tests run on synthetic files everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
from pathlib import Path

import pytest

tiktoken = pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kimi_chat import markers  # noqa: E402
from kimi_chat.errors import ReferenceDataError  # noqa: E402
from kimi_chat.reference import reference_dir  # noqa: E402
from kimi_chat.tokens.tokenizer import (
    MAX_NO_WHITESPACES_CHARS,
    PAT_STR,
    TIKTOKEN_MAX_ENCODE_CHARS,
    KimiTokenizer,
    cut_points,
    split_for_tiktoken,
)

from conftest import needs_reference  # noqa: E402

REF = reference_dir()
needs_ref = needs_reference  # the reference tokenizers (the skip reason names what is missing)


@pytest.fixture(scope="module")
def k2() -> KimiTokenizer:
    return KimiTokenizer.from_reference("k2")


@pytest.fixture(scope="module")
def k26() -> KimiTokenizer:
    return KimiTokenizer.from_reference("k2.6")


@pytest.fixture(scope="module")
def plain(k2: KimiTokenizer):
    """Plain tiktoken over the reference ranks, loaded by tiktoken's own loader (not ours), with the
    official pat_str and special tokens: what ``tokenization_kimi.py`` builds."""
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(REF / "tokenizer" / "tiktoken.model"))
    cfg = json.loads((REF / "Kimi-K2-Instruct" / "tokenizer_config.json").read_text())
    names = {int(k): v["content"] for k, v in cfg["added_tokens_decoder"].items()}
    n = len(ranks)
    specials = {names.get(i, f"<|reserved_token_{i}|>"): i for i in range(n, n + 256 + 2)}
    return tiktoken.Encoding("kimi-oracle", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens=specials)


def official_split(s: str, max_consecutive_slice_len: int):
    """``_split_whitespaces_or_nonwhitespaces`` of tokenization_kimi.py, re-typed from the official code."""
    current_slice_len = 0
    current_slice_is_space = s[0].isspace() if len(s) > 0 else False
    slice_start = 0
    for i in range(len(s)):
        is_now_space = s[i].isspace()
        if current_slice_is_space ^ is_now_space:
            current_slice_len = 1
            current_slice_is_space = is_now_space
        else:
            current_slice_len += 1
            if current_slice_len > max_consecutive_slice_len:
                yield s[slice_start:i]
                slice_start = i
                current_slice_len = 1
    yield s[slice_start:]


def official_pieces(text: str, max_chars: int = 400_000, max_run: int = 25_000) -> list[str]:
    return [p for i in range(0, len(text), max_chars) for p in official_split(text[i : i + max_chars], max_run)]


def official_encode(enc, text: str, allow_special: bool = True) -> list[int]:
    out: list[int] = []
    for p in official_pieces(text):
        out += enc.encode(p, allowed_special="all") if allow_special else enc.encode(p, disallowed_special=())
    return out


# ------------------------------------------------------------------------------------------------
# Facts of PROVENANCE.md
# ------------------------------------------------------------------------------------------------


def test_pat_str_is_the_pinned_one():
    assert hashlib.sha256(PAT_STR.encode()).hexdigest() == (
        "de5781783b193d5ccf5b1b28edfa70fa816ce78d54603fdc422cfd8d4ea4411f"
    )


def test_official_limits():
    assert (TIKTOKEN_MAX_ENCODE_CHARS, MAX_NO_WHITESPACES_CHARS) == (400_000, 25_000)


@pytest.mark.oracle
@needs_ref
def test_hello_world(k2, k26):
    assert k2.encode("Hello, world!") == [19180, 11, 2695, 0]
    assert k26.encode("Hello, world!") == [19180, 11, 2695, 0]
    assert k2.decode([19180, 11, 2695, 0]) == "Hello, world!"


@pytest.mark.oracle
@needs_ref
def test_ranks(k2):
    r = k2.mergeable_ranks
    assert k2.num_base_tokens == len(r) == 163_584 == markers.NUM_BASE_TOKENS
    assert sorted(r.values()) == list(range(163_584))
    assert sum(1 for b in r if len(b) == 1) == 256
    for rank, text in [(0, "!"), (32, "A"), (1000, ";\r\n"), (10000, "奈"), (163582, "sequential"), (163583, "自主性")]:
        assert k2.id_to_bytes(rank) == text.encode()
        assert k2.token_to_id(text.encode()) == rank


@pytest.mark.oracle
@needs_ref
def test_special_ids_and_names(k2, k26):
    k25 = KimiTokenizer.from_reference("k2.5")
    for tk in (k2, k25, k26):
        assert tk.special_ids == frozenset(range(163_584, 163_842))
        assert tk.vocab_size == len(tk) == 163_842 == tk.encoding.n_vocab
        # K2.6's eos_token_id is <|im_end|> (163586); K2 and K2.5 end at [EOS] (163585)
        eos = 163586 if tk is k26 else 163585
        assert (tk.bos_id, tk.eos_id, tk.unk_id, tk.pad_id) == (163584, eos, 163838, 163839)
        for i, name in [(163584, "[BOS]"), (163585, "[EOS]"), (163586, "<|im_end|>"), (163601, "<|im_middle|>")]:
            assert tk.id_to_token(i) == name and tk.token_to_id(name) == i
        for i in (163589, 163592, 163600, 163608, 163837, 163840, 163841):
            name = f"<|reserved_token_{i}|>"
            assert tk.id_to_token(i) == name and tk.token_to_id(name) == i
            assert tk.encode(name) == [i]
        assert tk.is_special(163841) and not tk.is_special(163583)
    # the same special-token config for K2.5 and K2.6
    assert k25.special_tokens == k26.special_tokens and k25.config_path == k26.config_path
    # The July-2025 config has no media / think tokens: their ids are reserved names there.
    for m in (markers.MEDIA_BEGIN, markers.MEDIA_CONTENT, markers.MEDIA_END, markers.MEDIA_PAD,
              markers.THINK_BEGIN, markers.THINK_END):
        assert k2.id_to_token(m.id) == f"<|reserved_token_{m.id}|>"
        assert k26.id_to_token(m.id) == m.text
    assert len(k2.added_tokens) == 17 and len(k26.added_tokens) == 23


@pytest.mark.oracle
@needs_ref
def test_markers_module_agrees_with_configs(k2, k26):
    for m in markers.MARKERS:
        if m.id is None:
            assert m.text not in k26.special_tokens and len(k26.encode(m.text)) > 1
            continue
        tk = k26 if m.id not in k2.added_tokens else k2
        assert tk.special_tokens[m.text] == m.id
        assert tk.added_tokens[m.id].special is m.special


@pytest.mark.oracle
@needs_ref
def test_markers_single_token_with_allow_special_and_text_without(k2, k26):
    for tk in (k2, k26):
        for tid, added in tk.added_tokens.items():
            assert tk.encode(added.content) == [tid]
            plain_ids = tk.encode(added.content, allow_special=False)
            assert len(plain_ids) > 1 and not any(tk.is_special(i) for i in plain_ids)
            assert tk.decode(plain_ids) == added.content
            # inside text: the marker is cut out, the text around it encoded on its own
            s = f"x {added.content}y"
            assert tk.encode(s) == tk.encode("x ") + [tid] + tk.encode("y")
    # with the July config <think> is ordinary text, with the K2.6 one a single token
    assert k2.encode("<think>") == k2.encode("<think>", allow_special=False) == [27, 39964, 29]
    assert k26.encode("<think>") == [markers.THINK_BEGIN.id]
    assert k26.encode("</think>") == [markers.THINK_END.id]


@pytest.mark.oracle
@needs_ref
def test_same_ids_as_plain_tiktoken(k2, plain):
    texts = [
        "Hello, world!",
        "def f(x):\r\n    return x ** 2\r\n",
        "你好，世界！Kimi 是月之暗面的模型。",
        "emoji 😀👍🏽👨‍👩‍👧 and numbers 1234567 3.14",
        "  \t\n\n   trailing   ",
        "<|im_user|>user<|im_middle|>hi<|im_end|>",
        "I'M here, they'LL go, we've",
    ]
    for t in texts:
        assert k2.encode(t) == plain.encode(t, allowed_special="all") == official_encode(plain, t)
        assert k2.encode(t, allow_special=False) == plain.encode(t, disallowed_special=())


@pytest.mark.oracle
@needs_ref
def test_decode_round_trip_and_skip_special(k2, k26):
    texts = ["", "a", " ", "\r\n", "Ünïcödé ßtraße", "中文和English混合", "🏳️‍🌈", "\x00\x01 ctrl", "tabs\t\tand  spaces"]
    for tk in (k2, k26):
        for t in texts:
            assert tk.decode(tk.encode(t)) == t
            assert tk.decode(tk.encode(t, allow_special=False)) == t
    ids = k26.encode("[BOS]<|im_user|>hi<|im_end|><think>r</think><|tool_call_begin|><|reserved_token_163700|>")
    assert k26.decode(ids) == "[BOS]<|im_user|>hi<|im_end|><think>r</think><|tool_call_begin|><|reserved_token_163700|>"
    # special=True entries go; special=False ones (think, tool-call markers) and reserved ids stay
    assert k26.decode(ids, skip_special_tokens=True) == "hi<think>r</think><|tool_call_begin|><|reserved_token_163700|>"
    # a token can hold part of a UTF-8 sequence: decode replaces, decode_bytes keeps
    emoji_ids = k2.encode("😀")
    assert b"".join(k2.id_to_bytes(i) for i in emoji_ids) == "😀".encode()
    with pytest.raises(KeyError, match="outside"):
        k2.decode([163842])


@pytest.mark.oracle
@needs_ref
def test_token_strings_are_byte_level(k2):
    ids = k2.encode(" world\n")
    assert [k2.id_to_token(i) for i in ids] == ["Ġworld", "Ċ"]
    assert k2.token_to_id("Ġworld") == 2695 and k2.token_to_id(b" world") == 2695
    for i in (0, 255, 1000, 10000, 163583, 163586, 163700):
        assert k2.token_to_id(k2.id_to_token(i)) == i
    with pytest.raises(KeyError):
        k2.token_to_id("not-a-token-\u20ac\u20ac\u20ac\u20ac")
    with pytest.raises(KeyError):
        k2.token_to_id(b"\xff\xfe\xfd\xfc\xfb")


@pytest.mark.oracle
@needs_ref
def test_surrogates_and_batch(k2, plain):
    # lone surrogates are replaced (tiktoken's behaviour) rather than crashing
    assert k2.encode("a\ud800b") == plain.encode("a\ufffdb")
    texts = ["one", "two words", "", "<|im_end|>", "x" * 30_000]
    assert k2.encode_batch(texts) == [k2.encode(t) for t in texts]
    assert k2.encode_batch(texts, allow_special=False, num_threads=2) == [k2.encode(t, allow_special=False) for t in texts]
    assert k2.count("Hello, world!") == 4


# ------------------------------------------------------------------------------------------------
# Long inputs: the official cuts
# ------------------------------------------------------------------------------------------------


def test_python_s_is_str_isspace_for_every_code_point():
    # split_for_tiktoken scans with `\s`; the official code tests str.isspace()
    ws = re.compile(r"\s")
    assert [c for c in range(0x110000) if bool(ws.match(chr(c))) != chr(c).isspace()] == []


_ALPH = st.sampled_from(list("ab1 \n\t\u00a0\u3000中é") + ["\r\n", "<|im_end|>"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_ALPH, max_size=120), max_chars=st.integers(1, 40), max_run=st.integers(1, 12))
def test_split_equals_official_algorithm_small_limits(parts, max_chars, max_run):
    text = "".join(parts)
    assert split_for_tiktoken(text, max_chars=max_chars, max_run=max_run) == (
        official_pieces(text, max_chars, max_run) if text else []
    )


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_ALPH, max_size=60), max_chars=st.integers(1, 30), max_run=st.integers(1, 8), data=st.data())
def test_cut_points_from_an_offset(parts, max_chars, max_run, data):
    # the cuts after `start` do not depend on whether the prefix was scanned
    text = "".join(parts)
    full = cut_points(text, max_chars=max_chars, max_run=max_run)
    start = data.draw(st.integers(0, len(text)))
    assert cut_points(text, start, max_chars=max_chars, max_run=max_run) == [c for c in full if c > start]


def test_split_equals_official_algorithm_real_limits():
    rnd = random.Random(4)
    text = (
        "a" * 60_001 + " " * 30_000 + "b" * 24_999 + "\n" * 25_001 + "word " * 20_000
        + "".join(rnd.choice("xy z\n") for _ in range(50_000)) + "中" * 410_000 + "\u3000" * 25_000
    )
    pieces = split_for_tiktoken(text)
    assert pieces == official_pieces(text)
    assert "".join(pieces) == text
    assert split_for_tiktoken("") == [] and split_for_tiktoken("x" * 25_000) == ["x" * 25_000]


@pytest.mark.oracle
@needs_ref
def test_long_inputs_encode_like_official(k2, plain):
    cases = [
        "1" * 25_001,  # digits group by 3: the cut at 25,000 changes the ids
        ("x" * 24_999 + " ") * 3 + "y" * 50_001,
        "a" * 25_001,
        " " * 25_003 + "z",
        "é" * 30_000,
        "x" + "<|im_end|>" * 2_600,  # 26,001 non-space chars: the cut at 25,000 falls inside a marker
        ("lorem ipsum dolor sit amet " * 16_000)[:430_000],  # crosses the 400k slice
    ]
    for t in cases:
        ours = k2.encode(t)
        assert ours == official_encode(plain, t), t[:20]
        assert k2.encode(t, allow_special=False) == official_encode(plain, t, allow_special=False)
        assert k2.decode(ours) == t
    # the cuts are behaviour, not only a crash guard: unsplit encoding gives other ids
    assert k2.encode("1" * 25_001) != plain.encode_ordinary("1" * 25_001)
    # a cut inside a marker leaves that one as text: 2,499 whole markers, the cut one, 100 more
    ids = k2.encode("x" + "<|im_end|>" * 2_600)
    assert ids.count(markers.IM_END.id) == 2_599


# ------------------------------------------------------------------------------------------------
# Loading: synthetic files (no reference needed), errors, cache
# ------------------------------------------------------------------------------------------------


def _write_model(path: Path, tokens: list[bytes]) -> Path:
    path.write_bytes(b"".join(base64.b64encode(t) + b" " + str(i).encode() + b"\n" for i, t in enumerate(tokens)))
    return path


def _byte_tokens() -> list[bytes]:
    return [bytes([b]) for b in range(256)]


def _config(added: dict[int, tuple[str, bool]], **extra) -> dict:
    cfg = {
        "added_tokens_decoder": {
            str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                     "special": s}
            for i, (c, s) in added.items()
        }
    }
    cfg.update(extra)
    return cfg


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    tokens = _byte_tokens() + [b"ab", b"abc", b"ll", b"hello"]  # 260 ranks -> specials 260..517
    _write_model(tmp_path / "tiktoken.model", tokens)
    cfg = _config({260: ("[BOS]", True), 261: ("[EOS]", True), 262: ("<|im_end|>", True), 263: ("<|tool_call_begin|>", False)},
                  bos_token="[BOS]", eos_token={"content": "[EOS]"})
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_synthetic_snapshot(snapshot):
    tk = KimiTokenizer.from_dir(snapshot)
    assert tk.num_base_tokens == 260 and tk.vocab_size == 518
    assert tk.special_ids == frozenset(range(260, 518))
    assert (tk.bos_id, tk.eos_id, tk.unk_id, tk.pad_id) == (260, 261, None, None)
    assert tk.id_to_token(264) == "<|reserved_token_264|>" and tk.id_to_token(517) == "<|reserved_token_517|>"
    assert tk.encode("abc<|im_end|>") == [257, 262]
    assert tk.encode("abc<|im_end|>", allow_special=False) == tk.encode("abc") + tk.encode("<|im_end|>", allow_special=False)
    assert tk.encode("hello") == [259]
    assert tk.decode([260, 257, 263, 262], skip_special_tokens=True) == "abc<|tool_call_begin|>"
    same = KimiTokenizer.from_files(snapshot / "tiktoken.model", snapshot / "tokenizer_config.json")
    assert same.encode("hello abc") == tk.encode("hello abc")
    with_mapping = KimiTokenizer.from_dir(snapshot, config=_config({300: ("<think>", False)}))
    assert with_mapping.encode("<think>") == [300] and with_mapping.bos_id is None


def test_missing_files_leaves_the_environment_as_it_found_it(tmp_path, snapshot):
    # Test_missing_files deleted $KIMI_CHAT_REFERENCE_DIR for every later test
    outer = pytest.MonkeyPatch()
    outer.setenv("KIMI_CHAT_REFERENCE_DIR", "/the/reference/of/this/run")
    try:
        inner = pytest.MonkeyPatch()
        try:
            test_missing_files(tmp_path, snapshot, inner)
        finally:
            inner.undo()  # what pytest does after the test
        assert os.environ.get("KIMI_CHAT_REFERENCE_DIR") == "/the/reference/of/this/run"
    finally:
        outer.undo()


def test_decode_refuses_what_is_not_a_token_id(snapshot):
    # Decode(["a"]) said "outside 0..N", decode([True]) decoded token 1
    tk = KimiTokenizer.from_dir(snapshot)
    with pytest.raises(TypeError, match=r"ids\[1\]: token ids are integers, not str \('a'\)"):
        tk.decode([97, "a"])
    with pytest.raises(TypeError, match=r"ids\[0\]: token ids are integers, not bool \(True\)"):
        tk.decode([True])
    with pytest.raises(TypeError, match=r"ids\[0\]: .*not bool"):
        tk.decode_bytes([False], skip_special_tokens=True)
    with pytest.raises(TypeError, match=r"ids\[2\]: .*not float"):
        tk.decode([97, 98, 1.0])
    with pytest.raises(KeyError, match=r"ids\[1\]: token id 518 is outside 0\.\.517"):
        tk.decode([97, 518])
    with pytest.raises(KeyError, match=r"ids\[0\]: token id -1 is outside"):
        tk.decode([-1])
    with pytest.raises(TypeError, match="token_id: .*not bool"):
        tk.id_to_token(True)
    np = pytest.importorskip("numpy")
    assert tk.decode(np.array([97, 257], dtype=np.int64)) == "aabc"
    assert tk.decode([]) == "" and tk.id_to_token(np.int32(98)) == "b"


def test_ranks_are_cached_and_reloaded_when_the_file_changes(snapshot):
    a = KimiTokenizer.from_dir(snapshot)
    b = KimiTokenizer.from_dir(snapshot)
    assert a.mergeable_ranks is b.mergeable_ranks and a.encoding is b.encoding
    model = snapshot / "tiktoken.model"
    _write_model(model, _byte_tokens() + [b"ab", b"abc", b"ll", b"hello", b"he"])
    st_ = model.stat()
    os.utime(model, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    c = KimiTokenizer.from_dir(snapshot, config=_config({}))
    assert c.num_base_tokens == 261 and c.mergeable_ranks is not a.mergeable_ranks


def test_missing_files(tmp_path, snapshot, monkeypatch):
    with pytest.raises(ReferenceDataError, match="directory not found"):
        KimiTokenizer.from_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReferenceDataError, match=r"tiktoken\.model: file not found"):
        KimiTokenizer.from_dir(tmp_path / "empty")
    (snapshot / "tokenizer_config.json").unlink()
    with pytest.raises(ReferenceDataError, match=r"tokenizer_config\.json: file not found"):
        KimiTokenizer.from_dir(snapshot)
    with pytest.raises(ReferenceDataError, match=r"other\.json: file not found"):
        KimiTokenizer.from_files(snapshot / "tiktoken.model", snapshot / "other.json")
    monkeypatch.setenv("KIMI_CHAT_REFERENCE_DIR", str(tmp_path / "absent"))
    with pytest.raises(ReferenceDataError, match="reference directory not found"):
        KimiTokenizer.from_reference()
    with pytest.raises(ValueError, match="unknown reference config"):
        KimiTokenizer.from_reference("k4")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "no ranks"),
        (b"IQ== 0\nIg==\n", r"line 2: expected '<base64 token> <rank>'"),
        (b"IQ== 0\n!!!! 1\n", "line 2: invalid base64"),
        (b"IQ== 0\nIg== one\n", "line 2: rank is not an integer"),
        (b"IQ== 0\nIQ== 1\n", "duplicate token"),
        (b"IQ== 0\nIg== 2\n", r"ranks must be exactly 0\.\.1"),
        (b"IQ== 0\nIg== 1\n", "single-byte token"),
    ],
)
def test_corrupt_tiktoken_model(tmp_path, content, message):
    (tmp_path / "tiktoken.model").write_bytes(content)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(_config({})))
    with pytest.raises(ReferenceDataError, match=message) as e:
        KimiTokenizer.from_dir(tmp_path)
    assert str(tmp_path / "tiktoken.model") in str(e.value)


@pytest.mark.parametrize(
    "config, message",
    [
        ("{not json", "invalid JSON at line 1 column 2"),
        ("[]", "top level is list"),
        ("{}", "no 'added_tokens_decoder'"),
        (json.dumps(_config({5: ("x", True)})), r"id 5, outside the special range 260\.\.517"),
        (json.dumps({"added_tokens_decoder": {"abc": {"content": "x"}}}), "not an integer id"),
        (json.dumps({"added_tokens_decoder": {"260": {}}}), "no string 'content'"),
        (json.dumps(_config({260: ("x", True), 261: ("x", True)})), "appears twice"),
        (json.dumps(_config({260: ("[BOS]", True)}, eos_token="[EOS]")), "eos_token '\\[EOS\\]' is not a special token"),
    ],
)
def test_corrupt_config(snapshot, config, message):
    (snapshot / "tokenizer_config.json").write_text(config)
    with pytest.raises(ReferenceDataError, match=message) as e:
        KimiTokenizer.from_dir(snapshot)
    assert str(snapshot / "tokenizer_config.json") in str(e.value)


def test_config_not_utf8(snapshot):
    (snapshot / "tokenizer_config.json").write_bytes(b"{\xff}")
    with pytest.raises(ReferenceDataError, match="not UTF-8"):
        KimiTokenizer.from_dir(snapshot)


@needs_reference
def test_from_reference_without_tiktoken_says_what_to_install(monkeypatch):
    """A base install (no tiktoken): a kimi_chat error with the CLI's install hint, not a bare
    ModuleNotFoundError (still one, for callers that catch it)."""
    import sys

    from kimi_chat.errors import KimiChatError, MissingExtraError

    monkeypatch.setitem(sys.modules, "tiktoken", None)  # what an import of a missing module meets
    with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[tokenizer\]' \(in the kimi_chat checkout\)") as info:
        KimiTokenizer.from_reference()
    assert isinstance(info.value, KimiChatError) and isinstance(info.value, ModuleNotFoundError)
