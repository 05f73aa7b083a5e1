"""``kimi-chat parse``: parse a raw Kimi output (the assistant turn, K2 or ``-d kimi-k3``) into OpenAI JSON.

Prints the ``ChatCompletionMessage``; with ``--stream``, feeds the text in chunks and prints one
``ChatCompletionChunk`` choice per line (``{"index": 0, "delta": {...}, "finish_reason": ...}``) as a
server would send them. Warnings and the stop reason go to stderr. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UnknownDialectError
from ._io import InputError, fail, read_text, read_tools, template_options


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("parse", help="parse a raw model output into an OpenAI message (or deltas)",
                       description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("file", nargs="?", default="-", metavar="FILE|-",
                   help="raw model output text (UTF-8); '-' or nothing: stdin")
    p.add_argument("--dialect", "-d", default="kimi-k2-instruct", help="dialect (default: kimi-k2-instruct)")
    p.add_argument("--tools", metavar="FILE",
                   help="JSON file with the declared tools (a list, or an object with a 'tools' list)")
    p.add_argument("--stream", action="store_true", help="print one JSON delta per line")
    p.add_argument("--chunk", type=int, default=None, metavar="N",
                   help="with --stream: characters per chunk (default 4, about a token); refused without --stream")
    p.add_argument("--thinking-prefilled", action="store_true",
                   help="the prompt already opened <think>: the output starts inside reasoning")
    p.add_argument("--kwargs", metavar="JSON", default=None,
                   help="the dialect template options the prompt was rendered with, e.g. '{\"thinking\": false}' "
                   "for a kimi-k2.5, kimi-k2.6 or kimi-k3 request with thinking off (its output then does not start "
                   "inside reasoning; kimi-k3: it starts in the response channel)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..output import StreamParser

    if args.chunk is not None and not args.stream:
        return fail("--chunk needs --stream (without it the text is parsed in one piece)")
    chunk = 4 if args.chunk is None else args.chunk
    if chunk < 1:
        return fail(f"--chunk must be at least 1, got {chunk}")
    try:
        text = read_text(args.file)
        tools = read_tools(args.tools) if args.tools else None
        options = template_options({}, args.kwargs)
        parser = StreamParser(args.dialect, tools=tools,
                              thinking_prefilled=True if args.thinking_prefilled else None, **options)
    except (UnknownDialectError, InputError, ValueError, TypeError) as e:
        return fail(str(e))

    if args.stream:
        first = True
        n = chunk
        for i in range(0, len(text), n):
            for d in parser.feed(text[i:i + n]):
                delta = d.to_openai()
                if first:
                    delta = {"role": "assistant", **delta}
                    first = False
                print(json.dumps({"index": 0, "delta": delta, "finish_reason": None}, ensure_ascii=False))
        for d in parser.finish():
            print(json.dumps({"index": 0, "delta": d.to_openai(), "finish_reason": None}, ensure_ascii=False))
        msg = parser.message
        assert msg.stop_reason is not None
        print(json.dumps({"index": 0, "delta": {}, "finish_reason": msg.finish_reason()}))
    else:
        parser.feed(text)
        parser.finish()
        msg = parser.message
        print(json.dumps(msg.to_openai(), ensure_ascii=False, indent=2))
    for w in msg.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"stop_reason: {msg.stop_reason.value if msg.stop_reason else None}", file=sys.stderr)
    return 0
