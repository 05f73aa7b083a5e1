"""README and CI stay in step: the README's setup and test commands are the ones .ci/run runs; the
README's `verify` / `inspect` console examples are what the commands print."""

from __future__ import annotations

import subprocess
import sys

import re
from pathlib import Path

from conftest import REFERENCE, needs_reference

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


# -- the README's console examples are what the commands print (issue 20 item 18) ------------------

_EXAMPLE_FILES = {  # file names the README's examples use -> the reference file they are
    "chat_template.rev2.jinja": "Kimi-K2-Instruct/chat_template.rev2.jinja",
    "Kimi-K3.jinja": "llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja",
    "Kimi-K2-Thinking-Q4_K_M.gguf": "llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja",
}


def _console_examples(program: str) -> list[tuple[list[str], str]]:
    """``(argv, printed output)`` of every ``$ kimi-chat PROGRAM ...`` console block of the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    # (a block whose output holds ``` is fenced with ````)
    found = re.findall(rf"(```+)console\n\$ kimi-chat ({program} [^\n]*)\n(.*?)\1\n", text, re.S)
    return [(command.split(), output) for _, command, output in found]


def _run_cli(argv: list[str], tmp_path: Path, monkeypatch, capsys) -> str:
    from kimi_chat.cli import main

    monkeypatch.chdir(tmp_path)
    main(argv)
    return capsys.readouterr().out


@needs_reference
def test_readme_verify_examples_are_what_verify_prints(tmp_path, monkeypatch, capsys):
    examples = _console_examples("verify")
    assert len(examples) == 2
    for argv, shown in examples:
        (tmp_path / argv[1]).write_bytes((REFERENCE / _EXAMPLE_FILES[argv[1]]).read_bytes())
        # in a new process, as a user runs it: the search's examples depend on the modules loaded
        # (hypothesis draws constants from them), so an in-process run after other tests may differ
        p = subprocess.run([sys.executable, "-m", "kimi_chat.cli", *argv, "-q"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
        assert p.stdout == shown, (" ".join(argv), p.stderr)


@needs_reference
def test_readme_inspect_example_is_what_inspect_prints(tmp_path, monkeypatch, capsys):
    from test_inspect import _full_tokens, write_gguf

    from kimi_chat import markers as M

    [(argv, shown)] = _console_examples("inspect")
    name = argv[1]
    tokens, types = _full_tokens()
    # the README's GGUF: llama.cpp's adapted Thinking template, the official vocabulary, eos [EOS] (as
    # llama.cpp's converter writes it from the July-2025 config)
    write_gguf(tmp_path / name, (REFERENCE / _EXAMPLE_FILES[name]).read_text(encoding="utf-8"), tokens=tokens,
               types=types, name="Kimi-K2-Thinking", eos=M.EOS.id)
    # inspect names the installed template by its absolute path; the README shows it as templates/...
    from kimi_chat.templates import template_path

    installed = str(template_path("kimi-k2-thinking@rev1").parent) + "/"
    assert _run_cli(argv, tmp_path, monkeypatch, capsys).replace(installed, "templates/") == shown


def test_readme_reference_table_lists_every_required_file():
    # issue 20 item 2: where a user outside this repository gets each file of the reference data
    import hashlib

    from kimi_chat.reference import REQUIRED_FILES

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Reference data\n", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, str] = {}
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        paths_cell, sha_cell, origin = row.split(" | ")[:3]
        paths, shas = re.findall(r"`([^`]+)`", paths_cell), re.findall(r"`([0-9a-f]{8})`", sha_cell)
        assert len(paths) == len(shas) and origin.strip(), row
        listed.update(zip(paths, shas))
    assert sorted(listed) == sorted(REQUIRED_FILES)
    if REFERENCE is not None:
        for rel, prefix in listed.items():
            assert hashlib.sha256((REFERENCE / rel).read_bytes()).hexdigest().startswith(prefix), rel
