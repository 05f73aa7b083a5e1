"""``kimi-chat inspect PATH``: which chat template a .gguf file, model directory,
tokenizer_config.json or .jinja file carries, its known problems, tokenizer facts that disagree with
the official tokenizer, and the command that fixes it."""

from __future__ import annotations

import argparse
import json

from ..errors import KimiChatError
from ._io import fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "inspect",
        help="identify the chat template (and tokenizer facts) of a .gguf / model dir / .jinja",
        description="Identify the chat template PATH carries (official revision, variant, llama.cpp adaptation "
        "or unknown), list the known problems of that revision, the tokenizer facts that disagree with the "
        "official Kimi tokenizer, and the command that fixes the template. PATH is a .gguf file, a model "
        "directory, a tokenizer_config.json or a .jinja file. The behavioural match needs transformers "
        "(pip install -e '.[verify]' in the checkout); exact matches do not. Exit status: 0 reported, 1 the template does "
        "not compile (transformers' Jinja), 2 bad input.",
    )
    p.add_argument("path", help=".gguf file, model directory, tokenizer_config.json or .jinja file")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..checks.inspection import inspect_path

    try:
        report = inspect_path(args.path)
    except KimiChatError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(report.format_text())
    ident = report.identification
    return 1 if ident is not None and ident.compile_error is not None else 0
