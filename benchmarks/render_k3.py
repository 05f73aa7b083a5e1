"""Kimi-K3 render speed alone: ``python benchmarks/render_k3.py [--repeat N]`` is
``python benchmarks/render.py --only k3`` (the K3 part of ``benchmarks/render.py``: kimi_chat's K3
renderer vs the official K3 encoder and tokenizer, on the same conversations)."""

from __future__ import annotations

import sys

from render import main

if __name__ == "__main__":
    sys.exit(main(["--only", "k3", *sys.argv[1:]]))
