"""Per-token cost of constrained generation in the native runtime, on the tiny models.

For each family: forced tool calls generated under the request's constraint (llguidance token masks
applied as a logits processor, :mod:`kimi_chat.engines.constrain`) and the same number of tokens
generated without one, from the same prompt. Printed per family, p50/p99 in milliseconds:

* ``mask``: one mask step (feed the sampled id to the matcher, compute the mask, apply it), as
  :class:`~kimi_chat.engines.constrain.TokenMask` times it;
* ``step (constrained)`` / ``step (free)``: the time between two ids the engine yields, with and
  without the mask (decode + sampling + mask);
* the ratios mask / free step and constrained / free step at p50 (same process, same machine).

The tiny model decodes in well under a millisecond, so the ratio here is an upper bound of what the
mask adds to a real model's step (whose decode takes tens of milliseconds; the mask does not grow
with the model). Needs the ``native`` extra and the reference data (the tiny models' vocabulary)::

    KIMI_CHAT_REFERENCE_DIR=../shared/reference python benchmarks/constraint_runtime.py [--runs 12]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kimi_chat.testing.tiny_model import build_tiny_model

ASK = [{"role": "user", "content": "Book it."}]
BOOKING = {
    "type": "object",
    "properties": {
        "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        "cabin": {"type": "string", "enum": ["economy", "business"]},
        "airport": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "note": {"type": "string", "maxLength": 40},
    },
    "required": ["seats", "cabin", "airport", "note"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "book", "parameters": BOOKING}}]
FAMILIES = {"k2": ("kimi-k2-instruct-0905", {}), "k3": ("kimi-k3", {"thinking": False})}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] * 1e3


def _gaps(model, prompt: list[int], n: int, mask=None, seed: int = 0) -> list[float]:
    """Seconds between consecutive ids of one generation (the first gap includes the prompt: dropped)."""
    out, t = [], time.perf_counter()
    for _ in model.generate(prompt, max_tokens=n, seed=seed, temperature=1.0, mask=mask):
        now = time.perf_counter()
        out.append(now - t)
        t = now
    return out[1:]


def bench(path: Path, options: dict, runs: int) -> dict[str, float]:
    from kimi_chat.engines.constrain import mask_for
    from kimi_chat.engines.native import NativeModel

    model = NativeModel.load(path, n_ctx=2048)
    try:
        masks: list[float] = []
        constrained: list[float] = []
        free: list[float] = []
        for seed in range(runs):
            r = model.chat(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=120,
                           temperature=1.0, seed=seed, **options)
            masks += r.mask.step_seconds[1:]
            n = len(r.completion_ids)
            # the same path timed from outside: a fresh mask of the same constraint, the same prompt
            m = mask_for(r.constraint, model.tokenizer(), dialect=model.dialect, prompt_len=len(r.prompt_ids))
            constrained += _gaps(model, r.prompt_ids, n, mask=m, seed=seed)
            free += _gaps(model, r.prompt_ids, n, seed=seed)
        return {
            "mask_p50": _pct(masks, 0.5), "mask_p99": _pct(masks, 0.99),
            "con_p50": _pct(constrained, 0.5), "con_p99": _pct(constrained, 0.99),
            "free_p50": _pct(free, 0.5), "free_p99": _pct(free, 0.99),
            "tokens": float(len(masks)),
        }
    finally:
        model.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12, help="forced-call generations per family (default 12)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'family':6} {'tokens':>6}  {'mask p50/p99 ms':>16}  {'step constrained':>17}  {'step free':>12}"
              f"  {'mask/free':>9}  {'constr/free':>11}")
        for fam, (dialect, options) in FAMILIES.items():
            path = build_tiny_model(Path(tmp) / f"tiny-{fam}.gguf", dialect=dialect)
            s = bench(path, options, args.runs)
            print(f"{fam:6} {int(s['tokens']):>6}  {s['mask_p50']:7.3f}/{s['mask_p99']:7.3f}  "
                  f"{s['con_p50']:8.3f}/{s['con_p99']:7.3f}  {s['free_p50']:5.3f}/{s['free_p99']:5.3f}"
                  f"  {s['mask_p50'] / s['free_p50']:9.2f}  {s['con_p50'] / s['free_p50']:11.2f}")


if __name__ == "__main__":
    main()
