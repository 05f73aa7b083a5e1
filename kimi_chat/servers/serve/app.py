"""The ASGI app of ``kimi-chat serve`` (Starlette): ``POST /v1/chat/completions`` (plain and streamed as
server-sent events), ``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus).

Operations (docs/serve-operations.md): one engine, every generation on one worker thread, so the
embedded engine generates one request at a time (``--upstream`` llama-server with ``-np`` slots is the
path to concurrency); the engine may load after the server starts listening (:class:`EngineLoader`: chat
requests are then a 503 with ``Retry-After``); what a request needs (the tokenizer, the marker tokens) is
built at start-up, and ``/health`` answers 503 until it is, or while the engine is stuck past
``--timeout``. A bounded queue: the place is taken before any preparation (rendering, tokenizing, the grammar), so a full server answers
429 (``Retry-After``) at once, and a waiting request whose client left gives its place back at once. A
client that disconnects cancels its generation; a per-request timeout (504, or an error event once
streaming); deadlines on the request head (:func:`~kimi_chat.servers.serve.http.header_deadline_protocol`)
and body (408); a body size limit (413); ``Content-Type: application/json`` required (415); the ``Host``
and ``Origin`` checked (403: :class:`~kimi_chat.servers.serve.http.EdgeMiddleware`); the API key, when
set, required as ``Authorization: Bearer KEY`` (401, compared in constant time).

Every response carries ``X-Request-Id``; one log line per request on the ``kimi_chat.serve`` logger (request
id, dialect, prompt/completion tokens, seconds, outcome), one per request field that does not change the
prompt, and one per undocumented field name (ignored, or refused with ``strict_fields``). Errors are
OpenAI-shaped, ``{"error": {"message", "type", "param", "code"}}``; an engine's failure is logged in
full and answered with a generic message (an upstream's URL or answer never reaches the client).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ...errors import KimiChatError, RenderError, RequestError, ToolSchemaError
from ...output import Delta
from .._fields import check_honoured, deep_json_error, nests_deeper_than, unknown_fields
from ..contract import prompt_tokens, read_chat_request
from .engines import Engine, EngineError
from .generation import ContextError, Outcome, Prepared, TokenLogprobs, prepare, run
from .http import ERROR_TYPES, EdgeMiddleware, JSONBody, error_response
from .metrics import Metrics

__all__ = ["ServeConfig", "EngineLoader", "create_app", "LOGGER"]

LOGGER = logging.getLogger("kimi_chat.serve")
"""Where the one line per request goes."""


@dataclass(frozen=True)
class ServeConfig:
    """How the server operates (the ``kimi-chat serve`` options)."""

    api_key: str | None = None
    """Required as ``Authorization: Bearer KEY`` when set."""
    contract: str = "open"
    """``open`` or ``moonshot`` (:func:`kimi_chat.servers.contract.read_chat_request`)."""
    queue: int = 16
    """Requests that may wait while one generates; one more is answered 429."""
    timeout: float = 600.0
    """Seconds a request may take, waiting included (an upstream's reads are bounded by it too)."""
    max_body: int = 8 * 1024 * 1024
    """Bytes a request body may have (413 beyond)."""
    body_timeout: float = 30.0
    """Seconds the client may take to send the whole body (408 beyond)."""
    max_request_tokens: int = 65536
    """The most tokens one request may ask to generate, ``n`` × ``max_tokens`` (400 beyond)."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names answered besides the loopback names (``"*"``: any)."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins allowed besides the server's own (``"*"``: any)."""
    strict_fields: bool = False
    """Refuse a body field nobody documents (a 400 naming it) instead of logging it once and ignoring it."""
    access_log: bool = False
    """One line per HTTP request on ``kimi_chat.serve.access``."""


class _Scheduler:
    """The engine's worker threads (one, or an upstream's slots: :attr:`Engine.slots`) and a count of the
    requests it holds (being prepared, waiting and running); :meth:`oldest` is when the longest-running
    generation began (``None``: idle)."""

    def __init__(self, capacity: int, workers: int = 1) -> None:
        self.capacity = capacity
        self.workers = workers
        self.held = 0
        self._started: dict[int, float] = {}
        self._lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kimi-serve-engine")

    def set_workers(self, workers: int) -> None:
        """Run ``workers`` generations at once (an engine loaded after the server started: its slots); only
        before the first job is submitted."""
        self.capacity += workers - self.workers
        self.workers = workers
        self.executor.shutdown(wait=False)
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kimi-serve-engine")

    def try_hold(self) -> bool:
        """Take a place (on the event loop's thread only); ``False`` when the queue is full."""
        if self.held >= self.capacity:
            return False
        self.held += 1
        return True

    def release(self) -> None:
        self.held -= 1

    def begin(self, key: int) -> None:
        with self._lock:
            self._started[key] = time.monotonic()

    def end(self, key: int) -> None:
        with self._lock:
            self._started.pop(key, None)

    @property
    def running(self) -> int:
        return len(self._started)

    def oldest(self) -> float | None:
        with self._lock:
            return min(self._started.values(), default=None)

    @property
    def waiting(self) -> int:
        return max(self.held - self.running, 0)


_END = object()
_FIRST = object()


class _Job:
    """One request's generations on the worker thread; its events come out of :attr:`events` (the
    deltas only when ``deltas``: a plain answer needs the outcomes alone)."""

    def __init__(self, app: "_Server", prepared: Prepared, t0: float, *, deltas: bool) -> None:
        self.cancel = threading.Event()
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.prepared = prepared
        loop = asyncio.get_running_loop()
        self._emit: Callable[[Any], None] = lambda ev: loop.call_soon_threadsafe(self.events.put_nowait, ev)
        emit = self._emit
        engine, scheduler, metrics = app.engine, app.scheduler, app.metrics

        def work() -> None:
            started = time.monotonic()
            scheduler.begin(id(self))
            first = True
            try:
                for index in range(prepared.request.n):
                    if self.cancel.is_set():
                        break
                    for item in run(engine, prepared, self.cancel):
                        if first:
                            first = False
                            metrics.first_token(time.monotonic() - t0)
                        if deltas or isinstance(item, Outcome):
                            emit((index, item))
            except BaseException as e:  # noqa: BLE001 - handed to the request, which answers it
                emit(e)
            finally:
                scheduler.end(id(self))
                metrics.generated(time.monotonic() - started)
                # the place is given back before the request sees its end (the loop runs these in order):
                # a client asking again the moment its answer ends is not refused a place still held
                loop.call_soon_threadsafe(scheduler.release)
                emit(_END)

        self.future: Future[None] = scheduler.executor.submit(work)
        # a job cancelled before it started gives its place back here (one that ran did in ``work``)
        self.future.add_done_callback(lambda f: loop.call_soon_threadsafe(scheduler.release) if f.cancelled() else None)

    def abandon(self) -> None:
        """The client is gone: stop the generation, or, still waiting, leave the queue at once."""
        self.cancel.set()
        if self.future.cancel():  # never started: its place is given back now (the done callback)
            self._emit(_END)

    async def next(self, deadline: float) -> Any:
        """The next event; ``TimeoutError`` past ``deadline`` (``time.monotonic()``)."""
        return await asyncio.wait_for(self.events.get(), max(deadline - time.monotonic(), 0.0))


@dataclass(frozen=True)
class EngineLoader:
    """An engine the server loads after it starts listening (``kimi-chat serve`` gives one: a GGUF loads
    for a while). Until :attr:`load` returns, ``/health`` answers 503 with the reason ``loading model``,
    and a chat request a 503 with ``Retry-After``; a load that raises is :attr:`_Server.ready`'s exception."""

    load: Callable[[], Engine]
    """Builds the engine (on a thread of its own)."""
    what: str
    """What is loading (the GGUF's path), for ``/health`` and the log."""


def _slots(engine: Engine) -> int:
    return max(int(getattr(engine, "slots", 1) or 1), 1)


def _param_of(e: Exception) -> str | None:
    """The field a rendering or grammar error names."""
    if isinstance(e, (RequestError, ContextError)):
        return e.param
    if isinstance(e, RenderError) and e.message_index is not None:
        return f"messages[{e.message_index}]" + (f".{e.field}" if e.field else "")
    if isinstance(e, ToolSchemaError):
        where = "tools" if e.tool_index is None else f"tools[{e.tool_index}]"
        return where + e.path.replace("/", ".") if e.path else where
    text = str(e)
    head = text.split(":", 1)[0].split(" ", 1)[0]
    if head.startswith(("messages", "tools", "tool_choice", "response_format")):
        return head
    return None


class _Server:
    def __init__(self, engine: Engine | EngineLoader, config: ServeConfig) -> None:
        self.loader = engine if isinstance(engine, EngineLoader) else None
        self.engine: Engine = None if self.loader is not None else engine  # type: ignore[assignment]
        """``None`` while :attr:`loader` loads it."""
        self.config = config
        slots = 1 if self.loader is not None else _slots(engine)  # type: ignore[arg-type]
        self.scheduler = _Scheduler(config.queue + slots, slots)
        self.metrics = Metrics(lambda: self.scheduler.waiting, lambda: self.scheduler.running)
        self.created = int(time.time())
        self.unknown_logged: set[str] = set()
        self.recent: list[float] = []  # seconds of the last requests (for Retry-After)
        self.ready: Future[None] = Future()
        """Done when the engine is loaded and warmed up (its exception: the load's or the warm-up's)."""
        self.ready.set_running_or_notify_cancel()
        threading.Thread(target=self._start, name="kimi-serve-start", daemon=True).start()

    def _start(self) -> None:
        """Load the engine (an :class:`EngineLoader`), then :meth:`_warm_up`; the outcome is :attr:`ready`'s.
        No request generates before (each waits for :attr:`ready`), so this thread has the engine to itself."""
        try:
            if self.loader is not None:
                t0 = time.monotonic()
                engine = self.loader.load()
                self.scheduler.set_workers(_slots(engine))
                self.engine = engine
                LOGGER.info("loaded %s in %.1fs", self.loader.what, time.monotonic() - t0)
            self._warm_up()
        except BaseException as e:  # noqa: BLE001 - said by /health, answered 503, and the CLI exits with it
            self.ready.set_exception(e)
        else:
            self.ready.set_result(None)

    def _warm_up(self) -> None:
        """Build what every request needs before the first arrives (before any generation): the tokenizer,
        the marker tokens, the engine's own (:meth:`warm_up` when it has one)."""
        t0 = time.monotonic()
        self.engine.tokenizer()
        self.engine.token_markers()
        warm = getattr(self.engine, "warm_up", None)
        if callable(warm):
            warm()
        LOGGER.info("ready in %.1fs (tokenizer, markers%s)", time.monotonic() - t0, ", engine" if warm else "")

    # ------------------------------------------------------------------ plumbing

    def _authorized(self, request: Request) -> bool:
        if self.config.api_key is None:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.config.api_key.encode())

    def _unavailable(self) -> str | None:
        """Why the engine cannot take a request now (``None``: it can)."""
        if self.engine is None and not self.ready.done():
            return f"loading model: {self.loader.what if self.loader else 'the engine'}"
        if not self.ready.done():
            return "loading: building the tokenizer and the marker tokens"
        if self.ready.exception() is not None:
            return f"start-up failed: {self.ready.exception()}"
        since = self.scheduler.oldest()
        if since is not None and time.monotonic() - since > self.config.timeout:
            return (f"stuck: the engine has been on one request for {time.monotonic() - since:.0f}s, longer than "
                    f"the {self.config.timeout:g}s timeout")
        return None

    def _retry_after(self) -> str:
        mean = sum(self.recent) / len(self.recent) if self.recent else 1.0
        return str(min(max(math.ceil(mean * max(self.scheduler.held, 1) / 2), 1), 60))

    async def _body(self, request: Request) -> bytes | None:
        """The body, or ``None`` past the size limit."""
        limit = self.config.max_body
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return None
        parts, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            parts.append(chunk)
        return b"".join(parts)

    def _loading(self) -> Response | None:
        """A 503 with ``Retry-After`` while the model loads (or failed to: the process is exiting)."""
        if self.engine is not None:
            return None
        failed = self.ready.done() and self.ready.exception() is not None
        return error_response(503, "the server failed to load its model; see its log" if failed else
                              "the server is loading its model; retry later", code="model_loading",
                              headers={"Retry-After": "5"})

    def _log(self, rid: str, prompt: int | None, completion: int, t0: float, outcome: str, status: int) -> None:
        self.metrics.request(status)
        LOGGER.info("%s dialect=%s prompt_tokens=%s completion_tokens=%d time=%.3fs outcome=%s", rid,
                    "-" if self.engine is None else self.engine.dialect.name, "-" if prompt is None else prompt,
                    completion,
                    time.monotonic() - t0, outcome)

    # ------------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> Response:
        reason = self._unavailable()
        status = "ok" if reason is None else "unavailable"
        if not self._authorized(request):  # without the key: ok / not ok, nothing else
            return JSONResponse({"status": status}, status_code=200 if reason is None else 503)
        body: dict[str, Any] = {"status": status}
        if self.engine is not None:
            body.update(model=self.engine.model, dialect=self.engine.dialect.name)
        body["queued"] = self.scheduler.held
        if reason is not None:
            body["reason"] = reason
        return JSONResponse(body, status_code=200 if reason is None else 503)

    async def metrics_text(self, request: Request) -> Response:
        if not self._authorized(request):
            return error_response(401, "Incorrect API key provided", code="invalid_api_key")
        out = self.metrics.exposition()
        if out is None:
            return error_response(404, "metrics need prometheus_client: pip install -e '.[serve]' (in the checkout)",
                                  code="not_found")
        return Response(out[0], media_type=out[1])

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return error_response(401, "Incorrect API key provided", code="invalid_api_key")
        loading = self._loading()
        if loading is not None:
            return loading
        return JSONResponse({"object": "list", "data": [
            {"id": self.engine.model, "object": "model", "created": self.created, "owned_by": "kimi-chat"}]})

    async def chat_completions(self, request: Request) -> Response:
        rid = request.state.request_id
        response_id = request.state.response_id
        t0 = time.monotonic()
        deadline = t0 + self.config.timeout

        def refuse(response: Response, outcome: str, prompt: int | None = None) -> Response:
            self._log(rid, prompt, 0, t0, outcome, response.status_code)
            return response

        def failed(e: RequestError) -> Response:
            return refuse(JSONBody(e.body(), status_code=e.status), str(e.status))

        if not self._authorized(request):
            return refuse(error_response(401, "Incorrect API key provided", code="invalid_api_key"), "401")
        loading = self._loading()
        if loading is not None:
            return refuse(loading, "503 loading")
        kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            return refuse(error_response(415, f"the body must be JSON sent as Content-Type: application/json, "
                                         f"not {kind or 'no content type'!r}", code="unsupported_media_type",
                                         param="Content-Type"), "415")
        try:
            raw = await asyncio.wait_for(self._body(request), self.config.body_timeout)
        except asyncio.TimeoutError:
            return refuse(error_response(408, f"the request body did not arrive within "
                                         f"{self.config.body_timeout:g}s", code="body_timeout"), "408")
        except ClientDisconnect:
            return refuse(Response(status_code=499), "disconnected")
        if raw is None:
            return refuse(error_response(413, f"the request body exceeds {self.config.max_body} bytes",
                                         code="request_too_large"), "413")
        if nests_deeper_than(raw):  # refused from the bytes: the decoder never goes near the recursion limit
            return failed(deep_json_error(raw))
        try:
            body = json.loads(raw)
        except RecursionError:
            return failed(deep_json_error(raw))
        except (ValueError, UnicodeDecodeError) as e:
            return refuse(error_response(400, f"the request body is not valid JSON: {e}", code="invalid_json"), "400")
        try:
            chat = read_chat_request(body, dialect=self.engine.dialect, contract=self.config.contract)
            check_honoured(body, chat.messages)
            if chat.logprobs and not getattr(self.engine, "supports_logprobs", False):
                raise RequestError("token log probabilities are not returned by this engine", param="logprobs",
                                   code="unsupported_parameter")
            self._unknown(rid, body)
            generated = chat.n * (chat.max_tokens or 1)
            if generated > self.config.max_request_tokens:
                raise RequestError(f"n ({chat.n}) × {chat.max_tokens_param} ({chat.max_tokens}) asks for {generated} "
                                   f"tokens; this server generates at most {self.config.max_request_tokens} per "
                                   "request", param="n" if chat.n > 1 else chat.max_tokens_param)
        except RequestError as e:
            return failed(e)
        for warning in chat.warnings:  # (served as the template renders it: said in the log)
            LOGGER.info("%s warning: %s", rid, warning)
        if not self.scheduler.try_hold():
            return refuse(error_response(429, f"the server is busy: {self.config.queue} requests are waiting "
                                         "already; retry later", code="queue_full",
                                         headers={"Retry-After": self._retry_after()}), "429")
        job: _Job | None = None
        try:
            reason = self._unavailable()
            if reason is not None and not reason.startswith("loading"):
                return refuse(error_response(503, f"the server cannot take requests now ({reason.split(':')[0]})",
                                             code="unavailable", headers={"Retry-After": "5"}), "503")
            try:  # (a request arriving while the server warms up waits for it, within its timeout)
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self.ready)),
                                       max(deadline - time.monotonic(), 0.0))
            except asyncio.TimeoutError:
                return refuse(error_response(504, f"the server was still starting after {self.config.timeout:g}s",
                                             code="timeout"), "timeout")
            except Exception:  # noqa: BLE001 - the warm-up's failure: /health says it
                return refuse(error_response(503, "the server failed to start; see its log", code="unavailable"),
                              "503")
            try:
                prepared = await run_in_threadpool(prepare, self.engine, chat)
                prompt = prompt_tokens(prepared.prompt_ids, dialect=self.engine.dialect, request=chat)
            except RequestError as e:
                return failed(e)
            except (KimiChatError, TypeError, ValueError, RecursionError) as e:  # input the renderer or grammar refuses
                context = isinstance(e, ContextError)
                return failed(RequestError(e.message if isinstance(e, ContextError) else str(e), param=_param_of(e),
                                           code="context_length_exceeded" if context else "invalid_request"))
            job = _Job(self, prepared, t0, deltas=chat.stream)
        finally:
            if job is None:
                self.scheduler.release()
        self.metrics.tokens(prompt, 0)
        if chat.stream:
            return StreamingResponse(self._stream(job, rid, response_id, prompt, t0, deadline),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await self._complete(request, job, rid, response_id, prompt, t0, deadline)

    def _unknown(self, rid: str, body: dict[str, Any]) -> None:
        """Fields nobody documents: refused under ``strict_fields``, else logged once per name and ignored."""
        for name in unknown_fields(body):
            if self.config.strict_fields:
                raise RequestError("is not a field this server reads (it runs with --strict-fields)",
                                   param=name, code="unknown_parameter")
            if name not in self.unknown_logged and len(self.unknown_logged) < 1000:
                self.unknown_logged.add(name)
                LOGGER.info("%s the request field %r is not one this server reads; ignored (said once per name)",
                            rid, name[:100].encode("utf-8", "backslashreplace").decode())

    # ------------------------------------------------------------------ answers

    def _usage(self, prompt: int, completion: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _engine_failure(self, rid: str, e: BaseException) -> tuple[str, str]:
        """The client's message for an engine failure (the detail goes to the log only) and the log outcome."""
        LOGGER.error("%s the engine failed: %s", rid, e, exc_info=None if isinstance(e, EngineError) else e)
        public = getattr(e, "public", None)
        return (public or f"the engine failed; the server's log has the detail (request id {rid})",
                f"error: {type(e).__name__}")

    def _finished(self, started: float) -> None:
        self.recent = [*self.recent[-15:], time.monotonic() - started]

    async def _complete(self, request: Request, job: _Job, rid: str, response_id: str, prompt: int, t0: float,
                        deadline: float) -> Response:
        async def watch() -> None:  # the body is read: the next message is the disconnect
            while (await request.receive())["type"] != "http.disconnect":
                pass
            job.abandon()

        watcher = asyncio.create_task(watch())
        outcomes: dict[int, Outcome] = {}
        try:
            while True:
                try:
                    ev = await job.next(deadline)
                except asyncio.TimeoutError:
                    job.abandon()
                    self._log(rid, prompt, 0, t0, "timeout", 504)
                    return error_response(504, f"the request took longer than {self.config.timeout:g}s",
                                          code="timeout")
                if ev is _END:
                    break
                if isinstance(ev, BaseException):
                    message, outcome = self._engine_failure(rid, ev)
                    self._log(rid, prompt, 0, t0, outcome, 502)
                    return error_response(502, message, code="engine_error")
                index, item = ev
                if isinstance(item, Outcome):
                    outcomes[index] = item
        finally:
            watcher.cancel()
        self._finished(t0)
        if job.cancel.is_set():
            self._log(rid, prompt, 0, t0, "disconnected", 499)
            return Response(status_code=499)
        completion = sum(len(o.completion_ids) for o in outcomes.values())
        self.metrics.tokens(0, completion)
        self._log(rid, prompt, completion, t0, ",".join(o.finish_reason for o in outcomes.values()), 200)
        return JSONResponse({
            "id": response_id, "object": "chat.completion", "created": int(time.time()), "model": self.engine.model,
            "choices": [{"index": i, "message": o.message, "finish_reason": o.finish_reason,
                         "logprobs": None if o.logprobs is None else {"content": o.logprobs, "refusal": None}}
                        for i, o in sorted(outcomes.items())],
            "usage": self._usage(prompt, completion)})

    async def _stream(self, job: _Job, rid: str, response_id: str, prompt: int, t0: float,
                      deadline: float) -> AsyncIterator[str]:
        created = int(time.time())
        usage = job.prepared.request.include_usage

        def chunk(index: int, delta: dict[str, Any], finish: str | None, logprobs: Any = None) -> str:
            obj = {"id": response_id, "object": "chat.completion.chunk", "created": created,
                   "model": self.engine.model,
                   "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}]}
            return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

        completion = 0
        finishes: list[str] = []
        outcome = "disconnected"
        logged = job.prepared.sampling.logprobs is not None
        pending: dict[int, list[dict[str, Any]]] = {}  # log probabilities not sent yet, by choice

        def logprobs_of(index: int) -> dict[str, Any]:
            return {"content": pending.pop(index, []), "refusal": None}
        try:
            for i in range(job.prepared.request.n):
                yield chunk(i, {"role": "assistant", "content": ""}, None)
            while True:
                try:
                    ev = await job.next(deadline)
                except asyncio.TimeoutError:
                    job.abandon()
                    outcome = "timeout"
                    yield self._error_event(f"the request took longer than {self.config.timeout:g}s", "timeout", 504)
                    return
                if ev is _END:
                    break
                if isinstance(ev, BaseException):
                    message, outcome = self._engine_failure(rid, ev)
                    yield self._error_event(message, "engine_error", 502)
                    return
                index, item = ev
                if isinstance(item, TokenLogprobs):
                    pending.setdefault(index, []).extend(item.content)
                elif isinstance(item, Delta):
                    delta = item.to_openai()
                    if delta:  # (with the log probabilities of the tokens that released it, as OpenAI's chunks)
                        yield chunk(index, delta, None, logprobs_of(index) if logged else None)
                elif isinstance(item, Outcome):
                    completion += len(item.completion_ids)
                    finishes.append(item.finish_reason)
                    rest = pending.get(index)  # (tokens that released no text: markers, a held stop sequence)
                    yield chunk(index, {}, item.finish_reason, logprobs_of(index) if rest else None)
            if usage:
                obj = {"id": response_id, "object": "chat.completion.chunk", "created": created,
                       "model": self.engine.model, "choices": [], "usage": self._usage(prompt, completion)}
                yield f"data: {json.dumps(obj)}\n\n"
            yield "data: [DONE]\n\n"
            outcome = ",".join(finishes)
        finally:  # also when the client went away (the response's task is cancelled)
            job.abandon()
            self._finished(t0)
            self.metrics.tokens(0, completion)
            self._log(rid, prompt, completion, t0, outcome, 200)

    @staticmethod
    def _error_event(message: str, code: str, status: int) -> str:
        body = RequestError(message, status=status, code=code, type=ERROR_TYPES[status]).body()
        return f"data: {json.dumps(body, ensure_ascii=True)}\n\n"


async def _http_error(request: Request, exc: Exception) -> Response:
    """404 / 405 (and any other HTTP error Starlette raises) as an OpenAI-shaped error."""
    status = getattr(exc, "status_code", 500)
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    message = {404: f"no such endpoint: {request.url.path[:200]}",
               405: f"{request.method} is not allowed on {request.url.path[:200]}"}.get(status, str(exc))
    return error_response(status, message, code=code, headers=dict(getattr(exc, "headers", None) or {}))


async def _server_error(request: Request, exc: Exception) -> Response:
    """An uncaught error: logged with its traceback, answered as an OpenAI-shaped 500 (never plain text)."""
    LOGGER.error("%s %s %s failed", getattr(request.state, "request_id", "-"), request.method, request.url.path,
                 exc_info=exc)
    return error_response(500, "the server failed on this request; its log has the detail", code="server_error")


def create_app(engine: Engine | EngineLoader, config: ServeConfig | None = None) -> Starlette:
    """The ASGI app serving ``engine`` (``uvicorn.run(create_app(engine), ...)``), or the engine an
    :class:`EngineLoader` loads (started at once on a thread of its own, so the server answers while the
    model loads). It starts building what requests need at once; ``/health`` says ``ok`` when that is done
    (``app.state.server.ready``, a :class:`concurrent.futures.Future`, holds the outcome)."""
    config = config or ServeConfig()
    server = _Server(engine, config)
    app = Starlette(
        routes=[
            Route("/health", server.health, methods=["GET"]),
            Route("/metrics", server.metrics_text, methods=["GET"]),
            Route("/v1/models", server.models, methods=["GET"]),
            Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        ],
        middleware=[Middleware(EdgeMiddleware, allowed_hosts=config.allowed_hosts,  # type: ignore[arg-type]
                               allowed_origins=config.allowed_origins, access_log=config.access_log)],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    app.state.server = server
    return app
