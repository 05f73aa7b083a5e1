"""The Kimi tokenizer: ``tiktoken`` with the official pre-tokenizer regex, special tokens and splitting limits.

It reproduces ``tokenization_kimi.py`` (``TikTokenTokenizer``) of the Kimi-K2 model snapshots:

* the BPE ranks of the snapshot's ``tiktoken.model`` (163,584 ranks, shared by every K2 variant);
* ``pat_str`` (:data:`PAT_STR`; its sha256 is pinned in ``PROVENANCE.md``);
* ``256 + 2`` special ids numbered from ``len(ranks)`` (163584..163841), each named after the
  config's ``added_tokens_decoder`` entry or else ``<|reserved_token_{id}|>``;
* long inputs cut into pieces of at most 400,000 chars, and each piece cut so that no run of more than
  25,000 consecutive whitespace (or non-whitespace) chars is handed to tiktoken in one call (the
  official ``_split_whitespaces_or_nonwhitespaces``; the cuts change the ids, so they are part of
  the tokenizer's behaviour, not only a crash guard).

``encode(text)`` treats special-token text as the special id (the official default,
``allow_special_tokens=True``); ``encode(text, allow_special=False)`` encodes it as ordinary text.

Kimi-K3's tokenizer is the same BPE with 256 special ids (no ``+ 2``) named by :data:`~kimi_chat.markers.K3_MARKERS`
(``<|open|>``, ``<|close|>``, ``<|sep|>``, ``<|end_of_msg|>``...): ``KimiTokenizer.from_reference("k3")``.

Either the July-2025 Kimi-K2-Instruct ``tokenizer_config.json`` or the K2.5/K2.6 one can be loaded; the
latter adds ``<|media_begin|>``.. (163602..163605) and ``<think>``/``</think>`` (163606, 163607) as
single tokens, where the former has them as reserved names (``<think>`` is then ordinary text).

Token strings (:meth:`KimiTokenizer.id_to_token`) follow the Hugging Face convention of the official
tokenizer: the GPT-2 byte-to-unicode form of the token bytes (``" world"`` is ``"Ġworld"``); special
tokens are their names.
"""

from __future__ import annotations

import base64
import binascii
import json
import operator
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple, Union

from ..errors import ReferenceDataError, import_extra
from .. import markers as _M
from ..markers import IM_END, NUM_RESERVED_SPECIAL, reserved_token_name
from ..reference import missing_reason as _missing_reason
from ..reference import reference_dir as _reference_dir

__all__ = [
    "KimiTokenizer",
    "AddedToken",
    "PAT_STR",
    "TIKTOKEN_MAX_ENCODE_CHARS",
    "MAX_NO_WHITESPACES_CHARS",
    "TIKTOKEN_MODEL_FILE",
    "TOKENIZER_CONFIG_FILE",
    "REFERENCE_CONFIGS",
    "K3_CONFIG",
    "REFERENCE_EOS",
    "split_for_tiktoken",
    "cut_points",
]

PathLike = Union[str, "os.PathLike[str]"]

PAT_STR: Final = "|".join(
    [
        r"""[\p{Han}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
"""The pre-tokenizer regex of ``tokenization_kimi.py`` (sha256 ``de578178…`` in PROVENANCE.md)."""

TIKTOKEN_MAX_ENCODE_CHARS: Final = 400_000
"""The official tokenizer encodes the text in slices of at most this many chars."""
MAX_NO_WHITESPACES_CHARS: Final = 25_000
"""... and cuts each slice so that no piece has a run of more than this many consecutive whitespace
(or non-whitespace) chars."""

TIKTOKEN_MODEL_FILE: Final = "tiktoken.model"
TOKENIZER_CONFIG_FILE: Final = "tokenizer_config.json"

_REFERENCE_TIKTOKEN = "tokenizer/tiktoken.model"

K3_CONFIG: Final[Mapping[str, Any]] = {
    "added_tokens_decoder": {str(m.id): {"content": m.text, "special": True} for m in _M.K3_MARKERS},
    "bos_token": _M.BOS.text,
    "eos_token": _M.EOS.text,
    "unk_token": _M.UNK.text,
    "pad_token": _M.PAD.text,
}
"""The Kimi-K3 tokenizer config as PROVENANCE.md's oracle recipe builds it (the official
``tokenizer_config.json`` was not found); load with ``num_special=K3_NUM_RESERVED_SPECIAL``."""


class ReferenceTokenizer(NamedTuple):
    """A tokenizer :meth:`KimiTokenizer.from_reference` loads: ``name``, ``config`` (a path in the reference
    directory, or the config itself), ``num_special`` (``None``: the default), ``eos`` (the model's eos)."""
    name: str
    config: str | Mapping[str, Any]
    num_special: int | None = None
    eos: str | None = None


_K26_CONFIG = "unverified/Kimi-K2.6-derived.tokenizer_config.json"
REFERENCE_TOKENIZERS: Final[Mapping[str, ReferenceTokenizer]] = {ref.name: ref for ref in (
    ReferenceTokenizer("k2", "Kimi-K2-Instruct/tokenizer_config.json"), ReferenceTokenizer("k2.5", _K26_CONFIG),
    ReferenceTokenizer("k2.6", _K26_CONFIG, eos=IM_END.text),
    ReferenceTokenizer("k3", K3_CONFIG, num_special=_M.K3_NUM_RESERVED_SPECIAL, eos=_M.K3_END_OF_MSG.text))}
"""Every tokenizer :meth:`KimiTokenizer.from_reference` loads, by name."""
REFERENCE_CONFIGS: Final[Mapping[str, str]] = {r.name: r.config for r in REFERENCE_TOKENIZERS.values()
                                               if isinstance(r.config, str)}
"""Configs of the reference directory loadable by :meth:`KimiTokenizer.from_reference`: ``"k2"`` is the July-2025
Kimi-K2-Instruct config; ``"k2.5"`` and ``"k2.6"`` the (unverified) K2.6-derived one with the media and ``<think>``
tokens (K2.6's tokenizer files are byte-identical to K2.5's; only the eos differs, see :data:`REFERENCE_EOS`)."""
REFERENCE_EOS: Final[Mapping[str, str]] = {r.name: r.eos for r in REFERENCE_TOKENIZERS.values() if r.eos is not None}
"""The eos token of a reference config where the model's ``eos_token_id`` is not the config's
``eos_token``: Kimi-K2.6 ends generation at ``<|im_end|>`` (163586), K2.5 and K2 at ``[EOS]`` (163585).
Kimi-K3 ends generation at ``<|end_of_msg|>`` (163586, the end of every message; ``eos_token_id`` of
its ``config.json`` / ``generation_config.json``, PROVENANCE.md): its official ``tokenization_kimi.py``
takes ``eos_id`` from the config's ``eos_token`` (constructor default ``[EOS]``; K3's
``tokenizer_config.json`` was not found), so, as for K2.6, ``eos_id`` is the model's eos."""


# --------------------------------------------------------------------------------------------------
# Splitting of long inputs (official limits)
# --------------------------------------------------------------------------------------------------


_LONG_RUN_RES: dict[int, re.Pattern[str]] = {}
_WS_RUN: Final = re.compile(r"\s*")
_NWS_RUN: Final = re.compile(r"\S*")


def _long_run_re(max_run: int) -> re.Pattern[str]:
    # A maximal run longer than max_run. The look-behinds make every attempt that does not start a run
    # fail at once, so the scan is linear. Python's `\s` on str is `str.isspace()` (both are
    # Py_UNICODE_ISSPACE); a test checks every code point.
    pat = _LONG_RUN_RES.get(max_run)
    if pat is None:
        n = max_run + 1
        pat = _LONG_RUN_RES[max_run] = re.compile(rf"(?<!\s)\s{{{n},}}|(?<!\S)\S{{{n},}}")
    return pat


def _has_long_run(s: str, max_run: int) -> bool:
    """Whether ``s`` has a run of more than ``max_run`` whitespace or non-whitespace chars.

    Probes every ``max_run``-th position: a run of at least ``max_run + 1`` chars holds a probe that is
    less than ``max_run`` chars from the run's start, so measuring the run around each probe (at most
    ``max_run`` chars back, ``max_run + 1`` forward, at C speed) finds every long run."""
    n = len(s)
    if n <= max_run:
        return False
    m = max_run + 1
    for p in range(0, n, max_run):
        run = _WS_RUN if s[p].isspace() else _NWS_RUN
        right = run.match(s, p, min(n, p + m)).end() - p
        lo = max(0, p - max_run)
        left = run.match(s[lo:p][::-1]).end() if p else 0
        if left + right >= m:
            return True
    return False


def cut_points(
    text: str,
    start: int = 0,
    *,
    max_chars: int = TIKTOKEN_MAX_ENCODE_CHARS,
    max_run: int = MAX_NO_WHITESPACES_CHARS,
) -> list[int]:
    """Positions ``c`` with ``start < c < len(text)``, in order, where the official splitting of the whole
    ``text`` starts a new piece (see :func:`split_for_tiktoken`).

    ``start`` lets a caller that already tokenized ``text[:start]`` get the cuts of the rest without
    rescanning the prefix (only the run that crosses ``start`` is looked at)."""
    n = len(text)
    if n <= max_run and n <= max_chars:
        return []
    cuts: list[int] = []
    run_re = _long_run_re(max_run)
    chunk = start - start % max_chars
    first = True
    while chunk < n:
        end = min(chunk + max_chars, n)
        if first:
            # the cuts of this chunk after `start` depend only on the runs from the one holding `start`
            scan = start
            if chunk < start < n:
                run = _WS_RUN if text[start - 1].isspace() else _NWS_RUN
                if text[start].isspace() == text[start - 1].isspace():
                    scan = start - run.match(text[chunk:start][::-1]).end()
            else:
                scan = chunk
            first = False
        else:
            cuts.append(chunk)
            scan = chunk
        if end - scan > max_run:
            sub = text[scan:end]
            if _has_long_run(sub, max_run):
                for mt in run_re.finditer(sub):
                    a, b = mt.span()
                    for c in range(scan + a + max_run, scan + b, max_run):
                        if c > start:
                            cuts.append(c)
        chunk += max_chars
    return cuts


def split_for_tiktoken(
    text: str,
    *,
    max_chars: int = TIKTOKEN_MAX_ENCODE_CHARS,
    max_run: int = MAX_NO_WHITESPACES_CHARS,
) -> list[str]:
    """The pieces the official tokenizer hands to tiktoken one by one, in order.

    Same result as ``[p for i in range(0, len(text), max_chars) for p in
    _split_whitespaces_or_nonwhitespaces(text[i:i + max_chars], max_run)]`` (the official code), at C
    speed. ``[]`` for an empty text; ``[text]`` when nothing needs cutting.
    """
    if not text:
        return []
    bounds = [0, *cut_points(text, max_chars=max_chars, max_run=max_run), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


# --------------------------------------------------------------------------------------------------
# Loading (cached)
# --------------------------------------------------------------------------------------------------


def _token_id(value: Any, where: str, vocab_size: int) -> int:
    """``value`` as a token id (an integer, not a bool, in ``0..vocab_size-1``); errors name ``where``."""
    if isinstance(value, bool):
        raise TypeError(f"{where}: token ids are integers, not bool ({value!r})")
    try:
        i = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: token ids are integers, not {type(value).__name__} ({value!r})") from None
    if not 0 <= i < vocab_size:
        raise KeyError(f"{where}: token id {i!r} is outside 0..{vocab_size - 1}")
    return i


@dataclass(frozen=True)
class AddedToken:
    """One entry of the config's ``added_tokens_decoder``: the token's name and its ``special`` flag
    (``special=False`` tokens, like the tool-call markers, survive ``skip_special_tokens``)."""

    id: int
    content: str
    special: bool


_lock = threading.Lock()
_RANKS_CACHE: dict[tuple[str, int, int], dict[bytes, int]] = {}
_ENCODING_CACHE: dict[tuple[Any, ...], Any] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ReferenceDataError(f"{path}: file not found") from None
    except OSError as e:
        raise ReferenceDataError(f"{path}: cannot read: {e.strerror or e}") from None
    if not path.is_file():
        raise ReferenceDataError(f"{path}: not a regular file")
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _parse_ranks(path: Path) -> dict[bytes, int]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ReferenceDataError(f"{path}: cannot read the tiktoken BPE file: {e.strerror or e}") from None
    lines = data.splitlines()
    try:
        ranks = {base64.b64decode(tok, validate=True): int(rank) for tok, rank in (ln.split() for ln in lines if ln)}
    except (ValueError, binascii.Error):
        ranks = None
    if ranks is None:
        # Slow path, only to say where and why.
        for lineno, ln in enumerate(lines, 1):
            if not ln:
                continue
            parts = ln.split()
            if len(parts) != 2:
                raise ReferenceDataError(
                    f"{path}: corrupt tiktoken BPE file: line {lineno}: expected '<base64 token> <rank>', "
                    f"got {ln[:60]!r}"
                )
            try:
                base64.b64decode(parts[0], validate=True)
            except (ValueError, binascii.Error):
                raise ReferenceDataError(
                    f"{path}: corrupt tiktoken BPE file: line {lineno}: invalid base64 token {parts[0][:60]!r}"
                ) from None
            try:
                int(parts[1])
            except ValueError:
                raise ReferenceDataError(
                    f"{path}: corrupt tiktoken BPE file: line {lineno}: rank is not an integer: {parts[1][:30]!r}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover
    n_lines = sum(1 for ln in lines if ln)
    if not ranks:
        raise ReferenceDataError(f"{path}: corrupt tiktoken BPE file: no ranks (empty file?)")
    if len(ranks) != n_lines:
        raise ReferenceDataError(
            f"{path}: corrupt tiktoken BPE file: {n_lines - len(ranks)} duplicate token(s) among {n_lines} lines"
        )
    values = set(ranks.values())
    if len(values) != len(ranks) or min(values) != 0 or max(values) != len(ranks) - 1:
        raise ReferenceDataError(
            f"{path}: corrupt tiktoken BPE file: ranks must be exactly 0..{len(ranks) - 1} without gaps or "
            f"repeats (found {len(values)} distinct ranks in {min(values)}..{max(values)})"
        )
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ReferenceDataError(
            f"{path}: corrupt tiktoken BPE file: {len(missing)} single-byte token(s) missing "
            f"(e.g. byte 0x{missing[0]:02x}); every byte must be a token"
        )
    return ranks


def _load_ranks(path: Path) -> dict[bytes, int]:
    key = _file_key(path)
    with _lock:
        cached = _RANKS_CACHE.get(key)
    if cached is not None:
        return cached
    ranks = _parse_ranks(path)
    with _lock:
        _RANKS_CACHE[key] = ranks
    return ranks


def _read_config(path: Path) -> dict[str, Any]:
    _file_key(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ReferenceDataError(f"{path}: corrupt tokenizer config: not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ReferenceDataError(f"{path}: cannot read the tokenizer config: {e.strerror or e}") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReferenceDataError(
            f"{path}: corrupt tokenizer config: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    if not isinstance(cfg, dict):
        raise ReferenceDataError(f"{path}: corrupt tokenizer config: top level is {type(cfg).__name__}, not an object")
    return cfg


def _added_tokens(
    cfg: Mapping[str, Any], where: str, num_base: int, num_special: int = NUM_RESERVED_SPECIAL + 2
) -> dict[int, AddedToken]:
    dec = cfg.get("added_tokens_decoder")
    if dec is None:
        raise ReferenceDataError(f"{where}: tokenizer config has no 'added_tokens_decoder'")
    if not isinstance(dec, Mapping):
        raise ReferenceDataError(f"{where}: 'added_tokens_decoder' is {type(dec).__name__}, not an object")
    out: dict[int, AddedToken] = {}
    names: dict[str, int] = {}
    hi = num_base + num_special
    for k, v in dec.items():
        try:
            tid = int(k)
        except (TypeError, ValueError):
            raise ReferenceDataError(f"{where}: added_tokens_decoder key {k!r} is not an integer id") from None
        if not isinstance(v, Mapping) or not isinstance(v.get("content"), str) or not v["content"]:
            raise ReferenceDataError(f"{where}: added_tokens_decoder[{k!r}] has no string 'content'")
        if not num_base <= tid < hi:
            raise ReferenceDataError(
                f"{where}: added token {v['content']!r} has id {tid}, outside the special range "
                f"{num_base}..{hi - 1} of this tiktoken.model"
            )
        if v["content"] in names:
            raise ReferenceDataError(
                f"{where}: added token {v['content']!r} appears twice (ids {names[v['content']]} and {tid})"
            )
        names[v["content"]] = tid
        out[tid] = AddedToken(tid, v["content"], bool(v.get("special", True)))
    return out


def _token_name(cfg: Mapping[str, Any], key: str) -> str | None:
    v = cfg.get(key)
    if isinstance(v, Mapping):
        v = v.get("content")
    return v if isinstance(v, str) else None


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte -> printable char map (what HF byte-level tokenizers show as tokens).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENCODER: Final = _bytes_to_unicode()
"""GPT-2 byte -> printable character map (the token spelling of byte-level BPE vocabularies, GGUF)."""
BYTE_DECODER: Final = {c: b for b, c in BYTE_ENCODER.items()}
"""Inverse of :data:`BYTE_ENCODER`."""


# --------------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------------


class KimiTokenizer:
    """The Kimi tokenizer of both families (``tiktoken`` underneath): K2's 256 + 2 special ids, K3's 256.
    Build it with :meth:`from_dir`, :meth:`from_files` or :meth:`from_reference`; loading is cached per
    file (path, size, mtime) within the process.

    Attributes: ``vocab_size`` (163842: 163584 BPE ranks + 258 special ids; 163840 for K3), ``num_base_tokens``,
    ``special_ids`` (every id of the special range, named or reserved: 258, K3 256), ``special_tokens``
    (name -> id), ``added_tokens`` (the config entries with their ``special`` flag), ``bos_id``,
    ``eos_id``, ``unk_id``, ``pad_id``, ``model_path``, ``config_path``.
    """

    def __init__(
        self,
        mergeable_ranks: dict[bytes, int],
        config: Mapping[str, Any],
        *,
        model_path: Path | None = None,
        config_path: Path | None = None,
        num_special: int = NUM_RESERVED_SPECIAL + 2,
        _cache_key: Any = None,
    ):
        tiktoken = import_extra("tiktoken", "tokenizer", "the tokenizer")  # without it: the CLI's install hint

        where = str(config_path) if config_path is not None else "tokenizer config"
        self.model_path = model_path
        self.config_path = config_path
        self.num_base_tokens: int = len(mergeable_ranks)
        self.added_tokens: Mapping[int, AddedToken] = _added_tokens(
            config, where, self.num_base_tokens, num_special
        )
        specials = {
            (self.added_tokens[i].content if i in self.added_tokens else reserved_token_name(i)): i
            for i in range(self.num_base_tokens, self.num_base_tokens + num_special)
        }
        if len(specials) != num_special:
            raise ReferenceDataError(f"{where}: an added token is named like a reserved token of another id")
        self.special_tokens: Mapping[str, int] = specials
        self._special_names: frozenset[str] = frozenset(specials)
        self.special_ids: frozenset[int] = frozenset(specials.values())
        self._id_to_special: dict[int, str] = {i: s for s, i in specials.items()}
        self._skip_ids: frozenset[int] = frozenset(i for i, t in self.added_tokens.items() if t.special)
        self.vocab_size: int = self.num_base_tokens + num_special

        key = (_cache_key, tuple(sorted(specials.items(), key=lambda kv: kv[1])))
        with _lock:
            enc = _ENCODING_CACHE.get(key) if _cache_key is not None else None
        if enc is None:
            enc = tiktoken.Encoding(
                name="kimi-k2", pat_str=PAT_STR, mergeable_ranks=mergeable_ranks, special_tokens=dict(specials)
            )
            if _cache_key is not None:
                with _lock:
                    _ENCODING_CACHE[key] = enc
        self._enc = enc
        self._ranks = mergeable_ranks
        self._id_to_token: list[str] | None = None
        self._token_to_id: dict[str, int] | None = None

        def _id(name_key: str) -> int | None:
            name = _token_name(config, name_key)
            if name is None:
                return None
            if name not in specials:
                raise ReferenceDataError(f"{where}: {name_key} {name!r} is not a special token of this config")
            return specials[name]

        # Constructor defaults of tokenization_kimi.py are [BOS] / [EOS]; the configs name them too.
        self.bos_id: int | None = _id("bos_token")
        self.eos_id: int | None = _id("eos_token")
        self.unk_id: int | None = _id("unk_token")
        self.pad_id: int | None = _id("pad_token")

    # ---------------------------------------------------------------- constructors

    @classmethod
    def from_files(
        cls,
        tiktoken_model: PathLike,
        tokenizer_config: PathLike | Mapping[str, Any],
        *,
        num_special: int = NUM_RESERVED_SPECIAL + 2,
    ) -> "KimiTokenizer":
        """Load from an explicit ``tiktoken.model`` path and a ``tokenizer_config.json`` path (or the
        already parsed config mapping). ``num_special`` is the size of the special range: 258 for the
        K2 line, :data:`~kimi_chat.markers.K3_NUM_RESERVED_SPECIAL` (256) for K3. Raises
        :class:`ReferenceDataError` naming the file on a missing or corrupt file."""
        model_path = Path(tiktoken_model)
        ranks = _load_ranks(model_path)
        cache_key = _file_key(model_path)
        if isinstance(tokenizer_config, Mapping):
            return cls(ranks, tokenizer_config, model_path=model_path, num_special=num_special, _cache_key=cache_key)
        config_path = Path(tokenizer_config)
        cfg = _read_config(config_path)
        return cls(
            ranks, cfg, model_path=model_path, config_path=config_path, num_special=num_special, _cache_key=cache_key
        )

    @classmethod
    def from_dir(cls, path: PathLike, *, config: PathLike | Mapping[str, Any] | None = None) -> "KimiTokenizer":
        """Load a model snapshot directory holding ``tiktoken.model`` and ``tokenizer_config.json``.
        ``config`` overrides the config (a path or a parsed mapping)."""
        d = Path(path)
        if not d.is_dir():
            raise ReferenceDataError(f"{d}: model snapshot directory not found")
        model = d / TIKTOKEN_MODEL_FILE
        if not model.is_file():
            raise ReferenceDataError(f"{model}: file not found (a Kimi snapshot dir holds {TIKTOKEN_MODEL_FILE})")
        if config is None:
            config = d / TOKENIZER_CONFIG_FILE
            if not Path(config).is_file():
                raise ReferenceDataError(
                    f"{config}: file not found (a Kimi snapshot dir holds {TOKENIZER_CONFIG_FILE}; "
                    "or pass config=)"
                )
        return cls.from_files(model, config)

    @classmethod
    def from_reference(cls, config: str = "k2", *, reference_dir: PathLike | None = None) -> "KimiTokenizer":
        """Load from the reference data layout (``tokenizer/tiktoken.model`` plus the config named by
        ``config``, a key of :data:`REFERENCE_CONFIGS`: ``"k2"``, ``"k2.5"`` or ``"k2.6"``; or ``"k3"``:
        the Kimi-K3 tokenizer, 256 special ids named by :data:`~kimi_chat.markers.K3_MARKERS`, as K3's
        config was not found. The directory is ``reference_dir`` or
        :func:`kimi_chat.reference.reference_dir` (``$KIMI_CHAT_REFERENCE_DIR``). ``eos_id`` is the model's eos
        (:data:`REFERENCE_EOS`; the records: :data:`REFERENCE_TOKENIZERS`)."""
        ref = REFERENCE_TOKENIZERS.get(config)
        if ref is None:
            raise ValueError(f"unknown reference config {config!r}; choose one of {sorted(REFERENCE_TOKENIZERS)}")
        d = Path(reference_dir) if reference_dir is not None else _reference_dir()
        if d is None:
            raise ReferenceDataError(_missing_reason())
        cfg = d / ref.config if isinstance(ref.config, str) else ref.config
        tok = cls.from_files(d / _REFERENCE_TIKTOKEN, cfg, num_special=ref.num_special or NUM_RESERVED_SPECIAL + 2)
        if ref.eos is not None:
            tok.eos_id = tok.token_to_id(ref.eos)
        return tok

    # ---------------------------------------------------------------- encoding

    @property
    def encoding(self) -> Any:
        """The underlying ``tiktoken.Encoding`` (no long-input splitting: prefer :meth:`encode`)."""
        return self._enc

    @property
    def mergeable_ranks(self) -> Mapping[bytes, int]:
        """The BPE ranks of ``tiktoken.model`` (token bytes -> id). Do not mutate."""
        return self._ranks

    def encode(self, text: str, *, allow_special: bool = True) -> list[int]:
        """Token ids of ``text``, exactly as the official ``encode`` (including its long-input cuts).

        ``allow_special=True`` (the official default): text equal to a special token's name (e.g.
        ``<|im_end|>``, or ``<|reserved_token_163700|>``) becomes that id. ``allow_special=False``:
        such text is encoded as ordinary text (several tokens), as for untrusted content.

        Which path is safe for a prompt: ``encode(render(messages))`` (the default ``allow_special``)
        turns a marker a user typed in a message into the control id (the turn ends there, or a fake
        tool call appears); ``encode(render(messages), allow_special=False)`` breaks the template's own
        markers. Tokenize prompts with :func:`kimi_chat.render_tokens` (markers as their ids, typed
        text as text; ``special_tokens="strict"`` refuses typed markers), and see
        :func:`kimi_chat.lint`'s ``typed-marker`` finding.
        """
        enc = self._enc
        if len(text) <= MAX_NO_WHITESPACES_CHARS:
            if allow_special:
                return enc.encode(text, allowed_special=self._special_names, disallowed_special=())
            return enc.encode_ordinary(text)
        cuts = cut_points(text)
        if not cuts:
            if allow_special:
                return enc.encode(text, allowed_special=self._special_names, disallowed_special=())
            return enc.encode_ordinary(text)
        out: list[int] = []
        for piece in split_for_tiktoken(text):
            if allow_special:
                out += enc.encode(piece, allowed_special=self._special_names, disallowed_special=())
            else:
                out += enc.encode_ordinary(piece)
        return out

    def encode_batch(
        self, texts: Sequence[str], *, allow_special: bool = True, num_threads: int = 4
    ) -> list[list[int]]:
        """:meth:`encode` of each text, in threads (tiktoken releases the GIL while encoding)."""
        if len(texts) <= 1 or num_threads <= 1:
            return [self.encode(t, allow_special=allow_special) for t in texts]
        with ThreadPoolExecutor(num_threads) as ex:
            return list(ex.map(lambda t: self.encode(t, allow_special=allow_special), texts))

    def count(self, text: str, *, allow_special: bool = True) -> int:
        """``len(self.encode(text, ...))``."""
        return len(self.encode(text, allow_special=allow_special))

    # ---------------------------------------------------------------- decoding

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False, errors: str = "replace") -> str:
        """Text of ``ids`` (UTF-8, invalid sequences replaced by U+FFFD unless ``errors`` says else).
        ``skip_special_tokens`` drops the ids the config flags ``special: true`` (``[BOS]``,
        ``<|im_end|>``...), keeping ``special: false`` ones (tool-call markers, ``<think>``) and
        reserved ids, as the official tokenizer does."""
        return self.decode_bytes(ids, skip_special_tokens=skip_special_tokens).decode("utf-8", errors=errors)

    def decode_bytes(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> bytes:
        """Raw bytes of ``ids``. Raises ``TypeError`` for an element that is not an integer (``bool``
        included: ``True`` is not token 1) and ``KeyError`` for an id outside ``0..vocab_size-1``; both
        name the element's position. Integer types with ``__index__`` (numpy ints) are accepted."""
        ids = [_token_id(v, f"ids[{n}]", self.vocab_size) for n, v in enumerate(ids)]
        if skip_special_tokens:
            skip = self._skip_ids
            ids = [i for i in ids if i not in skip]
        return self._enc.decode_bytes(ids)

    # ---------------------------------------------------------------- vocabulary

    def _vocab(self) -> tuple[list[str], dict[str, int]]:
        if self._id_to_token is None:
            enc_b = BYTE_ENCODER
            toks = [""] * self.vocab_size
            for b, i in self._ranks.items():
                toks[i] = "".join([enc_b[x] for x in b])
            for i, s in self._id_to_special.items():
                toks[i] = s
            t2i = {t: i for i, t in enumerate(toks)}
            self._token_to_id = t2i
            self._id_to_token = toks
        assert self._token_to_id is not None
        return self._id_to_token, self._token_to_id

    def id_to_token(self, token_id: int) -> str:
        """The token string of an id: a special token's name, else the byte-level (GPT-2 byte-to-unicode)
        form of its bytes, as ``convert_ids_to_tokens`` of the official tokenizer."""
        return self._vocab()[0][_token_id(token_id, "token_id", self.vocab_size)]

    def token_to_id(self, token: str | bytes) -> int:
        """Id of a token: ``bytes`` are raw token bytes; a ``str`` is a special token name (reserved
        ones included) or a byte-level token string (``"Ġworld"``, as :meth:`id_to_token` returns).
        Raises ``KeyError`` for an unknown token."""
        if isinstance(token, bytes):
            try:
                return self._ranks[token]
            except KeyError:
                pass
            try:
                return self.special_tokens[token.decode("utf-8")]
            except (KeyError, UnicodeDecodeError):
                raise KeyError(f"{token!r} is not a token") from None
        sid = self.special_tokens.get(token)
        if sid is not None:
            return sid
        try:
            return self._vocab()[1][token]
        except KeyError:
            raise KeyError(f"{token!r} is not a token (ordinary tokens are byte-level strings, e.g. 'Ġworld')") from None

    def id_to_bytes(self, token_id: int) -> bytes:
        """Raw bytes of one token (a special token's name in UTF-8)."""
        return self.decode_bytes([token_id])

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is in the special range (a named or reserved special id)."""
        return token_id in self.special_ids

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        src = self.config_path or "<mapping>"
        return f"KimiTokenizer(model={str(self.model_path)!r}, config={str(src)!r}, vocab_size={self.vocab_size})"

