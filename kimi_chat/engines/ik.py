"""The ``ik_llama.cpp`` backend of :class:`~kimi_chat.engines.native.NativeModel`, over
``ik-llama-cpp-python`` (optional extra: ``bash .ci/install-native-ik.sh .venv`` in the checkout).

``ik-llama-cpp-python`` 0.1.5 ships a prebuilt ``libllama`` of ik_llama.cpp and a small ctypes
binding; its high-level ``IkLlama`` class is not usable here (it forces a Gemma chat format, samples
without grammars, and loads DeepSeek-2 models in a way that crashes). This module talks to the C API
directly and presents it under the names of llama-cpp-python's low-level API that
:class:`NativeModel` uses (:class:`IkLib` for the module, :class:`IkEngine` for the ``Llama``
object), so the two backends share every line of ``NativeModel``.

What differs from llama.cpp, and how it is handled:

- **MLA.** ``build_deepseek2`` segfaults unless ``llama_model_params.mla`` equals the context's
  ``mla_attn`` (the model default is 0, the context default 3): :func:`load_ik` sets it.
- **Grammars.** The C API has GBNF sampling (``llama_sampler_init_grammar``,
  ``llama_grammar_sample``, ``llama_grammar_accept_token``); :meth:`IkEngine.generate` applies it.
- **Flash attention** is off: ik_llama.cpp's CPU flash-attention kernels assert on CPUs without
  AVX-VNNI (the binding's own warning says so).
- **Both engines in one process** work: llama-cpp-python loads its ``libllama`` with
  ``RTLD_GLOBAL``, but the two libraries have different sonames and ik's is loaded ``RTLD_LOCAL``;
  loading either first, both give the same tokens and samples as in a process of their own
  (``tests/engines/test_native_ik.py`` checks it).
- **Noise on stdout.** ik_llama.cpp's loader ``printf``s a line per MLA tensor it computes; unless
  ``verbose``, :func:`load_ik` sends file descriptor 1 to ``/dev/null`` while it loads (so
  ``--json`` output stays clean).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import KimiChatError, NativeUnavailable

__all__ = ["IK_INSTALL_HINT", "ik_available", "load_ik", "IkLib", "IkEngine", "IkGrammar"]

IK_INSTALL_HINT = ("bash .ci/install-native-ik.sh .venv (run in the kimi_chat checkout; "
                   "or pip install -e '.[native-ik]' there)")
LLAMA_DEFAULT_SEED = 0xFFFFFFFF
PENALTY_LAST_N = 64
"""How many of the last generated ids the penalties count (llama-cpp-python's ``last_n_tokens_size``)."""


def ik_available() -> bool:
    """Whether ``ik-llama-cpp-python`` is installed (without loading its library)."""
    import importlib.util

    return importlib.util.find_spec("ik_llama_cpp") is not None


def _ctypes_api() -> Any:
    try:
        from ik_llama_cpp import _ctypes_api as C
    except ImportError as e:
        raise NativeUnavailable(
            f"the ik_llama.cpp backend needs ik-llama-cpp-python, which is not installed ({e}); "
            f"install it with: {IK_INSTALL_HINT}") from e
    except OSError as e:  # the shared library itself failed to load
        raise NativeUnavailable(f"ik-llama-cpp-python is installed but its library does not load: {e}") from e
    return C


class _ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class IkGrammar:
    """A GBNF grammar for :meth:`IkEngine.generate` (``LlamaGrammar``'s place): checked when made,
    instantiated against the vocabulary per generation."""

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def from_string(cls, text: str, verbose: bool = False) -> "IkGrammar":
        """Like ``llama_cpp.LlamaGrammar.from_string``; the grammar is parsed at generation time
        (ik_llama.cpp parses against a vocabulary), where a bad grammar raises
        :class:`~kimi_chat.errors.KimiChatError`."""
        return cls(text)


class IkLib:
    """ik_llama.cpp's C API under llama-cpp-python's names (the subset :class:`NativeModel` uses).
    Functions that take a ``llama_model *`` in ik_llama.cpp are given the model here and take the
    vocabulary argument as llama-cpp-python's do."""

    LLAMA_DEFAULT_SEED = LLAMA_DEFAULT_SEED
    llama_chat_message = _ChatMessage
    LlamaGrammar = IkGrammar

    def __init__(self, C: Any) -> None:
        self.C = C
        lib = C._lib
        p, i32, u32, b, cp, sz = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32, ctypes.c_bool,
                                  ctypes.c_char_p, ctypes.c_size_t)
        cand = ctypes.POINTER(C.llama_token_data_array)
        sigs: dict[str, tuple[list[Any], Any]] = {
            "llama_vocab_n_tokens": ([p], i32),
            "llama_vocab_is_eog": ([p, i32], b),
            "llama_vocab_get_text": ([p, i32], cp),
            "llama_token_get_attr": ([p, i32], ctypes.c_int),
            "llama_token_to_piece_vocab": ([p, i32, ctypes.c_char_p, i32, i32, b], i32),
            "llama_vocab_tokenize": ([p, ctypes.c_char_p, i32, ctypes.POINTER(i32), i32, b, b], i32),
            "llama_vocab_bos": ([p], i32),
            "llama_vocab_eos": ([p], i32),
            "llama_chat_apply_template": ([cp, ctypes.POINTER(_ChatMessage), sz, b, ctypes.c_char_p, i32], i32),
            "llama_model_meta_count": ([p], i32),
            "llama_model_meta_key_by_index": ([p, i32, ctypes.c_char_p, sz], i32),
            "llama_model_meta_val_str_by_index": ([p, i32, ctypes.c_char_p, sz], i32),
            "llama_n_ctx": ([p], u32),
            "llama_n_batch": ([p], u32),
            "llama_set_rng_seed": ([p, u32], None),
            "llama_sampler_init_grammar": ([p, cp, cp], p),
            "llama_grammar_free": ([p], None),
            "llama_grammar_sample": ([p, p, cand], None),
            "llama_grammar_accept_token": ([p, p, i32], None),
            "llama_sample_min_p": ([p, cand, ctypes.c_float, sz], None),
            "llama_sample_top_k": ([p, cand, i32, sz], None),
            "llama_sample_top_p": ([p, cand, ctypes.c_float, sz], None),
            "llama_sample_temp": ([p, cand, ctypes.c_float], None),
            "llama_sample_token": ([p, cand], i32),
            "llama_sample_token_greedy": ([p, cand], i32),
            "llama_sample_repetition_penalties": ([p, cand, ctypes.POINTER(i32), sz, ctypes.c_float, ctypes.c_float,
                                                   ctypes.c_float], None),
            "llama_get_logits_ith": ([p, i32], ctypes.POINTER(ctypes.c_float)),
            "llama_log_set": ([p, p], None),
        }
        self._f: dict[str, Any] = {}
        for name, (args, res) in sigs.items():
            f = getattr(lib, name)
            f.argtypes, f.restype = args, res
            self._f[name] = f
        self.model: Any = None  # set by load_ik: the functions that need the model use it

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_f"][name]
        except KeyError:
            raise AttributeError(name) from None

    def llama_vocab_get_attr(self, vocab: Any, token: int) -> int:
        """``llama_token_get_attr`` (ik_llama.cpp takes the model)."""
        return int(self._f["llama_token_get_attr"](self.model, token))

    def llama_token_to_piece(self, vocab: Any, token: int, buf: Any, size: int, lstrip: int, special: bool) -> int:
        """``llama_token_to_piece_vocab`` (llama-cpp-python's ``llama_token_to_piece`` takes the vocab)."""
        return int(self._f["llama_token_to_piece_vocab"](vocab, token, buf, size, lstrip, special))


class _Params:
    def __init__(self, n_ctx: int) -> None:
        self.n_ctx = n_ctx


class _ModelHandle:
    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab


class IkEngine:
    """A loaded ik_llama.cpp model and context, shaped like ``llama_cpp.Llama`` for
    :class:`NativeModel` (``metadata``, ``tokenize``, ``n_ctx``, ``set_seed``, ``generate``,
    ``close``, ``_model.vocab``)."""

    def __init__(self, lib: IkLib, model: Any, ctx: Any, n_ctx: int) -> None:
        self._lib = lib
        self._model_p = model
        self._ctx = ctx
        self._model = _ModelHandle(lib.C.llama_model_get_vocab(model))
        self.context_params = _Params(n_ctx)
        self.metadata: dict[str, str] = self._read_metadata()
        self._seed = LLAMA_DEFAULT_SEED
        import numpy as np

        n_vocab = int(lib.llama_vocab_n_tokens(self._model.vocab))
        self._dtype = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
        if self._dtype.itemsize != ctypes.sizeof(lib.C.llama_token_data):
            raise KimiChatError("ik-llama-cpp-python: unexpected llama_token_data layout")
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._n_vocab = n_vocab

    def _read_metadata(self) -> dict[str, str]:
        lib, out = self._lib, {}
        for i in range(lib.llama_model_meta_count(self._model_p)):
            parts = []
            for f in (lib.llama_model_meta_key_by_index, lib.llama_model_meta_val_str_by_index):
                n = f(self._model_p, i, None, 0)
                buf = ctypes.create_string_buffer(n + 1)
                f(self._model_p, i, buf, n + 1)
                parts.append(buf.raw[:n].decode("utf-8", errors="replace"))
            out[parts[0]] = parts[1]
        return out

    def n_ctx(self) -> int:
        return int(self._lib.llama_n_ctx(self._ctx))

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        f = self._lib.llama_vocab_tokenize
        n = f(self._model.vocab, text, len(text), None, 0, add_bos, special)
        size = abs(n)
        buf = (ctypes.c_int32 * max(size, 1))()
        n = f(self._model.vocab, text, len(text), buf, size, add_bos, special)
        return list(buf[:n])

    def set_seed(self, seed: int) -> None:
        self._seed = seed & 0xFFFFFFFF

    def _decode(self, ids: Sequence[int], pos: int) -> None:
        from ik_llama_cpp._internals import make_batch_range

        C = self._lib.C
        n_batch = int(self._lib.llama_n_batch(self._ctx))
        for i in range(0, len(ids), n_batch):
            chunk = list(ids[i:i + n_batch])
            batch = make_batch_range(chunk, pos_start=pos + i, logits_last=i + n_batch >= len(ids))
            try:
                ret = C.llama_decode(self._ctx, batch)
            finally:
                C.llama_batch_free(batch)
            if ret != 0:
                raise KimiChatError(f"ik_llama.cpp: llama_decode failed at position {pos + i} ({ret})")

    def generate(self, tokens: Sequence[int], *, temp: float = 0.8, top_k: int = 40, top_p: float = 0.95,
                 min_p: float = 0.05, repeat_penalty: float = 1.0, frequency_penalty: float = 0.0,
                 presence_penalty: float = 0.0, reset: bool = True, grammar: IkGrammar | None = None,
                 logits_processor: Any = None) -> Iterator[int]:
        """Sample after ``tokens`` forever (the caller stops): ``logits_processor`` (a list of
        processors, called as llama-cpp-python calls them: the ids so far and the logits), the penalties,
        grammar, then top-k, top-p, min-p and temperature, as llama-cpp-python orders them. The penalties
        (``repeat_penalty`` 1, ``frequency_penalty`` and ``presence_penalty`` 0: none) are ik_llama.cpp's
        ``llama_sample_repetition_penalties`` over the last :data:`PENALTY_LAST_N` generated ids, as
        llama-cpp-python's penalties sampler counts them (the ids it accepted: the generated ones)."""
        import numpy as np

        lib, C = self._lib, self._lib.C
        g = None
        if grammar is not None:
            g = lib.llama_sampler_init_grammar(self._model.vocab, grammar.text.encode("utf-8"), b"root")
            if not g:
                raise KimiChatError("ik_llama.cpp rejected the grammar (its parse error is in the log)")
        try:
            C.llama_kv_cache_clear(self._ctx)
            lib.llama_set_rng_seed(self._ctx, self._seed)
            self._decode(tokens, 0)
            pos = len(tokens)
            arr = np.zeros(self._n_vocab, dtype=self._dtype)
            seen = list(tokens)
            generated: list[int] = []
            penalised = repeat_penalty != 1.0 or frequency_penalty != 0.0 or presence_penalty != 0.0
            while True:
                logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(self._ctx, -1), shape=(self._n_vocab,))
                arr["id"] = self._ids
                arr["logit"] = logits
                for processor in logits_processor or ():
                    processor(seen, arr["logit"])  # in place, as llama-cpp-python's custom sampler
                arr["p"] = 0.0
                cands = C.llama_token_data_array(
                    data=arr.ctypes.data_as(ctypes.POINTER(C.llama_token_data)), size=self._n_vocab,
                    selected=-1, sorted=False)
                cp = ctypes.pointer(cands)
                if penalised and generated:
                    window = generated[-PENALTY_LAST_N:]
                    last = (ctypes.c_int32 * len(window))(*window)
                    lib.llama_sample_repetition_penalties(self._ctx, cp, last, len(window), repeat_penalty,
                                                          frequency_penalty, presence_penalty)
                if g:
                    lib.llama_grammar_sample(g, self._ctx, cp)
                if temp <= 0:
                    tid = lib.llama_sample_token_greedy(self._ctx, cp)
                else:
                    lib.llama_sample_top_k(self._ctx, cp, top_k, 1)
                    lib.llama_sample_top_p(self._ctx, cp, top_p, 1)
                    lib.llama_sample_min_p(self._ctx, cp, min_p, 1)
                    lib.llama_sample_temp(self._ctx, cp, temp)
                    tid = lib.llama_sample_token(self._ctx, cp)
                if g:
                    lib.llama_grammar_accept_token(g, self._ctx, tid)
                seen.append(int(tid))
                generated.append(int(tid))
                yield int(tid)
                self._decode([tid], pos)
                pos += 1
        finally:
            if g:
                lib.llama_grammar_free(g)

    def close(self) -> None:
        C = self._lib.C
        if self._ctx:
            C.llama_free(self._ctx)
            self._ctx = None
        if self._model_p:
            C.llama_free_model(self._model_p)
            self._model_p = None


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def _quiet_log(level: int, text: bytes, user_data: Any) -> None:
    return None


@contextlib.contextmanager
def _stdout_silenced(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        _libc_flush()
        os.dup2(saved, 1)
        os.close(saved)


def _libc_flush() -> None:
    """Flush C stdio's buffers (what the library printed goes where fd 1 pointed then)."""
    ctypes.CDLL(None).fflush(None)


def load_ik(path: Path, *, n_ctx: int = 4096, n_threads: int | None = None, verbose: bool = False,
            **kwargs: Any) -> tuple[IkEngine, IkLib]:
    """Load ``path`` into ik_llama.cpp: the engine object and the library for :class:`NativeModel`.
    Extra keywords are ``llama_context_params`` fields (``mla_attn=``, ``n_batch=``, ...)."""
    C = _ctypes_api()
    lib = IkLib(C)
    if not verbose:
        lib.llama_log_set(ctypes.cast(_quiet_log, ctypes.c_void_p), None)
    C.llama_backend_init()
    cparams = C.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = min(n_ctx, 2048)
    cparams.flash_attn = False
    if n_threads:
        cparams.n_threads = cparams.n_threads_batch = n_threads
    for k, v in kwargs.items():
        if not hasattr(cparams, k):
            raise TypeError(f"load(backend='ik_llama.cpp'): unknown option {k!r}")
        setattr(cparams, k, v)
    mparams = C.llama_model_default_params()
    mparams.mla = cparams.mla_attn  # else build_deepseek2 segfaults (model default 0, context default 3)
    with _stdout_silenced(not verbose):
        model = C.llama_model_load_from_file(str(path).encode("utf-8"), mparams)
    if not model:
        raise KimiChatError(f"{path}: ik_llama.cpp could not load the model")
    ctx = C.llama_init_from_model(model, cparams)
    if not ctx:
        C.llama_free_model(model)
        raise KimiChatError(f"{path}: ik_llama.cpp could not create a context")
    lib.model = model
    return IkEngine(lib, model, ctx, n_ctx), lib
