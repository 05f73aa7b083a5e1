"""``kimi-chat serve MODEL.gguf``: an OpenAI-compatible ``/v1/chat/completions`` endpoint for a Kimi GGUF
(:mod:`kimi_chat.servers.serve`; extras ``serve`` and ``native``)."""

from __future__ import annotations

import argparse
import logging
import sys

from ..errors import KimiChatError
from ._io import fail

_CONTRACT_HELP = (
    "the request contract: 'open' (default) validates every request as Moonshot's API does (bad fields, "
    "tools, tool_choice, response_format, thinking: a 400 naming the field) and passes any valid sampling "
    "value through (temperature, top_p, penalties, n); 'moonshot' also enforces the sampling values "
    "Moonshot fixes (temperature within [0, 1], top_p 0.95, penalties 0, n 1; others are a 400), as its "
    "Vendor Verifier's tests/params expect")


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "serve",
        help="serve a Kimi GGUF as an OpenAI-compatible chat-completions endpoint",
        description="Serve POST /v1/chat/completions (plain and streamed), GET /v1/models and GET /health for a "
        "Kimi GGUF: prompts rendered and tokenized by kimi_chat (exactly the official ids), generation "
        "constrained by the request's tool choice, the output parsed by token id (reasoning_content, "
        "tool_calls). The model runs in this process (llama.cpp or ik_llama.cpp), or on a running "
        "llama-server with --upstream (token ids in, ids out). One generation at a time; --queue requests "
        "wait, one more is answered 429. Needs, in the checkout, pip install -e '.[serve]' "
        "and bash .ci/install-native.sh .venv.",
    )
    p.add_argument("model", help="GGUF file (with --upstream: the file the llama-server serves, read for its "
                   "vocabulary only)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (401 otherwise)")
    p.add_argument("--backend", choices=("llama.cpp", "ik_llama.cpp"), default="llama.cpp",
                   help="in-process engine (default llama.cpp)")
    p.add_argument("--upstream", metavar="URL", default=None,
                   help="generate on the llama-server at URL (its /completion endpoint) instead of in process; "
                   "the constraint goes as GBNF (a forced call or a response_format schema beyond its limits is a "
                   "400), which llama-server applies more slowly than the in-process engine's llguidance")
    p.add_argument("--dialect", "-d", default=None,
                   help="dialect (default: the one the GGUF's embedded template is identified as)")
    p.add_argument("--contract", choices=("open", "moonshot"), default="open", help=_CONTRACT_HELP)
    p.add_argument("--name", default=None, help="the model id /v1/models lists (default: the GGUF's file name)")
    p.add_argument("--n-ctx", type=int, default=4096, help="context size of the in-process engine (default 4096)")
    p.add_argument("--queue", type=int, default=16, help="requests that may wait for the engine (default 16)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a request may take (default 600)")
    p.add_argument("--max-body", type=int, default=8 * 1024 * 1024,
                   help="largest request body in bytes (default 8 MiB; 413 beyond)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..servers.serve import NativeEngine, ServeConfig, UpstreamEngine, create_app
    except ImportError as e:
        return fail(f"kimi-chat serve needs the serve extra ({e}); install it with: "
                    "pip install -e '.[serve]' (run in the kimi_chat checkout)")
    if args.queue < 0 or args.timeout <= 0 or args.max_body < 1:
        return fail("--queue must be 0 or more, --timeout and --max-body more than 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    log = logging.getLogger("kimi_chat.serve")
    try:
        if args.upstream:
            engine = UpstreamEngine.connect(args.upstream, args.model, dialect=args.dialect, name=args.name)
        else:
            engine = NativeEngine.load(args.model, dialect=args.dialect, backend=args.backend, n_ctx=args.n_ctx,
                                       name=args.name, progress=log.info)
    except (KimiChatError, FileNotFoundError, ValueError) as e:
        return fail(str(e))
    config = ServeConfig(api_key=args.api_key, contract=args.contract, queue=args.queue, timeout=args.timeout,
                         max_body=args.max_body)
    log.info("serving %s (%s, %s) on http://%s:%d/v1", engine.model, engine.dialect.name,
             f"upstream {args.upstream}" if args.upstream else args.backend, args.host, args.port)
    try:
        uvicorn.run(create_app(engine, config), host=args.host, port=args.port, log_level="warning")
    finally:
        engine.close()
    return 0
