"""Cost of an exact cache key for the tools a server declares on every request, same process.

    python benchmarks/tool_keys.py [--repeat N]

The tools caches (``kimi_chat.caches.content_key``) key on ``marshal.dumps(tools, 2)``: exact (``loads``
inverts it, every value's type is written) and free of reference counts. At 4 messages that key was more
than half of a rev1 render (13.5 of about 23 µs, measured on a quiet machine on 2026-12-02); since then
``kimi_chat.caches.exact_key`` finds it through the value's ``marshal`` format-4 text (a lookup in a bounded
map of format-4 text -> format-2 key, filled on a miss): the ``exact_key`` row. This prints each
candidate's time per call against format 2, for the five tools of ``benchmarks/render.py``, and what each
one would get wrong as a key on its own:

* ``marshal`` format 4: exact, but it flags every object whose reference count is above one, so an equal
  value held elsewhere gets another key (a miss for the same request);
* ``pickle`` protocol 5: exact for plain data; its memo follows sharing inside the value (misses only);
* ``orjson`` (if installed; not a dependency), with every ``PASSTHROUGH_*`` option: it raises on objects
  and subclasses, but writes a tuple as a list, NaN and infinities as ``null``, a UUID as its string and
  an Enum as its value (a mixin Enum is also ``==`` its value), so it is not exact on its own;
* ``==`` against a stored copy: a check on a hit, not a key; it tells apart what orjson collapses except
  mixin Enums.
"""

from __future__ import annotations

import argparse
import copy
import json
import marshal
import pickle
import sys
from collections.abc import Callable
from typing import Any

from _timing import per_call
from kimi_chat.caches import exact_key
from render import TOOLS


def candidates(tools: list[Any]) -> list[tuple[str, Callable[[], Any]]]:
    """(name, the call to time) for each key or check, ``marshal`` format 2 (today's key) first."""
    stored = copy.deepcopy(tools)
    out: list[tuple[str, Callable[[], Any]]] = [
        ("marshal format 2 (content_key)", lambda: marshal.dumps(tools, 2)),
        ("marshal format 4", lambda: marshal.dumps(tools, 4)),
        ("exact_key (format 4 -> format 2)", lambda: exact_key(tools)),
        ("pickle protocol 5", lambda: pickle.dumps(tools, 5)),
        ("== a stored copy", lambda: tools == stored),
        ("json.dumps", lambda: json.dumps(tools)),
    ]
    try:
        import orjson
    except ImportError:
        print("orjson is not installed: its row is left out", file=sys.stderr)
    else:
        opts = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
        out.insert(3, ("orjson.dumps (passthrough)", lambda: orjson.dumps(tools, option=opts)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="timing runs per candidate (the best is kept)")
    args = ap.parse_args(argv)
    rows = [(name, per_call(call, args.repeat)) for name, call in candidates(TOOLS)]
    base = rows[0][1]
    print(f"5 tools, {len(marshal.dumps(TOOLS, 2))} bytes as marshal format 2")
    print(f"{'key':<34}{'µs/call':>9}{'vs marshal 2':>14}")
    for name, t in rows:
        print(f"{name:<34}{t * 1e6:>9.2f}{t / base:>13.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
