"""``kimi-chat render``: an OpenAI chat.completions request (or a bare list of messages) -> the exact
prompt of a dialect, on stdout."""

from __future__ import annotations

import argparse
import sys

from ..dialect_records import Status, get_dialect
from ..errors import KimiChatError
from ..prompt import render
from ._io import InputError, fail, write_exact
from ._request import add_request_arguments, findings_printed, load_request, print_findings
from .count import add_tokenizer_arguments, tokens_json


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "render",
        help="render a request to the exact prompt text",
        description="Render an OpenAI chat.completions request body ({\"messages\": [...], \"tools\": [...]}) "
        "or a bare list of messages to the prompt the official template of DIALECT produces, byte for byte.",
    )
    add_request_arguments(p)
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no notes (the dialect's provenance status, the dialect the model names) and no lint "
                   "findings on stderr; warnings about ignored request fields still print")
    p.add_argument("--tokens", action="store_true",
                   help="print token ids as JSON ({\"ids\", \"spans\", \"assistant_mask\"}) instead of the text")
    add_tokenizer_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        req = load_request(args)
        with findings_printed():  # the option findings are printed below with the other lint findings
            if args.tokens:
                text = tokens_json(args, req)
            else:
                text = render(req["messages"], tools=req["tools"], dialect=req["dialect"],
                              add_generation_prompt=req["add_generation_prompt"],
                              continue_final_message=req.get("continue_final_message", False),
                              strict=req.get("strict", False), **req["options"])
        print_findings(args, req)
    except (InputError, KimiChatError, TypeError) as e:
        return fail(str(e))
    write_exact(text)
    d = get_dialect(req["dialect"])
    if not args.quiet and d.status in (Status.UNVERIFIED, Status.RECONSTRUCTED):
        article = "an" if d.status.value[0] in "aeiou" else "a"
        print(f"kimi-chat: note: {d.name} is checked against {article} {d.status.value} oracle template "
              f"({d.oracle}); see `kimi-chat dialects`", file=sys.stderr)
    return 0
