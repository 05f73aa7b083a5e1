"""Helpers of the ``kimi-chat serve`` tests: the app on a real uvicorn in a thread (loopback, a free
port, stopped on exit) and a scripted engine for the operations tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from kimi_chat.dialects import get_dialect
from kimi_chat.tokens.tokenizer import KimiTokenizer


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Uvicorn:
    """``app`` served by uvicorn on 127.0.0.1 in a daemon thread; ``url`` is its base."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __enter__(self) -> "Uvicorn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ScriptedEngine:
    """An :class:`~kimi_chat.servers.serve.engines.Engine` that "generates" the ids of ``text`` and then
    the end of the turn, one id per ``delay`` seconds. ``gate``: each generation first waits for it (set
    by the test); ``fail_after``: raise after that many ids (an engine dying mid-stream). It records how
    each generation ended in :attr:`endings` (``done``, ``cancelled``, ``failed``)."""

    def __init__(self, tokenizer: KimiTokenizer, *, dialect: str = "kimi-k2-instruct-0905", text: str = "Hello there",
                 delay: float = 0.0, gate: threading.Event | None = None, fail_after: int | None = None) -> None:
        self._tok = tokenizer
        self.model = "scripted"
        self.dialect = get_dialect(dialect)
        self.n_ctx = 4096
        self.ids = tokenizer.encode(text, allow_special=False)
        self.end = tokenizer.token_to_id("<|im_end|>")
        self.delay = delay
        self.gate = gate
        self.fail_after = fail_after
        self.endings: list[str] = []
        self.started = threading.Event()

    def tokenizer(self) -> KimiTokenizer:
        return self._tok

    def token_markers(self) -> frozenset[str]:
        return frozenset()

    def is_eog(self, token_id: int) -> bool:
        return token_id == self.end

    def generate(self, ids: Sequence[int], *, constraint: Any, max_tokens: int, sampling: Any,
                 cancel: threading.Event) -> Iterator[int]:
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
            if cancel.wait(self.delay) if self.delay else cancel.is_set():
                self.endings.append("cancelled")
                return
            yield tid
        self.endings.append("done")

    def close(self) -> None:
        pass


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON of each ``data:`` line, until ``[DONE]``."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        time.sleep(0.01)
    return True
