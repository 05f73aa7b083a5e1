"""``kimi-chat serve MODEL.gguf``: an OpenAI-compatible ``/v1/chat/completions`` endpoint for a Kimi GGUF
(:mod:`kimi_chat.servers.serve`; extras ``serve`` and ``native``)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from concurrent.futures import Future
from typing import Any

from ..errors import KimiChatError
from ._io import fail

_CONTRACT_HELP = (
    "the request contract: 'open' (default) validates every request as Moonshot's API does (bad fields, "
    "tools, tool_choice, response_format, thinking: a 400 naming the field) and passes any valid sampling "
    "value through (temperature, top_p, penalties, n); 'moonshot' also enforces the sampling values "
    "Moonshot fixes (temperature within [0, 1], top_p 0.95, penalties 0, n 1; others are a 400), as its "
    "Vendor Verifier's tests/params expect")


API_KEY_ENV = "KIMI_CHAT_API_KEY"
"""The environment variable ``kimi-chat serve`` reads its API key from (argv shows a key to ``ps``)."""

HEADER_TIMEOUT = 10.0
"""Seconds a client may take to send a request's headers."""


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "serve",
        help="serve a Kimi GGUF as an OpenAI-compatible chat-completions endpoint",
        description="Serve POST /v1/chat/completions (plain and streamed), GET /v1/models, GET /health and GET "
        "/metrics (Prometheus) for a Kimi GGUF: prompts rendered and tokenized by kimi_chat (exactly the official "
        "ids), generation constrained by the request's tool choice, the output parsed by token id "
        "(reasoning_content, tool_calls). The embedded engine (llama.cpp or ik_llama.cpp in this process) "
        "generates ONE REQUEST AT A TIME: --queue requests wait, one more is answered 429. For concurrent "
        "requests run llama-server with -np N slots (and -c N times the context you want per slot) and point "
        "--upstream at it: each request then generates in its own slot, at the same time as the others. "
        "Needs, in the checkout, pip install -e '.[serve]' and bash .ci/install-native.sh .venv. Operations: docs/serve-operations.md.",
    )
    p.add_argument("model", help="GGUF file (with --upstream: the file the llama-server serves, read for its "
                   "vocabulary only)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (401 otherwise); visible "
                   f"to ps: prefer the {API_KEY_ENV} environment variable or --api-key-file")
    p.add_argument("--api-key-file", default=None, metavar="PATH",
                   help="read the API key from PATH (its first line)")
    p.add_argument("--backend", choices=("llama.cpp", "ik_llama.cpp"), default="llama.cpp",
                   help="in-process engine (default llama.cpp; one generation at a time)")
    p.add_argument("--upstream", metavar="URL", default=None,
                   help="generate on the llama-server at URL (its /completion endpoint) instead of in process: the "
                   "path to concurrency (llama-server -np N: N requests generate at once); the constraint goes as "
                   "GBNF (a forced call or a response_format schema beyond its limits is a 400), which llama-server "
                   "applies more slowly than the in-process engine's llguidance. Its /props must answer within 5s "
                   "at start-up, and each read of a generation within --timeout")
    p.add_argument("--dialect", "-d", default=None,
                   help="dialect (default: the one the GGUF's embedded template is identified as)")
    p.add_argument("--contract", choices=("open", "moonshot"), default="open", help=_CONTRACT_HELP)
    p.add_argument("--name", default=None, help="the model id /v1/models lists (default: the GGUF's file name)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context size of the in-process engine (default 4096)")
    p.add_argument("--queue", type=int, default=16, help="requests that may wait for the engine (default 16)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds a request may take, waiting included (default 600; 504 beyond); also bounds each "
                   "read from an --upstream server")
    p.add_argument("--max-body", type=int, default=8 * 1024 * 1024,
                   help="largest request body in bytes (default 8 MiB; 413 beyond)")
    p.add_argument("--max-request-tokens", type=int, default=65536,
                   help="most tokens one request may ask to generate, n x max_tokens (default 65536; 400 beyond)")
    p.add_argument("--allowed-hosts", default="", metavar="H1,H2",
                   help="Host header names answered besides localhost / 127.0.0.1 / ::1 ('*': any; default: those "
                   "and the --host address; a wildcard --host answers any). Others are a 403 (DNS rebinding)")
    p.add_argument("--allowed-origins", default="", metavar="O1,O2",
                   help="browser origins (https://app.example) allowed besides the server's own ('*': any); a "
                   "request from another Origin is a 403")
    p.add_argument("--strict-fields", action="store_true",
                   help="refuse a request field neither OpenAI documents nor this server reads (default: logged "
                   "once per name and ignored)")
    p.add_argument("--access-log", action="store_true", help="one log line per HTTP request (kimi_chat.serve.access)")
    p.set_defaults(func=run)


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from --api-key-file, --api-key or $KIMI_CHAT_API_KEY (at most one of the first two)."""
    if args.api_key_file and args.api_key:
        raise ValueError("give --api-key or --api-key-file, not both")
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as f:
                key = f.readline().strip()
        except OSError as e:
            raise ValueError(f"--api-key-file: {e}") from None
        if not key:
            raise ValueError(f"--api-key-file: {args.api_key_file} holds no key on its first line")
        return key
    return args.api_key or os.environ.get(API_KEY_ENV) or None


def _hosts(args: argparse.Namespace) -> tuple[str, ...]:
    given = tuple(h for h in args.allowed_hosts.split(",") if h.strip())
    if given:
        return given
    return ("*",) if args.host in ("0.0.0.0", "::", "") else (args.host,)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket (before the model loads: an address in use is said at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {e.strerror or e}"
                      + (" (the port is in use: stop the other server or give --port)" if e.errno == errno.EADDRINUSE
                         else "")) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..servers.serve import EngineLoader, NativeEngine, ServeConfig, UpstreamEngine, create_app
        from ..servers.serve.http import header_deadline_protocol
    except ImportError as e:
        return fail(f"kimi-chat serve needs the serve extra ({e}); install it with: "
                    "pip install -e '.[serve]' (run in the kimi_chat checkout)")
    if args.queue < 0 or args.timeout <= 0 or args.max_body < 1 or args.max_request_tokens < 1:
        return fail("--queue must be 0 or more, --timeout, --max-body and --max-request-tokens more than 0")
    try:
        api_key = _api_key(args)
    except ValueError as e:
        return fail(str(e))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    log = logging.getLogger("kimi_chat.serve")
    try:
        sock = _bind(args.host, args.port)
    except OSError as e:
        return fail(str(e))
    config = ServeConfig(api_key=api_key, contract=args.contract, queue=args.queue, timeout=args.timeout,
                         max_body=args.max_body, max_request_tokens=args.max_request_tokens,
                         allowed_hosts=_hosts(args),
                         allowed_origins=tuple(o for o in args.allowed_origins.split(",") if o.strip()),
                         strict_fields=args.strict_fields, access_log=args.access_log)
    where = f"upstream {args.upstream}" if args.upstream else f"{args.backend}, one request at a time"
    host, port = sock.getsockname()[:2]
    address = f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    def load() -> Any:  # on the server's start-up thread, while it answers /health with 503
        if args.upstream:
            return UpstreamEngine.connect(args.upstream, args.model, dialect=args.dialect, name=args.name,
                                          timeout=args.timeout)
        return NativeEngine.load(args.model, dialect=args.dialect, backend=args.backend, n_ctx=args.n_ctx,
                                 name=args.name, progress=log.info)

    try:
        app = create_app(EngineLoader(load, args.model), config)
        state = app.state.server
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http=header_deadline_protocol(HEADER_TIMEOUT),
                                               timeout_graceful_shutdown=max(args.timeout, 1.0)))

        def started(ready: Future[None]) -> None:
            if ready.exception() is not None:  # a failed load ends the server (the process exits > 0)
                server.should_exit = True
                return
            engine = state.engine
            log.info("serving %s (%s, %s) on %s%s", engine.model, engine.dialect.name, where, address,
                     "" if api_key else " (no API key)")

        log.info("listening on %s; loading %s (/health answers 503 until it is ready)", address, args.model)
        state.ready.add_done_callback(started)
        try:
            server.run(sockets=[sock])
        finally:
            if state.engine is not None:
                state.engine.close()
    finally:
        sock.close()
    failure = state.ready.exception() if state.ready.done() else None
    if failure is not None:
        known = (KimiChatError, FileNotFoundError, ValueError, OSError)
        return fail(str(failure) if isinstance(failure, known) else f"{type(failure).__name__}: {failure}")
    return 0
