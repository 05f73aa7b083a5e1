"""What the Kimi format adds to llguidance: :func:`kimi_chat.grammar.constraint` against llguidance alone
on the same schemas (tests/data/constraint_schemas.json), in one process.

    python benchmarks/constraint.py [--quick] [--dialect kimi-k2-instruct|kimi-k3]

Prints (no asserts, numbers only), per family, over the corpus schemas:

1. compile time (ms, p50/p99 over schemas, each the best of 3): a cold ``constraint(...)`` (cache
   cleared) plus its ``LLMatcher`` (the whole request: the format walk, every ``%json`` schema
   checked, the grammar checked and compiled; the GBNF export is built only when read) against
   ``LLMatcher`` of the schema alone (``grammar_from_json_schema``); then a repeated request (the
   constraint cached, the ``LLMatcher`` built);
2. per-token mask time (µs, p50/p99 over every token of every valid instance): ``compute_bitmask``
   along the tokens of a forced call holding the instance (the Kimi text) against the same along the
   instance's JSON alone, and the ratio.

The tokenizer is the Kimi vocabulary (163,842 tokens) when the reference data is there, else the
byte-level tokenizer ``Constraint.accepts`` uses (said in the output).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import best_of  # noqa: E402

import llguidance  # noqa: E402

from kimi_chat.grammar.request import byte_tokenizer, clear_cache, constraint, llg_tokenizer  # noqa: E402
from kimi_chat.prompt import render  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = json.loads((ROOT / "tests" / "data" / "constraint_schemas.json").read_text(encoding="utf-8"))["schemas"]
USER = [{"role": "user", "content": "Call the tool."}]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def tokenizer(dialect: str):
    """(llguidance tokenizer, encode function, description)."""
    try:
        from kimi_chat.tokens.tokenizer import KimiTokenizer

        kt = KimiTokenizer.from_reference("k3" if dialect == "kimi-k3" else "k2")
        return llg_tokenizer(kt), kt.encode, f"the Kimi vocabulary ({kt.vocab_size} tokens)"
    except Exception as e:  # no reference data: the byte-level tokenizer
        from kimi_chat.dialects import get_dialect
        from kimi_chat.grammar.request import _tokenize

        tok, ids = byte_tokenizer(get_dialect(dialect))
        return tok, (lambda s: _tokenize(s, ids)), f"the byte-level tokenizer ({type(e).__name__}: {e})"


def kimi_text(dialect: str, schema: dict, value: object) -> str:
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    m = {"role": "assistant", "content": None, "reasoning_content": "ok",
         "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f",
                                                                              "arguments": json.dumps(value)}}]}
    prompt = render(USER, dialect=dialect, tools=tools)
    full = render(USER + [m], dialect=dialect, tools=tools, add_generation_prompt=False)
    return full[len(prompt):]


def mask_times(tok, grammar: str, tokens: list[int]) -> list[float]:
    m = llguidance.LLMatcher(tok, grammar, log_level=0)
    out = []
    for t in tokens:
        t0 = time.perf_counter()
        m.compute_bitmask()
        out.append(time.perf_counter() - t0)
        if not m.consume_token(t):
            break
    return out


def run(dialect: str, quick: bool) -> None:
    tok, encode, what = tokenizer(dialect)
    print(f"\n== {dialect}: {len(CORPUS)} schemas, {what}")
    cases = CORPUS[:6] if quick else CORPUS
    ours_c, warm_c, alone_c, ours_m, alone_m = [], [], [], [], []
    for case in cases:
        schema = case["schema"]
        tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]

        def ours() -> None:
            clear_cache()  # a cold build (a repeated request is a cache hit)
            c = constraint(tools, dialect=dialect, tool_choice="required", parallel_tool_calls=False)
            llguidance.LLMatcher(tok, c.grammar(), log_level=0)

        def warm() -> None:
            c = constraint(tools, dialect=dialect, tool_choice="required", parallel_tool_calls=False)
            llguidance.LLMatcher(tok, c.grammar(), log_level=0)

        alone_grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
        ours_c.append(best_of(ours, 3))
        warm()
        warm_c.append(best_of(warm, 3))
        alone_c.append(best_of(lambda: llguidance.LLMatcher(tok, alone_grammar, log_level=0), 3))
        c = constraint(tools, dialect=dialect, tool_choice="required", parallel_tool_calls=False)
        for value in case["valid"]:
            text = kimi_text(dialect, schema, value)
            ours_m += mask_times(tok, c.grammar(), encode(text))
            alone_m += mask_times(tok, alone_grammar, encode(json.dumps(value)))
    ms = 1e3
    us = 1e6
    print(f"compile   ours p50 {pct(ours_c, .5) * ms:8.2f} ms  p99 {pct(ours_c, .99) * ms:8.2f} ms | "
          f"llguidance alone p50 {pct(alone_c, .5) * ms:8.2f} ms  p99 {pct(alone_c, .99) * ms:8.2f} ms | "
          f"ratio p50 {pct(ours_c, .5) / pct(alone_c, .5):5.2f}x  p99 {pct(ours_c, .99) / pct(alone_c, .99):5.2f}x")
    print(f"repeated  ours p50 {pct(warm_c, .5) * ms:8.2f} ms  p99 {pct(warm_c, .99) * ms:8.2f} ms "
          f"(the constraint cached, its LLMatcher built) | ratio p50 {pct(warm_c, .5) / pct(alone_c, .5):5.2f}x")
    print(f"mask/tok  ours p50 {pct(ours_m, .5) * us:8.1f} µs  p99 {pct(ours_m, .99) * us:8.1f} µs | "
          f"llguidance alone p50 {pct(alone_m, .5) * us:8.1f} µs  p99 {pct(alone_m, .99) * us:8.1f} µs | "
          f"ratio p50 {pct(ours_m, .5) / pct(alone_m, .5):5.2f}x  p99 {pct(ours_m, .99) / pct(alone_m, .99):5.2f}x "
          f"({len(ours_m)} / {len(alone_m)} tokens; mean {statistics.mean(ours_m) * us:.1f} / "
          f"{statistics.mean(alone_m) * us:.1f} µs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first 6 schemas only")
    ap.add_argument("--dialect", action="append", help="default: kimi-k2-instruct and kimi-k3")
    args = ap.parse_args()
    for d in args.dialect or ["kimi-k2-instruct", "kimi-k3"]:
        run(d, args.quick)


if __name__ == "__main__":
    main()
