"""Streaming cost of kimi_chat's output parser, against a re-parse-everything baseline.

    python benchmarks/parse.py [--quick]

Prints (no asserts, numbers only):

1. per-delta microseconds (median, p99, mean; per delta the best of 3 streams) of ``StreamParser.feed`` on Kimi-K2-Thinking outputs of
   1 KB, 10 KB, 100 KB and 1 MB (reasoning + content + a tool-call section with two calls), fed in
   token-sized deltas (markers whole, text in 1-7 character pieces, ~4 on average);
2. the same for a baseline that does what most servers do: append the delta to the accumulated
   text and re-run a regex extractor over all of it (``extract_tool_call_info``, written below after
   vLLM's documented Kimi-K2 tool parser: a ``<think>`` split plus one ``findall`` over the tool-call
   regex). Its cost grows with the text, so for 100 KB and 1 MB it runs on a sample of deltas spread
   evenly over the stream and the total is extrapolated (mean of the sample x number of deltas);
   the output says so;
3. whole-text ``parse()`` of the 100 KB output, and its ratio to one regex pass that only finds the
   markers (``findall`` of the alternation of the format's ``<...>`` markers, those a model writes:
   not the ``[BOS]``-style specials; the goal: <= 6x, both families);
4. a 100 KB and a 1 MB tool-call argument fed one character at a time (linear: 10x the size should
   cost 10x the time, i.e. a flat per-character cost);
5. a server that reads ``StreamParser.message`` after every ``feed()``: a 300 KB output (reasoning,
   content, two tool calls) in 4-character chunks (the message is kept up to date incrementally, so
   this should cost a small multiple of the feeds alone, not grow with the square of the size);
6. Kimi-K3 (``--k3``: only these): per-delta cost on outputs written by ``render_k3`` of 1 KB to 1 MB,
   against a K3 re-parse baseline (``extract_k3_info``, after vLLM's ``kimi_k3`` parsers), and
   whole-text ``parse()`` of 100 KB. The servers' own K3 parsers, fed the same deltas in one process:
   ``benchmarks/parse_servers.py`` (adapters venv).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Collection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kimi_chat import markers as M  # noqa: E402
from kimi_chat.output import StreamParser, parse  # noqa: E402

DIALECT = "kimi-k2-thinking"
THINK, UNTHINK = M.THINK_BEGIN.text, M.THINK_END.text
SB, SE = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
CB, AB, CE = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text
END = M.IM_END.text
ALL_MARKERS = [m.text for m in M.MARKERS]

WORDS = ("the of and to in is that for it as was with be by on not he I this are or his from at which "
         "but have an they you were her she there been one all we their has would when if so what out up "
         "about into than them can only other time new some could these two may first then do any like "
         "function return value error config weather Paris Tōkyō données naïve 東京 <div> [1] {x}").split()


# ------------------------------------------------------------------------------------ the baseline

_E = re.escape
TOOL_CALL_REGEX = re.compile(
    _E(CB) + r"\s*(?P<tool_call_id>.+?:\d+)\s*" + _E(AB) + r"\s*(?P<function_arguments>.*?)\s*" + _E(CE),
    re.DOTALL,
)
THINK_REGEX = re.compile(_E(THINK) + r"(.*?)(?:" + _E(UNTHINK) + r"|$)", re.DOTALL)


def extract_tool_call_info(text: str) -> tuple[str | None, str | None, list[tuple[str, str, str]]]:
    """The regex approach (after vLLM's Kimi-K2 tool parser): reasoning by a ``<think>`` regex,
    content up to the section begin, calls by ``findall`` over the whole text."""
    reasoning = None
    m = THINK_REGEX.match(text)
    if m:
        reasoning = m.group(1)
        text = text[m.end():]
    start = text.find(SB)
    if start < 0:
        return reasoning, text.replace(END, ""), []
    calls = []
    for call_id, args in TOOL_CALL_REGEX.findall(text):
        name = call_id.split(".", 1)[-1].rsplit(":", 1)[0]
        calls.append((call_id, name, args))
    return reasoning, text[:start], calls


def baseline_delta(state: dict, delta: str) -> None:
    """One delta, served the quadratic way: accumulate, re-parse everything, diff."""
    state["text"] += delta
    reasoning, content, calls = state.get("extract", extract_tool_call_info)(state["text"])
    prev = state["prev"]
    # what a server then sends: the new suffix of each field
    _ = (reasoning or "")[len(prev[0] or ""):], (content or "")[len(prev[1] or ""):], calls[len(prev[2]):]
    state["prev"] = (reasoning, content, calls)


# ------------------------------------------------------------------------------------------ inputs


def words(rng: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def make_output(size: int, seed: int = 0) -> str:
    """A K2-Thinking output of about ``size`` characters: 30% reasoning, 30% content, 40% in two
    tool calls (JSON arguments with long string values)."""
    rng = random.Random(seed)
    args1 = json.dumps({"path": "notes/today.md", "text": words(rng, int(size * 0.28))}, ensure_ascii=False)
    args2 = json.dumps({"query": words(rng, int(size * 0.1)), "limit": 10, "tags": ["a", "b"]}, ensure_ascii=False)
    return (THINK + words(rng, int(size * 0.3)) + UNTHINK + words(rng, int(size * 0.3))
            + SB + CB + "functions.write_file:0" + AB + args1 + CE
            + CB + "functions.mcp.search:find-docs:1" + AB + args2 + CE + SE + END)


_MARKER_SPLIT = re.compile("(" + "|".join(map(_E, sorted(ALL_MARKERS, key=len, reverse=True))) + ")")


def marker_scan_ratio(text: str, dialect: str, markers: Collection[str], runs: int = 60) -> tuple[float, float, float]:
    """``(parse median ms, scan median ms, ratio)``: whole-text ``parse()`` of ``text`` against one
    regex pass that only finds the markers (``findall`` over the alternation of the ``<...>`` ones: their
    common prefix makes it the C regex engine's literal-prefix search), CPU time, medians.

    Each run reads a fresh copy of ``text`` (made outside the timing): the same parse of one string
    object varies by up to 1.6x with where that string and the parse's objects land in memory (measured:
    0.144-0.25 ms for copies of the same 100 KB K2 text in one process), so one copy timed 30 times
    measures its placement; the median over copies measures the parse."""
    scan = re.compile("|".join(map(_E, sorted((m for m in markers if m.startswith("<")), key=len, reverse=True))))
    clock = time.process_time_ns
    parse(text, dialect=dialect)
    ours, base = [], []
    for _ in range(runs):
        copy = (text + " ")[:-1]
        t0 = clock()
        parse(copy, dialect=dialect)
        t1 = clock()
        scan.findall(copy)
        t2 = clock()
        ours.append((t1 - t0) / 1e6)
        base.append((t2 - t1) / 1e6)
    p, b = statistics.median(ours), statistics.median(base)
    return p, b, p / b


def token_deltas(text: str, seed: int = 1, *, split: re.Pattern[str] = _MARKER_SPLIT,
                 markers: Collection[str] = ALL_MARKERS) -> list[str]:
    """Token-sized deltas: every marker alone (it is one token), text in 1-7 character pieces."""
    rng = random.Random(seed)
    out = []
    for part in split.split(text):
        if not part:
            continue
        if part in markers:
            out.append(part)
            continue
        i = 0
        while i < len(part):
            n = rng.randint(1, 7)
            out.append(part[i:i + n])
            i += n
    return out


# ---------------------------------------------------------------------------------------- measures


def per_delta_ours(deltas: list[str], repeat: int = 3, dialect: str = DIALECT) -> list[float]:
    """Microseconds per ``feed()``, for each delta the best of ``repeat`` streams (a shared machine
    preempts now and then; the best of a few runs is the cost of the code, not of the neighbours)."""
    clock = time.perf_counter_ns
    best: list[int] | None = None
    for _ in range(repeat):
        p = StreamParser(dialect)
        times = []
        gc.disable()
        try:
            for d in deltas:
                t0 = clock()
                p.feed(d)
                times.append(clock() - t0)
            p.finish()
        finally:
            gc.enable()
        best = times if best is None else [min(a, b) for a, b in zip(best, times)]
    assert best is not None
    return [t / 1000 for t in best]


def per_delta_baseline(deltas: list[str], sample: int | None, extract=None) -> tuple[list[float], float, bool]:
    """Per-delta microseconds of the baseline (on a sample if ``sample``) and its total (measured
    or extrapolated). ``extract``: the re-parse function (default: the K2 one)."""
    extract = extract_tool_call_info if extract is None else extract
    n = len(deltas)
    if sample is None or sample >= n:
        state = {"text": "", "prev": (None, None, []), "extract": extract}
        times = []
        for d in deltas:
            t0 = time.perf_counter_ns()
            baseline_delta(state, d)
            times.append((time.perf_counter_ns() - t0) / 1000)
        return times, sum(times), False
    idx = sorted({int(i * (n - 1) / (sample - 1)) for i in range(sample)})
    times = []
    for i in idx:
        acc = "".join(deltas[:i])
        state = {"text": acc, "prev": extract(acc), "extract": extract}
        t0 = time.perf_counter_ns()
        baseline_delta(state, deltas[i])
        times.append((time.perf_counter_ns() - t0) / 1000)
    return times, statistics.fmean(times) * n, True


def make_k3_output(size: int, seed: int = 0) -> str:
    """A Kimi-K3 output of about ``size`` characters, as ``render_k3`` writes the assistant turn
    (after the generation prompt): 30% reasoning, 30% content, two calls (a long string argument)."""
    from kimi_chat.families.k3.render import render_k3

    rng = random.Random(seed)
    msg = {"role": "assistant", "reasoning_content": words(rng, int(size * 0.3)), "content": words(rng, int(size * 0.3)),
           "tool_calls": [
               {"id": "a", "type": "function", "function": {"name": "write_file", "arguments": {
                   "path": "notes/today.md", "text": words(rng, int(size * 0.28))}}},
               {"id": "b", "type": "function", "function": {"name": "search", "arguments": {
                   "query": words(rng, int(size * 0.1)), "limit": 10, "tags": ["a", "b"]}}}]}
    user = [{"role": "user", "content": "hi"}]
    prefix = render_k3(user)
    return render_k3(user + [msg], add_generation_prompt=False)[len(prefix):]


_K3_MARKERS = [m.text for m in M.K3_MARKERS]
_K3_SPLIT = re.compile("(" + "|".join(map(_E, sorted(_K3_MARKERS, key=len, reverse=True))) + ")")


def k3_token_deltas(text: str, seed: int = 1) -> list[str]:
    """Token-sized K3 deltas: every marker alone, tag names and attributes and text in 1-7 character pieces."""
    return token_deltas(text, seed, split=_K3_SPLIT, markers=_K3_MARKERS)


_K3_O, _K3_C, _K3_S = _E(M.K3_OPEN.text), _E(M.K3_CLOSE.text), _E(M.K3_SEP.text)
_K3_THINK_CLOSE = re.compile(_K3_C + r"\s*think\s*" + _K3_S)
_K3_RESPONSE = re.compile(_K3_O + r"\s*response\s*" + _K3_S + r"(.*?)(?:" + _K3_C + r"\s*response\s*" + _K3_S + "|$)", re.DOTALL)
_K3_TOOLS = re.compile(_K3_O + r"\s*tools\s*" + _K3_S)
_K3_CALL = re.compile(_K3_O + r"\s*call\s+((?:(?!" + _K3_S + r").)*?)" + _K3_S + r"(.*?)" + _K3_C + r"\s*call\s*" + _K3_S,
                      re.DOTALL)
_K3_ARG = re.compile(_K3_O + r"\s*argument\s+((?:(?!" + _K3_S + r").)*?)" + _K3_S + r"(.*?)" + _K3_C
                     + r"\s*argument\s*" + _K3_S, re.DOTALL)
_K3_ATTR = re.compile(r'(\w+)="([^"]*)"')


def extract_k3_info(text: str) -> tuple[str | None, str | None, list[tuple[str, str, str]]]:
    """The regex approach for K3 (after vLLM's ``kimi_k3`` reasoning and tool parsers): reasoning up to
    ``<|close|>think<|sep|>``, the response channel by a regex, calls by ``finditer`` over the tools
    channel, each argument JSON-decoded by its type and the whole re-serialised."""
    m = _K3_THINK_CLOSE.search(text)
    if m is None:
        return text, None, []
    reasoning, rest = text[:m.start()], text[m.end():]
    r = _K3_RESPONSE.search(rest)
    content = r.group(1) if r else None
    calls = []
    t = _K3_TOOLS.search(rest)
    if t is not None:
        for attrs, body in _K3_CALL.findall(rest, t.end()):
            name = dict(_K3_ATTR.findall(attrs)).get("tool", "")
            args: dict = {}
            for a_attrs, value in _K3_ARG.findall(body):
                a = dict(_K3_ATTR.findall(a_attrs))
                if a.get("type", "string") == "string":
                    args[a.get("key", "")] = value
                else:
                    try:
                        args[a.get("key", "")] = json.loads(value)
                    except ValueError:
                        args[a.get("key", "")] = value
            calls.append(("", name, json.dumps(args, ensure_ascii=False)))
    return reasoning, content, calls


def k3_rows(sizes: list[int]) -> None:
    """Per-delta cost of the K3 parser against the K3 re-parse baseline (the servers' own K3 parsers:
    ``benchmarks/parse_servers.py``, in the adapters venv)."""
    print("Kimi-K3 (dialect kimi-k3), token-sized deltas (markers whole, tag text and text 1-7 chars)")
    print(f"{'output':>8} {'deltas':>8} | {'ours: median':>12} {'p99':>7} {'mean':>7} {'total ms':>9} | "
          f"{'baseline: median':>16} {'total ms':>11} | {'ratio (total)':>13}")
    for size in sizes:
        text = make_k3_output(size)
        deltas = k3_token_deltas(text)
        msg = parse(text, dialect="kimi-k3")
        assert len(msg.tool_calls) == 2 and not msg.warnings, msg.warnings
        r, c, calls = extract_k3_info(text)  # sanity: the baseline reads this input as we do
        assert (r, c) == (msg.reasoning_content, msg.content), (r[:40], c)
        assert [json.loads(a) for _, _, a in calls] == [json.loads(x.arguments) for x in msg.tool_calls]
        per_delta_ours(deltas, 1, "kimi-k3")
        ours = per_delta_ours(deltas, dialect="kimi-k3")
        base, base_total, extrapolated = per_delta_baseline(deltas, None if size <= 10_000 else 200, extract_k3_info)
        print(f"{size // 1000:>6}KB {len(deltas):>8} | {statistics.median(ours):>10.2f}us {pct(ours, .99):>5.2f}us "
              f"{statistics.fmean(ours):>5.2f}us {sum(ours) / 1000:>9.1f} | {statistics.median(base):>14.1f}us "
              f"{base_total / 1000:>10.1f}{'*' if extrapolated else ' '} | {base_total / sum(ours):>12.0f}x")
    print("  * baseline total extrapolated from 200 deltas sampled evenly over the stream (mean x deltas)")
    text = make_k3_output(100_000)
    p, b, ratio = marker_scan_ratio(text, "kimi-k3", _K3_MARKERS)
    print(f"whole-text parse() of a {len(text) // 1000} KB K3 output (CPU time): median {p:.3f} ms; one marker scan "
          f"{b:.3f} ms; ratio {ratio:.1f}x (goal <= 6x)")
    print()


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip the 1 MB cases")
    ap.add_argument("--k3", action="store_true", help="only the Kimi-K3 rows")
    ap.add_argument("--whole", action="store_true", help="only the whole-text parse against one marker scan, both families")
    args = ap.parse_args()
    if args.whole:
        for dialect, text, markers in ((DIALECT, make_output(100_000), ALL_MARKERS),
                                       ("kimi-k3", make_k3_output(100_000), _K3_MARKERS)):
            p, b, ratio = marker_scan_ratio(text, dialect, markers)
            print(f"{dialect:<18} whole-text parse() of {len(text) // 1000} KB: median {p:.3f} ms; one marker scan "
                  f"{b:.3f} ms; ratio {ratio:.1f}x (goal <= 6x)")
        return
    sizes = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    if args.k3:
        k3_rows(sizes)
        return

    print(f"python {sys.version.split()[0]}, dialect {DIALECT}, token-sized deltas (markers whole, text 1-7 chars)")
    print()
    print(f"{'output':>8} {'deltas':>8} | {'ours: median':>12} {'p99':>7} {'mean':>7} {'total ms':>9} | "
          f"{'baseline: median':>16} {'total ms':>11} | {'ratio (total)':>13}")
    for size in sizes:
        text = make_output(size)
        deltas = token_deltas(text)
        # sanity: the baseline and ours agree on this input
        msg = parse(text, dialect=DIALECT)
        r, c, calls = extract_tool_call_info(text)
        assert (msg.reasoning_content, msg.content) == (r, c) and [x.arguments for x in msg.tool_calls] == [a for _, _, a in calls]
        per_delta_ours(deltas, 1)  # warm-up
        ours = per_delta_ours(deltas)
        sample = None if size <= 10_000 else 200
        base, base_total, extrapolated = per_delta_baseline(deltas, sample)
        ours_total = sum(ours)
        print(f"{size // 1000:>6}KB {len(deltas):>8} | {statistics.median(ours):>10.2f}us {pct(ours, .99):>5.2f}us "
              f"{statistics.fmean(ours):>5.2f}us {ours_total / 1000:>9.1f} | {statistics.median(base):>14.1f}us "
              f"{base_total / 1000:>10.1f}{'*' if extrapolated else ' '} | {base_total / ours_total:>12.0f}x")
    print("  * baseline total extrapolated from 200 deltas sampled evenly over the stream (mean x deltas)")
    print()

    text = make_output(100_000)
    parse(text, dialect=DIALECT)
    runs = []
    clock = time.process_time_ns
    for _ in range(30):
        t0 = clock()
        parse(text, dialect=DIALECT)
        runs.append((clock() - t0) / 1e6)
    base_runs = []
    for _ in range(30):
        t0 = clock()
        extract_tool_call_info(text)
        base_runs.append((clock() - t0) / 1e6)
    base_once = min(base_runs)
    print(f"whole-text parse() of a {len(text) // 1000} KB output (CPU time): median {statistics.median(runs):.3f} ms, "
          f"best {min(runs):.3f} ms (the regex extractor, once, best: {base_once:.3f} ms)")
    p, b, ratio = marker_scan_ratio(text, DIALECT, ALL_MARKERS)
    print(f"  against one marker scan: parse median {p:.3f} ms, scan median {b:.3f} ms, ratio {ratio:.1f}x (goal <= 6x)")
    print()

    print("one tool-call argument fed one character at a time (CPU time of this process):")
    prev = None
    for size in ([100_000] if args.quick else [100_000, 1_000_000]):
        arg = json.dumps({"text": words(random.Random(size), size)}, ensure_ascii=False)
        head = SB + CB + "functions.write_file:0" + AB
        p = StreamParser(DIALECT)
        p.feed(head)
        gc.disable()
        t0 = time.process_time_ns()
        for ch in arg:
            p.feed(ch)
        p.feed(CE + SE)
        p.finish()
        total = (time.process_time_ns() - t0) / 1e9
        gc.enable()
        assert p.message.tool_calls[0].arguments == arg
        note = f"  ({total / prev:.1f}x the time for 10x the size)" if prev else ""
        print(f"  {len(arg) / 1e6:>5.2f} MB: {total:.3f} s total, {total / len(arg) * 1e6:.2f} us per character{note}")
        prev = total
    print()

    text = make_output(300_000)
    chunks = [text[i:i + 4] for i in range(0, len(text), 4)]
    for read in (False, True):
        p = StreamParser(DIALECT)
        gc.disable()
        t0 = time.process_time_ns()
        for c in chunks:
            p.feed(c)
            if read:
                p.message  # noqa: B018 - what a server does after each feed
        p.finish()
        total = (time.process_time_ns() - t0) / 1e9
        gc.enable()
        assert p.message == parse(text, dialect=DIALECT)
        what = "feed + message after each feed" if read else "feed alone"
        print(f"{len(text) // 1000} KB output in {len(chunks)} chunks of 4 characters, {what}: {total:.3f} s")
    print()
    k3_rows(sizes)


if __name__ == "__main__":
    main()
