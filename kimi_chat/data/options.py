"""What a run of the data pipeline renders with, as one picklable value: :class:`RenderOptions` (dialect,
tokenizer, reasoning policy, length limit, error policy).

It crosses process boundaries (a process pool's workers, ``datasets.map(num_proc=N)``, Ray actors) as a
*recipe* for its tokenizer (:class:`TokenizerSpec`: the files, not the 2.3 MB of BPE ranks), and each process
loads the tokenizer once (:meth:`TokenizerSpec.load`, cached per process). :meth:`RenderOptions.fingerprint`
names everything the output depends on: the kimi_chat version, the dialect, the tokenizer files' SHA-256
and the options, so that equal fingerprints mean equal samples (the ``datasets`` cache key, the Parquet file
metadata, the ``--resume`` check).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tokens.tokenizer import KimiTokenizer
    from .batch import BatchResult

__all__ = ["TokenizerSpec", "RenderOptions", "REASONING_POLICIES", "OVERLONG_POLICIES", "ON_ERROR_POLICIES"]

REASONING_POLICIES = ("as-sampled", "keep", "official")
OVERLONG_POLICIES = ("drop", "truncate")
ON_ERROR_POLICIES = ("record", "raise")

_LOADED: dict[str, "KimiTokenizer"] = {}
"""This process's tokenizers built from a config mapping, by :attr:`TokenizerSpec.key` (one per worker process,
unpickled on first use); tokenizers with files are :mod:`kimi_chat.tokens.live`'s."""
_HASHES: dict[tuple[str, int, int], str] = {}


def _file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


@dataclass(frozen=True)
class TokenizerSpec:
    """How to load a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer` again in another process: from its
    files (``model_path``, ``config_path``, the size of its special range and its eos id) or, for a
    tokenizer built from a config mapping, the pickled tokenizer itself (``pickled``)."""

    model_path: str | None = None
    config_path: str | None = None
    num_special: int = 0
    eos_id: int | None = None
    pickled: bytes | None = field(default=None, repr=False)
    live: Any = field(default=None, repr=False, compare=False)
    """The tokenizer itself in the process that made this spec (not pickled: another process loads its own)."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "live": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @classmethod
    def of(cls, tok: "KimiTokenizer") -> "TokenizerSpec":
        """The spec of a loaded tokenizer."""
        from ..tokens.live import tokenizer_ref

        ref = tokenizer_ref(tok)  # (model file, config file, special range, eos): the fields, in order
        if ref is not None:
            return cls(*ref, live=tok)
        return cls(str(tok.model_path) if tok.model_path else None, None, tok.vocab_size - tok.num_base_tokens,
                   tok.eos_id, pickled=pickle.dumps(tok), live=tok)

    @property
    def key(self) -> str:
        """A key naming this tokenizer in this process's cache."""
        if self.pickled is not None:
            return "pickled:" + hashlib.sha256(self.pickled).hexdigest()
        return json.dumps([self.model_path, self.config_path, self.num_special, self.eos_id])

    def load(self) -> "KimiTokenizer":
        """The tokenizer: the one this spec was made of, in its process; elsewhere loaded once per process."""
        if self.live is not None:
            return self.live
        if self.pickled is None:  # by its files: the live one of this process, else loaded once
            from ..tokens.live import tokenizer_from_ref

            return tokenizer_from_ref((str(self.model_path), str(self.config_path), self.num_special, self.eos_id))
        tok = _LOADED.get(self.key)
        if tok is None:
            tok = _LOADED[self.key] = pickle.loads(self.pickled)
        return tok

    def files_hash(self) -> str:
        """SHA-256 over the tokenizer's files (or its pickled form when it has no config file)."""
        h = hashlib.sha256()
        if self.model_path is not None:
            h.update(_file_sha256(Path(self.model_path)).encode())
        if self.config_path is not None:
            h.update(_file_sha256(Path(self.config_path)).encode())
        if self.pickled is not None:
            # a config mapping: the special tokens and ids are what the files would have said
            tok = self.load()
            h.update(json.dumps(sorted(tok.special_tokens.items())).encode())
        h.update(json.dumps([self.num_special, self.eos_id]).encode())
        return h.hexdigest()


@dataclass(frozen=True)
class RenderOptions:
    """The options of one data run; :meth:`render` applies the batch core
    (:func:`kimi_chat.data.batch.conversations_to_batch`) with them in whatever process it runs."""

    dialect: str
    tokenizer: TokenizerSpec
    reasoning: str = "as-sampled"
    max_length: int | None = None
    overlong: str = "drop"
    on_error: str = "record"

    def __post_init__(self) -> None:
        for name, value, allowed in (("reasoning", self.reasoning, REASONING_POLICIES),
                                     ("overlong", self.overlong, OVERLONG_POLICIES),
                                     ("on_error", self.on_error, ON_ERROR_POLICIES)):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}: choose one of {', '.join(allowed)}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length={self.max_length}: give a positive number of tokens, or None for no limit")

    @classmethod
    def make(cls, dialect: Any, tokenizer: "KimiTokenizer | None" = None, **options: Any) -> "RenderOptions":
        """Options for ``dialect`` (a name or a Dialect; stored as its canonical name) and ``tokenizer``
        (``None``: the dialect's reference tokenizer from ``$KIMI_CHAT_REFERENCE_DIR``)."""
        from ..dialects import get_dialect

        d = get_dialect(dialect)
        if tokenizer is None:
            tokenizer = d.tokenizer()
        return cls(d.name, TokenizerSpec.of(tokenizer), **options)

    def settings(self) -> dict[str, Any]:
        """The options as plain JSON data (what the manifest and the report record)."""
        d = asdict(self)
        tok = d.pop("tokenizer")
        d["tokenizer"] = {"model": tok["model_path"], "config": tok["config_path"]}
        return d

    def fingerprint(self, *extra: Any) -> str:
        """A hex digest of everything the samples depend on: the kimi_chat version, the dialect, the
        tokenizer files' hash, the options, and ``extra`` (e.g. the input's own fingerprint)."""
        from .. import __version__

        doc = {"kimi_chat": __version__, "dialect": self.dialect, "tokenizer": self.tokenizer.files_hash(),
               "reasoning": self.reasoning, "max_length": self.max_length, "overlong": self.overlong,
               "on_error": self.on_error, "extra": [str(e) for e in extra]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]

    def render(self, rows: Sequence[Mapping[str, Any]], first_row: int = 0) -> "BatchResult":
        """:func:`~kimi_chat.data.batch.conversations_to_batch` of ``rows`` (input rows ``first_row`` on)
        with these options and this process's tokenizer."""
        from .batch import conversations_to_batch

        return conversations_to_batch(
            rows, dialect=self.dialect, tokenizer=self.tokenizer.load(), reasoning=self.reasoning,
            max_length=self.max_length, overlong=self.overlong, on_error=self.on_error, first_row=first_row)


def default_workers() -> int:
    """The cores this process may use (``os.sched_getaffinity`` where the OS has it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)
