"""README and CI stay in step: the README's setup and test commands are the ones .ci/run runs; the README
stays a front page, its dialect table lists every dialect with its status. (Its code blocks that show an
output are run by tests/test_docs.py, with those of docs/.)"""

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


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail to a page of docs/"


def test_readme_dialect_table_lists_every_dialect_with_its_status():
    from kimi_chat import DIALECTS

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Which dialect is my model?", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| `moonshotai/")]
    by_dialect = {re.findall(r"`([^`]+)`", row[1])[0]: row for row in rows}
    for d in DIALECTS.values():
        assert d.name in by_dialect, f"README's dialect table has no row for {d.name}"
        assert by_dialect[d.name][2] == d.status.value, by_dialect[d.name]
