"""``kimi-chat lint``: the :func:`kimi_chat.lint` findings of a request (the input forms of ``render``),
one per line (``--json``: a list of objects); exit 1 when a finding is an error (what ``--strict``
refuses), 0 otherwise, 2 for input the renderer refuses.

Also :func:`print_findings`: ``render`` and ``count`` print the same findings on stderr (``-q``
silences them)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import KimiChatError
from ._io import InputError, fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from .render import add_request_arguments

    p = sub.add_parser(
        "lint",
        help="report what a request does that the model will likely answer badly, or that --strict refuses",
        description="Lint a chat.completions request ({\"messages\": [...], \"tools\": [...]}) or a bare list "
        "of messages for DIALECT: unknown roles, missing ids or content, unknown fields, template options "
        "the dialect does not read or that are not bools, tool-call ids the model was not trained on, "
        "missing reasoning in a tool loop... One finding per line (severity, code, messages[i].field, "
        "text). Exit status: 0 no errors (warnings only, or nothing), 1 some error (what --strict refuses), "
        "2 bad input (what the renderer refuses).",
    )
    add_request_arguments(p, strict=False)
    p.add_argument("--json", action="store_true",
                   help='print a JSON list of {"code", "message_index", "field", "severity", "text"}')
    p.add_argument("--quiet", "-q", action="store_true", help="no notes on stderr (which dialect the model names)")
    p.set_defaults(func=run)


def findings(req: dict[str, Any]) -> list[Any]:
    """The :func:`kimi_chat.lint` findings of a request loaded by ``cli.render.load_request``."""
    from ..checks.lint import lint

    return lint(req["messages"], dialect=req["dialect"], tools=req["tools"],
                add_generation_prompt=req["add_generation_prompt"], **req["options"])


def print_findings(args: argparse.Namespace, req: dict[str, Any]) -> None:
    """Print each lint finding of ``req`` on stderr (``kimi-chat: lint error: ...``), unless ``-q``.
    Called once the request rendered: input that lint cannot take does not fail the command (its
    output is the official prompt); a note says lint did not check it."""
    if getattr(args, "quiet", False):
        return
    try:
        found = findings(req)
    except KimiChatError as e:
        print(f"kimi-chat: note: lint could not check this request: {e}", file=sys.stderr)
        return
    for w in found:
        print(f"kimi-chat: lint {w.severity}: {w}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..prompt import render
    from .render import load_request

    try:
        req = load_request(args)
        # input the renderer refuses is bad input (exit 2), not a finding
        render(req["messages"], tools=req["tools"], dialect=req["dialect"],
               add_generation_prompt=req["add_generation_prompt"],
               continue_final_message=req["continue_final_message"], **req["options"])
        found = findings(req)
    except (InputError, KimiChatError, TypeError) as e:
        return fail(str(e))
    if args.json:
        print(json.dumps([w.to_dict() for w in found], ensure_ascii=False, indent=2))
    else:
        for w in found:
            print(f"{w.severity}: {w}")
    return 1 if any(w.severity == "error" for w in found) else 0
