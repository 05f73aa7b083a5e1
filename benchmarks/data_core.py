"""Samples as generated: the cost of ids + labels per conversation against the BPE floor, same process.

    python benchmarks/data_core.py [--dialects kimi-k2.6,kimi-k3] [--sizes 4,10,30,100] [--repeat 5]
                                   [--baseline DIR]

Per dialect, reasoning policy and conversation length (the tool conversation of ``render_tokens.py``: user,
assistant tool call with reasoning, tool result, assistant answer with reasoning, repeated):

* ``floor``: tiktoken encoding the same emitted text (every sample's text, ``Encoding.encode`` with the
  special tokens allowed): what the ids alone cost, with no rendering, attribution or sample logic;
* ``new``: :func:`kimi_chat.data.conversation_samples` on conversations it has not seen (its batches of calls
  interleaved with the floor's, so that the machine's changing load falls on both sides of the ratio): every
  call takes a conversation no call took before, built ahead of the timing, with no message text in common
  with another beyond the system prompt and the tool-call ids (what a dataset is: kimi_chat's caches of text
  pieces and prompts miss on the messages' text), and its ratio to the floor (goal <= 1.3x);
* ``repeat``: the same conversation again and again (the caches warm), and its ratio;
* ``render_tokens``: for reference, one :func:`kimi_chat.render_tokens` of the whole conversation (no generation
  prompt) on the same new conversations, as a ratio to the floor: what a single official rendering costs;
* ``x/doubling``: how ``new`` grows per doubling of the conversation's length, between consecutive sizes
  (goal <= 2.2x: linear is 2.0x; the floor's own growth is printed beside it: the K2-Thinking-style policies
  emit more text per turn as the history grows, one sample per final answer, each holding the history).

Samples / ids: how many samples and emitted ids one conversation gives. Then the batch core
(:func:`kimi_chat.data.conversations_to_batch`, Arrow batch included) on 200 new 30-message conversations per
dialect: conversations/s and ids/s in one process, with and without the per-conversation findings (lint).
``--baseline DIR`` runs the same measures on the kimi_chat of DIR (``git worktree add DIR COMMIT``) in a process
of its own and prints its ratios beside these: before and after a change. No asserts: the figures are printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import warnings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _timing import calls_per_batch, per_call, per_call_pair  # noqa: E402
from render_tokens import conversation  # noqa: E402

from kimi_chat.data import conversation_samples  # noqa: E402
from kimi_chat.data.samples import reasoning_options  # noqa: E402
from kimi_chat.dialects import get_dialect  # noqa: E402
from kimi_chat.errors import UnsupportedOptionError  # noqa: E402
from kimi_chat.tokens.rendered import render_tokens  # noqa: E402
from kimi_chat.tokens.tokenizer import KimiTokenizer  # noqa: E402


class Fresh:
    """Conversations of ``n`` messages, each taken once: every one salted with a number no other conversation of
    this run has (written at a fixed width, so that every conversation of a size has the same length as the
    floor's), so they have no message text in common beyond the system prompt and the tool-call ids; built
    ahead outside the timed calls: :meth:`reserve` before timing a function, :meth:`take` in each call."""

    _numbers = itertools.count(1)

    def __init__(self, n: int) -> None:
        self.n, self.ready = n, []

    def reserve(self, fn, repeat: int) -> None:
        """Enough conversations for every call of timing ``fn`` (:func:`per_call` / :func:`per_call_pair`:
        ``repeat`` batches, their size found by the first calls; three times that, as the first calls vary)."""
        calls = 3 * calls_per_batch(fn) * (repeat + 1) + 8
        self.ready += [self._make() for _ in range(calls - len(self.ready))]

    def take(self) -> list[dict]:
        return self.ready.pop() if self.ready else self._make()

    def _make(self) -> list[dict]:
        return conversation(self.n, salt=_salt(next(self._numbers)))


def _salt(k: int) -> str:
    return f"~{k:05d}"


def _tokenizer(name: str) -> KimiTokenizer:
    d = get_dialect(name)
    return KimiTokenizer.from_reference("k3" if d.family == "k3" else "k2.6")


def main() -> list[str]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="DIR",
                    help="also run this script on the kimi_chat of DIR (a checkout of an earlier commit: "
                         "git worktree add DIR COMMIT), in its own process, and print both ratios side by side")
    ap.add_argument("--no-batch", action="store_true", help="skip the batch core")
    ap.add_argument("--dialects", default="kimi-k2-instruct-0905,kimi-k2-thinking@rev1,kimi-k2.6,kimi-k3")
    ap.add_argument("--sizes", default="4,10,30,100")
    ap.add_argument("--policies", default="as-sampled,keep,official")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    results: dict[str, tuple[float, float]] = {}
    print(f"{'dialect':24} {'policy':10} {'msgs':>4} {'samples':>7} {'ids':>6} {'floor us':>9} {'new us':>9} "
          f"{'new/floor':>9} {'repeat us':>9} {'rep/floor':>9} {'render_tokens':>13} {'x/doubling':>10} "
          f"{'floor x/dbl':>11}")
    for name in args.dialects.split(","):
        tok = _tokenizer(name)
        enc = tok.encoding
        for policy in args.policies.split(","):
            try:
                reasoning_options(name, policy, tokenizer=tok)
            except UnsupportedOptionError:
                print(f"{name:24} {policy:10} (refused: the dialect cannot keep earlier reasoning)")
                continue
            prev = None
            for n in sizes:
                one = conversation(n, salt=_salt(0))  # the floor's text: a conversation as long as the new ones
                res = conversation_samples(one, dialect=name, tokenizer=tok, reasoning=policy, warn=False)
                texts = [tok.decode(s.input_ids) for s in res.samples]
                ids = sum(len(s.input_ids) for s in res.samples)
                def floor_fn() -> object:
                    return [enc.encode(t, allowed_special="all") for t in texts]

                fresh = Fresh(n)

                def new_fn() -> object:
                    return conversation_samples(fresh.take(), dialect=name, tokenizer=tok, reasoning=policy,
                                                warn=False)

                fresh.reserve(new_fn, args.repeat)
                # each side's batches interleaved with the floor's: a change of the machine's load falls on both
                floor, new = per_call_pair(floor_fn, new_fn, args.repeat)
                floor2, rep = per_call_pair(floor_fn, lambda: conversation_samples(
                    one, dialect=name, tokenizer=tok, reasoning=policy, warn=False), args.repeat)
                fresh_r = Fresh(n)

                def render_fn() -> object:
                    return render_tokens(fresh_r.take(), tokenizer=tok, dialect=name, add_generation_prompt=False)

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the dropped-reasoning warning, on every call
                    fresh_r.reserve(render_fn, args.repeat)
                    one_render = per_call(render_fn, args.repeat)
                growth = floor_growth = ""
                if prev is not None:
                    p_n, p_new, p_floor = prev
                    k = math.log2(n / p_n)
                    growth = f"{(new / p_new) ** (1 / k):.2f}x"
                    floor_growth = f"{(floor / p_floor) ** (1 / k):.2f}x"
                prev = (n, new, floor)
                print(f"{name:24} {policy:10} {n:>4} {len(res.samples):>7} {ids:>6} {floor * 1e6:>9.0f} "
                      f"{new * 1e6:>9.0f} {new / floor:>8.2f}x {rep * 1e6:>9.0f} {rep / floor2:>8.2f}x "
                      f"{one_render / floor:>12.2f}x {growth:>10} {floor_growth:>11}", flush=True)
                results[f"{name} {policy} {n}"] = (new / floor, rep / floor2)
    if os.environ.get("DATA_CORE_JSON"):  # the baseline run: its ratios for the parent to print
        print("JSON " + json.dumps(results))
    if args.baseline:
        _compare(args, results)
    return [] if args.no_batch else args.dialects.split(",")


def _compare(args: argparse.Namespace, after: dict[str, tuple[float, float]]) -> None:
    """Run this script on the kimi_chat of ``args.baseline`` (its own process: the same conversations, floor
    and timing) and print its ratios beside these."""
    import subprocess

    cmd = [sys.executable, os.path.abspath(__file__), "--dialects", args.dialects, "--sizes", args.sizes,
           "--policies", args.policies, "--repeat", str(args.repeat), "--no-batch"]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(args.baseline), "DATA_CORE_JSON": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    line = next((x for x in p.stdout.splitlines() if x.startswith("JSON ")), None)
    if line is None:
        print(f"baseline run failed: {(p.stderr or p.stdout).strip()[-400:]}")
        return
    before = json.loads(line[5:])
    print(f"\nbefore ({args.baseline}) / after (this checkout), each a ratio to the floor in its own process")
    print(f"{'dialect':24} {'policy':10} {'msgs':>4} {'new before':>10} {'new after':>9} {'rep before':>10} "
          f"{'rep after':>9}")
    for key, (new, rep) in after.items():
        b = before.get(key)
        if b is None:
            continue
        name, policy, n = key.split(" ")
        print(f"{name:24} {policy:10} {n:>4} {b[0]:>9.2f}x {new:>8.2f}x {b[1]:>9.2f}x {rep:>8.2f}x")


def batch_core(dialects: list[str]) -> None:
    import time

    from render_tokens import TOOLS

    from kimi_chat.data import conversations_to_batch

    if not dialects:
        return
    print(f"\n{'batch core (200 x 30 messages)':34} {'findings':>8} {'conv/s':>8} {'ids/s':>10} {'samples':>7}")
    for name in dialects:
        tok = _tokenizer(name)
        rows = [{"messages": conversation(30, salt=f"#{k}"), "tools": TOOLS} for k in range(200)]
        for findings in (False, True):
            conversations_to_batch(rows[:4], dialect=name, tokenizer=tok, findings=findings)
            t = time.process_time()
            res = conversations_to_batch(rows, dialect=name, tokenizer=tok, findings=findings)
            t = time.process_time() - t
            ids = sum(res.batch.column("length").to_pylist())
            print(f"{name:34} {str(findings):>8} {len(rows) / t:>8.0f} {ids / t:>10.0f} {res.batch.num_rows:>7}",
                  flush=True)


if __name__ == "__main__":
    batch_core(main())
