"""Kimi-K3 render speed: kimi_chat's K3 renderer vs the official K3 encoder and tokenizer, same process.

    python benchmarks/render_k3.py [--repeat N]

Renders the tool conversations of ``benchmarks/render.py`` (10, 100 and 1000 messages: user question,
assistant with reasoning and a tool call, tool result, assistant answer, repeated; tools declared) and
compares, after checking that the outputs are equal:

* text: ``render_k3`` vs the official ``encoding_k3.build_chat_segments`` + join (what
  ``apply_chat_template(tokenize=False)`` does);
* ids: ``render_k3_ids`` vs the official ``TikTokenTokenizer.apply_chat_template(tokenize=True)``,
  and vs ``render_k3`` + one ``encode`` of the whole text (a floor that is *not* the official ids).

Prints microseconds per message and the ratios. Needs transformers and the reference data.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from _timing import best_of  # noqa: E402
from render import TOOLS, conversation  # noqa: E402  (the K2 benchmark's conversations, same for both)
from kimi_chat.render.k3 import render_k3, render_k3_ids  # noqa: E402
from kimi_chat.oracle_k3 import official_k3_encoding, official_k3_ids, official_k3_tokenizer  # noqa: E402
from kimi_chat.tokenizer import KimiTokenizer  # noqa: E402

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    encoding = official_k3_encoding()
    official_tok = official_k3_tokenizer()
    tok = KimiTokenizer.from_reference("k3")

    def official_text(msgs: list[dict]) -> str:
        segs = encoding.build_chat_segments(msgs, tools=TOOLS, thinking_effort="max")
        return "".join(s.text for s in segs)

    print(f"{'messages':>8} | {'official text':>13} {'ours':>8} {'ratio':>6} | "
          f"{'official ids':>12} {'ours':>8} {'ratio':>6} | {'render+encode':>13} {'ids/that':>8}   (us/message)")
    worst_text = worst_ids = float("inf")
    for n in (10, 100, 1000):
        msgs = conversation(n)
        text = render_k3(msgs, TOOLS)
        if text != official_text(msgs):
            print(f"MISMATCH (text) at n={n}", file=sys.stderr)
            return 1
        ids = render_k3_ids(msgs, tok, TOOLS)
        if ids != official_k3_ids(msgs, TOOLS):
            print(f"MISMATCH (ids) at n={n}", file=sys.stderr)
            return 1
        rep = args.repeat if n < 1000 else max(2, args.repeat // 2)
        t_off = best_of(lambda: official_text(msgs), rep) / n * 1e6
        t_ours = best_of(lambda: render_k3(msgs, TOOLS), rep) / n * 1e6
        t_off_ids = best_of(lambda: official_tok.apply_chat_template(msgs, tools=TOOLS, tokenize=True), rep) / n * 1e6
        t_ids = best_of(lambda: render_k3_ids(msgs, tok, TOOLS), rep) / n * 1e6
        t_floor = best_of(lambda: tok.encode(render_k3(msgs, TOOLS)), rep) / n * 1e6
        worst_text = min(worst_text, t_off / t_ours)
        worst_ids = min(worst_ids, t_off_ids / t_ids)
        print(f"{n:>8} | {t_off:>13.1f} {t_ours:>8.2f} {t_off / t_ours:>5.1f}x | "
              f"{t_off_ids:>12.1f} {t_ids:>8.2f} {t_off_ids / t_ids:>5.1f}x | {t_floor:>13.2f} {t_ids / t_floor:>7.2f}x")
    print(f"worst ratio: text {worst_text:.1f}x (goal >= 20x), ids {worst_ids:.1f}x (goal >= 30x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
