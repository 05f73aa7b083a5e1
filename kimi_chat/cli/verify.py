"""``kimi-chat verify TEMPLATE --dialect D``: search for a conversation the template renders
differently from the dialect; exit 0 equivalent, 1 counterexample found, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys

from ..dialect_records import dialect_names, get_dialect
from ..errors import KimiChatError
from ._io import fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "verify",
        help="check a chat template against a dialect, with a minimal counterexample",
        description="Render generated conversations through TEMPLATE the way transformers does and through "
        "kimi_chat's formatter for DIALECT; report equivalence or the first difference, shrunk to a minimal "
        "conversation, with a diff (whitespace made visible). A Kimi-K3 port (K3 ships no template) is rendered as "
        "llama.cpp runs it, tool-call arguments parsed first, and a request the official K3 encoder refuses but the "
        "template renders is a difference. TEMPLATE is a .jinja file, a .gguf file, a "
        "tokenizer_config.json or a model directory. Exit status: 0 equivalent, 1 counterexample, 2 bad input. "
        "Needs transformers: pip install -e '.[verify]' in the kimi_chat checkout.",
    )
    p.add_argument("template", help="template file (.jinja), .gguf, tokenizer_config.json or model directory")
    p.add_argument("--dialect", "-d", default=None,
                   help="dialect to compare with (default: the dialect identify() recognises); "
                   f"one of {', '.join(dialect_names())}")
    p.add_argument("--examples", "-n", type=int, default=500, help="conversations to try (default 500)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random; the report shows it)")
    p.add_argument("--lenient", action="store_true",
                   help="render the template in a sandbox that allows mutating lists, as llama.cpp's engine does "
                   "(to see what such a runtime sends when transformers refuses the template)")
    p.add_argument("--arguments-as-given", action="store_true",
                   help="Kimi-K3 ports: pass tool-call arguments to the template as given (JSON strings unparsed), "
                   "as a host that does not parse them would; by default they are parsed first, as llama.cpp does")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def _progress(message: str) -> None:
    print(f"kimi-chat: progress: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ..checks.inspection import load_template
    from ..reference.oracle import OracleUnavailable
    from ..checks.verification import identify, verify

    if args.examples < 1:
        return fail("--examples must be at least 1")
    try:
        text, _source = load_template(args.template)
        if args.dialect is not None:
            dialect = get_dialect(args.dialect).name
        else:
            ident = identify(text)
            if ident.dialect is None:
                return fail(f"{args.template}: {ident.description}; name the dialect to compare with (--dialect)")
            dialect = ident.dialect
        if not args.quiet:
            _progress(f"rendering {args.examples} generated conversations through {args.template} and {dialect}")
        report = verify(text, dialect, examples=args.examples, seed=args.seed, lenient=args.lenient,
                        parse_arguments=not args.arguments_as_given, progress=None if args.quiet else _progress)
    except OracleUnavailable as e:
        return fail(str(e))
    except KimiChatError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(report.summary())
    return 0 if report.equivalent else 1
