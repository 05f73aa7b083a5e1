"""Cost of reading ``StreamParser.message`` while streaming, of the server body stage per call, and the
memory a parse retains for stray markers.

    python benchmarks/parse_reads.py [--quick]

Prints (no asserts, numbers only):

1. per-read microseconds of ``StreamParser.message`` read after every ``feed()`` of 4 characters, for
   outputs of 50k and 200k characters, and their ratio (a read that costs the size of what changed is
   flat: ratio ~1; a read that rebuilds the whole message grows with it: ratio ~4). Cases: K2 text
   after the end of the turn, a Kimi-K3 output (``render_k3``, half the size) then text after its end,
   K2 many small tool calls. The read cost is
   (feed + read) minus feed alone, best of 3;
2. the server body stage (``BodyStage``, what the vLLM/SGLang plugins run) fed 2,000 and 8,000 tool
   calls in token-sized deltas: total seconds and the ratio (linear: 4x);
3. memory retained (tracemalloc) by ``parse()`` of 10 MB of ``[PAD]`` (one stray marker each), and of
   10 MB alternating ``[PAD]`` and ``<|im_middle|>`` (``--quick``: 1 MB), with the warning count.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse import make_k3_output, token_deltas, words  # noqa: E402

from kimi_chat import markers as M  # noqa: E402
from kimi_chat.servers.stages import BodyStage  # noqa: E402
from kimi_chat.output import StreamParser, parse  # noqa: E402

SB, SE = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
CB, AB, CE = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text
END = M.IM_END.text


def after_end(n: int) -> tuple[str, str]:
    return "kimi-k2-instruct", "Hi" + END + words(random.Random(0), n)


def k3_output(n: int) -> tuple[str, str]:
    return "kimi-k3", make_k3_output(n // 2) + words(random.Random(0), n // 2)


def calls_text(count: int) -> str:
    return SB + "".join(CB + f"functions.f:{i}" + AB + '{"a": 1}' + CE for i in range(count)) + SE + END


def many_calls(n: int) -> tuple[str, str]:
    one = len(calls_text(1)) - len(SB + SE + END)
    return "kimi-k2-instruct", calls_text(max(1, n // one))


def run(dialect: str, chunks: list[str], read: bool) -> float:
    p = StreamParser(dialect)
    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    for c in chunks:
        p.feed(c)
        if read:
            p.message  # noqa: B018 - what a server does after each feed
    p.finish()
    total = time.perf_counter() - t0
    gc.enable()
    return total


def per_read_rows(quick: bool) -> None:
    print("1. StreamParser.message read after every 4-character feed: per-read cost")
    cases = (("K2, text after the end of the turn", after_end), ("Kimi-K3 output, then text after its end", k3_output),
             ("K2, many tool calls", many_calls))
    for name, make in cases:
        prev = None
        for n in (50_000, 200_000):
            dialect, text = make(n)
            chunks = [text[i:i + 4] for i in range(0, len(text), 4)]
            p = StreamParser(dialect)
            for c in chunks:
                p.feed(c)
                p.message  # noqa: B018
            p.finish()
            if p.message != parse(text, dialect=dialect):
                raise SystemExit(f"{name}: streamed message differs from parse()")
            repeat = 1 if quick else 3
            feed = min(run(dialect, chunks, False) for _ in range(repeat))
            both = min(run(dialect, chunks, True) for _ in range(repeat))
            us = max(both - feed, 0.0) / len(chunks) * 1e6
            note = f"   ({us / prev:.1f}x per read for 4x the size; flat = 1x)" if prev else ""
            print(f"  {name:38} {len(text) // 1000:>4}k chars, {len(chunks):>6} reads: {us:7.2f} us per read{note}")
            prev = us
    print()


def stage_rows(quick: bool) -> None:
    print("2. BodyStage (server body stage) streaming N tool calls in token-sized deltas")
    prev = None
    for count in (2000, 8000):
        deltas = token_deltas(calls_text(count))
        best = float("inf")
        for _ in range(1 if quick else 3):
            st = BodyStage(tools=None, after_reasoning=False)
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            for d in deltas:
                st.feed(d)
            st.finish()
            best = min(best, time.perf_counter() - t0)
            gc.enable()
        if len(st.calls) != count:
            raise SystemExit("the stage lost calls")
        note = f"   ({best / prev:.1f}x the time for 4x the calls; linear = 4x)" if prev else ""
        print(f"  {count:>5} calls, {len(deltas):>6} deltas: {best:.3f} s{note}")
        prev = best
    print()


def memory_rows(quick: bool) -> None:
    size = 1_000_000 if quick else 10_000_000
    print(f"3. memory retained by parse() of {size / 1e6:g} MB of stray markers (tracemalloc)")
    pad, mid = M.PAD.text, M.IM_MIDDLE.text
    for name, unit in ((f"{pad} repeated", pad), (f"{pad}{mid} alternating", pad + mid)):
        text = unit * (size // len(unit))
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        msg = parse(text)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        # (before the merge, ParseWarning had no count: one object per marker)
        n = sum(w.count for w in msg.warnings) if hasattr(msg.warnings[0], "count") else len(msg.warnings)
        print(f"  {name:34} {len(text) / 1e6:5.1f} MB input: {kept / 1e6:8.2f} MB retained "
              f"({kept / len(text):.3f} bytes per input character), {len(msg.warnings)} warning object(s) "
              f"for {n} stray markers")
        del msg
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run per measure, 1 MB for the memory rows")
    ap.add_argument("--only", choices=("reads", "stage", "memory"))
    a = ap.parse_args()
    if a.only in (None, "reads"):
        per_read_rows(a.quick)
    if a.only in (None, "stage"):
        stage_rows(a.quick)
    if a.only in (None, "memory"):
        memory_rows(a.quick)


if __name__ == "__main__":
    main()
