"""vLLM's tokenizer for ``--tokenizer-mode kimi_chat``: a ``TokenizerLike`` over
:class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`, loaded from the model directory without remote code.

``vllm serve MODEL --tokenizer-mode kimi_chat`` loads ``tiktoken.model`` and ``tokenizer_config.json``
of the model directory (or Hugging Face repo: only those files and ``config.json`` /
``chat_template.jinja`` / ``generation_config.json`` are fetched) into a :class:`KimiTokenizer`; no
``tokenization_kimi.py`` is imported, so no ``--trust-remote-code``. The directory's family
(:func:`directory_family`: its ``config.json`` ``model_type``, or its tokenizer config holding the family's
distinctive tokens, the family's serving hooks ``MODEL_TYPES`` / ``VOCABULARY``; else the default
dialect's) loads it (its record's ``snapshot_tokenizer``: a Kimi-K3 directory gets K3's 256 special ids,
and :data:`~kimi_chat.tokens.tokenizer.K3_CONFIG` without a ``tokenizer_config.json``).

The tokenizer also decides the model's dialect once, at load (:func:`model_dialect`), for the
renderer (:mod:`kimi_chat.servers.vllm.renderer`): ``$KIMI_CHAT_DIALECT`` when set, else the dialect
of a family that serves all its models in one (``SERVED_DIALECT``: Kimi-K3), known by its vocabulary,
else the identification of the directory's chat template (exact text, then behaviour).

What vLLM asks of a tokenizer: ``encode`` / ``__call__`` (prompt text: special-token text is the
special id, as the official ``encode``; the chat renderer never goes through here),
``decode`` / ``convert_ids_to_tokens`` / ``convert_tokens_to_string`` (incremental detokenization;
``skip_special_tokens`` drops only ids the config flags ``special: true``, so the tool-call markers
and ``<think>`` reach the parsers even then), ``get_vocab`` / ``get_added_vocab`` (byte-level token
strings, the Hugging Face convention), the special ids, and ``eos_token_id``: the end of a turn
(``<|im_end|>`` for K2, ``<|end_of_msg|>`` for K3); ``eos_token_ids`` adds ``[EOS]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from ... import markers as M
from ...dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, dialect_for_served_model, get_dialect
from ...errors import KimiChatError, UnknownDialectError
from ...families import Family, family_names, family_of
from ...tokens.tokenizer import BYTE_DECODER, TIKTOKEN_MODEL_FILE, TOKENIZER_CONFIG_FILE, KimiTokenizer

from ..family import DIALECT_ENV, model_names, read_json as _read_json
from ..hooks import serving_of
from .options import MODE, render_ids, template_options

__all__ = ["MODE", "DIALECT_ENV", "register_mode", "KimiChatVllmTokenizer", "ModelDialect", "model_dialect", "load_kimi_tokenizer",
           "directory_family", "model_names"]

# DIALECT_ENV (``KIMI_CHAT_DIALECT``): the environment variable naming the dialect to serve
# (``kimi-k2.6``, ``kimi-k3``...); it overrides the identification, and the parser plugins read the
# same variable (:mod:`kimi_chat.servers.family`, its one definition) with the same meaning.

CHAT_TEMPLATE_FILE = "chat_template.jinja"
_FETCHED = (TIKTOKEN_MODEL_FILE, TOKENIZER_CONFIG_FILE, CHAT_TEMPLATE_FILE, "config.json", "generation_config.json")
_ACCEPTED_KINDS = ("official", "variant", "ours", "equivalent", "adapted")
"""Identification kinds served as the dialect (``modified`` / ``unknown`` templates are refused)."""

LOGGER = logging.getLogger("kimi_chat.integrations.vllm")


class ModelDialect:
    """The dialect a model directory is served with, and why (``reason``: one line for the log)."""

    __slots__ = ("dialect", "reason")

    def __init__(self, dialect: Dialect, reason: str) -> None:
        self.dialect = dialect
        self.reason = reason

    def __repr__(self) -> str:
        return f"ModelDialect({self.dialect.name!r}, {self.reason!r})"


# ------------------------------------------------------------------------------------------ loading


def _snapshot(path_or_repo_id: str | Path, revision: str | None, download_dir: str | None) -> Path:
    """The local directory: ``path_or_repo_id`` itself, else a Hugging Face snapshot of the tokenizer
    files only (no weights)."""
    p = Path(path_or_repo_id)
    if p.is_dir():
        return p
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(str(path_or_repo_id), revision=revision, cache_dir=download_dir,
                                  allow_patterns=list(_FETCHED)))


def directory_family(model_config: Mapping[str, Any], tokenizer_config: Mapping[str, Any]) -> Family:
    """The family of a model directory from its ``config.json`` (``model_config``) and
    ``tokenizer_config.json``: the first registered family whose serving hooks' ``MODEL_TYPES`` prefix
    the ``model_type``, or whose ``VOCABULARY`` the config's ``added_tokens_decoder`` holds at its ids;
    else the default dialect's family."""
    model_type = str(model_config.get("model_type", ""))
    added = tokenizer_config.get("added_tokens_decoder") or {}
    for name in family_names():
        record = family_of(name)
        hooks = serving_of(record)
        if any(model_type.startswith(t) for t in hooks.MODEL_TYPES):
            return record
        if hooks.VOCABULARY and all(isinstance(added.get(str(m.id)), Mapping) and added[str(m.id)].get("content")
                                    == m.text for m in hooks.VOCABULARY):
            return record
    return family_of(get_dialect(DEFAULT_DIALECT))


def _vocabulary_family(tokenizer: KimiTokenizer) -> Family | None:
    """The family whose distinctive special tokens (serving hooks ``VOCABULARY``) ``tokenizer`` has at
    their ids (``None``: no family's)."""
    for name in family_names():
        record = family_of(name)
        vocabulary = serving_of(record).VOCABULARY
        if vocabulary and all(tokenizer.special_tokens.get(m.text) == m.id for m in vocabulary):
            return record
    return None


def load_kimi_tokenizer(directory: str | Path) -> KimiTokenizer:
    """The :class:`KimiTokenizer` of a model directory (its family's, see the module docstring)."""
    d = Path(directory)
    model = d / TIKTOKEN_MODEL_FILE
    if not model.is_file():
        raise KimiChatError(
            f"{d}: no {TIKTOKEN_MODEL_FILE}; --tokenizer-mode kimi_chat serves Kimi models (K2.x, K3), "
            "whose directories hold tiktoken.model and tokenizer_config.json"
        )
    cfg_path = d / TOKENIZER_CONFIG_FILE
    family = directory_family(_read_json(d / "config.json"), _read_json(cfg_path))
    return family.tokens.snapshot_tokenizer(d, None)


def chat_template_of(directory: str | Path) -> str | None:
    """The directory's chat template: ``chat_template.jinja``, else ``tokenizer_config.json``'s
    ``chat_template`` (the ``default`` one of a list), else None."""
    d = Path(directory)
    f = d / CHAT_TEMPLATE_FILE
    if f.is_file():
        return f.read_text(encoding="utf-8")
    t = _read_json(d / TOKENIZER_CONFIG_FILE).get("chat_template")
    if isinstance(t, list):
        t = next((e.get("template") for e in t if isinstance(e, Mapping) and e.get("name") == "default"), None)
    return t if isinstance(t, str) else None


def model_dialect(directory: str | Path, tokenizer: KimiTokenizer) -> ModelDialect:
    """The dialect to serve the model in ``directory`` with: ``$KIMI_CHAT_DIALECT`` (checked against the
    tokenizer's family), else the ``SERVED_DIALECT`` of the family whose vocabulary the tokenizer has
    (``kimi-k3`` for a K3 vocabulary), else the identification of the chat
    template (exact text first, then behaviour: :func:`kimi_chat.checks.verification.identify`), except where
    the model's name (:func:`model_names`) names a dialect the template cannot tell
    (:func:`kimi_chat.dialects.dialect_for_served_model`: ``moonshotai/Kimi-K2.7-Code``). Raises
    :class:`~kimi_chat.errors.KimiChatError` (a clear startup error) for a template kimi_chat does not
    know, a directory without a template, or an override of the wrong family."""
    from ...tokens.vocabulary import check_vocabulary

    vocab_family = _vocabulary_family(tokenizer)
    served = serving_of(vocab_family).SERVED_DIALECT if vocab_family is not None else None
    forced = os.environ.get(DIALECT_ENV, "").strip()
    if forced:
        try:
            d = get_dialect(forced)
        except UnknownDialectError as e:
            raise KimiChatError(f"${DIALECT_ENV}: {e}") from None
        try:
            check_vocabulary(tokenizer, d)
        except ValueError as e:
            raise KimiChatError(f"${DIALECT_ENV}={forced}: {e}") from None
        return ModelDialect(d, f"${DIALECT_ENV}={forced}")
    if vocab_family is not None and served is not None:
        spelled = "/".join(m.text for m in serving_of(vocab_family).VOCABULARY)
        return ModelDialect(get_dialect(served), f"{vocab_family.title} vocabulary ({spelled} special tokens)")
    text = chat_template_of(directory)
    hint = f"set {DIALECT_ENV} to a dialect name (kimi-chat dialects) to serve it anyway"
    names = model_names(directory)
    from ...checks.verification.identification import identify

    ident = identify(text) if text is not None else None
    accepted = ident.dialect if ident is not None and ident.kind in _ACCEPTED_KINDS else None
    served_by_name = dialect_for_served_model(names, accepted)
    if served_by_name is not None and served_by_name != accepted:  # a dialect the template cannot tell
        check_vocabulary(tokenizer, get_dialect(served_by_name))
        return ModelDialect(get_dialect(served_by_name), f"the model's name ({', '.join(names)}) says so"
                            + (f"; its chat template is {ident.label}" if ident is not None else ""))
    if text is None or ident is None:
        raise KimiChatError(f"{directory}: no chat template ({CHAT_TEMPLATE_FILE} or tokenizer_config.json "
                            f"chat_template) to identify the Kimi dialect from; {hint}")
    if ident.dialect is None or ident.kind not in _ACCEPTED_KINDS:
        raise KimiChatError(
            f"{directory}: the chat template is not one kimi_chat renders exactly ({ident.label}: "
            f"{ident.description}); {hint}"
        )
    d = get_dialect(ident.dialect)
    check_vocabulary(tokenizer, d)
    return ModelDialect(d, f"chat template identified as {ident.label} ({ident.match} match)")


# ------------------------------------------------------------------------------------------ vLLM side


class KimiChatVllmTokenizer:
    """vLLM ``TokenizerLike`` over :class:`KimiTokenizer` (see the module docstring). ``kimi`` is the
    :class:`KimiTokenizer`, ``model_dialect`` the :class:`ModelDialect` decided at load,
    ``name_or_path`` the model directory."""

    def __init__(self, kimi: KimiTokenizer, path: str | Path, *, dialect: ModelDialect | None = None,
                 truncation_side: str = "left") -> None:
        self.kimi = kimi
        self.name_or_path = str(path)
        self.model_dialect = dialect if dialect is not None else model_dialect(path, kimi)
        self._truncation_side = truncation_side
        self.tokenizer = kimi.encoding
        """The ``tiktoken.Encoding`` (xgrammar recognises a tiktoken tokenizer by it)."""
        self._eos = serving_of(self.model_dialect.dialect).END_OF_TURN.id
        self._special_flagged = sorted(kimi._skip_ids)

    @classmethod
    def from_pretrained(
        cls,
        path_or_repo_id: str | Path,
        *args: Any,
        trust_remote_code: bool = False,
        revision: str | None = None,
        download_dir: str | None = None,
        **kwargs: Any,
    ) -> "KimiChatVllmTokenizer":
        """Load from a model directory (or Hugging Face repo id); ``trust_remote_code`` is not needed
        and not used."""
        d = _snapshot(path_or_repo_id, revision, download_dir)
        return cls(load_kimi_tokenizer(d), d, truncation_side=kwargs.get("truncation_side") or "left")

    # ---------------------------------------------------------------- properties

    @property
    def dialect(self) -> Dialect:
        """The served dialect."""
        return self.model_dialect.dialect

    @property
    def all_special_tokens(self) -> list[str]:
        """The names of the special tokens ``skip_special_tokens`` drops (config ``special: true``)."""
        return [self.kimi._id_to_special[i] for i in self._special_flagged]

    @property
    def all_special_ids(self) -> list[int]:
        """Their ids."""
        return list(self._special_flagged)

    @property
    def bos_token_id(self) -> int:
        """``[BOS]``."""
        return self.kimi.bos_id if self.kimi.bos_id is not None else M.BOS.id

    @property
    def eos_token_id(self) -> int:
        """The end of a turn: ``<|im_end|>`` (K2) or ``<|end_of_msg|>`` (K3)."""
        return self._eos

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Every id that ends generation: the end of a turn and ``[EOS]``."""
        return frozenset({self._eos, M.EOS.id})

    @property
    def pad_token_id(self) -> int:
        """``[PAD]``."""
        return self.kimi.pad_id if self.kimi.pad_id is not None else M.PAD.id

    @property
    def is_fast(self) -> bool:
        """True: :meth:`convert_tokens_to_string` handles the special tokens itself (so vLLM's
        detokenizer does not split the text around them)."""
        return True

    @property
    def vocab_size(self) -> int:
        """BPE ranks plus the special range."""
        return self.kimi.vocab_size

    @property
    def max_token_id(self) -> int:
        """``vocab_size - 1``."""
        return self.kimi.vocab_size - 1

    @cached_property
    def max_chars_per_token(self) -> int:
        """The longest token string (vLLM bounds prompt text by it)."""
        return max(len(t) for t in self.kimi._vocab()[0])

    @property
    def truncation_side(self) -> str:
        """Where ``truncation`` cuts (vLLM passes ``left`` for generation)."""
        return self._truncation_side

    def num_special_tokens_to_add(self) -> int:
        """0: Kimi tokenizers add no BOS/EOS to encoded text."""
        return 0  # Kimi tokenizers add no BOS/EOS

    def __len__(self) -> int:
        return self.kimi.vocab_size

    def __hash__(self) -> int:
        return hash(id(self))

    def __repr__(self) -> str:
        return f"KimiChatVllmTokenizer({self.name_or_path!r}, dialect={self.dialect.name!r})"

    # ---------------------------------------------------------------- encoding

    def encode(self, text: str, truncation: bool | None = None, max_length: int | None = None,
               add_special_tokens: bool = True) -> list[int]:
        """Ids of prompt text, special-token text as the special id (the official ``encode``).

        Not safe for a prompt holding untrusted text: ``encode(render(messages))`` turns a marker a user
        typed (``<|im_end|>``...) into the control id. The safe paths give the ids of
        :func:`kimi_chat.render_tokens` (typed markers kept as text): the kimi_chat renderer vLLM's chat
        endpoints use, and :meth:`apply_chat_template` with ``tokenize=True``; :func:`kimi_chat.lint`
        reports typed markers (``typed-marker``)."""
        ids = self.kimi.encode(text)
        if truncation and max_length is not None and len(ids) > max_length:
            ids = ids[-max_length:] if self._truncation_side == "left" else ids[:max_length]
        return ids

    def __call__(self, text: str | list[str], text_pair: str | None = None, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None, **kwargs: Any) -> Any:
        """``{"input_ids", "attention_mask"}`` of a text or a list of texts (:meth:`encode`)."""
        from transformers import BatchEncoding

        if text_pair is not None:
            raise ValueError("text_pair is not supported by the kimi_chat tokenizer")
        if kwargs.get("return_offsets_mapping"):
            raise ValueError("return_offsets_mapping is not supported by the kimi_chat tokenizer")
        if isinstance(text, str):
            ids: Any = self.encode(text, truncation, max_length)
            mask: Any = [1] * len(ids)
        else:
            ids = [self.encode(t, truncation, max_length) for t in text]
            mask = [[1] * len(i) for i in ids]
        return BatchEncoding({"input_ids": ids, "attention_mask": mask})

    def apply_chat_template(self, messages: list[Any], tools: list[dict[str, Any]] | None = None,
                            **kwargs: Any) -> str | list[int]:
        """The prompt of ``messages`` in the served dialect: ids (``tokenize=True``, the default, from
        :func:`kimi_chat.render_tokens`) or text. vLLM's chat path uses the renderer instead."""
        options, agp, cont = template_options(self.dialect, dict(kwargs, tools=None))
        if kwargs.get("tokenize", True):
            return render_ids(self.kimi, self.dialect, list(messages), tools, options, agp, cont)
        from ...prompt import render

        return render(list(messages), tools=tools, dialect=self.dialect, add_generation_prompt=agp,
                      continue_final_message=cont, **options)

    # ---------------------------------------------------------------- vocabulary

    def get_vocab(self) -> dict[str, int]:
        """Byte-level token string (``Ġworld``) or special name -> id."""
        return dict(self.kimi._vocab()[1])

    def get_added_vocab(self) -> dict[str, int]:
        """Every special-range name (named and reserved) -> id."""
        return dict(self.kimi.special_tokens)

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int]:
        """Ids of token strings (unknown ones: ``[UNK]``)."""
        t2i = self.kimi._vocab()[1]
        if isinstance(tokens, str):
            return t2i.get(tokens, self.kimi.unk_id if self.kimi.unk_id is not None else M.UNK.id)
        return [self.convert_tokens_to_ids(t) for t in tokens]  # type: ignore[misc]

    def convert_ids_to_tokens(self, ids: Sequence[int] | int, skip_special_tokens: bool = False) -> list[str] | str:
        """Token strings of ids (out-of-range ids: ``""``); one id gives one string (as transformers)."""
        toks = self.kimi._vocab()[0]
        n = len(toks)
        if isinstance(ids, int):
            return toks[ids] if 0 <= ids < n else ""
        skip = self.kimi._skip_ids if skip_special_tokens else ()
        return [toks[i] if 0 <= i < n else "" for i in ids if i not in skip]

    def id_to_bytes(self, token_id: int) -> bytes:
        """Raw bytes of one token (a special token's name in UTF-8): how kimi_chat's parsers decode ids."""
        return self.kimi.id_to_bytes(token_id)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Text of token strings (byte-level strings and special-token names), invalid UTF-8 replaced."""
        specials = self.kimi.special_tokens
        dec = BYTE_DECODER
        out = bytearray()
        for t in tokens:
            if t in specials:
                out += t.encode("utf-8")
            else:
                out += bytes(dec[c] for c in t)
        return out.decode("utf-8", errors="replace")

    def decode(self, ids: Sequence[int] | int, skip_special_tokens: bool = False) -> str:
        """Text of ids (invalid UTF-8 replaced)."""
        if isinstance(ids, int):
            ids = [ids]
        return self.kimi.decode(ids, skip_special_tokens=skip_special_tokens)


def register_mode(mode: str = MODE) -> None:
    """Register ``mode`` (default ``kimi_chat``) in vLLM's tokenizer registry and ``RENDERER_REGISTRY``
    (by module and class name: nothing of the renderer is imported until vLLM loads it). Idempotent;
    called by :func:`kimi_chat.servers.vllm.register`, the ``vllm.general_plugins`` entry point."""
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import TokenizerRegistry

    tok = (__name__, KimiChatVllmTokenizer.__name__)
    ren = (__name__.rpartition(".")[0] + ".renderer", "KimiChatRenderer")
    if TokenizerRegistry.tokenizers.get(mode) != tok:
        TokenizerRegistry.register(mode, *tok)
    if RENDERER_REGISTRY.renderers.get(mode) != ren:
        RENDERER_REGISTRY.register(mode, *ren)
