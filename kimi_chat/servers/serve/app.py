"""The ASGI app of ``kimi-chat serve`` (Starlette): ``POST /v1/chat/completions`` (plain and streamed as
server-sent events), ``GET /v1/models``, ``GET /health``.

Operations: one engine, every generation on one worker thread; a bounded queue (a request that finds
it full is answered 429 at once); a client that disconnects cancels its generation (queued or running);
a per-request timeout (504, or an error event once streaming); a body size limit (413); the API key,
when set, required as ``Authorization: Bearer KEY`` (401 otherwise, compared in constant time); one log
line per request on the ``kimi_chat.serve`` logger (id, dialect, prompt/completion tokens, seconds,
outcome), and one per request field that does not change the prompt or is served as the official
template renders it (a ``developer`` message on K2...: :attr:`ChatRequest.warnings`). Errors are OpenAI-shaped: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ...errors import KimiChatError
from ...output import Delta
from ..contract import RequestError, prompt_tokens, read_chat_request
from .engines import Engine
from .generation import Outcome, Prepared, prepare, run

__all__ = ["ServeConfig", "create_app", "LOGGER"]

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
    """Seconds a request may take, waiting included."""
    max_body: int = 8 * 1024 * 1024
    """Bytes a request body may have (413 beyond)."""


def _error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> JSONResponse:
    e = RequestError(message, status=status, param=param, code=code)
    return JSONResponse(e.body(), status_code=e.status)


class _Scheduler:
    """One worker thread for the engine and a count of the requests it holds (running + waiting)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kimi-serve-engine")

    def try_hold(self) -> bool:
        """Take a place (on the event loop's thread only); ``False`` when the queue is full."""
        if self.held >= self.capacity:
            return False
        self.held += 1
        return True

    def release(self) -> None:
        self.held -= 1


_END = object()


class _Job:
    """One request's generations on the worker thread; its events come out of :attr:`events` (the
    deltas only when ``deltas``: a plain answer needs the outcomes alone)."""

    def __init__(self, app: "_Server", prepared: Prepared, *, deltas: bool) -> None:
        self.cancel = threading.Event()
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.prepared = prepared
        loop = asyncio.get_running_loop()
        emit: Callable[[Any], None] = lambda ev: loop.call_soon_threadsafe(self.events.put_nowait, ev)  # noqa: E731
        engine = app.engine

        def work() -> None:
            try:
                for index in range(prepared.request.n):
                    if self.cancel.is_set():
                        break
                    for item in run(engine, prepared, self.cancel):
                        if deltas or isinstance(item, Outcome):
                            emit((index, item))
            except BaseException as e:  # noqa: BLE001 - handed to the request, which answers it
                emit(e)
            finally:
                emit(_END)

        future = app.scheduler.executor.submit(work)
        future.add_done_callback(lambda _f: loop.call_soon_threadsafe(app.scheduler.release))

    async def next(self, deadline: float) -> Any:
        """The next event; ``TimeoutError`` past ``deadline`` (``time.monotonic()``)."""
        return await asyncio.wait_for(self.events.get(), max(deadline - time.monotonic(), 0.0))


class _Server:
    def __init__(self, engine: Engine, config: ServeConfig) -> None:
        self.engine = engine
        self.config = config
        self.scheduler = _Scheduler(config.queue + 1)
        self.created = int(time.time())

    # ------------------------------------------------------------------ plumbing

    def _authorized(self, request: Request) -> bool:
        if self.config.api_key is None:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.config.api_key.encode())

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

    def _log(self, rid: str, prompt: int | None, completion: int, t0: float, outcome: str) -> None:
        LOGGER.info("%s dialect=%s prompt_tokens=%s completion_tokens=%d time=%.3fs outcome=%s", rid,
                    self.engine.dialect.name, "-" if prompt is None else prompt, completion,
                    time.monotonic() - t0, outcome)

    # ------------------------------------------------------------------ endpoints

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": self.engine.model, "dialect": self.engine.dialect.name,
                             "queued": self.scheduler.held})

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _error(401, "Incorrect API key provided", code="invalid_api_key")
        return JSONResponse({"object": "list", "data": [
            {"id": self.engine.model, "object": "model", "created": self.created, "owned_by": "kimi-chat"}]})

    async def chat_completions(self, request: Request) -> Response:
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        t0 = time.monotonic()
        deadline = t0 + self.config.timeout

        def refuse(response: JSONResponse, outcome: str, prompt: int | None = None) -> JSONResponse:
            self._log(rid, prompt, 0, t0, outcome)
            return response

        if not self._authorized(request):
            return refuse(_error(401, "Incorrect API key provided", code="invalid_api_key"), "401")
        raw = await self._body(request)
        if raw is None:
            return refuse(_error(413, f"the request body exceeds {self.config.max_body} bytes",
                                 code="request_too_large"), "413")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            return refuse(_error(400, f"the request body is not valid JSON: {e}", code="invalid_json"), "400")
        try:
            chat = read_chat_request(body, dialect=self.engine.dialect, contract=self.config.contract)
            for warning in chat.warnings:  # (served as the template renders it: said in the log)
                LOGGER.info("%s warning: %s", rid, warning)
            prepared = await run_in_threadpool(prepare, self.engine, chat)
            prompt = prompt_tokens(prepared.prompt_ids, dialect=self.engine.dialect, request=chat)
        except RequestError as e:
            return refuse(JSONResponse(e.body(), status_code=e.status), str(e.status))
        except (KimiChatError, TypeError, ValueError) as e:  # input the renderer or the grammar refuses
            return refuse(_error(400, str(e), code="invalid_request"), "400")
        if not self.scheduler.try_hold():
            return refuse(_error(429, f"the server is busy: {self.config.queue} requests are waiting already; "
                                 "retry later", code="queue_full"), "429", prompt)
        job = _Job(self, prepared, deltas=chat.stream)
        if chat.stream:
            return StreamingResponse(self._stream(job, rid, prompt, t0, deadline), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return await self._complete(request, job, rid, prompt, t0, deadline)

    # ------------------------------------------------------------------ answers

    def _usage(self, prompt: int, completion: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    async def _complete(self, request: Request, job: _Job, rid: str, prompt: int, t0: float,
                        deadline: float) -> Response:
        async def watch() -> None:  # the body is read: the next message is the disconnect
            while (await request.receive())["type"] != "http.disconnect":
                pass
            job.cancel.set()

        watcher = asyncio.create_task(watch())
        outcomes: dict[int, Outcome] = {}
        try:
            while True:
                try:
                    ev = await job.next(deadline)
                except asyncio.TimeoutError:
                    job.cancel.set()
                    self._log(rid, prompt, 0, t0, "timeout")
                    return _error(504, f"the request took longer than {self.config.timeout:g}s", code="timeout")
                if ev is _END:
                    break
                if isinstance(ev, BaseException):
                    self._log(rid, prompt, 0, t0, f"error: {ev}")
                    return _error(502, f"the engine failed: {ev}", code="engine_error")
                index, item = ev
                if isinstance(item, Outcome):
                    outcomes[index] = item
        finally:
            watcher.cancel()
        if job.cancel.is_set():
            self._log(rid, prompt, 0, t0, "disconnected")
            return Response(status_code=499)
        completion = sum(len(o.completion_ids) for o in outcomes.values())
        self._log(rid, prompt, completion, t0, ",".join(o.finish_reason for o in outcomes.values()))
        return JSONResponse({
            "id": rid, "object": "chat.completion", "created": int(time.time()), "model": self.engine.model,
            "choices": [{"index": i, "message": o.message, "finish_reason": o.finish_reason, "logprobs": None}
                        for i, o in sorted(outcomes.items())],
            "usage": self._usage(prompt, completion)})

    async def _stream(self, job: _Job, rid: str, prompt: int, t0: float, deadline: float) -> AsyncIterator[str]:
        created = int(time.time())
        usage = job.prepared.request.include_usage

        def chunk(index: int, delta: dict[str, Any], finish: str | None) -> str:
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": self.engine.model,
                   "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}]}
            return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

        completion = 0
        finishes: list[str] = []
        outcome = "disconnected"
        try:
            for i in range(job.prepared.request.n):
                yield chunk(i, {"role": "assistant", "content": ""}, None)
            while True:
                try:
                    ev = await job.next(deadline)
                except asyncio.TimeoutError:
                    job.cancel.set()
                    outcome = "timeout"
                    yield self._error_event(f"the request took longer than {self.config.timeout:g}s", "timeout")
                    return
                if ev is _END:
                    break
                if isinstance(ev, BaseException):
                    outcome = f"error: {ev}"
                    yield self._error_event(f"the engine failed: {ev}", "engine_error")
                    return
                index, item = ev
                if isinstance(item, Delta):
                    delta = item.to_openai()
                    if delta:
                        yield chunk(index, delta, None)
                elif isinstance(item, Outcome):
                    completion += len(item.completion_ids)
                    finishes.append(item.finish_reason)
                    yield chunk(index, {}, item.finish_reason)
            if usage:
                obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": self.engine.model,
                       "choices": [], "usage": self._usage(prompt, completion)}
                yield f"data: {json.dumps(obj)}\n\n"
            yield "data: [DONE]\n\n"
            outcome = ",".join(finishes)
        finally:  # also when the client went away (the response's task is cancelled)
            job.cancel.set()
            self._log(rid, prompt, completion, t0, outcome)

    @staticmethod
    def _error_event(message: str, code: str) -> str:
        body = RequestError(message, status=500, code=code, type="server_error").body()
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def create_app(engine: Engine, config: ServeConfig | None = None) -> Starlette:
    """The ASGI app serving ``engine`` (``uvicorn.run(create_app(engine), ...)``)."""
    server = _Server(engine, config or ServeConfig())
    app = Starlette(routes=[
        Route("/health", server.health, methods=["GET"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
    ])
    app.state.server = server
    return app
