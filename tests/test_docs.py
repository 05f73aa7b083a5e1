"""The documentation is true: every code block of the README and of docs/ that shows an output is run
and gives that output, and every link between the pages (relative links and their anchors) resolves.

Blocks that show an output, by kind:

* interactive Python (``>>>`` lines, fenced ``pycon`` or ``python``): run here with :mod:`doctest`, the
  blocks of one page in order and in one namespace, from the repository root;
* ``console`` sessions (``$ kimi-chat ...`` and what it prints): the ``verify`` and ``inspect`` examples
  of docs/checks.md, run here;
* ``text`` blocks: the conformance reports of docs/engines.md (tests/engines/test_conformance.py and
  tests/engines/test_native_ik.py compare them with what the command prints) and the Kimi-K3 prompt of
  docs/rendering.md (tests/tokens/test_k3_tokens.py renders it).

A block of another kind shows no output: ``sh`` commands, ``python`` without ``>>>`` (and no output in
its comments), ``peg`` grammars (tests/parsing/test_parse.py and tests/parsing/test_k3_parse.py compare them with the
code), and unlabelled sketches of a format."""

from __future__ import annotations

import doctest
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE, needs_reference

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]

# Pages the README and docs/ link to that are written in the same change set as other work (serving
# operations, the training-data command): a link to one of them is checked once the page exists.
PAGES_WRITTEN_ELSEWHERE = {ROOT / "docs" / "serve-operations.md", ROOT / "docs" / "training-data.md"}

_FENCE = re.compile(r"^(```+)([a-z]*)\n(.*?)^\1\n", re.S | re.M)


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _blocks(page: Path) -> list[tuple[str, str, int]]:
    """``(language, body, line of the opening fence)`` of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [(m.group(2), m.group(3), text.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(text)]


# -- blocks that show an output are run ------------------------------------------------------------

def _doctest_pages() -> list[Path]:
    return [p for p in PAGES if any(">>> " in body for lang, body, _ in _blocks(p) if lang in ("pycon", "python"))]


@pytest.mark.parametrize("page", _doctest_pages(), ids=_rel)
def test_interactive_python_blocks_print_what_they_show(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples read files of the repository (examples/...)
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    namespace: dict = {}
    report: list[str] = []
    for lang, body, line in _blocks(page):
        if lang not in ("pycon", "python") or ">>> " not in body:
            continue
        test = parser.get_doctest(body, namespace, f"{_rel(page)}:{line}", str(page), line)
        runner.run(test, out=report.append, clear_globs=False)
        namespace = test.globs  # (a DocTest runs in a copy of the namespace it is given)
    failed = runner.summarize(verbose=False).failed
    assert failed == 0, "".join(report)


def test_every_block_that_shows_an_output_is_run():
    """Which blocks show an output is decided by their kind (the module's docstring): a new kind of
    block, or a console session of another command, needs a test before it goes into a page."""
    console_commands: list[str] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for lang, body, line in _blocks(page):
            where = f"{_rel(page)}:{line}"
            assert lang in ("sh", "python", "pycon", "console", "text", "peg", ""), f"{where}: ```{lang}"
            if lang == "python" and not any(_rel(page) == p and s in body for p, s in _OUTPUT_IN_COMMENTS_NOT_YET_RUN):
                assert not re.search(r"^\s*[^#\n]*#\s*(?:->|=>|True\b|False\b|\()", body, re.M) or ">>> " in body, (
                    f"{where}: a python block that shows an output in a comment: write it as a >>> session")
            if lang == "console":
                console_commands.append(body.split("\n", 1)[0])
            if lang == "text":
                before = text.split("\n")[max(0, line - 2)]
                in_k3 = page.name == "rendering.md" and "## Kimi-K3" in text[:text.index(body)]
                assert before.startswith("<!-- conformance: ") or in_k3, f"{where}: a text block no test checks"
    assert sorted(console_commands) == sorted(cmd for cmd, _ in _CHECKED_CONSOLE), console_commands


# Python blocks that still show outputs in comments, each to become a >>> session: the overview block at
# the top of docs/constraints.md (its matcher needs the reference tokenizer, its validate call a model's
# output), kept until that page's top part is rewritten.
_OUTPUT_IN_COMMENTS_NOT_YET_RUN = {("docs/constraints.md", "m = c.matcher(KimiTokenizer.from_reference(")}


# the console sessions of docs/checks.md, as `$ kimi-chat ...` lines, and the reference file each reads
_CHECKED_CONSOLE = [
    ("$ kimi-chat inspect Kimi-K2-Thinking-Q4_K_M.gguf", "llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja"),
    ("$ kimi-chat verify chat_template.rev2.jinja --dialect kimi-k2-instruct-0905 --seed 0",
     "Kimi-K2-Instruct/chat_template.rev2.jinja"),
    ("$ kimi-chat verify Kimi-K3.jinja --seed 1", "llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja"),
]


def _console_examples(program: str) -> list[tuple[list[str], str]]:
    """``(argv, printed output)`` of every ``$ kimi-chat PROGRAM ...`` session of docs/checks.md."""
    text = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    # (a block whose output holds ``` is fenced with ````)
    found = re.findall(rf"(```+)console\n\$ kimi-chat ({program} [^\n]*)\n(.*?)\1\n", text, re.S)
    return [(command.split(), output) for _, command, output in found]


def _reference_file(argv: list[str]) -> Path:
    [source] = [src for cmd, src in _CHECKED_CONSOLE if cmd == "$ kimi-chat " + " ".join(argv)]
    return REFERENCE / source


@needs_reference
def test_verify_examples_are_what_verify_prints(tmp_path):
    examples = _console_examples("verify")
    assert len(examples) == 2
    for argv, shown in examples:
        (tmp_path / argv[1]).write_bytes(_reference_file(argv).read_bytes())
        # in a new process, as a user runs it: the search's examples depend on the modules loaded
        # (hypothesis draws constants from them), so an in-process run after other tests may differ
        p = subprocess.run([sys.executable, "-m", "kimi_chat.cli", *argv, "-q"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
        assert p.stdout == shown, (" ".join(argv), p.stderr)


@needs_reference
def test_inspect_example_is_what_inspect_prints(tmp_path, monkeypatch, capsys):
    from checks.test_inspect import _full_tokens, write_gguf

    from kimi_chat import markers as M
    from kimi_chat.cli import main

    [(argv, shown)] = _console_examples("inspect")
    tokens, types = _full_tokens()
    # the page's GGUF: llama.cpp's adapted Thinking template, the official vocabulary, eos [EOS] (as
    # llama.cpp's converter writes it from the July-2025 config)
    write_gguf(tmp_path / argv[1], _reference_file(argv).read_text(encoding="utf-8"), tokens=tokens,
               types=types, name="Kimi-K2-Thinking", eos=M.EOS.id)
    monkeypatch.chdir(tmp_path)
    main(argv)
    # inspect names the installed template by its absolute path; the page shows it as templates/...
    from kimi_chat.templates import template_path

    installed = str(template_path("kimi-k2-thinking@rev1").parent) + "/"
    assert capsys.readouterr().out.replace(installed, "templates/") == shown


# -- tables that state facts of the code -------------------------------------------------------------

def test_fidelity_table_lists_every_dialect_with_its_oracle_and_status():
    from kimi_chat import DIALECTS

    text = (ROOT / "docs" / "dialects-and-fidelity.md").read_text(encoding="utf-8")
    for d in DIALECTS.values():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{d.name}`")), None)
        assert row is not None, d.name
        assert d.oracle in row and d.status.value in row, row


def test_reference_table_lists_every_required_file_with_its_hash():
    from kimi_chat.reference import REQUIRED_FILES

    text = (ROOT / "docs" / "reference-data.md").read_text(encoding="utf-8")
    listed: dict[str, str] = {}
    for row in (line for line in text.splitlines() if line.startswith("| `")):
        paths_cell, sha_cell, origin = row.split(" | ")[:3]
        paths, shas = re.findall(r"`([^`]+)`", paths_cell), re.findall(r"`([0-9a-f]{8})`", sha_cell)
        assert len(paths) == len(shas) and origin.strip(), row
        listed.update(zip(paths, shas))
    assert sorted(listed) == sorted(REQUIRED_FILES)
    if REFERENCE is not None:
        for rel, prefix in listed.items():
            assert hashlib.sha256((REFERENCE / rel).read_bytes()).hexdigest().startswith(prefix), rel


# -- links between the pages resolve ----------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation other than ``-``/``_`` dropped,
    spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_slug_is_githubs():
    assert _slug("`kimi-chat serve`: an OpenAI-compatible Kimi endpoint (`serve` extra)") == (
        "kimi-chat-serve-an-openai-compatible-kimi-endpoint-serve-extra")
    assert _slug('Forced tool calls (`tool_choice: "required"` or a named function)') == (
        "forced-tool-calls-tool_choice-required-or-a-named-function")


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_links_between_pages_resolve(page):
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            if dest not in PAGES_WRITTEN_ELSEWHERE:
                broken.append(f"{target}: no file {dest}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {_rel(dest)}")
    assert not broken, broken


# -- the repository explains itself ------------------------------------------------------------------

_NUMBERED_REFERENCE = re.compile(r"\b(issue|task)s? ?#?[0-9]+", re.I)


def test_no_file_cites_a_numbered_issue():
    """A reader of the repository cannot see the tracker: code, tests, comments, docs and scripts say what
    the code does, not which numbered issue or task asked for it."""
    files = [p for p in ROOT.rglob("*") if p.is_file() and (p.suffix in (".py", ".md", ".sh", ".jinja", ".toml"))
             and not {".venv", ".git", "node_modules"} & set(p.relative_to(ROOT).parts)]
    files.append(ROOT / ".ci" / "run")
    cited = [f"{_rel(p)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if _NUMBERED_REFERENCE.search(line)]
    assert not cited, "\n".join(cited)
