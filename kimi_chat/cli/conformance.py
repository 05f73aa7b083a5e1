"""``kimi-chat conformance MODEL.gguf [--backend B] [--server URL] [--json]``: what an engine gets
wrong about Kimi (tokenization, special tokens, chat formatting, generation), check by check (see
:mod:`kimi_chat.engines.conformance`; :func:`kimi_chat.engines.native.conformance` loads the model). Exit
status 0 when no check fails for this model or template (a failure that is a known engine problem, upstream and
documented, is reported as such and does not count), 1 when some do, 2 when the model cannot be loaded or the
server asked."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import KimiChatError
from ._io import fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from ..engines.native import BACKENDS

    p = sub.add_parser(
        "conformance",
        help="report what an engine (llama.cpp, ik_llama.cpp, llama-server) gets wrong about Kimi",
        description="Load a Kimi GGUF into an engine and check its tokenization (against the official "
        "tiktoken rules, on a fixed corpus), its special tokens (ids, types, detokenization, "
        "end-of-generation ids), its chat formatting (built-in Kimi format and, with --server, a running "
        "llama-server's /apply-template, against kimi_chat.render for the dialect the embedded template "
        "is identified as) and generation (a smoke test and a grammar-forced tool call). Each check "
        "passes, fails with the first difference shown, or is a KNOWN engine problem (upstream, documented: "
        "the engine's, not the model's); the last line says what to do. Exit status: 0 no failure of this "
        "model or template, 1 some, 2 usage or load error.",
    )
    p.add_argument("model", help="GGUF file")
    p.add_argument("--backend", "-b", choices=BACKENDS, default=BACKENDS[0],
                   help=f"engine to load the model in (default {BACKENDS[0]})")
    p.add_argument("--server", metavar="URL", default=None,
                   help="base URL of a running llama-server serving the same model (adds /apply-template checks)")
    p.add_argument("--dialect", "-d", default=None,
                   help="dialect to check against (default: the one the embedded template is identified as)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..engines.native import conformance

    try:
        report = conformance(args.model, backend=args.backend, server=args.server, dialect=args.dialect)
    except (KimiChatError, OSError, ValueError) as e:  # ImportError of a missing extra is a KimiChatError
        return fail(str(e))
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(report.format_text())
    return 0 if report.ok else 1
