"""The HTTP edge of ``kimi-chat serve``: OpenAI-shaped error responses, the ASGI middleware every request
goes through (the ``Host`` / ``Origin`` checks against DNS rebinding and cross-site posts, the
``X-Request-Id`` header, the optional access log) and uvicorn's HTTP/1.1 protocol with a deadline on a
request's headers (a client that sends a byte a second is disconnected, not held forever)."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.responses import Response

from ...errors import RequestError

__all__ = ["ERROR_TYPES", "error_response", "EdgeMiddleware", "LOOPBACK_HOSTS", "header_deadline_protocol",
           "ACCESS_LOGGER"]

ACCESS_LOGGER = logging.getLogger("kimi_chat.serve.access")
"""One line per HTTP request when the access log is on (``--access-log``)."""

ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
    405: "invalid_request_error", 408: "timeout_error", 413: "invalid_request_error", 415: "invalid_request_error",
    429: "server_busy_error", 500: "server_error", 502: "engine_error", 503: "service_unavailable_error",
    504: "timeout_error",
}
"""The OpenAI ``error.type`` of each status this server answers with: a client can tell a full queue
(429 ``server_busy_error``), a failed engine (502 ``engine_error``) and a request past ``--timeout``
(504 ``timeout_error``) from a bad request."""

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Host names a server bound to loopback answers to (besides ``--allowed-hosts``)."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")


class JSONBody(Response):
    """A JSON response encoded ASCII-only: any text it echoes (a lone surrogate included) encodes."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(status: int, message: str, *, code: str | None = None, param: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    """An OpenAI-shaped error ``{"error": {"message", "type", "param", "code"}}`` (type by :data:`ERROR_TYPES`)."""
    e = RequestError(message, status=status, param=param, code=code, type=ERROR_TYPES.get(status, "server_error"))
    return JSONBody(e.body(), status_code=status, headers=headers)


def _host_name(value: str) -> str:
    """The host of a ``Host`` header or an origin's netloc, without the port (IPv6 without brackets)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class EdgeMiddleware:
    """Every request: refuse a ``Host`` the server does not answer to (403; DNS rebinding) and an
    ``Origin`` that is neither the server's own nor allowed (403; a web page posting to a local server),
    give it a request id (the client's ``X-Request-Id`` when it sends a sane one, else a new
    ``chatcmpl-...`` id, which the chat endpoint answers with) sent back as ``X-Request-Id`` and kept in
    ``scope["state"]["request_id"]``, and write the access log line.

    ``allowed_hosts``: host names (no port) besides :data:`LOOPBACK_HOSTS`; ``"*"`` allows any.
    ``allowed_origins``: origins (``https://app.example``) allowed besides the server's own; ``"*"`` any."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = (), access_log: bool = False) -> None:
        self.app = app
        hosts = {h.strip().lower().strip("[]") for h in allowed_hosts}
        self.any_host = "*" in hosts
        self.hosts = frozenset(hosts | set(LOOPBACK_HOSTS))
        origins = {o.strip().rstrip("/").lower() for o in allowed_origins}
        self.any_origin = "*" in origins
        self.origins = frozenset(origins)
        self.access_log = access_log

    def _refusal(self, headers: dict[str, str]) -> Response | None:
        host = headers.get("host", "")
        if not self.any_host and _host_name(host) not in self.hosts:
            return error_response(403, f"this server does not answer to the host {host[:100]!r}; start it with "
                                  "--allowed-hosts naming it", code="host_not_allowed", param="Host")
        origin = headers.get("origin")
        if origin is None or self.any_origin or origin.rstrip("/").lower() in self.origins:
            return None
        parts = urlsplit(origin)
        if parts.netloc and parts.netloc.lower() == host.lower():  # same origin (the server's own page)
            return None
        return error_response(403, f"requests from the origin {origin[:100]!r} are not allowed; start the "
                              "server with --allowed-origins naming it", code="origin_not_allowed", param="Origin")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.monotonic()
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        generated = f"chatcmpl-{uuid.uuid4().hex}"
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else generated
        state = scope.setdefault("state", {})
        state["request_id"], state["response_id"] = request_id, generated
        status = [0]

        async def send_with_id(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode("ascii"))]
            await send(message)

        try:
            refusal = self._refusal(headers)
            if refusal is not None:
                await refusal(scope, receive, send_with_id)
            else:
                await self.app(scope, receive, send_with_id)
        finally:
            if self.access_log:
                client = scope.get("client") or ("-", 0)
                ACCESS_LOGGER.info('%s "%s %s" %d %.3fs request_id=%s', client[0], scope["method"], scope["path"],
                                   status[0], time.monotonic() - t0, request_id)


def header_deadline_protocol(seconds: float) -> type:
    """uvicorn's h11 HTTP/1.1 protocol with a deadline of ``seconds`` on each request's headers, counted
    from the connection (or the end of the previous response): a connection that has not sent a whole
    request head by then is closed. (uvicorn's keep-alive timeout restarts on every byte, so a client
    sending a byte a second would hold a connection forever.) Give it as ``uvicorn.Config(http=...)``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineH11(H11Protocol):  # type: ignore[misc]
        _head_timer: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(seconds, self._head_expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:  # a whole request head arrived
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.cycle is not None and self.cycle.response_complete:
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineH11
