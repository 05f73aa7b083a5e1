"""The official Kimi-K3 rendering: K3's own ``TikTokenTokenizer`` and ``encoding_k3`` from the reference data.

K3 ships no chat template: its tokenizer renders chats in Python (``encoding_k3.build_chat_segments``)
and encodes them segment by segment. This module instantiates that official tokenizer the way
``../shared/reference/PROVENANCE.md`` (section "Kimi-K3") describes, with the reference directory's
``Kimi-K3/`` files imported from where they are (never copied into the project):

    TikTokenTokenizer(tokenizer/tiktoken.model,
                      added_tokens_decoder={id: AddedToken(name, special=True) for the K3 ids},
                      unk_token="[UNK]", pad_token="[PAD]")

:func:`official_k3_render` is its ``apply_chat_template(..., tokenize=False)``, :func:`official_k3_ids`
the same with ``tokenize=True``, :func:`official_k3_segments` the encoder's ``build_chat_segments``
(what the benchmark times). The tokenizer is built once per reference directory and cached.

Needs transformers, tokenizers and tiktoken (``pip install -e '.[verify]'`` in the checkout); their absence
raises :class:`~kimi_chat.reference.oracle.OracleUnavailable`, absent reference data
:class:`~kimi_chat.errors.ReferenceDataError`.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ... import markers as M
from ...errors import ReferenceDataError
from ...reference.oracle import OracleUnavailable
from ...reference import reference_dir

__all__ = [
    "K3_ORACLE_DIR",
    "official_k3_tokenizer",
    "official_k3_encoding",
    "official_k3_segments",
    "official_k3_render",
    "official_k3_ids",
    "official_render",
]

K3_ORACLE_DIR = "Kimi-K3"
"""Directory of the reference data holding ``encoding_k3.py`` and ``tokenization_kimi.py``."""
_TIKTOKEN = "tokenizer/tiktoken.model"
# private module names, so that importing the oracle can never shadow a user's own modules
_ENCODING_MODULE = "_kimi_chat_oracle_k3.encoding_k3"
_TOKENIZATION_MODULE = "_kimi_chat_oracle_k3.tokenization_kimi"

_lock = threading.Lock()
_MODULES: dict[Path, tuple[ModuleType, ModuleType]] = {}
_TOKENIZERS: dict[Path, Any] = {}


def _root(ref: str | os.PathLike[str] | None) -> Path:
    root = Path(ref) if ref is not None else reference_dir()
    if root is None:
        raise ReferenceDataError(
            "reference data not found: set $KIMI_CHAT_REFERENCE_DIR to the reference directory"
        )
    for rel in (f"{K3_ORACLE_DIR}/encoding_k3.py", f"{K3_ORACLE_DIR}/tokenization_kimi.py", _TIKTOKEN):
        if not (root / rel).is_file():
            raise ReferenceDataError(f"{root / rel}: file not found (the Kimi-K3 oracle needs it)")
    return root.resolve()


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a regular .py file always has one
        raise ReferenceDataError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _modules(root: Path) -> tuple[ModuleType, ModuleType]:
    """``(encoding_k3, tokenization_kimi)`` of the reference directory, imported once."""
    cached = _MODULES.get(root)
    if cached is not None:
        return cached
    with _lock:
        cached = _MODULES.get(root)
        if cached is not None:
            return cached
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        pkg = _ENCODING_MODULE.rpartition(".")[0]
        if pkg not in sys.modules:
            sys.modules[pkg] = ModuleType(pkg)
        encoding = _load(_ENCODING_MODULE, root / K3_ORACLE_DIR / "encoding_k3.py")
        # tokenization_kimi does `from encoding_k3 import ...` when imported as a plain module
        saved = sys.modules.get("encoding_k3")
        sys.modules["encoding_k3"] = encoding
        try:
            tokenization = _load(_TOKENIZATION_MODULE, root / K3_ORACLE_DIR / "tokenization_kimi.py")
        except ImportError as e:
            raise OracleUnavailable(
                f"the official Kimi-K3 tokenizer needs transformers, tokenizers and tiktoken ({e}): "
                "pip install -e '.[verify]' (run in the kimi_chat checkout)"
            ) from e
        finally:
            if saved is None:
                sys.modules.pop("encoding_k3", None)
            else:
                sys.modules["encoding_k3"] = saved
        _MODULES[root] = (encoding, tokenization)
        return encoding, tokenization


def official_k3_encoding(ref: str | os.PathLike[str] | None = None) -> ModuleType:
    """The reference ``encoding_k3`` module (imported from the reference directory)."""
    return _modules(_root(ref))[0]


def official_k3_tokenizer(ref: str | os.PathLike[str] | None = None) -> Any:
    """The official K3 ``TikTokenTokenizer``, built per PROVENANCE.md's recipe (cached per directory)."""
    root = _root(ref)
    tok = _TOKENIZERS.get(root)
    if tok is not None:
        return tok
    _, tokenization = _modules(root)
    try:
        from tokenizers import AddedToken
    except ImportError as e:  # pragma: no cover - transformers depends on tokenizers
        raise OracleUnavailable("the official Kimi-K3 tokenizer needs tokenizers: "
                                "pip install -e '.[verify]' (run in the kimi_chat checkout)") from e
    with _lock:
        tok = _TOKENIZERS.get(root)
        if tok is None:
            tok = tokenization.TikTokenTokenizer(
                str(root / _TIKTOKEN),
                added_tokens_decoder={m.id: AddedToken(m.text, special=True) for m in M.K3_MARKERS},
                unk_token=M.UNK.text,
                pad_token=M.PAD.text,
            )
            _TOKENIZERS[root] = tok
    return tok


def official_k3_segments(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, *, ref: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> list[Any]:
    """The official ``build_chat_segments(messages, tools=tools, **kwargs)`` (``EncodeSegment`` list).

    Unlike ``apply_chat_template``, this does not default ``thinking_effort`` to ``"max"``."""
    return official_k3_encoding(ref).build_chat_segments(messages, tools=tools, **kwargs)


def official_k3_render(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, *, ref: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> str:
    """The official K3 prompt text: ``apply_chat_template(messages, tools=tools, tokenize=False, **kwargs)``.

    ``kwargs`` are the tokenizer's: ``add_generation_prompt``, ``thinking``, ``thinking_effort``,
    ``tool_choice``, ``response_format``, ``response_schema``, ``image_prompts``. Errors of the official
    code (``ValueError``, ``AssertionError``, ``KeyError``...) propagate as raised."""
    return official_k3_tokenizer(ref).apply_chat_template(messages, tools=tools, tokenize=False, **kwargs)


def official_render(messages: Sequence[Any], tools: Sequence[Any] | None, dialect: Any, add_generation_prompt: bool,
                    **options: Any) -> str:
    """The family record's ``official_render``: :func:`official_k3_render` of the reference data (one K3
    dialect, so ``dialect`` picks nothing)."""
    return official_k3_render(messages, tools, add_generation_prompt=add_generation_prompt, **options)


def official_k3_ids(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, *, ref: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> list[int]:
    """The official K3 prompt token ids: ``apply_chat_template(..., tokenize=True, **kwargs)``."""
    return list(official_k3_tokenizer(ref).apply_chat_template(messages, tools=tools, tokenize=True, **kwargs))
