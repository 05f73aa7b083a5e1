"""``kimi-chat render``: an OpenAI chat.completions request (or a bare list of messages) -> the exact
prompt of a dialect, on stdout."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..dialects import DEFAULT_DIALECT, Status, get_dialect
from ..errors import KimiChatError
from ..render import render
from ._io import InputError, fail, read_json, read_tools, request_body, template_options, write_exact


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "render",
        help="render a request to the exact prompt text",
        description="Render an OpenAI chat.completions request body ({\"messages\": [...], \"tools\": [...]}) "
        "or a bare list of messages to the prompt the official template of DIALECT produces, byte for byte.",
    )
    add_request_arguments(p)
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no note on stderr about the dialect's provenance status")
    p.add_argument("--tokens", action="store_true",
                   help="print token ids as JSON ({\"ids\", \"spans\", \"assistant_mask\"}) instead of the text")
    from .count import add_tokenizer_arguments

    add_tokenizer_arguments(p)
    p.set_defaults(func=run)


def add_request_arguments(p: argparse.ArgumentParser) -> None:
    """The request arguments that :func:`load_request` reads: FILE, ``--dialect``, ``--tools``,
    ``--no-generation-prompt``, ``--kwargs`` (shared by ``render`` and ``count``)."""
    p.add_argument("file", nargs="?", default="-", help="request JSON file, or - for stdin (default)")
    p.add_argument("--dialect", "-d", default=None,
                   help=f"dialect or alias (default: the request's \"dialect\" key, else {DEFAULT_DIALECT}); "
                   "see `kimi-chat dialects`")
    p.add_argument("--tools", metavar="FILE",
                   help="JSON file with the tools list, or an object with a 'tools' list (overrides the request's tools)")
    p.add_argument("--no-generation-prompt", action="store_true",
                   help="do not end with the assistant header (for training / prefill; the model would not answer)")
    p.add_argument("--kwargs", metavar="JSON", default=None,
                   help="dialect template options as a JSON object, e.g. '{\"thinking\": false}' "
                   "(merged over the request's chat_template_kwargs)")


def load_request(args: argparse.Namespace) -> dict[str, Any]:
    """The request of ``render``-like commands: messages, tools, dialect, add_generation_prompt, options."""
    body = request_body(read_json(args.file), args.file)
    tools = read_tools(args.tools) if args.tools else body.get("tools")
    options = template_options(body, args.kwargs)
    dialect = args.dialect or body.get("dialect") or DEFAULT_DIALECT
    get_dialect(dialect)
    return {
        "messages": body["messages"],
        "tools": tools,
        "dialect": dialect,
        "add_generation_prompt": not args.no_generation_prompt,
        "options": options,
    }


def run(args: argparse.Namespace) -> int:
    try:
        req = load_request(args)
        if args.tokens:
            from .count import tokens_json

            text = tokens_json(args, req)
        else:
            text = render(req["messages"], tools=req["tools"], dialect=req["dialect"],
                          add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except (InputError, KimiChatError, TypeError) as e:
        return fail(str(e))
    write_exact(text)
    d = get_dialect(req["dialect"])
    if not args.quiet and d.status in (Status.UNVERIFIED, Status.RECONSTRUCTED):
        print(f"kimi-chat: note: {d.name} is checked against an {d.status.value} oracle template "
              f"({d.oracle}); see `kimi-chat dialects`", file=sys.stderr)
    return 0
