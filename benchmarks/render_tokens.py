"""Token-level rendering speed: render_tokens vs render + encode vs transformers' apply_chat_template(tokenize=True),
same process, on a 100-message tool conversation per dialect.

    python benchmarks/render_tokens.py [--messages 100] [--repeat 15]

* ``render+encode``: ``tokenizer.encode(render(...))`` (the ids only; the floor);
* ``render_tokens``: the call (ids, with the per-piece attribution from which ``assistant_mask``,
  ``message_index`` and ``spans`` are built on first access) (goal: within 1.3x of the floor), the same
  request again and again (kimi_chat's caches of text ids and earlier prompts warm);
* ``cold``: the call on one of 64 conversations in turn with no message text in common (beyond the system
  prompt and tools): a conversation kimi_chat has not seen lately, and its ratio to the floor;
* ``+fields``: the call, then reading ``assistant_mask``, ``message_index`` and ``spans`` (all of them built);
* ``extend_tokens``: the last 2 messages (assistant tool call + tool result) appended to the previous prompt;
* ``transformers``: ``PreTrainedTokenizerFast.apply_chat_template(tokenize=True)`` with the dialect's oracle
  template and the ``tokenizers`` conversion of the same tiktoken.model (ids checked equal to ours first).
  The official Kimi tokenizer class is remote code (not available offline); the fast conversion stands in.
  For ``kimi-k3`` (no Jinja template): the official K3 ``TikTokenTokenizer.apply_chat_template(tokenize=True)``
  (:mod:`kimi_chat.oracle_k3`), which encodes the prompt segment by segment (goal: >= 30x).

Tokenizer: the reference data, the K2.6-derived config for reasoning dialects, the July-2025 one otherwise,
the K3 tokenizer for kimi-k3.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from _timing import best_of  # noqa: E402
from kimi_chat.dialects import DIALECTS, get_dialect  # noqa: E402
from kimi_chat.reference.oracle import deep_sort_dict  # noqa: E402
from kimi_chat.prompt import render, render_segments  # noqa: E402
from kimi_chat.families.k3.render import render_k3_ids  # noqa: E402
from kimi_chat.tokens.tokenizer import PAT_STR, KimiTokenizer  # noqa: E402
from kimi_chat.tokens.rendered import extend_tokens, render_tokens  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city, in Celsius.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                         "required": ["city"]}}}]


def conversation(n: int, salt: str = "") -> list[dict]:
    """``n`` messages of a tool conversation; ``salt`` is written into every message's text after the system
    prompt (conversations with different salts share no message text)."""
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful assistant. Answer briefly and use tools."}]
    i = 0
    while len(msgs) < n:
        cid = f"functions.get_weather:{i}"
        msgs += [
            {"role": "user", "content": f"What's the weather like in city number {i}{salt} today? I plan a walk of {i * 3} km."},
            {"role": "assistant", "content": "", "reasoning_content": f"The user wants the weather{salt}; call the tool.",
             "tool_calls": [{"id": cid, "type": "function",
                             "function": {"name": "get_weather", "arguments": f'{{"city": "city-{i}{salt}"}}'}}]},
            {"role": "tool", "tool_call_id": cid, "content": f'{{"temp": {15 + i % 10}, "sky": "clear{salt}", "wind_kmh": 12}}'},
            {"role": "assistant", "content": f"It is {15 + i % 10} °C and clear in city {i}{salt}: a good day for {i * 3} km.",
             "reasoning_content": f"Summarise the tool result{salt}."},
        ]
        i += 1
    return msgs[:n]


POOL = 64
"""Distinct conversations for the cold column: more than kimi_chat keeps prompts of."""


def hf_tokenizer(tok: KimiTokenizer):
    try:
        from tokenizers import AddedToken
        from transformers import PreTrainedTokenizerFast
        from transformers.convert_slow_tokenizer import TikTokenConverter
    except ImportError as e:  # pragma: no cover
        print(f"(transformers/tokenizers unavailable: {e})", file=sys.stderr)
        return None
    conv = TikTokenConverter(vocab_file=str(tok.model_path), pattern=PAT_STR).converted()
    names = sorted(tok.special_tokens, key=tok.special_tokens.__getitem__)
    conv.add_special_tokens([AddedToken(n, normalized=False, special=True) for n in names])
    return PreTrainedTokenizerFast(tokenizer_object=conv, bos_token="[BOS]", eos_token="[EOS]",
                                   unk_token="[UNK]", pad_token="[PAD]")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)

    toks = {c: KimiTokenizer.from_reference(c) for c in ("k2", "k2.6", "k3")}
    hfs = {c: hf_tokenizer(t) for c, t in toks.items() if c != "k3"}
    try:
        from kimi_chat.families.k3.oracle import official_k3_tokenizer

        hfs["k3"] = official_k3_tokenizer()
    except Exception as e:  # pragma: no cover - transformers or the reference data missing
        print(f"(the official K3 tokenizer is unavailable: {e})", file=sys.stderr)
        hfs["k3"] = None
    try:
        from kimi_chat.reference.oracle import oracle_template
    except ImportError:  # pragma: no cover
        oracle_template = None

    msgs = conversation(args.messages)
    # agent loop: the model calls a tool (the last assistant message), the tool answers
    prev_msgs, tail = msgs[:-2], msgs[-2:]
    print(f"{args.messages} messages; best of {args.repeat}; times in ms")
    print(f"{'dialect':<24}{'tokens':>7}{'render':>8}{'segments':>9}{'render+enc':>11}{'render_tok':>11}{'ratio':>7}"
          f"{'cold':>7}{'ratio':>7}{'+fields':>8}{'ratio':>7}{'extend':>8}{'transformers':>13}{'tf/rt':>7}")
    for name in DIALECTS:
        d = get_dialect(name)
        cfg = "k3" if d.family == "k3" else "k2.6" if d.reasoning else "k2"
        tok, hf = toks[cfg], hfs[cfg]
        kw = {"tools": TOOLS, "dialect": name}
        rt = render_tokens(msgs, tokenizer=tok, **kw)
        # K3: the official ids are the segment-wise encoding, not encode(render(...))
        ids = render_k3_ids(msgs, tok, TOOLS) if d.family == "k3" else tok.encode(render(msgs, **kw))
        assert rt.ids == ids, name
        t_render = best_of(lambda: render(msgs, **kw), args.repeat)
        t_segs = best_of(lambda: render_segments(msgs, **kw), args.repeat)
        t_floor = best_of(lambda: tok.encode(render(msgs, **kw)), args.repeat)
        t_rt = best_of(lambda: render_tokens(msgs, tokenizer=tok, **kw), args.repeat)
        convs = [conversation(args.messages, f" #{k}") for k in range(POOL)]
        pool, floor_pool = itertools.cycle(convs), itertools.cycle(convs)
        t_cold = best_of(lambda: render_tokens(next(pool), tokenizer=tok, **kw), max(args.repeat, POOL))
        t_cold_floor = best_of(lambda: tok.encode(render(next(floor_pool), **kw)), max(args.repeat, POOL))

        def with_fields():
            r = render_tokens(msgs, tokenizer=tok, **kw)
            return r.assistant_mask, r.message_index, r.spans

        t_all = best_of(with_fields, args.repeat)

        prev = render_tokens(prev_msgs, tokenizer=tok, **kw)
        completion = rt.ids[len(prev.ids) : rt.span_of(len(prev_msgs))[1]] if rt.ids[: len(prev.ids)] == prev.ids else []
        ext = extend_tokens(prev, completion, tail) if completion else None
        if ext is not None:
            assert ext.ids == rt.ids
            t_ext = f"{best_of(lambda: extend_tokens(prev, completion, tail), args.repeat) * 1e3:8.2f}"
        else:
            t_ext = f"{'None':>8}"  # not prefix-stable (e.g. reasoning of earlier turns dropped)

        t_hf_s, ratio_hf = f"{'-':>13}", f"{'-':>7}"
        if hf is not None and d.family == "k3":
            def call():
                return hf.apply_chat_template(msgs, tools=TOOLS, tokenize=True)

            same = list(call()) == ids
            t_hf = best_of(call, max(3, args.repeat // 3))
            t_hf_s = f"{t_hf * 1e3:13.2f}" + ("" if same else "*")
            ratio_hf = f"{t_hf / t_rt:6.1f}x"
        elif hf is not None and oracle_template is not None:
            template = oracle_template(d)
            hf_tools = deep_sort_dict(TOOLS) if d.spec.sort_tool_keys else TOOLS
            extra = {}
            if d.spec.tools_typescript:
                from kimi_chat.families.k2.tools_ts import tools_to_typescript

                extra["tools_ts_str"] = tools_to_typescript(TOOLS)

            def call():
                return hf.apply_chat_template(msgs, tools=hf_tools, chat_template=template, tokenize=True,
                                              add_generation_prompt=True, return_dict=False, **extra)

            try:
                got = call()
                got = list(got["input_ids"] if isinstance(got, dict) else got)
                same = got == ids
            except Exception as e:  # pragma: no cover - template not renderable by transformers
                same = None
                print(f"  ({name}: transformers failed: {type(e).__name__}: {e})", file=sys.stderr)
            if same is not None:
                t_hf = best_of(call, max(3, args.repeat // 3))
                t_hf_s = f"{t_hf * 1e3:13.2f}" + ("" if same else "*")
                ratio_hf = f"{t_hf / t_rt:6.1f}x"
        print(f"{name:<24}{len(ids):>7}{t_render * 1e3:8.2f}{t_segs * 1e3:9.2f}{t_floor * 1e3:11.2f}{t_rt * 1e3:11.2f}{t_rt / t_floor:6.2f}x{t_cold * 1e3:7.2f}{t_cold / t_cold_floor:6.2f}x{t_all * 1e3:8.2f}{t_all / t_floor:6.2f}x{t_ext}{t_hf_s}{ratio_hf}")
    print("render / segments: render() and render_segments() alone; ratio = render_tokens / (render+encode) "
          "(goal <= 1.3); cold: render_tokens of conversations not seen lately, and its ratio to their render+encode; +fields: render_tokens then reading assistant_mask, message_index, spans, and its ratio; extend: extend_tokens of the last 2 messages; tf/rt = transformers / render_tokens "
          "(goal >= 5; kimi-k3: the official K3 tokenizer, goal >= 30); * = transformers ids differ from ours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
