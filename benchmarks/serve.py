"""The cost of ``kimi-chat serve`` over calling its engine directly, on the tiny Kimi-K3 model in llama.cpp,
in one process. Run from the repository root (needs the ``serve`` and ``native`` extras and the reference
data for the tiny model's vocabulary)::

    PYTHONPATH=$PWD python benchmarks/serve.py [--quick] [--prefix | --upstream]

* direct: :func:`kimi_chat.servers.serve.generation.prepare` + :func:`~kimi_chat.servers.serve.generation.run`
  on the engine (render, tokenize, generate, parse by id): the work any server must do;
* served: the same request over loopback HTTP to the app on uvicorn, plain (``chat.completion``) and
  streamed (server-sent events, read to ``[DONE]``).

Greedy generation of exactly N tokens (``max_tokens`` N, the tiny model's noise never ends its turn
early at temperature 0 with this prompt: checked). Each line: best-of milliseconds for N = 1 and N = 64;
per request = the N = 1 times; per token = (t64 - t1) / 63. ratio = served / direct.

``--prefix`` measures the KV-cache reuse of a multi-turn chat in the embedded engine (tiny K3 model, a
~1,000-token system prompt): the second turn's time to first token (``max_tokens`` 1, served plain) right
after the first turn (its prompt starts with the whole first prompt: llama.cpp keeps those tokens) against
the same request after an unrelated one (nothing to reuse), and how many prompt tokens were reused.

``--upstream`` instead measures what the GBNF export costs a real llama-server (``--upstream`` mode; the
binary is ``$KIMI_CHAT_LLAMA_SERVER`` or beside the Python, as tests/llama_server_support.py finds it), on
the tiny Kimi-K2-Instruct-0905 model: the same ``/completion`` request (ids in, ids out, greedy, at most
64 tokens) with no grammar and with the GBNF of a plain request (marker-free text), a ``json_schema``
reply, and a forced call among 1 and 16 tools. Each line: the grammar's size, best-of milliseconds per
request for 1 token (the grammar's parse and the first mask) and per generated token after it; ratio =
that grammar / no grammar.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _timing import best_of  # noqa: E402


def _tools(n: int) -> list[dict]:
    return [{"type": "function", "function": {"name": f"tool_{i}", "description": "A tool.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "days", "unit"], "additionalProperties": False}}} for i in range(n)]


def upstream(repeat: int) -> None:
    """The GBNF export's cost to llama-server (module doc)."""
    from kimi_chat.grammar.request import constraint
    from kimi_chat.servers.contract import read_chat_request
    from kimi_chat.servers.serve import UpstreamEngine
    from kimi_chat.servers.serve.engines import Sampling
    from kimi_chat.servers.serve.generation import prepare
    from kimi_chat.testing.tiny_model import build_tiny_model
    from llama_server_support import LlamaServer, missing_reason

    if missing_reason():
        raise SystemExit(missing_reason())
    d = "kimi-k2-instruct-0905"
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
              "required": ["city", "temperature"], "additionalProperties": False}
    cases = {
        "no grammar": (None, {}),
        "plain request": (constraint(None, dialect=d).gbnf, {}),
        "json_schema": (constraint(None, dialect=d, response_format={"type": "json_schema", "json_schema": {
            "name": "w", "schema": schema}}).gbnf, {}),
        "forced, 1 tool": (constraint(_tools(1), dialect=d, tool_choice="required").gbnf, {"tools": _tools(1)}),
        "forced, 16 tools": (constraint(_tools(16), dialect=d, tool_choice="required").gbnf, {"tools": _tools(16)}),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "k2.gguf", dialect=d)
        with LlamaServer(path, None, Path(tmp) / "llama-server.log") as ls:
            engine = UpstreamEngine.connect(ls.url, path)
            greedy = Sampling(temperature=0.0, seed=1)
            rows = []
            for name, (gbnf, extra) in cases.items():
                req = read_chat_request({"model": "m", "messages": [{"role": "user", "content": "Tell me a story."}],
                                         **extra}, dialect=d)
                ids = prepare(engine, req).prompt_ids
                gen = lambda n: len(list(engine.generate(ids, constraint=gbnf, max_tokens=n, sampling=greedy,  # noqa: E731
                                                         cancel=threading.Event())))
                n64 = gen(64)  # warm (and how many tokens the grammar lets it write)
                t1, t64 = best_of(lambda: gen(1), repeat), best_of(lambda: gen(64), repeat)
                rows.append((name, len(gbnf or ""), t1, (t64 - t1) / max(n64 - 1, 1), n64))
            engine.close()
    base1, base_tok = rows[0][2], rows[0][3]
    print(f"{'grammar':<18} {'GBNF bytes':>10} {'1 token ms':>11} {'per token ms':>13} {'tokens':>7} "
          f"{'ratio req':>10} {'ratio tok':>10}")
    for name, size, t1, per, n in rows:
        print(f"{name:<18} {size:>10} {t1 * 1e3:>11.2f} {per * 1e3:>13.3f} {n:>7} {t1 / base1:>10.2f} "
              f"{per / base_tok:>10.2f}")


def prefix(repeat: int) -> None:
    """The second turn's time to first token with and without the first turn's KV cache (module doc)."""
    import time

    import httpx

    from kimi_chat.servers.serve import NativeEngine, ServeConfig, create_app
    from kimi_chat.testing.tiny_model import build_tiny_model
    from kimi_chat.tokens.tokenizer import KimiTokenizer
    from serve_support import Uvicorn

    system = " ".join(f"Rule {i}: answer politely and cite the section number of the manual." for i in range(80))
    turn1 = [{"role": "system", "content": system}, {"role": "user", "content": "What is rule 3?"}]
    other = [{"role": "system", "content": "Something else entirely. " * 20}, {"role": "user", "content": "Hi"}]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "k3.gguf", dialect="kimi-k3", tokenizer=KimiTokenizer.from_reference("k3"))
        engine = NativeEngine.load(path, n_ctx=4096)
        with Uvicorn(create_app(engine, ServeConfig())) as s, httpx.Client(base_url=s.url, timeout=300) as c:
            def ask(messages: list, n: int = 1) -> dict:
                r = c.post("/v1/chat/completions", json={"model": "m", "messages": messages, "max_tokens": n,
                                                         "temperature": 0, "seed": 1})
                return r.json()

            first = ask(turn1, 8)
            turn2 = [*turn1, {"role": "assistant", "content": first["choices"][0]["message"]["content"] or "OK"},
                     {"role": "user", "content": "And rule 4?"}]
            cold, warm, reused = [], [], 0
            for _ in range(repeat):
                ask(other)  # the cache now holds an unrelated prompt
                t0 = time.perf_counter()
                ask(turn2)
                cold.append(time.perf_counter() - t0)
                ask(turn1, 8)  # the first turn again: the cache holds its prompt and reply
                t0 = time.perf_counter()
                ask(turn2)
                warm.append(time.perf_counter() - t0)
                reused = engine.native.reused_tokens
            prompt = ask(turn2)["usage"]["prompt_tokens"]
        engine.close()
    print(f"second turn, {prompt} prompt tokens: time to first token (best of {repeat}, served plain)")
    print(f"  after an unrelated request  {min(cold) * 1e3:9.1f} ms")
    print(f"  after the first turn        {min(warm) * 1e3:9.1f} ms  ({reused} prompt tokens from the KV cache; "
          f"{min(cold) / min(warm):.1f}x faster)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--upstream", action="store_true", help="the GBNF export's cost to llama-server instead")
    ap.add_argument("--prefix", action="store_true", help="the second turn's time to first token with the KV cache "
                    "of the first against without")
    args = ap.parse_args()
    repeat = 3 if args.quick else 7
    if args.upstream:
        upstream(repeat)
        return
    if args.prefix:
        prefix(repeat)
        return

    import httpx

    from kimi_chat.servers.contract import read_chat_request
    from kimi_chat.servers.serve import NativeEngine, ServeConfig, create_app
    from kimi_chat.servers.serve.generation import Outcome, prepare, run
    from kimi_chat.testing.tiny_model import build_tiny_model
    from kimi_chat.tokens.tokenizer import KimiTokenizer
    from serve_support import Uvicorn, sse_events

    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "k3.gguf", dialect="kimi-k3", tokenizer=KimiTokenizer.from_reference("k3"))
        engine = NativeEngine.load(path, n_ctx=2048)
        body = lambda n, **kw: {"model": "m", "messages": [{"role": "user", "content": "Tell me a story."}],  # noqa: E731
                                "max_tokens": n, "temperature": 0, "seed": 1, **kw}

        def direct(n: int) -> None:
            req = read_chat_request(body(n), dialect=engine.dialect)
            items = list(run(engine, prepare(engine, req), threading.Event()))
            out = items[-1]
            if not isinstance(out, Outcome) or len(out.completion_ids) != n:
                raise SystemExit(f"direct: expected {n} tokens, got {out}")

        with Uvicorn(create_app(engine, ServeConfig())) as s, httpx.Client(base_url=s.url, timeout=120) as c:
            def plain(n: int) -> None:
                r = c.post("/v1/chat/completions", json=body(n)).json()
                if r["usage"]["completion_tokens"] != n:
                    raise SystemExit(f"plain: expected {n} tokens, got {r['usage']}")

            def streamed(n: int) -> None:
                with c.stream("POST", "/v1/chat/completions",
                              json=body(n, stream=True, stream_options={"include_usage": True})) as r:
                    usage = [e["usage"] for e in sse_events(r.iter_lines()) if e.get("usage")]
                if usage[-1]["completion_tokens"] != n:
                    raise SystemExit(f"streamed: expected {n} tokens, got {usage}")

            times = {}
            for name, fn in (("direct", direct), ("served plain", plain), ("served stream", streamed)):
                fn(1)  # warm
                times[name] = (best_of(lambda: fn(1), repeat), best_of(lambda: fn(64), repeat))
        engine.close()
    d1, d64 = times["direct"]
    print(f"{'path':<14} {'1 token ms':>11} {'64 tokens ms':>13} {'per token ms':>13} {'ratio req':>10} {'ratio tok':>10}")
    for name, (t1, t64) in times.items():
        per = (t64 - t1) / 63
        print(f"{name:<14} {t1 * 1e3:>11.2f} {t64 * 1e3:>13.2f} {per * 1e3:>13.3f} {t1 / d1:>10.2f} "
              f"{per / ((d64 - d1) / 63):>10.2f}")


if __name__ == "__main__":
    main()
