"""PrimeIntellect's ``renderers`` 0.1.12 on the conversations of ``benchmarks/data.py`` (run by it, in the venv
where ``renderers`` is installed: ``/work/venv-renderers``; kimi_chat is not imported here).

    /work/venv-renderers/bin/python benchmarks/data_renderers.py SPEC_JSON

SPEC_JSON (written by benchmarks/data.py): the conversations, the reference ``tiktoken.model`` and tokenizer
config paths, and the Kimi pre-tokenizer pattern. ``renderers`` loads a model's tokenizer from the Hugging Face
hub, which is not reachable offline: a small adapter over tiktoken with the reference files stands in for it
(the Tokenizer protocol of ``renderers.base``). It has no K2.6 renderer: its K2.5 one (the same format but
``preserve_thinking``) renders, with ``build_training_sample`` (one render per conversation: what it offers
for training). Prints one JSON line: seconds per conversation and tokens per conversation.
"""

from __future__ import annotations

import json
import sys
import time


class KimiTiktoken:
    """The renderers Tokenizer protocol over tiktoken and the reference files."""

    def __init__(self, model: str, config: str, pattern: str) -> None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        ranks = load_tiktoken_bpe(model)
        with open(config, encoding="utf-8") as f:
            cfg = json.load(f)
        specials = {t["content"]: int(i) for i, t in cfg.get("added_tokens_decoder", {}).items()}
        self._enc = tiktoken.Encoding("kimi", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
        self._specials = specials
        self.name_or_path = "moonshotai/Kimi-K2.5"
        self.unk_token_id = None
        self.eos_token_id = specials.get("<|im_end|>")

    def encode(self, text: str, *args, **kwargs):
        return self._enc.encode(text, allowed_special="all")

    def decode(self, ids, *args, **kwargs):
        return self._enc.decode(list(ids))

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            if tokens in self._specials:
                return self._specials[tokens]
            try:
                return self._enc.encode_single_token(tokens)
            except KeyError:  # not a token of this vocabulary (as an HF tokenizer's unk: None here)
                return None
        return [self.convert_tokens_to_ids(t) for t in tokens]


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    try:
        from renderers.base import build_training_sample
        from renderers.kimi_k25 import KimiK25Renderer
    except ImportError as e:
        print(json.dumps({"error": f"renderers not importable: {e}"}))
        return
    tok = KimiTiktoken(spec["model"], spec["config"], spec["pattern"])
    r = KimiK25Renderer(tok)
    rows = spec["rows"]
    build_training_sample(r, rows[0]["messages"], tools=rows[0]["tools"])  # warm
    best = float("inf")
    tokens = 0
    for _ in range(3):
        t = time.perf_counter()
        tokens = 0
        for row in rows:
            s = build_training_sample(r, row["messages"], tools=row["tools"])
            tokens += len(s.token_ids)
        best = min(best, time.perf_counter() - t)
    print(json.dumps({"seconds_per_conversation": best / len(rows), "tokens_per_conversation": tokens / len(rows)}))


if __name__ == "__main__":
    main()
