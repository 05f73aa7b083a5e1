"""Bounded rendering of untrusted templates (``identify``, ``verify``, ``inspect_path`` run templates from
strangers): every rendering runs in a worker process forked from this one, with a time limit, a memory
limit and an output limit (:data:`LIMITS`). A template that exceeds one raises
:class:`TemplateLimitError` (and the worker is replaced); whatever else the rendering returns or raises
is passed back unchanged.

A separate process is what bounds every way a template can misbehave: nested loops (Jinja's sandbox
caps one ``range`` at 100 000 items, not loops of loops), exponential string growth, a single huge
allocation inside a filter or string method. The worker persists between renderings (its compiled
templates are cached there), so a rendering costs one round trip through a pipe; ``identify`` takes
about 1.3x its in-process time. Where ``os.fork`` does not exist (Windows) the rendering runs
in-process, unbounded.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...errors import KimiChatError

__all__ = ["TemplateLimitError", "Limits", "LIMITS", "run_bounded"]


class TemplateLimitError(KimiChatError, ValueError):
    """A template exceeded a bound of :data:`LIMITS` while rendering (``limit``: ``"time"``,
    ``"memory"`` or ``"output"``): a hostile or broken template; it is not run further."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass
class Limits:
    """The bounds of one rendering of an untrusted template."""

    seconds: float = 10.0
    """Wall-clock time (an official template renders a probe in milliseconds)."""
    output_chars: int = 16 * 2**20
    """Characters of rendered text."""
    memory_bytes: int = 2 * 2**30
    """Address space the rendering worker may add to the process's (read when a worker starts)."""


LIMITS = Limits()
"""The bounds every template rendering of :mod:`kimi_chat.verify` runs under (change its fields to
loosen or tighten them)."""


class _Foreign(Exception):
    """Stand-in for an exception of the child that cannot be pickled (its type name is kept)."""


def _limit_memory(extra: int) -> None:
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = vm + extra
        resource.setrlimit(resource.RLIMIT_AS, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    except (ImportError, OSError, ValueError):  # pragma: no cover - no /proc or no resource module
        pass


def _evaluate(fn: Callable[..., str], args: tuple[Any, ...], kwargs: dict[str, Any],
              limits: Limits) -> tuple[str, bytes]:
    """``(kind, the pickled answer)`` to one request: ``("ok", text)``, ``("limit", kind, why)``,
    ``("raise", exc)`` or ``("foreign", type name, text)``."""
    try:
        out = fn(*args, **kwargs)
        if len(out) > limits.output_chars:
            payload: tuple[Any, ...] = ("limit", "output", f"the template rendered {len(out)} characters, "
                                        f"more than the limit of {limits.output_chars}")
        else:
            payload = ("ok", out)
    except MemoryError:
        payload = ("limit", "memory", f"the template needed more than {limits.memory_bytes} bytes of memory")
    except BaseException as e:  # noqa: BLE001 - passed back to the parent, which raises it
        payload = ("raise", e)
    try:
        data = pickle.dumps(payload)
        if payload[0] == "raise":
            pickle.loads(data)  # the parent must be able to read it back
        return payload[0], data
    except MemoryError:
        return "limit", pickle.dumps(("limit", "memory", "the template's rendering needed more than "
                                      f"{limits.memory_bytes} bytes of memory"))
    except Exception:  # noqa: BLE001 - an exception holding unpicklable data: its type name and text
        if payload[0] != "raise":
            raise
        e = payload[1]
        return "foreign", pickle.dumps(("foreign", type(e).__name__, str(e)))


_HEADER = struct.Struct("<Q")


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd`` (``None`` at end of file); :class:`_Late` past ``deadline``."""
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _Late
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


class _Late(Exception):
    """No answer before the deadline."""


class _Worker:
    """A forked child that renders requests one at a time (its caches, compiled templates included,
    persist between requests), under the memory bound set when it starts."""

    def __init__(self, limits: Limits) -> None:
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
            code = 0
            try:
                os.close(req_w)
                os.close(res_r)
                _limit_memory(limits.memory_bytes)
                while True:
                    head = _read_exact(req_r, _HEADER.size, None)
                    if head is None:
                        break  # the parent is gone
                    fn, args, kwargs, lim = pickle.loads(_read_exact(req_r, _HEADER.unpack(head)[0], None) or b"")
                    kind, answer = _evaluate(fn, args, kwargs, lim)
                    _write_all(res_w, answer)
                    if kind == "limit":
                        break  # after running out of memory the process is not trusted further
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(res_w)
        self.pid, self.send, self.recv = pid, req_w, res_r

    def ask(self, request: bytes, seconds: float) -> bytes | None:
        """The answer to ``request`` (``None``: the worker died); :class:`_Late` after ``seconds``."""
        deadline = time.monotonic() + seconds
        try:
            _write_all(self.send, request)
        except BrokenPipeError:
            return None
        head = _read_exact(self.recv, _HEADER.size, deadline)
        if head is None:
            return None
        return _read_exact(self.recv, _HEADER.unpack(head)[0], deadline)

    def stop(self) -> None:
        """Kill the worker and reap it."""
        for fd in (self.send, self.recv):
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - already gone
            pass
        os.waitpid(self.pid, 0)


_LOCK = threading.Lock()
_WORKER: _Worker | None = None


def run_bounded(fn: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    """``fn(*args, **kwargs)`` (a template rendering returning text; ``fn`` and its arguments are
    pickled) within :data:`LIMITS`, in the worker process; its exceptions are re-raised here.
    :class:`TemplateLimitError` when a bound is exceeded (the worker is then replaced)."""
    global _WORKER
    limits = LIMITS
    if not hasattr(os, "fork"):  # pragma: no cover - Windows
        return fn(*args, **kwargs)
    request = pickle.dumps((fn, args, kwargs, limits))
    with _LOCK:
        if _WORKER is None or os.getpid() != _PARENT[0]:
            _PARENT[0] = os.getpid()
            _WORKER = _Worker(limits)
        worker = _WORKER
        try:
            answer = worker.ask(request, limits.seconds)
        except _Late:
            answer = None
            late = True
        else:
            late = False
        payload = pickle.loads(answer) if answer is not None else None
        if payload is None or payload[0] == "limit":
            worker.stop()
            _WORKER = None
    if late:
        raise TemplateLimitError(f"the template did not finish rendering within {limits.seconds:g} s "
                                 "(a hostile or broken template?)", limit="time")
    if payload is None:  # the worker died without answering (killed for memory, or crashed)
        raise TemplateLimitError("the template's rendering was killed (out of memory?) before it finished",
                                 limit="memory")
    kind = payload[0]
    if kind == "ok":
        return str(payload[1])
    if kind == "limit":
        raise TemplateLimitError(payload[2], limit=payload[1])
    if kind == "foreign":
        raise type(payload[1], (_Foreign,), {})(payload[2])
    raise payload[1]


_PARENT = [os.getpid()]
