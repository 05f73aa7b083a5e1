"""Helpers of the ``kimi-chat serve`` tests: the app on a real uvicorn in a thread (loopback, a free
port, stopped on exit) and a scripted engine for the operations tests."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kimi_chat.dialects import get_dialect
from kimi_chat.tokens.tokenizer import KimiTokenizer


WAIT = 60.0
"""Seconds a test waits for an event it needs (generous: the suite runs on a loaded machine)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Uvicorn:
    """``app`` served by uvicorn on 127.0.0.1 in a daemon thread; ``url`` is its base. The listening socket
    is bound here and handed to uvicorn (no free port looked up and bound later, which another process,
    such as a second test run beside this one, could take in between)."""

    def __init__(self, app: Any, **config: Any) -> None:
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config.setdefault("timeout_graceful_shutdown", 5)
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off", **config))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + WAIT
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                self.close()
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=WAIT)
        self._socket.close()

    def __enter__(self) -> "Uvicorn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(engine: Any, http: Any = None, **config: Any) -> Uvicorn:
    """``engine`` behind :func:`~kimi_chat.servers.serve.create_app` with ``ServeConfig(**config)`` on a
    :class:`Uvicorn` (``http``: uvicorn's HTTP protocol class, its default when ``None``)."""
    from kimi_chat.servers.serve import ServeConfig, create_app

    return Uvicorn(create_app(engine, ServeConfig(**config)), **({"http": http} if http else {}))


class ScriptedEngine:
    """An :class:`~kimi_chat.servers.serve.engines.Engine` that "generates" the ids of ``text`` and then
    the end of the turn, one id per ``delay`` seconds. ``gate``: each generation first waits for it (set
    by the test); ``fail_after``: raise after that many ids (an engine dying mid-stream). It records how
    each generation ended in :attr:`endings` (``done``, ``cancelled``, ``failed``; nothing when the caller
stopped at the end of the turn) and counts them in :attr:`generations`. ``hold_after``: after that many
    ids, send nothing more until the generation is cancelled (at most :data:`WAIT` seconds), so a test of a
    client leaving mid-stream does not race the generation's end."""

    def __init__(self, tokenizer: KimiTokenizer, *, dialect: str = "kimi-k2-instruct-0905", text: str = "Hello there",
                 delay: float = 0.0, gate: threading.Event | None = None, fail_after: int | None = None,
                 hold_after: int | None = None) -> None:
        self._tok = tokenizer
        self.model = "scripted"
        self.dialect = get_dialect(dialect)
        self.n_ctx = 4096
        self.ids = tokenizer.encode(text, allow_special=False)
        self.end = tokenizer.token_to_id("<|im_end|>")
        self.delay = delay
        self.gate = gate
        self.fail_after = fail_after
        self.hold_after = hold_after
        self.endings: list[str] = []
        self.generations = 0
        self.started = threading.Event()

    def tokenizer(self) -> KimiTokenizer:
        return self._tok

    def token_markers(self) -> frozenset[str]:
        return frozenset()

    def is_eog(self, token_id: int) -> bool:
        return token_id == self.end

    def generate(self, ids: Sequence[int], *, constraint: Any, max_tokens: int, sampling: Any,
                 cancel: threading.Event) -> Iterator[int]:
        self.generations += 1
        self.started.set()
        if self.gate is not None:
            while not self.gate.wait(0.01):
                if cancel.is_set():
                    self.endings.append("cancelled")
                    return
        for n, tid in enumerate([*self.ids, self.end][:max_tokens]):
            if self.fail_after is not None and n == self.fail_after:
                self.endings.append("failed")
                raise RuntimeError("the scripted engine died")
            if self.hold_after is not None and n == self.hold_after and cancel.wait(WAIT):
                self.endings.append("cancelled")
                return
            if cancel.wait(self.delay) if self.delay else cancel.is_set():
                self.endings.append("cancelled")
                return
            yield tid
        self.endings.append("done")

    def check_constraint(self, constraint: Any, request: Any) -> None:
        pass

    def close(self) -> None:
        pass


def abandoned_request(url: str, body: dict[str, Any], until: Any) -> bool:
    """POST ``body`` as JSON to ``url`` on a plain socket, wait until ``until()`` holds (the request reached
    the point the test needs: queued, generating, upstream streaming), then close the connection without
    reading the answer, as a client that gives up does. Whether ``until()`` held: a client timeout in its
    place would race the server under load (it may give up before the request arrives)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    raw = json.dumps(body).encode()
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\n\r\n").encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=WAIT) as sock:
        sock.sendall(head + raw)
        return wait_for(until)


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON of each ``data:`` line, until ``[DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def wait_for(predicate: Any, timeout: float = WAIT) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        time.sleep(0.01)
    return True


def listening_port(log: Path, proc: subprocess.Popen[Any], timeout: float = WAIT) -> int:
    """The port a ``kimi-chat serve --port 0`` process (``proc``, logging to the file ``log``) listens on,
    read from its ``listening on`` line: the kernel chose a port no other process holds (a port looked up
    free and given with ``--port`` could be taken before the process binds it). ``AssertionError`` (with
    the log) when the process exits first or says nothing in ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/v1", log.read_text("utf-8", "replace"))
        if found:
            return int(found.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"kimi-chat serve did not say its port (exit {proc.poll()}): "
                         f"{log.read_text('utf-8', 'replace')[-3000:]}")


class FakeVocabulary:
    """What :class:`~kimi_chat.servers.serve.engines.UpstreamEngine` reads of the GGUF it is given (a
    vocabulary-only :class:`~kimi_chat.engines.native.NativeModel`), from kimi_chat's tokenizer: the tokenizer,
    the dialect, the marker tokens (the dialect's defaults) and the end of generation (the end of the turn)."""

    def __init__(self, tokenizer: KimiTokenizer, dialect: str) -> None:
        from kimi_chat.grammar import default_token_markers
        from kimi_chat.output.format import format_for

        self._tok = tokenizer
        self.path = "fake.gguf"
        self.dialect = get_dialect(dialect)
        self._markers = default_token_markers(self.dialect)
        self._ends = frozenset(format_for(self.dialect).end_of_turn_ids)

    def tokenizer(self) -> KimiTokenizer:
        return self._tok

    def marker_tokens(self, dialect: Any) -> frozenset[str]:
        return self._markers

    def is_eog(self, token_id: int) -> bool:
        return token_id in self._ends

    def close(self) -> None:
        pass


class FakeLlamaServer:
    """A stand-in for llama-server's ``/props`` and streamed ``/completion`` (``return_tokens``) on a real
    uvicorn: it answers every completion with ``reply`` (ids, streamed one per event, then ``stop``; with
    ``n_probs``, each token's ``completion_probabilities``: logprob -1, the next id -2) and keeps each
    request body in :attr:`bodies` (the grammar the upstream engine sent)."""

    def __init__(self, reply: Sequence[int], n_ctx: int = 4096, total_slots: int = 1) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, StreamingResponse
        from starlette.routing import Route

        self.reply = list(reply)
        self.bodies: list[dict[str, Any]] = []

        async def props(request: Request) -> JSONResponse:
            return JSONResponse({"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": total_slots})

        async def completion(request: Request) -> StreamingResponse:
            body = await request.json()
            self.bodies.append(body)
            ids = self.reply[:body.get("n_predict", len(self.reply))]

            n_probs = body.get("n_probs")

            def probs(tid: int) -> list[dict[str, Any]]:  # (llama-server's shape; logprob -1 each, then -2)
                top = [{"id": tid, "logprob": -1.0}, {"id": tid + 1, "logprob": -2.0}][:n_probs]
                return [{"id": tid, "logprob": -1.0, "top_logprobs": top}]

            async def events() -> Any:
                for tid in ids:
                    event = {"tokens": [tid], "stop": False}
                    if n_probs:
                        event["completion_probabilities"] = probs(tid)
                    yield f"data: {json.dumps(event)}\n\n"
                yield f"data: {json.dumps({'tokens': [], 'stop': True})}\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")

        self.server = Uvicorn(Starlette(routes=[Route("/props", props), Route("/completion", completion,
                                                                              methods=["POST"])]))
        self.url = self.server.url

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> "FakeLlamaServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HangingLlamaServer:
    """A llama-server that hangs: ``/props`` (``hang_props``) or every ``/completion`` sends nothing for up
    to ``hang`` seconds (released early by :meth:`close`)."""

    def __init__(self, *, hang_props: bool, hang: float = 600.0, n_ctx: int = 4096) -> None:
        import asyncio

        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self._stop = threading.Event()
        self.calls: list[str] = []

        async def stall() -> None:
            deadline = time.monotonic() + hang
            while not self._stop.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

        async def props(request: Request) -> JSONResponse:
            self.calls.append("props")
            if hang_props:
                await stall()
            return JSONResponse({"default_generation_settings": {"n_ctx": n_ctx}})

        async def completion(request: Request) -> JSONResponse:
            self.calls.append("completion")
            await stall()
            return JSONResponse({"error": "released"}, status_code=500)

        self.server = Uvicorn(Starlette(routes=[Route("/props", props), Route("/completion", completion,
                                                                              methods=["POST"])]))
        self.url = self.server.url

    def close(self) -> None:
        self._stop.set()
        self.server.close()

    def __enter__(self) -> "HangingLlamaServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SlowStartEngine(ScriptedEngine):
    """A :class:`ScriptedEngine` whose tokenizer is built on first use, as a GGUF's is: each build is
    counted in :attr:`builds` and waits for :attr:`built` (set by the test) at most :data:`WAIT` seconds."""

    def __init__(self, tokenizer: KimiTokenizer, **kwargs: Any) -> None:
        super().__init__(tokenizer, **kwargs)
        self._ready: KimiTokenizer | None = None
        self.builds = 0
        self.built = threading.Event()

    def tokenizer(self) -> KimiTokenizer:
        if self._ready is None:
            self.builds += 1
            self.built.wait(WAIT)
            time.sleep(0.05)  # (a build takes a while: concurrent first uses overlap)
            self._ready = self._tok
        return self._ready


class StallingLlamaServer:
    """A llama-server on a plain socket (no HTTP library between the test and the connection): ``/props``
    answers; each ``/completion`` sends the response head and ``first`` (ids, one event each), then sends
    nothing more and waits for the client to close the connection. :attr:`closed` is set when it does
    (the stall then ends); :attr:`completions` counts the generations asked for. :meth:`close` stops it."""

    def __init__(self, first: Sequence[int], *, n_ctx: int = 4096) -> None:
        self.first = list(first)
        self.n_ctx = n_ctx
        self.completions = 0
        self.streaming = threading.Event()
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(8)
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(conn: socket.socket, buf: bytes) -> tuple[str, bytes, bytes] | None:
        """The request line, its body and what follows it (``None``: the client closed the connection)."""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                       if k.strip().lower() == "content-length"), 0)
        while len(rest) < length:
            data = conn.recv(65536)
            if not data:
                return None
            rest += data
        return lines[0], rest[:length], rest[length:]

    def _connection(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            conn.settimeout(0.1)
            while not self._stop.is_set():
                try:
                    got = self._read_request(conn, buf)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if got is None:
                    return
                line, _body, buf = got
                if line.startswith("GET /props"):
                    body = json.dumps({"default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": 1})
                    conn.sendall(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                                 f"{len(body)}\r\n\r\n{body}".encode())
                    continue
                self.completions += 1
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for tid in self.first:
                    event = f"data: {json.dumps({'tokens': [tid], 'stop': False})}\n\n".encode()
                    conn.sendall(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.streaming.set()
                while not self._stop.is_set():  # the stall: nothing more is sent
                    try:
                        if not conn.recv(65536):
                            self.closed.set()
                            return
                    except TimeoutError:
                        continue
                    except OSError:
                        self.closed.set()
                        return
                return

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)

    def __enter__(self) -> "StallingLlamaServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
