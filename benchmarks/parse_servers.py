"""Per-delta cost of the servers' Kimi-K3 parsers and of kimi_chat's plugins, fed the same deltas in one
process. Run in the adapters venv from the repository root::

    PYTHONPATH=$PWD ~/.cache/kimi-chat/venv-adapters/bin/python benchmarks/parse_servers.py [--quick] [--mb]

The outputs are ``benchmarks/parse.py``'s K3 ones (``make_k3_output``); the deltas are its real tokens,
one delta per token as the engine's detokenizer sends them (the K3 vocabulary,
``tests/adapters/adapter_support.hf_tokenizer("k3")``, decoded incrementally), each with its id: the
built-in vLLM reasoning parser finds ``<|close|>think<|sep|>`` by its token ids, so the ids must be the
model's (``benchmarks/parse.py``'s character-split deltas would hide the tag from it).

* vLLM 0.33: the parser class ``ParserManager.get_parser`` composes for ``--tool-call-parser X
  --reasoning-parser X`` (X = ``kimi_k3``, vLLM's ``KimiK3Parser``; X = ``kimi_chat``, ours), one
  ``parse_delta(delta_text, delta_ids, request, prompt_ids, finished=...)`` per delta;
* SGLang 0.5.23: ``ReasoningParser(X).parse_stream_chunk`` then, for the text it hands on,
  ``FunctionCallParser(tools, X).parse_stream_chunk`` (X = ``kimi_k3``; ours: ``kimi_chat``).

Each line: median / p99 microseconds per delta and the stream's total; ratio = built-in total / ours.
The built-ins re-scan the accumulated text per delta (cost grows with the output), so they run once
per size and never at 1 MB (``--mb`` runs ours at 1 MB); ours: best of 3 streams per delta. A
sanity line per size checks that every runner saw the same reasoning, content and calls.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from parse import make_k3_output, pct  # noqa: E402

from kimi_chat import markers as M  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "text": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}, "tags": {"type": "array"}}}}},
]
USER = [{"role": "user", "content": "hi"}]


def _inputs(size: int, tok):
    text = make_k3_output(size)
    if text.endswith(M.K3_END_OF_MSG.text):  # the stop token: not in the text a server parses
        text = text[: -len(M.K3_END_OF_MSG.text)]
    from tokenizers.decoders import DecodeStream

    stream = DecodeStream(skip_special_tokens=False)
    deltas, ids, pending = [], [], []
    for t in tok.encode(text, add_special_tokens=False):  # one delta per token (as the engine sends)
        pending.append(t)
        piece = stream.step(tok._tokenizer, t)
        if piece:
            deltas.append(piece)
            ids.append(pending)
            pending = []
    if "".join(deltas) != text:
        raise AssertionError("the deltas do not spell the output")
    ids[-1] = ids[-1] + pending + [M.K3_END_OF_MSG.id]
    return deltas, ids


class Seen:
    def __init__(self) -> None:
        self.reasoning, self.content, self.args = [], [], {}

    def add(self, reasoning, content, calls) -> None:
        if reasoning:
            self.reasoning.append(reasoning)
        if content:
            self.content.append(content)
        for index, args in calls:
            if args:
                self.args[index] = self.args.get(index, "") + args

    def summary(self) -> tuple:
        calls = []
        for _, a in sorted(self.args.items()):
            try:
                calls.append(json.loads(a))
            except ValueError:
                calls.append(a)
        return "".join(self.reasoning), "".join(self.content).strip() or None, calls


def vllm_stream(tok, name: str, prompt: list[int], deltas, ids):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager

    cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True,
                                   model_name="kimi", tokenizer=tok)
    request = ChatCompletionRequest(model="kimi", messages=USER, tools=TOOLS, tool_choice="auto", stream=True)
    request = cls(tok, request.tools, model_config=None, chat_template_kwargs={}).adjust_request(request)
    p = cls(tok, request.tools, model_config=None, chat_template_kwargs={})
    seen, times, clock, last = Seen(), [], time.perf_counter_ns, len(deltas) - 1
    for i, (d, t) in enumerate(zip(deltas, ids)):
        t0 = clock()
        m = p.parse_delta(d, t, request, prompt, finished=i == last)
        times.append(clock() - t0)
        if m is not None:
            seen.add(m.reasoning, m.content, [(c.index, c.function.arguments if c.function else None)
                                              for c in m.tool_calls or []])
    return times, seen


def sglang_stream(tok, name: str, prompt: list[int], deltas, ids):
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    rp = ReasoningParser(name, stream_reasoning=True, force_reasoning=True, tokenizer=tok, tool_call_parser_active=True)
    fcp = FunctionCallParser([Tool.model_validate(t) for t in TOOLS], name, tokenizer=tok)
    seen, times, clock = Seen(), [], time.perf_counter_ns
    for d in deltas:
        t0 = clock()
        r, normal = rp.parse_stream_chunk(d)
        content, calls = (fcp.parse_stream_chunk(normal) if normal else ("", []))
        times.append(clock() - t0)
        seen.add(r, content, [(c.tool_index, c.parameters) for c in calls])
    t0 = clock()
    r, normal = rp.parse_stream_end() if hasattr(rp, "parse_stream_end") else (None, None)
    if normal:
        content, calls = fcp.parse_stream_chunk(normal)
        seen.add(r, content, [(c.tool_index, c.parameters) for c in calls])
    times[-1] += clock() - t0
    return times, seen


def best_of(n: int, run):
    best, seen = None, None
    for _ in range(n):
        gc.disable()
        try:
            times, seen = run()
        finally:
            gc.enable()
        best = times if best is None else [min(a, b) for a, b in zip(best, times)]
    return [t / 1000 for t in best], seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 KB and 10 KB only")
    ap.add_argument("--mb", action="store_true", help="also ours at 1 MB")
    args = ap.parse_args()
    logging.disable(logging.WARNING)

    import sglang
    import vllm

    import kimi_chat.servers.sglang  # noqa: F401  (registers kimi_chat)
    import kimi_chat.servers.vllm  # noqa: F401
    from kimi_chat.families.k3.render import render_k3
    from tests.adapters.adapter_support import hf_tokenizer

    tok = hf_tokenizer("k3")
    prompt = tok.encode(render_k3(USER), add_special_tokens=False)
    print(f"python {sys.version.split()[0]}, vLLM {vllm.__version__}, SGLang {sglang.__version__}; "
          "K3 outputs of benchmarks/parse.py, one delta per token (with its id)")
    print(f"{'output':>7} {'deltas':>7} | {'runner':28} {'median':>9} {'p99':>9} {'total ms':>10} | {'ratio':>7}")
    sizes = [1_000, 10_000] + ([] if args.quick else [100_000])
    for size in sizes + ([1_000_000] if args.mb else []):
        deltas, ids = _inputs(size, tok)
        rows = []
        for label, fn, name, builtin in (("vLLM kimi_chat (ours)", vllm_stream, "kimi_chat", False),
                                         ("vLLM kimi_k3 (built-in)", vllm_stream, "kimi_k3", True),
                                         ("SGLang kimi_chat (ours)", sglang_stream, "kimi_chat", False),
                                         ("SGLang kimi_k3 (built-in)", sglang_stream, "kimi_k3", True)):
            if builtin and size > 100_000:
                continue
            times, seen = best_of(1 if builtin else 3, lambda: fn(tok, name, prompt, deltas, ids))
            rows.append((label, times, seen, builtin))
        ours_total = {r[0].split()[0]: sum(r[1]) for r in rows if not r[3]}
        for label, times, seen, builtin in rows:
            ratio = f"{sum(times) / ours_total[label.split()[0]]:>6.0f}x" if builtin else ""
            print(f"{size // 1000:>5}KB {len(deltas):>7} | {label:28} {statistics.median(times):>7.2f}us "
                  f"{pct(times, .99):>7.2f}us {sum(times) / 1000:>10.1f} | {ratio:>7}")
        ref = rows[0][2].summary()
        same = [label for label, _, seen, _ in rows if seen.summary() == ref]
        print(f"{'':>15} | same reasoning, content and calls: {', '.join(same)}")


if __name__ == "__main__":
    main()
