"""The Kimi-K3 differential run: vLLM's and SGLang's built-in ``kimi_k3`` parsers and kimi_chat's plugins
on the K3 corpus of ``tests/adapters/k3_support.py`` (rendered completions plus the edge cases of issue
14), streamed token by token and whole, each compared with the format's reading. Run in the adapters venv
from the repository root::

    PYTHONPATH=$PWD ~/.cache/kimi-chat/venv-adapters/bin/python benchmarks/diff_k3_servers.py

(``tests/adapters/test_differential_k3.py`` pins the same table.)"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    logging.disable(logging.WARNING)  # the built-ins log every dropped call
    from tests.adapters.k3_differential import differential, table

    builtin, ours = differential()
    print(table("vLLM / SGLang built-in kimi_k3 vs the K3 format", builtin))
    print()
    print(table("kimi_chat plugins vs the K3 format", ours))


if __name__ == "__main__":
    main()
