"""README and CI stay in step: the README's setup and test commands are the ones .ci/run runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", quick, re.S)]


def test_readme_has_setup_and_test_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    assert "kimi-chat render examples/" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in _readme_commands():
        assert command in ci, f"README command not run by .ci/run: {command}"


def test_readme_lists_every_dialect_with_status():
    from kimi_chat import DIALECTS

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for d in DIALECTS.values():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{d.name}`")), None)
        assert row is not None, d.name
        assert d.oracle in row and d.status.value in row, row


def test_readme_render_example_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Use", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(block, "README.md#use", "exec"), scope)  # noqa: S102 - our own documentation
    assert scope["prompt"].endswith("<|im_assistant|>assistant<|im_middle|><think></think>")
    assert "## Return of functions.get_weather:0\n21 °C, clear<|im_end|>" in scope["prompt"]
