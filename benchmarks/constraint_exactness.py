"""How often the constraint is exact, against llguidance alone, over a schema corpus.

    python benchmarks/constraint_exactness.py [--corpus FILE] [--dialect kimi-k3] [--additional-properties schema]

For each schema of the corpus (default tests/data/constraint_schemas.json: ``{"schemas": [{"name",
"schema", "valid", "invalid"}]}``), as one tool's ``parameters`` under ``tool_choice="required"``:

* ``llguidance``: llguidance alone compiles the schema with nothing dropped
  (:func:`kimi_chat.grammar.schemas.prepare` has no note: no keyword left out, no lenient mode);
* ``exact``: ``constraint(...)`` says ``exact`` (no note);
* ``wrong``: under ``exact``, a valid instance (as the renderer writes the call) refused or an invalid
  one accepted: a broken promise, listed by name.

Prints the counts and, for the inexact schemas, the notes' reasons by frequency. Numbers only.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from kimi_chat.grammar.gbnf import GrammarError
from kimi_chat.grammar.request import constraint
from kimi_chat.grammar.schemas import prepare
from kimi_chat.prompt import render

ROOT = Path(__file__).resolve().parent.parent
USER = [{"role": "user", "content": "Call the tool."}]


def call_text(dialect: str, tools: list, value: object) -> str:
    """The model's part of a forced call of ``f`` with ``value``, as the renderer writes it."""
    m = {"role": "assistant", "content": None, "reasoning_content": "ok",
         "tool_calls": [{"id": "functions.f:0", "type": "function",
                         "function": {"name": "f", "arguments": json.dumps(value, ensure_ascii=False)}}]}
    prompt = render(USER, dialect=dialect, tools=tools)
    full = render(USER + [m], dialect=dialect, tools=tools, add_generation_prompt=False)
    return full[len(prompt):]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "constraint_schemas.json")
    ap.add_argument("--dialect", default="kimi-k3")
    ap.add_argument("--additional-properties", default="schema", choices=("schema", "declared"))
    args = ap.parse_args()
    cases = json.loads(args.corpus.read_text(encoding="utf-8"))["schemas"]
    alone = exact = errors = 0
    wrong: list[str] = []
    reasons: collections.Counter[str] = collections.Counter()
    for case in cases:
        schema = case["schema"]
        if not prepare(schema, "#").notes:
            alone += 1
        tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
        try:
            extra = {} if args.additional_properties == "schema" else {  # the default (and older versions)
                "additional_properties": args.additional_properties}
            c = constraint(tools, dialect=args.dialect, tool_choice="required", parallel_tool_calls=False, **extra)
        except GrammarError as e:
            errors += 1
            reasons[f"error: {str(e)[:80]}"] += 1
            continue
        if not c.exact:
            for n in c.notes:
                reasons[n.reason[:90]] += 1
            continue
        exact += 1
        valid = case.get("valid", []) if args.additional_properties == "schema" else []
        if any(not c.accepts(call_text(args.dialect, tools, v)) for v in valid) or any(
                c.accepts(call_text(args.dialect, tools, v)) for v in case.get("invalid", [])):
            wrong.append(case["name"])
    print(f"{args.corpus.name}: {len(cases)} schemas, {args.dialect}, additional_properties="
          f"{args.additional_properties!r}")
    print(f"llguidance alone exact {alone} | constraint exact {exact} ({exact / max(alone, 1):.0%} of llguidance) | "
          f"grammar errors {errors} | wrong under exact {len(wrong)} {wrong}")
    for reason, n in reasons.most_common(12):
        print(f"  {n:4d}  {reason}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
