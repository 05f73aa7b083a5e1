"""``kimi-chat``: the command line, for every family's dialects. One module per subcommand in this package
(``render``, ``count``, ...); each exports ``register(subparsers)`` which adds its parser and sets ``func``
(``args -> exit status``); :func:`build_parser` imports them, in the order ``--help`` lists them. What
several subcommands share is in one place each: :mod:`._request` (the request arguments of ``render`` /
``count`` / ``lint``, reading the request, its lint findings), :mod:`.count` (the tokenizer arguments and
loading), :mod:`._body` (request-body fields as template options), :mod:`._io` (reading input, reporting
errors).

Every subcommand reports bad input the same way: one line ``kimi-chat COMMAND: error: MESSAGE`` on
stderr and exit status 2 (argparse's own usage errors look the same, after the subcommand's usage);
``-`` is standard input wherever a file is read, named ``<stdin>`` in messages."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ._io import InputError, fail, set_prog, source_name, surrogate_message

__all__ = ["main", "build_parser"]

_INPUT_ARGS = ("file", "request", "tools", "template", "path")
"""The attributes the subcommands keep their input files under (named in the safety-net messages)."""


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an unknown option is reported with this subcommand's usage (argparse
    otherwise hands it back to the top-level parser, which prints the top-level usage)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="kimi-chat",
        description="The Kimi chat formats, right: both families, K2 (Kimi-K2-Instruct, -0905, -Thinking, K2.5, "
        "K2.6, K2.7-Code: <|im_*|> turns) and K3 (Kimi-K3: XTML), rendered byte for byte as the official templates and "
        "tokenizers do, linted, tokenized and parsed. `kimi-chat COMMAND --help` for each command.")
    parser.add_argument("--version", action="version", version=f"kimi-chat {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_SubcommandParser)
    from . import (conformance, count, data_report, dialects, inspect, lint, parse, prepare, render, run, serve,
                   tiny_model, verify)

    for command in (render, count, lint, parse, dialects, inspect, verify, run, serve, tiny_model, conformance,
                    prepare, data_report):
        command.register(sub)
    return parser


def _inputs(args: argparse.Namespace) -> str:
    names = [source_name(v) for a in _INPUT_ARGS if isinstance(v := getattr(args, a, None), str)]
    return ", ".join(names) or "the input"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kimi-chat``; returns the exit status (0 ok, 1 negative result, 2 bad input)."""
    args = build_parser().parse_args(argv)
    set_prog(f"kimi-chat {args.command}")
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `kimi-chat render ... | head`
        return 0
    except InputError as e:
        return fail(str(e))
    # The safety net: input the subcommand's own checks let through still gets one line, not a traceback.
    except RecursionError:
        return fail(f"{_inputs(args)}: input nested too deeply to process "
                    f"(more than about {sys.getrecursionlimit()} levels)")
    except UnicodeEncodeError as e:
        if not 0xD800 <= ord(e.object[e.start]) <= 0xDFFF:
            raise
        return fail(f"{_inputs(args)}: {surrogate_message(e.object[e.start])}")
    finally:
        set_prog("kimi-chat")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
