"""The engines ``kimi-chat serve`` generates with, behind one small protocol (:class:`Engine`).

* :class:`NativeEngine`: a GGUF in this process (:class:`kimi_chat.engines.native.NativeModel`, llama.cpp or
  ik_llama.cpp);
* :class:`UpstreamEngine`: a running ``llama-server``: the prompt goes to its ``/completion`` endpoint as
  token ids, the generated ids come back (``return_tokens``) and are parsed here, by id, so a marker the
  model spells with ordinary tokens stays text. The constraint goes as its GBNF export
  (:attr:`kimi_chat.grammar.Constraint.gbnf`: tool calls and a ``response_format`` reply; this
  llama-server build has no llguidance); a request whose forced call or ``response_format`` has no GBNF
  export (a schema beyond its rules' limits) is refused (:meth:`UpstreamEngine.check_constraint`) rather
  than generated unconstrained. A cancelled generation closes its connection at once (:class:`_HangUp`),
  even while a read waits on an upstream that sends nothing.

Both take the prompt as ids (rendered and tokenized by kimi_chat), a constraint (a
:class:`~kimi_chat.grammar.Constraint`, GBNF text, or ``None``), ``max_tokens``, :class:`Sampling` and a ``cancel`` event checked
between tokens; they yield generated ids and stop after an end-of-generation id (yielded last).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ...dialect_records import DialectRecord as Dialect
from ...errors import KimiChatError, RequestError
from ...tokens.tokenizer import KimiTokenizer

__all__ = ["Sampling", "Engine", "EngineError", "ConstraintFailure", "NativeEngine", "UpstreamEngine",
           "constraint_gbnf", "check_vocabulary", "STARTUP_TIMEOUT"]

STARTUP_TIMEOUT = 5.0
"""Seconds :meth:`UpstreamEngine.connect` waits for the llama-server's ``/props`` (a server that does not
answer by then fails the start-up)."""


class EngineError(KimiChatError):
    """The engine failed while generating (an upstream server that died or answered an error). The
    message is for the server's log (it may name the upstream's URL and quote its answer); the client
    gets :attr:`public` (``None``: a generic message)."""

    public: str | None = None


class ConstraintFailure(EngineError):
    """The output constraint failed while generating (llguidance refused the model's token, or a
    vocabulary without a marker the constraint needs): the request fails, the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.public = message


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one generation (``temperature`` 0 is greedy; ``seed`` ``None``: random), as
    llama.cpp's sampler chain takes them: ``top_k`` 0 and ``min_p`` 0 are off, ``repetition_penalty`` 1 is
    none, the OpenAI ``presence_penalty`` / ``frequency_penalty`` are llama.cpp's, ``logit_bias`` maps a
    token id to the bias added to its logit."""

    temperature: float = 0.6
    top_p: float = 1.0
    seed: int | None = None
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    logprobs: int | None = None
    """``None``: no log probabilities; else yield :class:`~kimi_chat.engines.native.TokenLogprob` ids with
    that many alternatives (an engine that can: :attr:`Engine.supports_logprobs`)."""


def _token_logprob(tid: int, probs: Sequence[Any], k: int, top: int) -> Any:
    """``tid`` as a :class:`~kimi_chat.engines.native.TokenLogprob` from llama-server's
    ``completion_probabilities[k]`` (``{"id", "logprob", "top_logprobs": [{"id", "logprob"}...]}``)."""
    from ...engines.native import TokenLogprob

    entry = probs[k] if k < len(probs) and isinstance(probs[k], dict) else {}
    if entry.get("id", tid) != tid:
        entry = {}
    alternatives = tuple((int(a["id"]), float(a["logprob"])) for a in entry.get("top_logprobs") or ())[:top]
    return TokenLogprob(tid, float(entry.get("logprob", 0.0)), alternatives)


def check_vocabulary(model: Any) -> None:
    """Refuse a GGUF whose vocabulary lacks markers its dialect's output format needs as single tokens
    (:meth:`kimi_chat.engines.native.NativeModel.missing_markers`): every request's constraint would fail
    on them. The error names the markers and what to do."""
    missing = model.missing_markers(model.dialect) if hasattr(model, "missing_markers") else []
    if missing:
        raise KimiChatError(
            f"{model.path}: the vocabulary has no single token for {', '.join(missing)}, which the "
            f"{model.dialect.name} output format needs (a GGUF converted with an older tokenizer config, such as "
            "the July-2025 one without <think> / </think>?); convert the model again with the tokenizer_config.json "
            f"of its {model.dialect.name} release, or serve it as a dialect its vocabulary has the markers of "
            "(--dialect)")


def constraint_gbnf(constraint: Any) -> str | None:
    """The GBNF text of ``constraint``: ``None``, GBNF text itself, or a
    :class:`~kimi_chat.grammar.Constraint` (its GBNF export; ``None`` when it has none)."""
    if constraint is None or isinstance(constraint, str):
        return constraint
    return constraint.gbnf or None


@runtime_checkable
class Engine(Protocol):
    """What the server needs of an engine."""

    model: str
    """The model id the server lists (``/v1/models``) and answers with."""
    dialect: Dialect
    """The chat format the engine's model speaks."""
    n_ctx: int
    """The context size: prompt + completion must fit."""
    slots: int
    """How many generations may run at once (the embedded engine: 1; an upstream llama-server: its
    ``-np`` slots). The server runs that many worker threads; an engine without the attribute: 1."""
    supports_logprobs: bool
    """Whether :meth:`generate` yields :class:`~kimi_chat.engines.native.TokenLogprob` ids when
    ``sampling.logprobs`` is set (an engine without the attribute: no; ``logprobs`` is then a 400)."""

    def tokenizer(self) -> KimiTokenizer:
        """kimi_chat's tokenizer for the model (prompts are tokenized by it; the parser decodes ids with it)."""
        ...

    def token_markers(self) -> frozenset[str]:
        """Marker spellings that are single tokens of the model (GBNF writes them as token references)."""
        ...

    def is_eog(self, token_id: int) -> bool:
        """Whether the engine ends generation on ``token_id``."""
        ...

    def generate(self, ids: Sequence[int], *, constraint: Any, max_tokens: int, sampling: Sampling,
                 cancel: threading.Event) -> Iterator[int]:
        """Generate from ``ids``: at most ``max_tokens`` ids, stopping after an end-of-generation id or
        when ``cancel`` is set."""
        ...

    def check_constraint(self, constraint: Any, request: Any) -> None:
        """Raise :class:`~kimi_chat.errors.RequestError` (a 400 naming the field) when this engine cannot
        enforce what ``request`` (a :class:`~kimi_chat.servers.contract.ChatRequest`) must be constrained to."""
        ...

    def close(self) -> None:
        """Free the engine."""
        ...


class NativeEngine:
    """A :class:`~kimi_chat.engines.native.NativeModel` in this process (one generation at a time: the server
    runs every generation on one worker thread)."""

    supports_logprobs = True
    slots = 1

    def __init__(self, model: Any, *, name: str | None = None) -> None:
        self.native = model
        self.model = name or Path(model.path).name
        self.dialect = model.dialect
        self.n_ctx = int(model.n_ctx)

    @classmethod
    def load(cls, path: str | Path, *, dialect: str | Dialect | None = None, backend: str = "llama.cpp",
             n_ctx: int = 4096, name: str | None = None, **kwargs: Any) -> "NativeEngine":
        """Load the GGUF ``path`` (:meth:`kimi_chat.engines.native.NativeModel.load`)."""
        from ...engines.native import NativeModel

        model = NativeModel.load(path, dialect=dialect, backend=backend, n_ctx=n_ctx, **kwargs)
        try:
            check_vocabulary(model)
        except KimiChatError:
            model.close()
            raise
        return cls(model, name=name)

    def tokenizer(self) -> KimiTokenizer:
        return self.native.tokenizer()  # type: ignore[no-any-return]

    def token_markers(self) -> frozenset[str]:
        return self.native.marker_tokens(self.dialect)  # type: ignore[no-any-return]

    def is_eog(self, token_id: int) -> bool:
        return self.native.is_eog(token_id)  # type: ignore[no-any-return]

    def generate(self, ids: Sequence[int], *, constraint: Any, max_tokens: int, sampling: Sampling,
                 cancel: threading.Event) -> Iterator[int]:
        """A :class:`~kimi_chat.grammar.Constraint` is applied as llguidance token masks
        (:mod:`kimi_chat.engines.constrain`), GBNF text by the engine's grammar sampler."""
        extra: dict[str, Any] = {}
        if constraint is not None and not isinstance(constraint, str):
            from ...engines.constrain import mask_for

            extra["mask"] = mask_for(constraint, self.tokenizer(), dialect=self.dialect, prompt_len=len(ids))
        else:
            extra["grammar"] = constraint
        from ...engines.native import ConstraintFailed

        gen = self.native.generate(ids, max_tokens=max_tokens, seed=sampling.seed, temperature=sampling.temperature,
                                   top_p=sampling.top_p, top_k=sampling.top_k, min_p=sampling.min_p,
                                   repeat_penalty=sampling.repetition_penalty,
                                   presence_penalty=sampling.presence_penalty,
                                   frequency_penalty=sampling.frequency_penalty,
                                   logit_bias=dict(sampling.logit_bias), logprobs=sampling.logprobs, **extra)
        try:
            for tid in gen:
                if cancel.is_set():
                    return
                yield tid
        except ConstraintFailed as e:
            raise ConstraintFailure(f"{e}; the request fails rather than generate unconstrained") from e
        finally:
            gen.close()

    def check_constraint(self, constraint: Any, request: Any) -> None:
        """Every constraint is enforced in process (llguidance)."""

    def close(self) -> None:
        self.native.close()


class _HangUp:
    """Closes an upstream request's connection as soon as ``cancel`` is set, even while a read waits on
    an upstream that sends nothing (a long prompt, a hung server): a watcher thread shuts the socket down,
    the blocked read returns and the upstream sees the client leave (llama-server then frees the slot).
    The socket is the one httpx connects (its ``connect_tcp`` trace event) or, on a kept-alive connection,
    the response's network stream. Call :meth:`done` when the request is over."""

    POLL = 0.05
    """Seconds between the watcher's looks at whether the request is over (a set ``cancel`` wakes it at once)."""

    def __init__(self, cancel: threading.Event) -> None:
        self._cancel = cancel
        self._over = threading.Event()
        self._lock = threading.Lock()
        self._socket: Any = None
        threading.Thread(target=self._watch, name="kimi-serve-upstream-hangup", daemon=True).start()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's ``trace`` extension: keep the socket of a new connection."""
        if event == "connection.connect_tcp.complete":
            self._keep(info.get("return_value"))

    def response(self, r: Any) -> None:
        """Keep the socket ``r`` is read from (a kept-alive connection has no connect event)."""
        self._keep(r.extensions.get("network_stream"))

    def _keep(self, stream: Any) -> None:
        get = getattr(stream, "get_extra_info", None)
        sock = get("socket") if callable(get) else None
        if sock is not None:
            with self._lock:
                self._socket = sock
            if self._cancel.is_set():
                self._shut()

    def _shut(self) -> None:
        import socket

        with self._lock:
            if self._over.is_set() or self._socket is None:
                return
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _watch(self) -> None:
        while not self._over.is_set():
            if self._cancel.wait(self.POLL):
                self._shut()
                return

    def done(self) -> None:
        with self._lock:
            self._over.set()


class UpstreamEngine:
    """A running llama-server at ``url`` serving the same GGUF: ids in, ids out (``/completion`` with
    ``return_tokens``, streamed). ``vocabulary`` is the GGUF (loaded vocabulary-only, for the tokenizer,
    the dialect and the context size is asked of the server's ``/props``)."""

    supports_logprobs = True  # (llama-server's n_probs: completion_probabilities of each token)
    slots = 1
    """llama-server's ``total_slots`` (``-np``): requests generated at once."""

    def __init__(self, url: str, *, vocabulary: Any, name: str | None = None, timeout: float = 600.0,
                 startup_timeout: float = STARTUP_TIMEOUT) -> None:
        """``timeout``: seconds a generation may wait for the upstream's next bytes (the server's
        ``--timeout``: a hung upstream holds the engine thread no longer than a request may take);
        ``startup_timeout``: seconds ``/props`` may take."""
        import httpx

        self.url = url.rstrip("/")
        self.vocabulary = vocabulary
        self.model = name or Path(vocabulary.path).name
        self.dialect = vocabulary.dialect
        self._client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        self.n_ctx = self._context_size(startup_timeout)

    @classmethod
    def connect(cls, url: str, gguf: str | Path, *, dialect: str | Dialect | None = None,
                name: str | None = None, timeout: float = 600.0,
                startup_timeout: float = STARTUP_TIMEOUT) -> "UpstreamEngine":
        """The llama-server at ``url``; ``gguf`` is the model file it serves (read vocabulary-only here)."""
        from ...engines.native import NativeModel

        vocabulary = NativeModel.load(gguf, dialect=dialect, n_ctx=512, vocab_only=True)
        check_vocabulary(vocabulary)
        return cls(url, vocabulary=vocabulary, name=name, timeout=timeout, startup_timeout=startup_timeout)

    def _context_size(self, seconds: float) -> int:
        """The context of one slot (``/props``); sets :attr:`slots` (its ``total_slots``)."""
        try:
            props = self._client.get("/props", timeout=seconds).json()
            self.slots = max(int(props.get("total_slots", 1)), 1)
            return int(props["default_generation_settings"]["n_ctx"])
        except Exception as e:  # noqa: BLE001 - any failure: the server is not a llama-server we can use
            raise EngineError(f"{self.url}: not a reachable llama-server (GET /props within {seconds:g}s: "
                              f"{type(e).__name__}: {e})") from e

    def tokenizer(self) -> KimiTokenizer:
        return self.vocabulary.tokenizer()  # type: ignore[no-any-return]

    def token_markers(self) -> frozenset[str]:
        return self.vocabulary.marker_tokens(self.dialect)  # type: ignore[no-any-return]

    def is_eog(self, token_id: int) -> bool:
        return self.vocabulary.is_eog(token_id)  # type: ignore[no-any-return]

    def check_constraint(self, constraint: Any, request: Any) -> None:
        """Refuse a request whose constraint has no GBNF export where it must hold: a ``response_format``
        reply (``json_object`` / ``json_schema``) or a forced call (``tool_choice`` ``required`` / a named
        function). The 400 names the field and the reason (a schema beyond the GBNF rules' limits); the
        in-process engine enforces such schemas. Without a forced choice, tools with no export are
        generated unconstrained (the parser reads the calls by id and checks them)."""
        if constraint is None or isinstance(constraint, str) or constraint.gbnf:
            return
        forced = request.tool_choice == "required" or isinstance(request.tool_choice, dict)
        for note in constraint.gbnf_notes:
            if not note.reason.startswith("no GBNF export"):
                continue
            if note.path == "response_format" or (forced and note.path == "tools"):
                param = "tools"
                if note.path == "response_format":
                    kind = (request.response_format or {}).get("type")
                    param = "response_format.json_schema.schema" if kind == "json_schema" else "response_format"
                raise RequestError(f"the upstream llama-server cannot enforce this: {note.reason} (its grammar is "
                                   "the GBNF export; the in-process engine, without --upstream, enforces it)",
                                   param=param, code="unsupported_schema")

    def generate(self, ids: Sequence[int], *, constraint: Any, max_tokens: int, sampling: Sampling,
                 cancel: threading.Event) -> Iterator[int]:
        import httpx

        body: dict[str, Any] = {"prompt": list(ids), "n_predict": max_tokens, "stream": True, "return_tokens": True,
                                "temperature": sampling.temperature, "top_p": sampling.top_p,
                                "top_k": sampling.top_k, "min_p": sampling.min_p,
                                "repeat_penalty": sampling.repetition_penalty,
                                "presence_penalty": sampling.presence_penalty,
                                "frequency_penalty": sampling.frequency_penalty, "cache_prompt": True}
        if sampling.logit_bias:
            body["logit_bias"] = [[tid, bias] for tid, bias in sampling.logit_bias]
        if sampling.logprobs is not None:
            body["n_probs"] = max(sampling.logprobs, 1)
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        gbnf = constraint_gbnf(constraint)
        if gbnf is not None:
            body["grammar"] = gbnf
        hangup = _HangUp(cancel)
        try:
            with self._client.stream("POST", "/completion", json=body, extensions={"trace": hangup.trace}) as r:
                try:
                    hangup.response(r)
                    if r.status_code != 200:
                        raise EngineError(f"{self.url}/completion answered {r.status_code}: {r.read()[:500]!r}")
                    for line in r.iter_lines():
                        if cancel.is_set():
                            return  # leaving the block closes the connection: llama-server stops the slot
                        if not line.startswith("data:"):
                            continue
                        event = json.loads(line[5:])
                        if "error" in event:
                            raise EngineError(f"{self.url}/completion: {event['error']}")
                        probs = event.get("completion_probabilities") or ()
                        for k, tid in enumerate(event.get("tokens") or ()):
                            yield int(tid) if sampling.logprobs is None else _token_logprob(int(tid), probs, k,
                                                                                             sampling.logprobs)
                        if event.get("stop"):  # (the end-of-generation id came in ``tokens`` already)
                            return
                finally:  # (before the connection goes back to the pool)
                    hangup.done()
        except httpx.HTTPError as e:
            if cancel.is_set():  # (the read :class:`_HangUp` interrupted)
                return
            raise EngineError(f"{self.url}: the upstream llama-server failed mid-generation ({e})") from e
        finally:
            hangup.done()
        if cancel.is_set():
            return
        raise EngineError(f"{self.url}/completion: the stream ended before the generation did")

    def close(self) -> None:
        self._client.close()
        self.vocabulary.close()
