"""``kimi-chat``: the command line. One module per subcommand in this package; each exports
``register(subparsers)`` which adds its parser and sets ``func`` (``args -> exit status``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "COMMANDS"]

COMMANDS: tuple[str, ...] = ("render", "count", "parse", "dialects", "inspect", "verify", "run", "tiny_model")
"""Subcommand modules of this package, in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="kimi-chat", description="The Kimi-K2 chat format, right.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kimi-chat``; returns the exit status (0 ok, 1 negative result, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `kimi-chat render ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
