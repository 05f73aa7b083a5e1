"""``kimi-chat tiny-model OUT.gguf``: write a tiny randomly initialised Kimi-architecture (deepseek2)
GGUF with the real Kimi vocabulary, for trying ``kimi-chat run`` and testing engines (needs the
``native`` extra and the reference tokenizer files). ``-d kimi-k3``: K3's special tokens over the same
vocabulary, ``<|end_of_msg|>`` as end of generation, no template."""

from __future__ import annotations

import argparse
import sys
import time

from ..dialects import DEFAULT_DIALECT, get_dialect
from ..errors import KimiChatError
from ._io import fail


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "tiny-model",
        help="write a tiny random Kimi-architecture GGUF (real vocabulary) for trying `run`",
        description="Write a ~49 MB deepseek2 GGUF with random weights, the real 163,840-token Kimi "
        "vocabulary (kimi-k2 pre-tokenizer, BPE merges derived from tiktoken.model) and kimi_chat's "
        "template for DIALECT as tokenizer.chat_template (a Kimi-K3 dialect: K3's special tokens, "
        "<|end_of_msg|> as end of generation, no template). Its output is noise, but real engines load, "
        "tokenize and generate with it. Needs the reference tokenizer files "
        "($KIMI_CHAT_REFERENCE_DIR) or --tokenizer-dir.",
    )
    p.add_argument("out", help="output .gguf path")
    p.add_argument("--dialect", "-d", default=DEFAULT_DIALECT, help=f"embedded template (default {DEFAULT_DIALECT})")
    p.add_argument("--tokenizer-dir", default=None,
                   help="a model snapshot directory with tiktoken.model and tokenizer_config.json "
                   "(default: the reference data)")
    p.add_argument("--seed", type=int, default=0, help="weight initialisation seed (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..testing.tiny_model import build_tiny_model
        from ..tokenizer import KimiTokenizer

        d = get_dialect(args.dialect)
        tok = KimiTokenizer.from_dir(args.tokenizer_dir) if args.tokenizer_dir else None
        t0 = time.perf_counter()
        path = build_tiny_model(args.out, dialect=d.name, tokenizer=tok, seed=args.seed)
    except (KimiChatError, OSError) as e:
        return fail(str(e))
    what = f"{d.name} template" if d.family == "k2" else f"{d.name} special tokens"
    print(f"kimi-chat: wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {what}) "
          f"in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return 0
