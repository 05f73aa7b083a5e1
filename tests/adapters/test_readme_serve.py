"""The README's server lines are the ones these tests exercise: the ``vllm serve`` line that uses the
plugin carries exactly the flags ``test_vllm`` registers and composes with, and the SGLang line the
names and environment ``test_sglang`` registers with."""

from __future__ import annotations

import shlex
from pathlib import Path

from .test_vllm import SERVE_FLAGS

README = Path(__file__).resolve().parents[2] / "README.md"
SGLANG_FLAGS = ["--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2"]
SGLANG_ENV = "KIMI_CHAT_SGLANG_NAMES=kimi_k2"


def _shell_blocks() -> list[str]:
    blocks, cur, lang = [], None, None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if cur is None:
                cur, lang = [], line[3:].strip()
            else:
                if lang in ("sh", "bash", "console", ""):
                    blocks.append("\n".join(cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def _commands(needle: str) -> list[list[str]]:
    out = []
    for block in _shell_blocks():
        for cmd in block.replace("\\\n", " ").splitlines():
            if needle in cmd:
                out.append(shlex.split(cmd))
    return out


def _require(cmds: list, what: str) -> None:
    assert cmds, f"README has no {what} line"


def test_readme_vllm_serve_line_uses_the_tested_flags():
    cmds = _commands("kimi_chat.servers.vllm")
    _require(cmds, "`vllm serve` plugin")
    for argv in cmds:
        assert argv[:2] == ["vllm", "serve"], argv
        flags = argv[3:]
        for i in range(0, len(SERVE_FLAGS)):
            assert SERVE_FLAGS[i] in flags, (SERVE_FLAGS[i], argv)
        pairs = dict(zip(SERVE_FLAGS[1::2], SERVE_FLAGS[2::2]))
        for k, v in pairs.items():
            assert flags[flags.index(k) + 1] == v, (k, argv)


def test_readme_sglang_line_uses_the_tested_names():
    cmds = _commands("sglang.launch_server")
    _require(cmds, "SGLang")
    for argv in cmds:
        assert argv[0] == SGLANG_ENV, argv
        for k, v in zip(SGLANG_FLAGS[::2], SGLANG_FLAGS[1::2]):
            assert argv[argv.index(k) + 1] == v, (k, argv)
