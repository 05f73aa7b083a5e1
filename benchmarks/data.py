"""Training-data speed and memory: kimi_chat's data path against what a trainer would do instead, same process.

    python benchmarks/data.py [--conversations N] [--parallel N] [--shard-rows N] [--ray] [--memory 10000,200000]
                              [--renderers] [--only parallel|memory]

On synthetic K2.6 agent loops (system prompt; rounds of a user question, an assistant turn with reasoning and a
tool call, the tool result, an assistant answer with reasoning; one tool declared):

1. **Samples as generated, per conversation**: ``conversations_to_batch`` (ids, labels, masks, Arrow batch, the
   report's findings) against the only exact route today, the official template per sample: for every trained
   assistant turn the official prompt of ``messages[:i]`` (transformers rendering the reference template, as
   ``apply_chat_template`` does; then the official encode), as kimi_chat.reference.oracle renders it. Goal >= 10x.
   Every row is new to the report's checks and to kimi_chat's caches of text pieces and prompts (each timed run
   takes rows no earlier run took; their tool results and city names repeat, as a dataset's do); the tool list
   repeats across rows (one list, as in most datasets). Also the samples core alone (``conversation_samples``),
   the ceiling of the batch core's ratio.
2. **Parallel**: ``kimi-chat prepare``'s local engine at 1 and 2 workers (conversations/s; efficiency =
   rate(2) / (2 * rate(1)), goal >= 0.8 on an idle 2-core machine), and the Ray engine on a local cluster
   (``--ray``).
3. **Memory**: the peak RSS of ``kimi-chat prepare --workers 1`` (a child process, rendering in-process) on
   ``--memory`` sizes of input: flat means streamed.
4. ``--renderers``: PrimeIntellect's ``renderers`` 0.1.12 (run in ``/work/venv-renderers`` by
   ``benchmarks/data_renderers.py`` when that venv exists; it loads its tokenizer from the Hugging Face hub,
   which is not reachable offline: the script says so).

Ratios are printed from one process; nothing asserts a timing. Needs the reference data, transformers,
pyarrow, tqdm (and ray[data] for ``--ray``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "data"))

from data_pipeline_support import agent_loop  # noqa: E402

from kimi_chat.data.options import RenderOptions  # noqa: E402

DIALECT = "kimi-k2.6"
BATCH = 100
"""Rows per call of the batch core in the batched measure."""


class _NewRows:
    """Rows of agent loops, ``n`` per timed run, each run's rows new (numbered past every earlier run's: no text of
    their questions and reasoning seen before), built ahead of the timing: :meth:`next` before each run."""

    def __init__(self, n: int, turns: int) -> None:
        self.n, self.turns, self.made = n, turns, 0

    def next(self) -> list:
        rows = [agent_loop(self.made + i, self.turns) for i in range(self.n)]
        self.made += self.n
        return rows


def _best(fn, fresh: _NewRows, repeat: int = 3) -> float:
    """The fewest CPU seconds of this process over ``repeat`` runs of ``fn(rows)`` (single-threaded work: the
    machine's other load does not count), each run on new rows (``fresh``), built outside the timing."""
    best = float("inf")
    for _ in range(repeat):
        rows = fresh.next()
        t = time.process_time()
        fn(rows)
        best = min(best, time.process_time() - t)
    return best


def bench_per_conversation(n: int, turns: int) -> None:
    from kimi_chat.data.batch import conversations_to_batch
    from kimi_chat.data.samples import conversation_samples
    from kimi_chat.reference.oracle import render_official

    fresh = _NewRows(n, turns)
    rows = fresh.next()
    options = RenderOptions.make(DIALECT)
    tok = options.tokenizer.load()
    options.render(rows[:2])  # warm: templates compiled, caches filled

    def ours(rows: list) -> None:
        for r in rows:
            options.render([r])

    def bare(rows: list) -> None:  # the samples alone, without the report's per-conversation checks
        for r in rows:
            conversations_to_batch([r], dialect=DIALECT, tokenizer=tok, findings=False)

    def core(rows: list) -> None:  # the samples core alone (ids and labels): no Arrow batch, no findings, no row checks
        for r in rows:
            conversation_samples(r["messages"], dialect=DIALECT, tokenizer=tok, tools=r["tools"], warn=False)

    def batched(rows: list) -> None:  # as prepare and datasets.map call it: a batch of rows, one Arrow batch
        for k in range(0, n, BATCH):
            options.render(rows[k : k + BATCH], first_row=k)

    quarter = max(1, n // 4)  # the official route is slow: a quarter of the rows, per conversation
    render_official(rows[0]["messages"], tools=rows[0]["tools"], dialect=DIALECT)  # warm: the template compiled

    def official(rows: list) -> None:
        for r in rows[:quarter]:
            msgs = r["messages"]
            for i, m in enumerate(msgs):
                if m["role"] == "assistant":
                    tok.encode(render_official(msgs[:i], tools=r["tools"], dialect=DIALECT,
                                               add_generation_prompt=True))
                    tok.encode(render_official(msgs[: i + 1], tools=r["tools"], dialect=DIALECT,
                                               add_generation_prompt=False))

    t_bare = _best(bare, fresh) / n
    t_ours = _best(ours, fresh) / n
    t_batched = _best(batched, fresh) / n
    t_core = _best(core, fresh) / n
    t_off = _best(official, fresh, 2) / quarter
    msgs = len(rows[0]["messages"])
    print(f"per conversation ({msgs} messages, {turns} rounds, {DIALECT}, CPU time): official template per sample "
          f"(prompt + turn, render + encode) {t_off * 1e3:.2f} ms; kimi_chat conversations_to_batch, one row per "
          f"call {t_ours * 1e3:.2f} ms: {t_off / t_ours:.1f}x (goal >= 10x); in batches of {BATCH} rows (as prepare "
          f"and datasets.map call it) {t_batched * 1e3:.2f} ms: {t_off / t_batched:.1f}x; one row per call without "
          f"the report's checks (findings=False) {t_bare * 1e3:.2f} ms: {t_off / t_bare:.1f}x; the samples core alone "
          f"(conversation_samples: ids and labels, no Arrow, no findings; the ceiling of the ratios above) "
          f"{t_core * 1e3:.2f} ms: {t_off / t_core:.1f}x; {_load()}")


def _write_input(path: Path, n: int, turns: int) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps(agent_loop(i, turns)) + "\n")
    return path


def _load() -> str:
    """The machine's load, for reading the clock ratios: the load averages over 1, 5 and 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


def _spin(n: int) -> float:
    """Pure-Python work on no data: its CPU seconds."""
    t = time.process_time()
    x = 0
    for i in range(n):
        x += i * i
    return time.process_time() - t


def machine_parallelism(n: int = 20_000_000) -> str:
    """The control for the clock ratio: the same pure-CPU loop in 1 and in 2 processes (nothing shared,
    nothing to read): its efficiency by the clock is the most any program gets on this machine right now."""
    import multiprocessing

    walls, cores = {}, {}
    for k in (1, 2):
        with multiprocessing.get_context("spawn").Pool(k) as pool:
            pool.map(_spin, [1] * k)  # started
            t = time.perf_counter()
            cpu = sum(pool.map(_spin, [n] * k))
            walls[k] = time.perf_counter() - t
            cores[k] = cpu / walls[k]
    eff = walls[1] / walls[2]  # k times the work in walls[k]: rate(2) / (2 * rate(1))
    return (f"control (a pure-CPU loop, 1 vs 2 processes): {eff:.2f} by the clock; this process tree got "
            f"{cores[1]:.2f} and {cores[2]:.2f} cores")


def bench_parallel(n: int, turns: int, with_ray: bool, shard_rows: int | None = None) -> None:
    """The local engine at 1 and 2 workers on ``n`` conversations in shards of ``shard_rows`` (default n/16).
    Efficiency by the clock: rate(2) / (2 * rate(1)); by CPU time: the CPU seconds of the whole run at 1 worker
    (everything is in this process) over those at 2 (this process, the driver, plus every worker's CPU on its
    chunks: reading, parsing, rendering, writing), 1.0 when the pool adds no work. On a machine that other
    processes load, the clock ratio measures them too: the load average is printed with it."""
    from kimi_chat.data.pipeline import run_local
    from kimi_chat.data.sources import open_source

    options = RenderOptions.make(DIALECT)
    rows = shard_rows or max(50, n // 16)
    tmp = Path(tempfile.mkdtemp(prefix="kimi-data-bench-"))
    try:
        src = _write_input(tmp / "in.jsonl", n, turns)
        run_local(open_source(src, rows), tmp / "warm", options, workers=1, progress=False)  # caches, page cache
        rates, cpu = {}, {}
        print(f"parallel: {n} conversations ({turns} rounds each) in shards of {rows}; before: {_load()}")
        for workers in (1, 2):
            out = tmp / f"out{workers}"
            driver = time.process_time()
            r = run_local(open_source(src, rows), out, options, workers=workers, progress=False)
            driver = time.process_time() - driver
            worker_cpu = sum(s["cpu_seconds"] for s in r.shards) if workers > 1 else 0.0
            cpu[workers] = driver + worker_cpu
            rates[workers] = r.rows / r.seconds
            print(f"local engine, {workers} worker(s): {n} conversations in {r.seconds:.2f} s = "
                  f"{rates[workers]:,.0f} conversations/s, {r.tokens / r.seconds:,.0f} tokens/s; CPU "
                  f"{cpu[workers]:.1f} s (driver {driver:.1f} s, workers {worker_cpu:.1f} s); {_load()}")
        print(f"parallel efficiency at 2 workers: {rates[2] / (2 * rates[1]):.2f} by the clock (goal >= 0.8 on an "
              f"idle machine; worker start included); {cpu[1] / cpu[2]:.2f} by CPU time (1.0: the pool adds no work)")
        print(machine_parallelism())
        if with_ray:
            import ray

            from kimi_chat.data.ray_engine import local_cluster, run_ray

            with local_cluster(3):
                t = time.perf_counter()
                r = run_ray(open_source(src, rows), tmp / "ray", options, workers=2, progress=False)
                secs = time.perf_counter() - t
                print(f"ray engine, 2 actors (local cluster): {n} conversations in {secs:.2f} s = "
                      f"{r.rows / secs:,.0f} conversations/s (actor start included); "
                      f"{r.rows / secs / rates[2]:.2f}x the local engine at 2 workers")
            del ray
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_memory(sizes: list[int]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kimi-data-mem-"))
    try:
        for n in sizes:
            src = _write_input(tmp / f"in{n}.jsonl", n, 1)
            code = ("import resource, sys; from kimi_chat.cli import main; "
                    f"s = main(['prepare', {str(src)!r}, '-d', {DIALECT!r}, '-o', {str(tmp / f'out{n}')!r}, "
                    "'--workers', '1', '-q']); "
                    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(s)")
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
            secs = time.perf_counter() - t
            if p.returncode:
                print(f"memory at {n}: prepare failed: {p.stderr.strip()[-300:]}")
                continue
            peak_mb = int(p.stdout.strip().splitlines()[-1]) / 1024
            size_mb = src.stat().st_size / 1e6
            print(f"memory: {n:,} conversations ({size_mb:,.0f} MB of JSONL): peak RSS {peak_mb:,.0f} MB "
                  f"({secs:.0f} s)")
            shutil.rmtree(tmp / f"out{n}", ignore_errors=True)
            src.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_renderers(n: int, turns: int) -> None:
    """renderers 0.1.12 (its K2.5 renderer, build_training_sample: one full render per conversation) against
    kimi_chat's samples as generated on the same conversations."""
    from kimi_chat.tokens.tokenizer import PAT_STR

    venv = Path("/work/venv-renderers/bin/python")
    script = Path(__file__).with_name("data_renderers.py")
    if not venv.exists():
        print("renderers 0.1.12: not run (no /work/venv-renderers: python -m venv /work/venv-renderers && "
              "/work/venv-renderers/bin/pip install renderers==0.1.12)")
        return
    fresh = _NewRows(n, turns)
    rows = fresh.next()  # the rows renderers takes (new to it): kimi_chat's timed runs take new rows too
    options = RenderOptions.make("kimi-k2.5")
    tok = options.tokenizer.load()
    options.render(rows[:2])
    ours_tokens = sum(sum(options.render([r]).batch.column("length").to_pylist()) for r in rows[:20]) / 20
    t_ours = _best(lambda new: [options.render([r]) for r in new], fresh) / n
    official = RenderOptions.make("kimi-k2.5", reasoning="official")
    t_official = _best(lambda new: [official.render([r]) for r in new], fresh) / n
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"rows": rows, "model": str(tok.model_path), "config": str(tok.config_path), "pattern": PAT_STR}, f)
    try:
        p = subprocess.run([str(venv), str(script), f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    try:
        theirs = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        print(f"renderers 0.1.12: failed: {(p.stderr or p.stdout).strip()[-400:]}")
        return
    if "error" in theirs:
        print(f"renderers 0.1.12: {theirs['error']}")
        return
    t_theirs = theirs["seconds_per_conversation"]
    print(f"renderers 0.1.12 (KimiK25Renderer, build_training_sample: one full render per conversation, "
          f"{theirs['tokens_per_conversation']:.0f} tokens) {t_theirs * 1e3:.2f} ms per conversation; kimi_chat "
          f"samples as generated on kimi-k2.5 ({ours_tokens:.0f} tokens over its samples) {t_ours * 1e3:.2f} ms: "
          f"kimi_chat {t_theirs / t_ours:.2f}x its speed; kimi_chat reasoning='official' (the same work: one full "
          f"render) {t_official * 1e3:.2f} ms: {t_theirs / t_official:.2f}x (tokenizer: tiktoken over the reference "
          "files, as the hub is not reachable offline)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--turns", type=int, default=3, help="rounds per conversation (4 messages each)")
    ap.add_argument("--parallel", type=int, default=2000, help="conversations for the parallel runs (0: skip)")
    ap.add_argument("--shard-rows", type=int, default=None, help="rows per shard in the parallel runs (default n/16)")
    ap.add_argument("--only", choices=("parallel", "memory"), help="run only this part")
    ap.add_argument("--ray", action="store_true", help="also the Ray engine on a local cluster")
    ap.add_argument("--memory", default="10000,200000", help="input sizes for the memory peak ('' to skip)")
    ap.add_argument("--renderers", action="store_true", help="also PrimeIntellect's renderers 0.1.12")
    args = ap.parse_args()
    if args.only is None:
        bench_per_conversation(args.conversations, args.turns)
        if args.renderers:
            bench_renderers(args.conversations, args.turns)
    if args.parallel and args.only in (None, "parallel"):
        bench_parallel(args.parallel, args.turns, args.ray, args.shard_rows)
    if args.memory and args.only in (None, "memory"):
        bench_memory([int(x) for x in args.memory.split(",") if x])


if __name__ == "__main__":
    main()
