"""Timing helper shared by the benchmark scripts (run them from anywhere: each puts this folder on
``sys.path`` as Python does for a script)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn``, in seconds (the least disturbed by the machine)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def calls_per_batch(fn: Callable[[], object], budget: float = 0.02) -> int:
    """How many calls of ``fn`` fill a batch of about ``budget`` CPU seconds (one call timed: it runs once)."""
    t = time.process_time()
    fn()
    return max(1, int(budget / max(time.process_time() - t, 1e-7)))


def per_call(fn: Callable[[], object], repeat: int, budget: float = 0.02) -> float:
    """CPU seconds of this process per call of ``fn``: the best of ``repeat`` batches of calls, each
    batch sized so that it lasts about ``budget`` seconds (a 4-message render takes microseconds: one
    call is below the clock's noise, a batch is not). CPU time, not wall time: on a shared machine the
    other processes' load does not count (single-threaded code; its cache misses still do)."""
    number = calls_per_batch(fn, budget)
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t) / number)
    return best


def per_call_pair(a: Callable[[], object], b: Callable[[], object], repeat: int,
                  budget: float = 0.02) -> tuple[float, float]:
    """Seconds per call of ``a`` and of ``b`` (:func:`per_call`), their batches interleaved, so that a
    change of the machine's load falls on both sides of the ratio alike."""
    numbers = [calls_per_batch(fn, budget) for fn in (a, b)]
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for k, fn in enumerate((a, b)):
            t = time.process_time()
            for _ in range(numbers[k]):
                fn()
            best[k] = min(best[k], (time.process_time() - t) / numbers[k])
    return best[0], best[1]
