"""Prompt rendering in vLLM: ``--tokenizer-mode kimi_chat`` vs vLLM's own renderers, same process.

    KIMI_CHAT_ADAPTER_TESTS=1 PYTHONPATH=$PWD ~/.cache/kimi-chat/venv-adapters/bin/python \\
        benchmarks/vllm_render.py [--repeat N] [--only k2|k3]

Requests per second of ``renderer.render_chat`` (vLLM's chat entry: messages -> engine input ids, what
the API server runs per chat request) on tool conversations of 10, 100 and 1000 messages
(``benchmarks/render.py``'s ``conversation``), in a model directory built from the reference data:

* K2 dialects: our renderer vs vLLM's ``HfRenderer`` with a real fast tokenizer built from
  ``tiktoken.model`` (faster than the remote-code ``TikTokenTokenizer`` a real K2 deployment runs, so
  the ratio is a lower bound) and the dialect's official template; the tools are pre-sorted and
  ``tools_ts_str`` passed, as the official tokenizer's pre-processing does, and the content format is
  ``string`` (vLLM's ``auto`` picks ``openai`` for the Kimi templates, and 0905's template then writes
  the Python repr of an assistant's content list into the prompt). Goal >= 10x.
* Kimi-K3: our renderer vs vLLM's ``KimiK3Renderer`` with the official K3 tokenizer (the release's
  ``tokenization_kimi.py`` + ``encoding_k3.py`` from the reference data, PROVENANCE recipe). Goal >= 30x.

Two columns: the same request sent again and again (``ratio``: kimi_chat's prompt caches are warm; a chat
client's next turn, which starts with the previous prompt, gets the same reuse), and ``cold``: each request
one of 64 conversations with no message text in common (beyond the system prompt and tools), more than
kimi_chat keeps, so its history is encoded anew.

Both sides' ids are checked equal before timing.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _timing import per_call_pair  # noqa: E402
from render import TOOLS, conversation  # noqa: E402

from kimi_chat.dialects import get_dialect  # noqa: E402
from kimi_chat.reference.oracle import deep_sort_dict  # noqa: E402
from kimi_chat.families.k2.tools_ts import tools_to_typescript  # noqa: E402
from tests.adapters.test_vllm_renderer import (  # noqa: E402  (the model directories of the tests)
    _hf_renderer,
    chat_params,
    make_model_dir,
    vllm_config,
)

K2 = ("kimi-k2-instruct-0905", "kimi-k2-thinking@rev1", "kimi-k2.6")
SIZES = (10, 100, 1000)


def _ids(renderer, msgs, params) -> list[int]:
    (_,), (engine_input,) = renderer.render_chat([msgs], params)
    return list(engine_input["prompt_token_ids"])


POOL = 64
"""Distinct conversations per size for the cold column: more than kimi_chat keeps prompts of
(``kimi_chat.tokens.prompt_ids.PREFIXES``), so each request is one it has not seen lately."""


def _row(label: str, n: int, ours, theirs, p_ours, p_theirs, repeat: int) -> tuple[float, float]:
    msgs = conversation(n)
    if _ids(ours, msgs, p_ours) != _ids(theirs, msgs, p_theirs):
        raise SystemExit(f"{label} n={n}: the two renderers' ids differ")
    rep = max(2, repeat if n < 1000 else repeat // 2)
    t_ours, t_theirs = per_call_pair(lambda: ours.render_chat([msgs], p_ours),
                                     lambda: theirs.render_chat([msgs], p_theirs), rep)
    pool = [conversation(n, f" #{k}") for k in range(POOL)]
    if _ids(ours, pool[1], p_ours) != _ids(theirs, pool[1], p_theirs):
        raise SystemExit(f"{label} n={n}: the two renderers' ids differ")
    mine, other = itertools.cycle(pool), itertools.cycle(pool)
    c_ours, c_theirs = per_call_pair(lambda: ours.render_chat([next(mine)], p_ours),
                                     lambda: theirs.render_chat([next(other)], p_theirs), rep)
    ratio, cold = t_theirs / t_ours, c_theirs / c_ours
    print(f"{label:<22} {n:>5} | {1 / t_theirs:>10.1f} {1 / t_ours:>10.1f} | {ratio:>6.1f}x | "
          f"{1 / c_theirs:>10.1f} {1 / c_ours:>10.1f} | {cold:>6.1f}x")
    return ratio, cold


def k2_table(root: Path, repeat: int) -> float:
    from vllm.renderers.registry import renderer_from_config

    print(f"{'K2 (vs HfRenderer)':<22} {'msgs':>5} | {'vLLM req/s':>10} {'ours req/s':>10} | ratio  "
          f"| {'cold: vLLM':>10} {'ours':>10} | ratio")
    worst = cold = float("inf")
    for name in K2:
        d = get_dialect(name)
        model = make_model_dir(root, name)
        ours = renderer_from_config(vllm_config(model))
        hf = _hf_renderer(model, name)
        tools = deep_sort_dict(TOOLS) if d.spec.sort_tool_keys else TOOLS
        extra = {"tools_ts_str": tools_to_typescript(tools)} if d.spec.tools_typescript else {}
        for n in SIZES:
            r, c = _row(name, n, ours, hf, chat_params(TOOLS), chat_params(tools, content_format="string", **extra),
                        repeat)
            worst, cold = min(worst, r), min(cold, c)
    print(f"K2 worst ratio: {worst:.1f}x, cold {cold:.1f}x (goal >= 10x)")
    return worst


def k3_table(root: Path, repeat: int) -> float:
    from vllm.renderers.kimi_k3 import KimiK3Renderer
    from vllm.renderers.registry import renderer_from_config

    from kimi_chat.families.k3.oracle import official_k3_tokenizer

    print(f"{'K3 (vs KimiK3Renderer)':<22} {'msgs':>5} | {'vLLM req/s':>10} {'ours req/s':>10} | ratio  "
          f"| {'cold: vLLM':>10} {'ours':>10} | ratio")
    model = make_model_dir(root, "kimi-k3")
    ours = renderer_from_config(vllm_config(model))
    theirs = KimiK3Renderer(vllm_config(model, mode="kimi_k3"), official_k3_tokenizer())
    worst = cold = float("inf")
    for n in SIZES:
        r, c = _row("kimi-k3", n, ours, theirs, chat_params(TOOLS), chat_params(TOOLS), repeat)
        worst, cold = min(worst, r), min(cold, c)
    print(f"K3 worst ratio: {worst:.1f}x, cold {cold:.1f}x (goal >= 30x)")
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", choices=("k2", "k3"), default=None)
    args = ap.parse_args(argv)
    logging.getLogger("kimi_chat.integrations.vllm").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "k3":
            k2_table(Path(tmp), args.repeat)
        if args.only != "k2":
            k3_table(Path(tmp), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
