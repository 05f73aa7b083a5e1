"""Tokenizers named by their files, so that a pickled :class:`~kimi_chat.tokens.rendered.RenderedTokens` need not
carry its tokenizer (2.3 MB of ranks): the tokenizers a render used in this process are registered by their files,
and an unpickled result takes back the live one with the same files, else loads it once from them."""

from __future__ import annotations

import weakref

from typing import Any

from ..caches import PerTokenizer
from ..dialect_records import get_dialect
from ..errors import ReferenceDataError
from .tokenizer import KimiTokenizer

__all__ = ["PickledWithoutTokenizer", "register_live", "tokenizer_ref", "tokenizer_from_ref"]


class PickledWithoutTokenizer:
    """What :class:`~kimi_chat.tokens.rendered.RenderedTokens` pickles: its slots but the tokenizer (named by
    its files, :func:`tokenizer_ref`) and the dialect object (by its name, ``dialect``)."""

    __slots__ = ()
    _tokenizer: KimiTokenizer | None
    _tokenizer_ref: tuple[str, str, int, int | None] | None
    dialect: str

    @property
    def tokenizer(self) -> KimiTokenizer:
        """The tokenizer it was rendered with. A pickled result does not carry it (2.3 MB): unpickled, it is
        the live tokenizer of this process with the same files (one a render used here, else loaded once from
        them); :class:`~kimi_chat.errors.ReferenceDataError` when its files cannot be found."""
        tok = self._tokenizer
        if tok is None:
            tok = self._tokenizer = tokenizer_from_ref(self._tokenizer_ref)
        return tok

    @tokenizer.setter
    def tokenizer(self, value: KimiTokenizer) -> None:
        self._tokenizer = value

    def __getstate__(self) -> dict[str, Any]:
        names = type(self).__slots__  # type: ignore[attr-defined]
        state = {k: getattr(self, k) for k in names if k not in ("_tokenizer", "_dialect")}
        if self._tokenizer is not None:
            state["_tokenizer_ref"] = tokenizer_ref(self._tokenizer)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k in type(self).__slots__:  # type: ignore[attr-defined]
            if k not in state:  # a slot added since the object was pickled: not known
                object.__setattr__(self, k, None)
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_tokenizer", None)
        object.__setattr__(self, "_dialect", get_dialect(self.dialect))


def register_live(tok: KimiTokenizer) -> None:
    """Make ``tok`` the live tokenizer of its files: the newest tokenizer a render used wins (its reference is
    computed once per tokenizer, a weak per-tokenizer cache lookup)."""
    ref = _REFS.get(tok, tokenizer_ref)
    if ref is not None and _LIVE.get(ref) is not tok:
        _LIVE[ref] = tok


_REFS: "PerTokenizer[tuple[str, str, int, int | None] | None]" = PerTokenizer("tokens.live_tokenizers")
_LIVE: "weakref.WeakValueDictionary[tuple[str, str, int, int | None], KimiTokenizer]" = weakref.WeakValueDictionary()
_LOADED: dict[tuple[str, str, int, int | None], KimiTokenizer] = {}


def tokenizer_ref(tok: KimiTokenizer) -> tuple[str, str, int, int | None] | None:
    """What names a tokenizer across processes: its files, special range and eos (``None``: built from a
    mapping, not files)."""
    if tok.model_path is None or tok.config_path is None:
        return None
    return (str(tok.model_path), str(tok.config_path), tok.vocab_size - tok.num_base_tokens, tok.eos_id)


def tokenizer_from_ref(ref: tuple[str, str, int, int | None] | None) -> KimiTokenizer:
    """The live tokenizer of this process named by ``ref`` (one a render used), else one loaded once from its
    files; :class:`~kimi_chat.errors.ReferenceDataError` for ``None`` (a tokenizer built from a mapping)."""
    if ref is None:
        raise ReferenceDataError(
            "this RenderedTokens was unpickled without its tokenizer (built from a config mapping, not files): "
            "set .tokenizer to the KimiTokenizer it was rendered with")
    tok = _LIVE.get(ref) or _LOADED.get(ref)
    if tok is None:
        model, config, num_special, eos = ref
        tok = KimiTokenizer.from_files(model, config, num_special=num_special)
        tok.eos_id = eos
        _LOADED[ref] = tok
    return tok
