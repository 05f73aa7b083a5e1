"""``kimi-chat lint``: the :func:`kimi_chat.lint` findings of a request (the input forms of ``render``),
one per line (``--json``: a list of objects); exit 1 when a finding is an error (what ``--strict``
refuses), 0 otherwise, 2 for input the renderer refuses."""

from __future__ import annotations

import argparse
import json

from ..errors import KimiChatError
from ..prompt import render
from ._io import InputError, fail
from ._request import add_request_arguments, findings, load_request


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
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


def run(args: argparse.Namespace) -> int:
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
