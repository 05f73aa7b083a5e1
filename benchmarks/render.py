"""Render speed: kimi_chat.render vs the official renderer of each dialect, same process.

    python benchmarks/render.py [--repeat N] [--only k2|k3] [--sizes 4,10,30,100,1000]

Renders tool conversations of 4, 10, 30, 100 and 1000 messages (``--sizes``; user question, assistant
with reasoning and a tool call, tool result, assistant answer, repeated; five tools declared, as a
server declares them on every request) with both, checks they are equal, and prints microseconds per
message and the speed-up ratio, then the worst ratio at the short sizes (<= 30 messages: what servers
see; the goals for short requests: K2 >= 15x every dialect, K3 >= 20x):

* K2 dialects: transformers rendering the official Jinja template (compiled template cached, as
  transformers does; its input normalisation runs each time, as apply_chat_template does);
* Kimi-K3 (no Jinja template): ``render_k3`` vs the official ``encoding_k3.build_chat_segments`` + join
  (what ``apply_chat_template(tokenize=False)`` does); and the ids: ``render_k3_ids`` vs the official
  ``TikTokenTokenizer.apply_chat_template(tokenize=True)``, and vs ``render_k3`` + one ``encode`` of the
  whole text (a floor that is *not* the official ids). Goals: text >= 20x, ids >= 30x.

The ``cold`` columns render a request nobody has seen before, every time, as a multi-tenant server
sees them: a conversation AND a tool list that are new on every request (function names,
descriptions and parameter descriptions carry a fresh number), each decoded from its JSON text just
before it is rendered (the objects a server holds), ours and the official one alternately; the
median microseconds of a call. No cache of kimi_chat is hit by a repeated request there (the warm
columns render one request over and over: the tools' declaration comes from its cache). Goal:
>= 10x the official, cold, at <= 30 messages in every dialect (``--cold N``: requests per size, 0: no cold columns).

Needs transformers and the reference data. ``benchmarks/render_k3.py`` runs the K3 part alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from _timing import per_call, per_call_pair  # noqa: E402
from kimi_chat import render  # noqa: E402
from kimi_chat.dialects import K2_DIALECTS  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "search_web", "description": "Search the web; the top results.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "What to find"},
                                                          "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
                         "required": ["query"]}}},
         {"type": "function", "function": {"name": "read_file", "description": "Read a text file.",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                          "encoding": {"type": "string", "enum": ["utf-8", "latin-1"]}},
                         "required": ["path"]}}},
         {"type": "function", "function": {"name": "send_email", "description": "Send an email.",
          "parameters": {"type": "object", "properties": {
              "to": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string"},
              "body": {"type": "string"}, "urgent": {"type": "boolean", "default": False}},
              "required": ["to", "subject", "body"]}}},
         {"type": "function", "function": {"name": "create_event", "description": "Add an event to the calendar.",
          "parameters": {"type": "object", "properties": {
              "title": {"type": "string"}, "start": {"type": "string", "description": "ISO 8601"},
              "minutes": {"type": "number"}, "attendees": {"type": "array", "items": {"type": "object", "properties": {
                  "name": {"type": "string"}, "email": {"type": "string"}}}}},
              "required": ["title", "start"]}}}]
"""Five tools, declared on every request."""

def fresh_tools(salt: str) -> list[dict]:
    """:data:`TOOLS` as a tool list never declared before: every name, description and parameter
    description carries ``salt`` (what no cache keyed on earlier tool lists holds)."""
    out = []
    for tool in TOOLS:
        f = tool["function"]
        params = json.loads(json.dumps(f["parameters"]))
        for prop in params["properties"].values():
            prop["description"] = f"{prop.get('description', 'a value')} ({salt})"
        out.append({"type": "function", "function": {"name": f"{f['name']}_{salt}",
                                                     "description": f"{f['description']} ({salt})", "parameters": params}})
    return out


_REQUESTS = itertools.count()


def cold_request(n: int) -> str:
    """The JSON text of a request never made before (``{"messages", "tools"}``): a fresh conversation of
    ``n`` messages (:func:`conversation` with a new salt) and a fresh tool list (:func:`fresh_tools`)."""
    salt = f"r{next(_REQUESTS)}"
    return json.dumps({"messages": conversation(n, "-" + salt), "tools": fresh_tools(salt)}, ensure_ascii=False)


def cold_pair(ours: Callable[[list, list], object], official: Callable[[list, list], object], n: int,
              count: int) -> tuple[float, float]:
    """Median seconds of a cold call of ``ours`` and of ``official`` (``fn(messages, tools)``): ``count``
    requests never seen before (:func:`cold_request`), each decoded from its JSON text for each side just
    before the call (what a server does), the two sides alternating request by request."""
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter
    for _ in range(count):
        text = cold_request(n)
        for k, fn in enumerate((ours, official)):
            req = json.loads(text)
            msgs, tools = req["messages"], req["tools"]
            t = clock()
            fn(msgs, tools)
            times[k].append(clock() - t)
    return statistics.median(times[0]), statistics.median(times[1])


SIZES = (4, 10, 30, 100, 1000)
SHORT = 30
"""Sizes up to this are the short conversations the short-request goals are about."""


def conversation(n: int, salt: str = "") -> list[dict]:
    """A tool conversation of ``n`` messages (system prompt, then user / tool call / tool result / answer).
    ``salt``: written into every message's text after the system prompt (conversations with different
    salts share no message text: what a cache of earlier requests has never seen)."""
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful assistant."}]
    i = 0
    while len(msgs) < n:
        cid = f"functions.get_weather:{i}"
        msgs += [
            {"role": "user", "content": f"What's the weather in city number {i}{salt}?"},
            {"role": "assistant", "content": "", "reasoning_content": f"Call the tool{salt}.",
             "tool_calls": [{"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": f'{{"city": "c{i}{salt}"}}'}}]},
            {"role": "tool", "tool_call_id": cid, "content": f'{{"temp": 20, "note": "{salt}"}}' if salt else '{"temp": 20}'},
            {"role": "assistant", "content": f"It is 20 degrees in city {i}{salt}.", "reasoning_content": f"Easy{salt}."},
        ]
        i += 1
    return msgs[:n]


def k2_table(repeat: int, sizes: tuple[int, ...] = SIZES, cold: int = 300) -> int:
    from kimi_chat.reference.oracle import render_official

    print(f"{'dialect':<24}{'messages':>9}{'kimi_chat µs/msg':>18}{'transformers µs/msg':>21}{'speed-up':>10}"
          + (f" | {'cold kimi_chat µs':>17}{'transformers µs':>16}{'speed-up':>10}" if cold else ""))
    worst = (float("inf"), "")
    worst_cold = (float("inf"), "")
    for dialect in K2_DIALECTS:
        for n in sizes:
            msgs = conversation(n)
            ours = render(msgs, tools=TOOLS, dialect=dialect)
            if ours != render_official(msgs, tools=TOOLS, dialect=dialect):
                print(f"{dialect}: outputs differ!", file=sys.stderr)
                return 1
            t_ours, t_hf = per_call_pair(lambda: render(msgs, tools=TOOLS, dialect=dialect),
                                         lambda: render_official(msgs, tools=TOOLS, dialect=dialect), repeat)
            line = f"{dialect:<24}{n:>9}{t_ours / n * 1e6:>18.2f}{t_hf / n * 1e6:>21.2f}{t_hf / t_ours:>9.1f}x"
            if cold and n <= SHORT:
                req = json.loads(cold_request(n))
                if render(req["messages"], tools=req["tools"], dialect=dialect) != render_official(
                        req["messages"], tools=req["tools"], dialect=dialect):
                    print(f"{dialect}: cold outputs differ!", file=sys.stderr)
                    return 1
                c_ours, c_hf = cold_pair(lambda m, t: render(m, tools=t, dialect=dialect),
                                         lambda m, t: render_official(m, tools=t, dialect=dialect), n, cold)
                line += f" | {c_ours * 1e6:>17.1f}{c_hf * 1e6:>16.1f}{c_hf / c_ours:>9.1f}x"
                worst_cold = min(worst_cold, (c_hf / c_ours, f"{dialect} at {n}"))
            print(line)
            if n <= SHORT:
                worst = min(worst, (t_hf / t_ours, f"{dialect} at {n}"))
    if worst[1]:
        print(f"K2 worst ratio at <= {SHORT} messages: {worst[0]:.1f}x ({worst[1]}; goal >= 15x)")
    if worst_cold[1]:
        print(f"K2 worst cold ratio at <= {SHORT} messages: {worst_cold[0]:.1f}x ({worst_cold[1]}; goal >= 10x)")
    return 0


def k3_table(repeat: int, sizes: tuple[int, ...] = SIZES, cold: int = 300) -> int:
    from kimi_chat.families.k3.oracle import official_k3_encoding, official_k3_ids, official_k3_tokenizer
    from kimi_chat.families.k3.render import render_k3, render_k3_ids
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    encoding = official_k3_encoding()
    official_tok = official_k3_tokenizer()
    tok = KimiTokenizer.from_reference("k3")

    def official_text(msgs: list[dict], tools: list[dict] = TOOLS) -> str:
        segs = encoding.build_chat_segments(msgs, tools=tools, thinking_effort="max")
        return "".join(s.text for s in segs)

    print(f"kimi-k3  {'messages':>8} | {'official text':>13} {'ours':>8} {'ratio':>6} | "
          f"{'official ids':>12} {'ours':>8} {'ratio':>6} | {'render+encode':>13} {'ids/that':>8}   (µs/message)")
    worst_text = worst_ids = worst_short = float("inf")
    for n in sizes:
        msgs = conversation(n)
        if render_k3(msgs, TOOLS) != official_text(msgs):
            print(f"MISMATCH (text) at n={n}", file=sys.stderr)
            return 1
        if render_k3_ids(msgs, tok, TOOLS) != official_k3_ids(msgs, TOOLS):
            print(f"MISMATCH (ids) at n={n}", file=sys.stderr)
            return 1
        rep = repeat if n < 1000 else max(2, repeat // 2)
        t_off, t_ours = (t / n * 1e6 for t in per_call_pair(lambda: official_text(msgs), lambda: render_k3(msgs, TOOLS), rep))
        t_off_ids, t_ids = (t / n * 1e6 for t in per_call_pair(
            lambda: official_tok.apply_chat_template(msgs, tools=TOOLS, tokenize=True),
            lambda: render_k3_ids(msgs, tok, TOOLS), rep))
        t_floor = per_call(lambda: tok.encode(render_k3(msgs, TOOLS)), rep) / n * 1e6
        worst_text = min(worst_text, t_off / t_ours)
        if n <= SHORT:
            worst_short = min(worst_short, t_off / t_ours)
        worst_ids = min(worst_ids, t_off_ids / t_ids)
        print(f"kimi-k3  {n:>8} | {t_off:>13.1f} {t_ours:>8.2f} {t_off / t_ours:>5.1f}x | "
              f"{t_off_ids:>12.1f} {t_ids:>8.2f} {t_off_ids / t_ids:>5.1f}x | {t_floor:>13.2f} {t_ids / t_floor:>7.2f}x")
    worst_cold = float("inf")
    for n in (n for n in sizes if cold and n <= SHORT):
        req = json.loads(cold_request(n))
        if render_k3(req["messages"], req["tools"]) != official_text(req["messages"], req["tools"]):
            print(f"MISMATCH (cold text) at n={n}", file=sys.stderr)
            return 1
        c_ours, c_off = cold_pair(lambda m, t: render_k3(m, t), official_text, n, cold)
        worst_cold = min(worst_cold, c_off / c_ours)
        print(f"kimi-k3  {n:>8} | cold (a request never seen before), µs per request: official text "
              f"{c_off * 1e6:.1f}, ours {c_ours * 1e6:.1f}: {c_off / c_ours:.1f}x")
    if worst_cold != float("inf"):
        print(f"kimi-k3 worst cold ratio at <= {SHORT} messages: text {worst_cold:.1f}x (goal >= 10x)")
    print(f"kimi-k3 worst ratio: text {worst_text:.1f}x (goal >= 20x), ids {worst_ids:.1f}x (goal >= 30x)"
          + (f"; text at <= {SHORT} messages {worst_short:.1f}x" if worst_short != float("inf") else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", choices=("k2", "k3"), default=None, help="only the K2 dialects, or only Kimi-K3")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="conversation sizes, comma-separated")
    ap.add_argument("--cold", type=int, default=300,
                    help="requests never seen before timed per size <= 30 (the cold columns; 0: none)")
    args = ap.parse_args(argv)
    sizes = tuple(int(x) for x in args.sizes.split(","))
    if args.only != "k3" and k2_table(args.repeat, sizes, args.cold):
        return 1
    if args.only != "k2":
        return k3_table(args.repeat, sizes, args.cold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
