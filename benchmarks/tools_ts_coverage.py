"""Coverage of the in-template TypeScript tool declaration: the share of tool lists for
which our K2.6 template, WITHOUT tools_ts_str, declares exactly what the official tokenizer declares
(``Kimi-K2.6/tool_declaration_ts.py`` on the deep-sorted tools, JSON where it raises).

    python benchmarks/tools_ts_coverage.py [--generated N] [--llama-server]

Sets: the 20 golden TS cases of the reference data, the real-world corpus
(``fixtures/tools_ts/corpus.json``, one tool at a time), and N hypothesis-generated tool lists of
three kinds: schemas of every kind the encoder knows plus some it rejects, with any float
("generated") or floats of few digits ("short-float"), and any JSON built from schema keywords
("wild"). Engines: transformers' sandboxed Jinja2, and with ``--llama-server`` a real
llama-server (``/apply-template``, the tiny GGUF). Needs the reference data ($KIMI_CHAT_REFERENCE_DIR)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hypothesis import HealthCheck, given, settings  # noqa: E402

from kimi_chat.reference import reference_file  # noqa: E402
from tools_ts_support import (  # noqa: E402
    MSGS, corpus, declaration_of, json_declaration, official_declaration, official_ts, ours_transformers, tool_lists, wild_tool_lists,
)


def generated(n: int, strategy) -> list[list]:
    out: list[list] = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(tools: list) -> None:
        out.append(tools)

    collect()
    return out


def sets(n: int) -> dict[str, list[list]]:
    golden = [json.loads(line)["tools"] for line in
              reference_file("unverified/k25_tools_ts.golden.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"golden": golden, "corpus": [[c["tool"]] for c in corpus()],
            "generated": generated(n, tool_lists(odd=True)),
            "short-float": generated(n, tool_lists(odd=True, short=True, functions_only=True)),
            "wild": generated(n, wild_tool_lists())}


def report(engine: str, name: str, cases: list[list], declare, json_expected=None) -> None:
    """Print the share of ``cases`` whose declaration by ``declare`` is the official one: the official
    encoder's TypeScript, or (where it raises) ``json_expected(tools)`` (default: the official JSON;
    ``None`` from it leaves the case out)."""
    ts_n = ts_ok = js_n = js_ok = skipped = 0
    for tools in cases:
        ts = official_ts(tools)
        got = declare(tools)
        if ts:
            ts_n += 1
            ts_ok += got == ts
            continue
        expected = json_expected(tools) if json_expected else official_declaration(tools)
        if expected is None:
            skipped += 1
            continue
        js_n += 1
        js_ok += got == expected
    n, ok = ts_n + js_n, ts_ok + js_ok
    print(f"{engine:13} {name:12} exact {ok}/{n} = {ok / max(n, 1):.1%}   (official TypeScript: {ts_ok}/{ts_n}; "
          f"JSON: {js_ok}/{js_n}" + (f"; left out: {skipped}" if skipped else "") + ")")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=300)
    ap.add_argument("--llama-server", action="store_true")
    args = ap.parse_args()
    all_sets = sets(args.generated)
    for name, cases in all_sets.items():
        report("transformers", name, cases, lambda t: declaration_of(ours_transformers(t)))
    if args.llama_server:
        from kimi_chat.templates import template_path
        from kimi_chat.testing.tiny_model import build_tiny_model
        from llama_server_support import LlamaServer, RECOMMENDED_FLAGS, floats_written_alike, llama_server_tool

        def rewritten(tools: list) -> str | None:
            # JSON declarations show llama-server's rewrites (README "llama-server"): the tools as it
            # rebuilds them; left out when a float has more digits than its tojson writes
            sent = [llama_server_tool(t) for t in tools]
            return json_declaration(sent) if floats_written_alike(sent) else None

        with tempfile.TemporaryDirectory() as tmp:
            gguf = build_tiny_model(Path(tmp) / "tiny.gguf", dialect="kimi-k2-instruct-0905")
            with LlamaServer(gguf, template_path("kimi-k2.6"), Path(tmp) / "log", args=RECOMMENDED_FLAGS[1:]) as s:
                for name, cases in all_sets.items():
                    # llama-server refuses tools that are not functions: those lists are left out
                    ok = [t for t in cases if all(x.get("type") == "function" for x in t)]
                    report("llama-server", name, ok, lambda t: declaration_of(s.apply_template(MSGS, t)), rewritten)
    return 0


if __name__ == "__main__":
    sys.exit(main())
