"""``kimi-chat tiny-model OUT.gguf``: write a tiny randomly initialised Kimi-architecture (deepseek2)
GGUF with the real Kimi vocabulary, for trying ``kimi-chat run`` and testing engines (needs the
``native`` extra and the reference tokenizer files). ``-d kimi-k3``: K3's special tokens over the same
vocabulary, ``<|end_of_msg|>`` as end of generation, no template."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..dialect_records import DEFAULT_DIALECT, get_dialect
from ..errors import KimiChatError, ReferenceDataError
from ..families import family_of
from ._io import InputError, fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "tiny-model",
        help="write a tiny random Kimi-architecture GGUF (real vocabulary) for trying `run`",
        description="Write a ~49 MB deepseek2 GGUF with random weights, the real 163,840-token Kimi "
        "vocabulary (kimi-k2 pre-tokenizer, BPE merges derived from tiktoken.model; a reasoning dialect's "
        "<think> / </think> as special tokens) and kimi_chat's "
        "template for DIALECT as tokenizer.chat_template (a Kimi-K3 dialect: K3's special tokens, "
        "<|end_of_msg|> as end of generation, no template). Its output is noise, but real engines load, "
        "tokenize and generate with it. Needs the reference tokenizer files "
        "($KIMI_CHAT_REFERENCE_DIR) or --tokenizer-dir.",
    )
    p.add_argument("out", help="output .gguf path (an existing file is replaced only if it is a GGUF file)")
    p.add_argument("--dialect", "-d", default=DEFAULT_DIALECT, help=f"embedded template (default {DEFAULT_DIALECT})")
    p.add_argument("--tokenizer-dir", default=None,
                   help="a model snapshot directory with tiktoken.model and tokenizer_config.json "
                   "(default: the reference data)")
    p.add_argument("--seed", type=int, default=0, help="weight initialisation seed (default 0)")
    p.add_argument("--terse", action="store_true",
                   help="build a bias into the weights toward the end-of-turn marker and the structure-closing "
                   "tokens: replies are short ('OK', then the end of the turn) and constrained calls and JSON "
                   "replies complete, so finish-dependent checks run in seconds")
    p.set_defaults(func=run)


GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""


def _check_out(out: str) -> None:
    """Refuse an output path that is a directory, or an existing file that is not a GGUF file (which
    would be overwritten)."""
    path = Path(out)
    if path.is_dir():
        raise InputError(f"{out}: is a directory; give the path of the .gguf file to write, "
                         f"e.g. {path / 'kimi-tiny.gguf'}")
    if path.exists():
        try:
            with open(path, "rb") as f:
                head = f.read(len(GGUF_MAGIC))
        except OSError as e:
            raise InputError(f"{out}: cannot read the existing file: {e.strerror or e}") from e
        if head != GGUF_MAGIC:
            raise InputError(f"{out}: exists and is not a GGUF file; not overwritten (remove it, or choose "
                             "another path)")


def run(args: argparse.Namespace) -> int:
    try:
        from ..testing.tiny_model import build_tiny_model
        from ..families.k3.tokens import vocabulary_problem
        from .count import snapshot_tokenizer

        _check_out(args.out)
        d = get_dialect(args.dialect)
        tok = None  # build_tiny_model's default: the reference tokenizer of d's family
        if args.tokenizer_dir:
            tok = snapshot_tokenizer(args.tokenizer_dir, d, None, "--tokenizer-dir")
            problem = vocabulary_problem(tok, d)
            if problem is not None:
                raise InputError(f"--tokenizer-dir {args.tokenizer_dir}: {problem}; give --tokenizer-dir a "
                                 f"{family_of(d).title} model snapshot, or choose its "
                                 "dialect with --dialect")
        t0 = time.perf_counter()
        path = build_tiny_model(args.out, dialect=d.name, tokenizer=tok, seed=args.seed, terse=args.terse,
                                progress=lambda line: print(f"kimi-chat: {line} ({time.perf_counter() - t0:.1f}s)",
                                                            file=sys.stderr, flush=True))
    except ReferenceDataError as e:
        return fail(f"{e}" + ("" if args.tokenizer_dir else " (or give a model snapshot directory with --tokenizer-dir DIR)"))
    except (InputError, KimiChatError, OSError) as e:
        return fail(str(e))
    what = f"{d.name} template" if family_of(d).official.jinja_templates else f"{d.name} special tokens"
    what += ", terse" if args.terse else ""
    print(f"kimi-chat: wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {what}) "
          f"in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0
