"""``kimi-chat dialects``: list the dialects with their provenance status, oracle file and model names."""

from __future__ import annotations

import argparse
import json

from ..dialect_records import ALIASES, DIALECTS


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("dialects", help="list dialects, their provenance status and oracle template")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = [
        {
            "name": d.name,
            "aliases": [a for a, n in ALIASES.items() if n == d.name],
            "status": d.status.value,
            "oracle": d.oracle,
            "model_names": list(d.model_names),
            "reasoning": d.reasoning_policy,
            "summary": d.summary,
        }
        for d in DIALECTS.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        alias = f" (alias: {', '.join(r['aliases'])})" if r["aliases"] else ""
        print(f"{r['name']:<{width}}  {r['status']:<13}  {r['oracle']}{alias}")
        if r["model_names"]:
            print(f"{'':<{width}}  models: {', '.join(r['model_names'])} (any of them names the dialect)")
        print(f"{'':<{width}}  {r['summary']}")
    return 0
