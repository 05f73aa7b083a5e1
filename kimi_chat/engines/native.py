"""A thin binding to a native llama.cpp runtime: load a Kimi GGUF, generate, parse.

Optional extra: ``bash .ci/install-native.sh .venv`` in the checkout (llama-cpp-python + gguf). Importing this module
always works; using :class:`NativeModel` without the extra raises :class:`NativeUnavailable` saying
what to install.

:meth:`NativeModel.chat` is the whole path of a request::

    messages --render_tokens--> ids --engine.generate (llguidance token masks of kimi_chat.grammar.constraint)--> ids
             --detokenize (special tokens kept)--> StreamParser --> OpenAI message / chunks

**Send ids, not text.** The prompt is tokenized by kimi_chat's :class:`~kimi_chat.tokens.tokenizer.
KimiTokenizer` (the official tiktoken rules) and the engine receives ids, so the engine's own
``kimi-k2`` pre-tokenizer, which disagrees with tiktoken on some text (combining marks), cannot change
a prompt. Marker-looking text inside messages stays text (``render_tokens(special_tokens="text")``).
:meth:`NativeModel.compare_tokenization` reports where the engine's tokenization differs.

**Two engines**: ``NativeModel.load(path, backend="llama.cpp")`` (the default, extra ``native``) or
``backend="ik_llama.cpp"`` (extra ``native-ik``, :mod:`kimi_chat.engines.ik`); :func:`conformance`
reports what an engine gets wrong on its own (:mod:`kimi_chat.engines.conformance`).

The tokenizer is built from the GGUF's own vocabulary by default (its BPE tokens are the tiktoken
ranks, its CONTROL tokens the special ids), so no reference files are needed to run a model.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import markers as M
from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, dialect_for_served_model, get_dialect
from ..errors import KimiChatError, NativeUnavailable
from ..output import Delta
from ..tokens.rendered import render_tokens
from ..tokens.tokenizer import BYTE_DECODER, KimiTokenizer
from . import chat as _chat
from .chat import ChatResult
from .conformance import Check, ConformanceReport, check_model

__all__ = [
    "TokenLogprob",
    "ConstraintFailed",
    "NativeUnavailable",
    "NativeModel",
    "ChatResult",
    "TokenizationDiff",
    "INSTALL_HINT",
    "BACKENDS",
    "native_available",
    "conformance",
    "ConformanceReport",
    "Check",
]

INSTALL_HINT = ("bash .ci/install-native.sh .venv (run in the kimi_chat checkout: builds llama-cpp-python once, "
                "about 4 minutes on 2 cores, then cached; or pip install -e '.[native]' there)")

BACKENDS: tuple[str, ...] = ("llama.cpp", "ik_llama.cpp")
"""The engines :meth:`NativeModel.load` can run a GGUF in."""


def native_available() -> bool:
    """Whether llama-cpp-python can be imported."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as e:
        raise NativeUnavailable(
            f"the native runtime needs llama-cpp-python, which is not installed ({e}); install it with: "
            f"{INSTALL_HINT}"
        ) from e
    return llama_cpp


@dataclass(frozen=True)
class TokenizationDiff:
    """One text on which the engine's tokenization differs from kimi_chat's (official rules)."""

    text: str
    ours: list[int]
    engine: list[int]

    @property
    def first_difference(self) -> int:
        """Index of the first differing id."""
        for i, (a, b) in enumerate(zip(self.ours, self.engine)):
            if a != b:
                return i
        return min(len(self.ours), len(self.engine))



class TokenLogprob(int):
    """A generated token id (an ``int``) with its log probability under the distribution it was sampled
    from (after the constraint's mask and the logit bias, before temperature) and the ``top`` most likely
    ``(id, logprob)`` pairs: what :meth:`NativeModel.generate` yields when asked for ``logprobs``."""

    logprob: float
    top: tuple[tuple[int, float], ...]

    def __new__(cls, token_id: int, logprob: float, top: tuple[tuple[int, float], ...] = ()) -> "TokenLogprob":
        self = super().__new__(cls, token_id)
        self.logprob = logprob
        self.top = top
        return self


class ConstraintFailed(KimiChatError):
    """The output constraint (a logits processor) raised while generating: llama-cpp-python calls the
    processors through a C callback that would print the error and go on unconstrained, so
    :meth:`NativeModel.generate` catches it and raises this after the token instead."""


class _Guarded:
    """A logits processor that keeps the first error of ``inner`` (:attr:`error`) instead of raising it
    through llama.cpp's C callback; after an error it leaves the scores as they are."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.error: BaseException | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.error is not None:
            return scores
        try:
            return self.inner(input_ids, scores)
        except Exception as e:  # noqa: BLE001 - raised by generate() after this token
            self.error = e
            return scores


class _LogprobRecorder:
    """A logits processor (the last of the chain) keeping the log-softmax of the scores it sees."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.logprobs: Any = None

    def __call__(self, _input_ids: Any, scores: Any) -> Any:
        import numpy as np

        finite = scores[np.isfinite(scores)]
        peak = float(finite.max()) if finite.size else 0.0
        shifted = scores - peak
        self.logprobs = shifted - float(np.log(np.exp(shifted).sum()))
        return scores

    def token(self, tid: int) -> TokenLogprob:
        import numpy as np

        lp = self.logprobs
        if lp is None:
            return TokenLogprob(tid, 0.0)
        top: tuple[tuple[int, float], ...] = ()
        if self.top:
            best = np.argpartition(-lp, self.top)[:self.top]
            top = tuple(sorted(((int(i), float(lp[i])) for i in best), key=lambda p: -p[1]))
        return TokenLogprob(tid, float(lp[tid]), top)


# llama_token_attr bits (llama.h)
_ATTR_UNUSED = 1 << 1
_ATTR_NORMAL = 1 << 2
_ATTR_CONTROL = 1 << 3
_ATTR_USER_DEFINED = 1 << 4


class NativeModel:
    """A GGUF model in llama.cpp (through llama-cpp-python) or ik_llama.cpp (through
    ik-llama-cpp-python, :mod:`kimi_chat.engines.ik`). Build it with :meth:`load`."""

    def __init__(self, llama: Any, path: Path, *, dialect: str | Dialect | None = None,
                 tokenizer: KimiTokenizer | None = None, lib: Any = None, backend: str = "llama.cpp") -> None:
        self._lib = lib if lib is not None else _llama_cpp()
        self._llama = llama
        self.path = path
        self.backend = backend
        """``llama.cpp`` or ``ik_llama.cpp`` (:data:`BACKENDS`)."""
        self._vocab = llama._model.vocab
        if dialect is not None:
            self.dialect = get_dialect(dialect)
            self.dialect_source = "given"
        else:
            self.dialect, self.dialect_source = self._detect_dialect()
        self.n_vocab: int = int(self._lib.llama_vocab_n_tokens(self._vocab))
        self._tokenizer = tokenizer
        self._markers: dict[str, frozenset[str]] = {}

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(
        cls,
        gguf_path: str | os.PathLike[str],
        *,
        dialect: str | Dialect | None = None,
        tokenizer: KimiTokenizer | None = None,
        backend: str = "llama.cpp",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        verbose: bool = False,
        progress: Callable[[str], None] | None = None,
        **llama_kwargs: Any,
    ) -> "NativeModel":
        """Load ``gguf_path`` into llama.cpp. ``dialect`` is the chat format the model speaks (used by
        :meth:`chat` when none is given); ``tokenizer`` defaults to one built from the GGUF's own
        vocabulary (:meth:`tokenizer`). ``progress`` receives one-line status messages.

        ``backend``: ``"llama.cpp"`` (llama-cpp-python, extra ``native``) or ``"ik_llama.cpp"``
        (ik-llama-cpp-python, extra ``native-ik``; see :mod:`kimi_chat.engines.ik`: one backend per
        process). Extra keywords go to ``llama_cpp.Llama`` or, for ik_llama.cpp, to
        ``llama_context_params``.

        ``dialect=None``: the dialect whose template the GGUF embeds (exact text match by
        :func:`kimi_chat.checks.verification.identify`: an official, known-variant or kimi_chat template), else
        the default dialect; ``dialect_source`` says which."""
        path = Path(gguf_path)
        if not path.is_file():  # before the import: a missing file is said to be missing, extra or not
            raise FileNotFoundError(f"{path}: no such GGUF file" if not path.exists() else f"{path}: not a file")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, not {backend!r}")
        if backend == "ik_llama.cpp":
            from .ik import _ctypes_api, load_ik

            _ctypes_api()  # a missing extra is said before the load message
        else:
            lib = _llama_cpp()
        if progress:
            progress(f"loading {path} ({path.stat().st_size / 1e6:.1f} MB) into {backend} ...")
        t0 = time.perf_counter()
        if backend == "ik_llama.cpp":
            llama, lib = load_ik(path, n_ctx=n_ctx, n_threads=n_threads, verbose=verbose, **llama_kwargs)
        else:
            try:
                llama = lib.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=verbose,
                                  **llama_kwargs)
            except ValueError as e:  # llama-cpp-python's "Failed to load model from file"
                raise KimiChatError(f"{path}: llama.cpp could not load the model: {e}") from e
        model = cls(llama, path, dialect=dialect, tokenizer=tokenizer, lib=lib, backend=backend)
        if progress:
            arch = model.metadata.get("general.architecture", "?")
            progress(f"loaded {path.name} in {time.perf_counter() - t0:.1f}s ({arch}, {model.n_vocab} tokens)")
        return model

    def close(self) -> None:
        """Free the model and context."""
        close = getattr(self._llama, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "NativeModel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ metadata

    def _detect_dialect(self) -> tuple[Dialect, str]:
        tmpl = self.embedded_chat_template
        if tmpl:
            try:
                from ..checks.verification import identify

                ident = identify(tmpl, behavioural=False)
            except Exception as e:  # identification is a convenience: never fail a load on it
                return get_dialect(DEFAULT_DIALECT), f"default; the embedded template could not be identified: {e}"
            exact = ident.dialect if ident.match == "exact" else None
            names = [str(self.metadata.get("general.name") or ""), Path(self.path).stem]
            served = dialect_for_served_model(names, exact)  # the name decides what the template cannot tell
            if served is not None and served != exact:
                return get_dialect(served), f"model name {names[0] or names[1]!r} (embedded template: {ident.label})"
            if exact is not None:
                return get_dialect(exact), f"embedded template: {ident.label}"
            return get_dialect(DEFAULT_DIALECT), "default; embedded template not identified"
        if self._k3_vocabulary():
            return get_dialect("kimi-k3"), f"vocabulary: {M.K3_OPEN.text} at {M.K3_OPEN.id} (Kimi-K3, no template)"
        return get_dialect(DEFAULT_DIALECT), "default; the GGUF embeds no template"

    def _k3_vocabulary(self) -> bool:
        """The engine's vocabulary is Kimi-K3's: ``<|open|>`` at its K3 id (where K2 has ``<|im_end|>``)."""
        n = int(self._lib.llama_vocab_n_tokens(self._vocab))
        return n > M.K3_OPEN.id and self.token_text(M.K3_OPEN.id) == M.K3_OPEN.text

    @property
    def metadata(self) -> dict[str, str]:
        """The GGUF's scalar metadata, as llama.cpp reports it (strings)."""
        return dict(self._llama.metadata)

    @property
    def embedded_chat_template(self) -> str | None:
        """``tokenizer.chat_template`` of the GGUF (``None`` if it has none)."""
        return self._llama.metadata.get("tokenizer.chat_template")

    @property
    def n_ctx(self) -> int:
        # llama.cpp pads the context (to 256), but llama-cpp-python sizes its buffers by the
        # requested n_ctx: the smaller of the two is what fits
        engine = int(self._llama.n_ctx())
        params = getattr(self._llama, "context_params", None)
        requested = int(getattr(params, "n_ctx", 0) or 0)
        return min(engine, requested) if requested else engine

    def is_eog(self, token_id: int) -> bool:
        """Whether the engine ends generation on ``token_id``."""
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token_id))

    def eog_ids(self) -> list[int]:
        """Every end-of-generation id of the engine's vocabulary."""
        return [i for i in self._special_range() if self.is_eog(i)]

    def _special_range(self) -> range:
        return range(min(M.NUM_BASE_TOKENS, self.n_vocab), self.n_vocab)

    def token_text(self, token_id: int) -> str:
        """The vocabulary entry of ``token_id`` as stored in the GGUF (byte-level form for BPE tokens)."""
        return self._lib.llama_vocab_get_text(self._vocab, token_id).decode("utf-8", errors="replace")

    def token_attr(self, token_id: int) -> int:
        return int(self._lib.llama_vocab_get_attr(self._vocab, token_id))

    # ------------------------------------------------------------------ tokens

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """The engine's own tokenization of ``text`` (no BOS). ``special``: special-token text becomes
        the special id (else it is ordinary text)."""
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def piece(self, token_id: int, special: bool = True) -> bytes:
        """The engine's bytes for one token (``special``: control tokens are spelled out, else empty)."""
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_token_to_piece(self._vocab, token_id, buf, size, 0, special)
            if n >= 0:
                return buf.raw[:n]
            size = -n  # the buffer was too small: n is minus the size needed

    def detokenize(self, ids: Iterable[int], special: bool = True) -> str:
        """The engine's text of ``ids`` (UTF-8, invalid sequences replaced). Built from
        :meth:`piece`, which sizes its buffer (llama-cpp-python's ``Llama.detokenize`` uses a 32-byte
        buffer per token and returns wrong bytes for longer tokens)."""
        return b"".join(self.piece(i, special) for i in ids).decode("utf-8", errors="replace")

    def tokenizer(self) -> KimiTokenizer:
        """kimi_chat's tokenizer for this model: the official rules over the GGUF's vocabulary (BPE
        tokens = tiktoken ranks, CONTROL tokens = special ids named as in the GGUF), unless one was
        given to :meth:`load`."""
        if self._tokenizer is None:
            self._tokenizer = self._build_tokenizer()
        return self._tokenizer

    def _build_tokenizer(self) -> KimiTokenizer:
        ranks: dict[bytes, int] = {}
        added: dict[str, Any] = {}
        num_base = None
        for i in range(self.n_vocab):
            attr = self.token_attr(i)
            text = self.token_text(i)
            if attr & _ATTR_CONTROL:
                if num_base is None:
                    num_base = i
                if text != M.reserved_token_name(i):
                    known = M.BY_ID.get(i)
                    special = known.special if known is not None and known.text == text else True
                    added[str(i)] = {"content": text, "special": special}
            elif attr & (_ATTR_NORMAL | _ATTR_USER_DEFINED) and num_base is None:
                try:
                    ranks[bytes(BYTE_DECODER[c] for c in text)] = i
                except KeyError:
                    raise KimiChatError(f"{self.path}: token {i} ({text!r}) is not a byte-level BPE token; "
                                        "is this a Kimi GGUF?") from None
        if len(ranks) != (num_base or self.n_vocab):
            raise KimiChatError(f"{self.path}: the vocabulary is not a Kimi (tiktoken) vocabulary")
        config: dict[str, Any] = {"added_tokens_decoder": added}
        # eos: the engine's end of generation (the model's eos: <|im_end|> for K2.6, <|end_of_msg|> for K3)
        for key, getter in (("bos_token", "llama_vocab_bos"), ("eos_token", "llama_vocab_eos")):
            tid = getattr(self._lib, getter)(self._vocab)
            if tid is not None and 0 <= tid < self.n_vocab:
                config[key] = self.token_text(tid)
        # the official tokenizers number 256 + 2 special ids (K2 line; two beyond the model's 163840) or,
        # for Kimi-K3, 256: exactly the engine's vocabulary
        num_special = M.K3_NUM_RESERVED_SPECIAL if self._k3_vocabulary() else M.NUM_RESERVED_SPECIAL + 2
        return KimiTokenizer(ranks, config, num_special=num_special)

    def marker_tokens(self, dialect: str | Dialect | None = None) -> frozenset[str]:
        """Spellings of the output format's markers (of ``dialect``'s family, default the model's) that
        the engine tokenizes to their single id."""
        from ..grammar.vocabulary import format_markers

        family = (self.dialect if dialect is None else get_dialect(dialect)).family
        if family not in self._markers:
            self._markers[family] = frozenset(m.text for m in format_markers(self.dialect if dialect is None else dialect)
                                              if self.tokenize(m.text, special=True) == [m.id])
        return self._markers[family]

    def missing_markers(self, dialect: str | Dialect | None = None) -> list[str]:
        """The output-format markers ``dialect`` (default the model's) needs as single tokens
        (:func:`kimi_chat.grammar.vocabulary.default_token_markers`) that this vocabulary does not have as
        its special id: a K2.6 GGUF converted with the July-2025 vocabulary lacks ``<think>`` and
        ``</think>``. Such a model cannot be constrained (nor parsed by id) as that dialect."""
        from ..grammar.vocabulary import default_token_markers, format_markers

        d = self.dialect if dialect is None else get_dialect(dialect)
        have = self.marker_tokens(d)
        needed = default_token_markers(d)
        return [m.text for m in format_markers(d) if m.text in needed and m.text not in have]

    def compare_tokenization(self, texts: Iterable[str], *, special: bool = False) -> list[TokenizationDiff]:
        """Texts whose engine tokenization differs from kimi_chat's (``special``: with special-token
        parsing on both sides)."""
        tok = self.tokenizer()
        out = []
        for t in texts:
            ours = tok.encode(t, allow_special=special)
            engine = self.tokenize(t, special=special)
            if ours != engine:
                out.append(TokenizationDiff(t, ours, engine))
        return out

    # ------------------------------------------------------------------ generation

    def generate(
        self,
        ids: Sequence[int],
        *,
        max_tokens: int,
        grammar: str | None = None,
        seed: int | None = None,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        mask: Any = None,
        repeat_penalty: float = 1.0,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        logit_bias: Mapping[int, float] | None = None,
        logprobs: int | None = None,
    ) -> Iterator[int]:
        """Generate from the prompt ``ids``: yields ids, at most ``max_tokens``; stops after an
        end-of-generation id (yielded last). ``grammar``: GBNF text (root rule ``root``) constraining
        the output; ``mask``: a logits processor applied before sampling (a
        :class:`kimi_chat.engines.constrain.TokenMask`: llguidance's token masks); ``seed``: sampling
        seed (``None``: random); ``temperature`` 0 is greedy; ``repeat_penalty``, ``presence_penalty``,
        ``frequency_penalty``: llama.cpp's penalties (1, 0, 0: none); ``logit_bias``: token id -> the
        bias added to its logit before sampling (after the mask: a masked token stays masked);
        ``logprobs``: yield :class:`TokenLogprob` ids with their log probability and that many most likely
        alternatives (0: the chosen token's alone).

        The context keeps the previous generation's tokens: the longest common prefix of this prompt
        with them is not evaluated again (llama.cpp's KV cache; :attr:`reused_tokens` says how many)."""
        if max_tokens < 1:
            return
        ids = list(ids)
        if not ids:
            raise ValueError("generate() needs a non-empty prompt")
        if len(ids) + max_tokens > self.n_ctx:
            raise KimiChatError(f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceed the context "
                                f"({self.n_ctx}); load with a larger n_ctx")
        g = None
        if grammar is not None:
            try:
                g = self._lib.LlamaGrammar.from_string(grammar, verbose=False)
            except ValueError as e:
                raise KimiChatError(f"llama.cpp rejected the grammar: {e}") from e
        self._llama.set_seed(seed if seed is not None else self._lib.LLAMA_DEFAULT_SEED)
        recorder = None if logprobs is None else _LogprobRecorder(logprobs)
        processors = [_Guarded(p) for p in (mask, _bias_processor(logit_bias, self.n_vocab), recorder)
                      if p is not None]
        extra = {"logits_processor": processors} if processors else {}
        self.reused_tokens = self._common_prefix(ids)
        gen = self._llama.generate(ids, temp=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                                   repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                                   frequency_penalty=frequency_penalty, reset=True, grammar=g, **extra)
        try:
            for n, tid in enumerate(gen, 1):
                failed = next((p.error for p in processors if p.error is not None), None)
                if failed is not None:  # (the token was sampled without the constraint: not yielded)
                    raise ConstraintFailed(f"the output constraint failed: {failed}") from failed
                yield int(tid) if recorder is None else recorder.token(int(tid))
                if self.is_eog(tid) or n >= max_tokens:
                    break
        finally:
            gen.close()

    reused_tokens: int = 0
    """How many prompt tokens the last :meth:`generate` took from the KV cache (the longest common prefix
    with the tokens the context held; llama-cpp-python's ``generate`` keeps them)."""

    def _common_prefix(self, ids: Sequence[int]) -> int:
        """The prompt tokens llama-cpp-python's ``generate`` will keep in the KV cache: the longest common
        prefix with the tokens the context holds, one less when that is the whole prompt (the last id is
        evaluated again for its logits)."""
        held = getattr(self._llama, "_input_ids", None)
        n_held = int(getattr(self._llama, "n_tokens", 0) or 0)
        if held is None or n_held == 0:
            return 0
        n = 0
        for a, b in zip(held[:n_held].tolist(), ids):
            if int(a) != int(b):
                break
            n += 1
        return n - 1 if n == len(ids) else n

    # ------------------------------------------------------------------ chat

    def prompt_ids(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                   dialect: str | Dialect | None = None, **options: Any) -> list[int]:
        """The prompt of a request as ids, tokenized by kimi_chat (official rules; text typed in
        messages is never a special token)."""
        d = self.dialect if dialect is None else get_dialect(dialect)
        tok = self.tokenizer()
        return render_tokens(messages, tokenizer=tok, tools=tools, dialect=d, special_tokens="text", **options).ids

    def request_grammar(self, *, tools: Sequence[Any] | None = None, tool_choice: Any = None,
                        parallel_tool_calls: bool = True, dialect: str | Dialect | None = None,
                        **options: Any) -> str:
        """The GBNF grammar of a request (markers the engine has as single tokens are written as token
        references): the export for engines that take GBNF (:meth:`chat` applies llguidance's token
        masks instead, :mod:`kimi_chat.engines.constrain`)."""
        from ..grammar import tool_call_grammar

        d = self.dialect if dialect is None else get_dialect(dialect)
        return tool_call_grammar(tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                                 dialect=d, token_markers=self.marker_tokens(d), **options)

    def chat_stream(
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] | None = None,
        dialect: str | Dialect | None = None,
        tool_choice: Any = None,
        parallel_tool_calls: bool = True,
        grammar: bool | str | None = None,
        max_tokens: int = 256,
        temperature: float = 0.8,
        seed: int | None = None,
        reasoning: bool = True,
        **options: Any,
    ) -> Iterator[Delta | ChatResult]:
        """:meth:`chat`, streamed: yields :class:`~kimi_chat.output.Delta` objects as the parser
        decides them, then the :class:`ChatResult`."""
        return _chat.chat_stream(self, messages, tools=tools, dialect=dialect, tool_choice=tool_choice,
                           parallel_tool_calls=parallel_tool_calls, grammar=grammar, max_tokens=max_tokens,
                           temperature=temperature, seed=seed, reasoning=reasoning, **options)

    def chat(self, messages: Sequence[Any], **kwargs: Any) -> ChatResult:
        """Answer a chat request: render with the dialect, tokenize with kimi_chat, generate with
        llama.cpp (constrained by the token masks of :func:`kimi_chat.grammar.constraint` when ``tools``
        or a ``response_format`` are given, :mod:`kimi_chat.engines.constrain`; or by ``grammar=`` GBNF
        text; ``grammar=False`` turns it off), parse with :class:`~kimi_chat.output.StreamParser`; a
        constraint that is not exact has the calls checked against their schemas afterwards.

        Keywords: ``tools``, ``dialect`` (default: the model's), ``tool_choice``,
        ``parallel_tool_calls``, ``grammar``, ``max_tokens`` (256), ``temperature`` (0.8), ``seed``,
        ``reasoning`` (allow a ``<think>`` block), and render options (``thinking=False``...)."""
        result = None
        for item in self.chat_stream(messages, **kwargs):
            if isinstance(item, ChatResult):
                result = item
        if result is None:  # chat_stream always ends with its ChatResult: a broken stream, said so
            raise KimiChatError(f"{self.path}: the chat stream ended without a result")
        return result

    # ------------------------------------------------------------------ templates

    def apply_builtin_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                               template: str | None = None) -> str:
        """llama.cpp's own C++ chat formatting (``llama_chat_apply_template``) of plain
        ``{"role", "content": str}`` messages, with the format it detects from ``template`` (default:
        the embedded template). This is what llama.cpp does when it cannot run a Jinja template."""
        return _chat.apply_builtin_template(self, messages, add_generation_prompt=add_generation_prompt, template=template)

    def render_embedded(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                        add_generation_prompt: bool = True, **kwargs: Any) -> str:
        """The embedded Jinja template rendered by llama-cpp-python's own chat formatter (the one
        ``create_chat_completion`` uses)."""
        return _chat.render_embedded(self, messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs)



def _bias_processor(bias: Mapping[int, float] | None, n_vocab: int) -> Any:
    """A llama-cpp-python logits processor adding ``bias`` (OpenAI ``logit_bias``) to the logits; ``None``
    without one. An id outside the vocabulary is an error naming it."""
    if not bias:
        return None
    for tid in bias:
        if not 0 <= tid < n_vocab:
            raise KimiChatError(f"logit_bias.{tid}: not a token id of this model (0..{n_vocab - 1})")
    ids = list(bias)
    values = [bias[i] for i in ids]

    def apply(_input_ids: Any, scores: Any) -> Any:
        scores[ids] += values
        return scores

    return apply


def conformance(
    gguf: str | os.PathLike[str] | NativeModel,
    *,
    backend: str = "llama.cpp",
    server: str | None = None,
    dialect: str | Dialect | None = None,
    n_ctx: int = 2048,
    timeout: float = 30.0,
) -> ConformanceReport:
    """The conformance report of ``gguf`` (a path, or a loaded :class:`NativeModel`, whose backend is then
    used) in ``backend`` (:func:`kimi_chat.engines.conformance.check_model` of the loaded model). ``server``:
    the base URL of a running llama-server serving the same model (adds the ``/apply-template`` checks);
    ``dialect``: the dialect to check against (default: the one
    :func:`kimi_chat.checks.verification.identify` finds in the embedded template).

    Raises :class:`~kimi_chat.errors.KimiChatError` when the model cannot be loaded or the server
    cannot be asked (a failed check is a result, not an error)."""
    if isinstance(gguf, NativeModel):
        return check_model(gguf, server=server, dialect=dialect, timeout=timeout)
    model = NativeModel.load(gguf, backend=backend, n_ctx=n_ctx, dialect=dialect)
    try:
        return check_model(model, server=server, dialect=dialect, timeout=timeout)
    finally:
        model.close()
