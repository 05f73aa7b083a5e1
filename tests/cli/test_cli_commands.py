"""The CLI trip-ups a new user met: the top-level help covers both families; errors name CLI
flags, not Python calls; ``tiny-model`` refuses a directory or a non-GGUF file and leaves no ``.part``;
``inspect`` exits 1 for a template that does not compile; ``verify`` prints progress on stderr
(``-q`` silences it). (``kimi-chat lint``: test_cli_lint.py; ``count --per-message``: test_tokens_cli.py;
``--version``: test_cli_errors.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_chat.cli import main
from kimi_chat.cli.tiny_model import GGUF_MAGIC, _check_out
from kimi_chat.cli._io import InputError
from kimi_chat.reference import reference_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool_conversation.json"
TEMPLATE = ROOT / "templates" / "kimi-k2-instruct-0905.jinja"

needs_tokenizer = pytest.mark.skipif(
    reference_file("tokenizer/tiktoken.model") is None or reference_file("Kimi-K2-Instruct/tokenizer_config.json") is None,
    reason="reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference",
)


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_top_level_help_covers_both_families(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "The Kimi-K2 chat format" not in text
    assert "K2" in text and "K3" in text and "lint" in text


def test_missing_reference_data_names_the_flag(monkeypatch, tmp_path, capsys):
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    monkeypatch.setenv("KIMI_CHAT_REFERENCE_DIR", str(tmp_path / "none"))
    status = main(["count", "-q", str(EXAMPLE)])
    assert status == 2
    assert "(or give a model snapshot directory with --tokenizer DIR)" in _err(capsys)
    status = main(["tiny-model", str(tmp_path / "t.gguf")])
    assert status == 2
    err = _err(capsys)
    assert "--tokenizer-dir DIR" in err and not (tmp_path / "t.gguf.part").exists()


@needs_tokenizer
def test_a_tokenizer_of_the_other_family_names_the_flag(capsys):
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    ref = reference_file("tokenizer/tiktoken.model").parent  # type: ignore[union-attr]
    config = reference_file("Kimi-K2-Instruct/tokenizer_config.json")
    status = main(["count", "-q", "-d", "kimi-k3", "--tokenizer", str(ref), "--tokenizer-config", str(config),
                   str(EXAMPLE)])
    assert status == 2
    err = _err(capsys)
    assert f"--tokenizer {ref}: the tokenizer has no special token <|open|>" in err
    assert "give --tokenizer a Kimi-K3 model snapshot directory" in err
    assert "KimiTokenizer" not in err and "from_reference" not in err


def test_tiny_model_refuses_a_directory(tmp_path, capsys):
    out = tmp_path / "models"
    out.mkdir()
    status = main(["tiny-model", str(out)])
    assert status == 2
    err = _err(capsys)
    assert f"{out}: is a directory; give the path of the .gguf file to write" in err
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["models"]


def test_tiny_model_refuses_to_overwrite_a_non_gguf_file(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("my notes")
    status = main(["tiny-model", str(out)])
    assert status == 2
    assert f"{out}: exists and is not a GGUF file; not overwritten" in _err(capsys)
    assert out.read_text() == "my notes"
    gguf = tmp_path / "old.gguf"
    gguf.write_bytes(GGUF_MAGIC + b"\x03\x00\x00\x00")
    _check_out(str(gguf))  # an earlier GGUF may be replaced
    with pytest.raises(InputError):
        _check_out(str(tmp_path))


@needs_tokenizer
def test_build_tiny_model_leaves_no_part_file_on_failure(tmp_path):
    pytest.importorskip("gguf", reason="the `native` extra (gguf) is not installed")
    from kimi_chat.testing.tiny_model import TinyConfig, build_tiny_model

    out = tmp_path / "taken"
    out.mkdir()  # os.replace onto a directory fails after the file is written
    with pytest.raises(OSError):
        build_tiny_model(out, config=TinyConfig(hidden=8, ffn=8, expert_ffn=8))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_inspect_exits_1_for_a_template_that_does_not_compile(tmp_path, capsys):
    pytest.importorskip("transformers", reason="the compile check needs transformers (the verify extra)")
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in %}broken")
    status = main(["inspect", str(bad)])
    assert status == 1
    assert "the template does not compile" in capsys.readouterr().out
    status = main(["inspect", "--json", str(bad)])
    assert status == 1
    assert json.loads(capsys.readouterr().out)["identification"]["compile_error"].startswith("line 1: ")
    status = main(["inspect", str(TEMPLATE)])
    assert status == 0


def test_verify_reports_progress(capsys):
    pytest.importorskip("transformers", reason="verify needs transformers (the verify extra)")
    from kimi_chat.checks.verification import verify

    seen: list[str] = []
    report = verify(TEMPLATE.read_text(), "kimi-k2-instruct-0905", examples=20, seed=1, progress=seen.append)
    assert report.equivalent
    assert seen == [f"{n}/20 conversations, no difference yet" for n in range(2, 21, 2)]  # every tenth
    capsys.readouterr()  # (transformers' own import notice)
    status = main(["verify", str(TEMPLATE), "-d", "kimi-k2-instruct-0905", "-n", "2", "--seed", "1"])
    assert status == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"kimi-chat: progress: rendering 2 generated conversations through {TEMPLATE} and kimi-k2-instruct-0905"
    assert "kimi-chat: progress: 2/2 conversations, no difference yet" in err
    status = main(["verify", str(TEMPLATE), "-d", "kimi-k2-instruct-0905", "-n", "2", "--seed", "1", "-q"])
    assert status == 0
    assert capsys.readouterr().err == ""


def test_verify_progress_says_when_it_shrinks(tmp_path):
    pytest.importorskip("transformers", reason="verify needs transformers (the verify extra)")
    from kimi_chat.checks.verification import verify

    seen: list[str] = []
    report = verify("{% for m in messages %}{{ m.content }}{% endfor %}", "kimi-k2-instruct-0905", examples=50,
                    seed=1, progress=seen.append)
    assert not report.equivalent
    assert seen[-1] == f"difference found after {report.examples} conversations; shrinking it"


@needs_tokenizer
@pytest.mark.parametrize("argv", [["count"], ["render", "--tokens"], ["render"]])
def test_an_unread_option_is_reported_once_by_the_render_commands(argv, capsys, tmp_path):
    """``count`` (and ``render``) print lint's finding for an option the template does not read; the
    render's ``UserWarning`` for the same finding, which Python would show on stderr too, is not given."""
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    import warnings

    f = tmp_path / "m.json"
    f.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")  # every warning the command gives is recorded, none filtered out
        status = main([*argv, "-d", "kimi-k2-instruct-0905", "--kwargs", '{"thinkng": false}', str(f)])
    err = _err(capsys)
    assert status == 0
    assert err.count("'thinkng'") == 1 and ": unread-kwarg: " in err
    assert [str(w.message) for w in shown if "thinkng" in str(w.message)] == []
