"""Render speed: kimi_chat.render vs transformers rendering the official template, same process.

    python benchmarks/render.py [--repeat N]

For each dialect, renders tool conversations of 10, 100 and 1000 messages (user question, assistant
tool call, tool result, assistant answer, repeated) with both, checks they are equal, and prints
microseconds per message and the speed-up ratio. transformers' compiled template is cached (as
transformers does); its input normalisation runs each time (as apply_chat_template does).
Needs transformers and the reference data.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from _timing import best_of  # noqa: E402
from kimi_chat import DIALECTS, render  # noqa: E402
from kimi_chat.oracle import render_official  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def conversation(n: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful assistant."}]
    i = 0
    while len(msgs) < n:
        cid = f"functions.get_weather:{i}"
        msgs += [
            {"role": "user", "content": f"What's the weather in city number {i}?"},
            {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
             "tool_calls": [{"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": f'{{"city": "c{i}"}}'}}]},
            {"role": "tool", "tool_call_id": cid, "content": '{"temp": 20}'},
            {"role": "assistant", "content": f"It is 20 degrees in city {i}.", "reasoning_content": "Easy."},
        ]
        i += 1
    return msgs[:n]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"{'dialect':<24}{'messages':>9}{'kimi_chat µs/msg':>18}{'transformers µs/msg':>21}{'speed-up':>10}")
    for dialect in DIALECTS:
        for n in (10, 100, 1000):
            msgs = conversation(n)
            ours = render(msgs, tools=TOOLS, dialect=dialect)
            if ours != render_official(msgs, tools=TOOLS, dialect=dialect):
                print(f"{dialect}: outputs differ!", file=sys.stderr)
                return 1
            t_ours = best_of(lambda: render(msgs, tools=TOOLS, dialect=dialect), args.repeat)
            t_hf = best_of(lambda: render_official(msgs, tools=TOOLS, dialect=dialect), args.repeat)
            print(f"{dialect:<24}{n:>9}{t_ours / n * 1e6:>18.2f}{t_hf / n * 1e6:>21.2f}{t_hf / t_ours:>9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
