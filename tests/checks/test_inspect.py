"""inspect: small GGUF files (metadata and a token list, no weights) carrying each reference template
and an adapted copy; model directories / tokenizer_config.json; .jinja files; `kimi-chat inspect`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gguf  # a test dependency: it builds the GGUF files (metadata + token list, no weights)
import pytest

from kimi_chat import markers as M
from kimi_chat.cli import main
from kimi_chat.checks.inspection import InspectError, inspect_path, load_template, read_gguf_metadata
from kimi_chat.families.k3.tooling import K3_FIX_HINT
from kimi_chat.checks.known_problems import KNOWN_TEMPLATES
from kimi_chat.reference import reference_file
from kimi_chat.templates import template_path

from conftest import needs_reference

FULL_VOCAB = 163840
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
OFFICIAL_MARKERS = [m for m in M.MARKERS if m.id is not None]


def _official_tokens(n: int = FULL_VOCAB) -> tuple[list[str], list[int]]:
    tokens = [f"tok{i}" for i in range(n)]
    types = [1] * n
    for m in OFFICIAL_MARKERS:
        if m.id < n:
            tokens[m.id] = m.text
            types[m.id] = 3
    return tokens, types


_FULL = None


def _full_tokens() -> tuple[list[str], list[int]]:
    global _FULL
    if _FULL is None:
        _FULL = _official_tokens()
    return _FULL


def write_gguf(path: Path, template: str | None, *, tokens: list[str] | None = None, types: list[int] | None = None,
               pre: str = "kimi-k2", bos: int | None = M.BOS.id, eos: int | None = M.IM_END.id,
               eot: int | None = None, name: str | None = None, extra: dict | None = None) -> Path:
    """A GGUF file with metadata and a token list only (an empty tensor list)."""
    w = gguf.GGUFWriter(str(path), "deepseek2")
    if name is not None:
        w.add_name(name)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    if tokens is None:
        tokens = [f"tok{i}" for i in range(16)]
    w.add_token_list(tokens)
    if types is not None:
        w.add_token_types(types)
    w.add_token_merges(["a b", "c d"])  # a string array the reader skips
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if eot is not None:
        w.add_eot_token_id(eot)
    if template is not None:
        w.add_chat_template(template)
    for k, v in (extra or {}).items():
        w.add_string(k, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _ref(relpath: str) -> str:
    p = reference_file(relpath)
    assert p is not None
    return p.read_text(encoding="utf-8")


# -- GGUF reader --------------------------------------------------------------------------------------


def test_reader_agrees_with_gguf_reader(tmp_path):
    tokens, types = _official_tokens(200)
    p = write_gguf(tmp_path / "m.gguf", CHATML, tokens=tokens, types=types, name="Tiny", eot=7)
    ours = read_gguf_metadata(p)
    theirs = gguf.GGUFReader(str(p))
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):
            continue
        want = field.contents()
        got = ours[key]
        if key == "tokenizer.ggml.merges":
            assert got.count == len(want)
        else:
            assert got == want, key
    assert ours["GGUF.version"] == 3 and ours["GGUF.tensor_count"] == 0


def test_reader_rejects_non_gguf_and_truncated_files(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 40)
    with pytest.raises(InspectError, match="not a GGUF file"):
        read_gguf_metadata(bad)
    good = write_gguf(tmp_path / "g.gguf", CHATML)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:120])
    with pytest.raises(InspectError, match="cut.gguf: .*truncated"):
        read_gguf_metadata(cut)


# -- GGUF inspection ----------------------------------------------------------------------------------


@needs_reference
@pytest.mark.parametrize("known", KNOWN_TEMPLATES, ids=lambda t: t.source)
def test_gguf_with_each_known_template_is_identified(tmp_path, known):
    p = write_gguf(tmp_path / "model.gguf", _ref(known.source))
    ins = inspect_path(p)
    ident = ins.identification
    assert ins.kind == "gguf" and ins.template_source == "tokenizer.chat_template"
    assert ident.match == "exact" and ident.dialect == known.dialect
    assert ident.kind == known.kind
    assert [p.code for p in ident.problems] == list(known.problems)
    assert ins.needs_fix == (known.kind != "official")
    if known.dialect == "kimi-k3":  # no template of ours to use instead (tests/checks/test_k3_identify.py)
        assert ins.fix_template is None and ins.fix_command is None and ins.fix_hint == K3_FIX_HINT
        return
    installed = str(template_path(known.dialect))  # absolute: the command works from any directory
    assert ins.fix_template == installed and Path(installed).is_absolute()
    assert ins.fix_command == (f"llama-server -m {p} --jinja --chat-template-file {installed} "
                               "--no-prefill-assistant --no-reasoning-preserve")
    assert ins.fix_hint == ins.fix_command


@pytest.mark.parametrize("dialect, name", [("kimi-k2.5", "Kimi-K2.5"), ("kimi-k2.6", "Kimi-K2.6")])
def test_gguf_with_our_own_template(tmp_path, dialect, name):
    from kimi_chat.checks.verification import own_template_text

    text = own_template_text(dialect)
    ins = inspect_path(write_gguf(tmp_path / "model.gguf", text, name=name))
    assert (ins.identification.dialect, ins.identification.kind) == (dialect, "ours")
    out = ins.format_text()
    assert not ins.needs_fix and "use:       llama-server" in out
    # our templates compute the TypeScript declaration themselves: no false tools_ts_str problem
    assert "needs-tools-ts-str" not in [p.code for p in ins.identification.problems]
    assert "tools_ts_str" not in out
    # the installed template's absolute path, and the note reads as a sentence
    assert f"--chat-template-file {template_path(dialect)}" in out
    assert f"(the template: kimi_chat's own {dialect} template;" in out and "the kimi_chat's" not in out


@needs_reference
def test_gguf_with_the_crlf_copy_is_rev1(tmp_path):
    p = write_gguf(tmp_path / "model.gguf", _ref("Kimi-K2-Instruct/chat_template.rev1-crlf.jinja"))
    ident = inspect_path(p).identification
    assert (ident.dialect, ident.kind) == ("kimi-k2-instruct@rev1", "official")


@needs_reference
def test_gguf_with_an_edited_adaptation(tmp_path):
    text = _ref("llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Thinking.jinja").replace(
        "{# Find last non-tool-call assisitant message #}", "{# edited by a converter #}")
    ins = inspect_path(write_gguf(tmp_path / "model.gguf", text))
    ident = ins.identification
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2-thinking@rev1", "adapted", "behavioural")
    assert ident.renders_in_sandbox is False and ins.needs_fix
    out = ins.format_text()
    assert "adapted copy of kimi-k2-thinking@rev1" in out and "SecurityError" in out
    assert "fix:       llama-server" in out and f"--chat-template-file {template_path('kimi-k2-thinking@rev1')}" in out


def test_official_tokenizer_facts_agree(tmp_path):
    tokens, types = _full_tokens()
    ins = inspect_path(write_gguf(tmp_path / "m.gguf", CHATML, tokens=tokens, types=types))
    assert ins.disagreements == [], [f.to_dict() for f in ins.disagreements]
    assert {f.name for f in ins.facts} >= {"tokenizer.ggml.pre", "vocab size", "marker tokens", "bos token id",
                                           "<|im_end|> is end-of-generation", "marker token types"}


def test_tokenizer_facts_that_disagree(tmp_path):
    tokens, types = (list(x) for x in _full_tokens())
    tokens[M.TOOL_CALL_BEGIN.id] = "<|reserved_token_163597|>"
    types[M.IM_MIDDLE.id] = 1
    p = write_gguf(tmp_path / "m.gguf", CHATML, tokens=tokens, types=types, pre="deepseek-v3", eos=M.EOS.id,
                   bos=1)
    ins = inspect_path(p)
    bad = {f.name: f for f in ins.disagreements}
    assert set(bad) == {"tokenizer.ggml.pre", "marker tokens", "marker token types", "bos token id",
                        "<|im_end|> is end-of-generation"}
    assert bad["tokenizer.ggml.pre"].value == "deepseek-v3"
    assert bad["marker tokens"].value == ["163597: '<|reserved_token_163597|>' (official '<|tool_call_begin|>')"]
    assert bad["marker token types"].value == ["<|im_middle|> (normal)"]
    assert bad["<|im_end|> is end-of-generation"].value is False
    text = ins.format_text()
    assert "DIFF tokenizer.ggml.pre: deepseek-v3 (official: kimi-k2)" in text


def test_im_end_as_eot_counts_as_end_of_generation(tmp_path):
    ins = inspect_path(write_gguf(tmp_path / "m.gguf", CHATML, eos=M.EOS.id, eot=M.IM_END.id))
    fact = next(f for f in ins.facts if f.name == "<|im_end|> is end-of-generation")
    assert fact.ok and fact.value is True


def test_small_vocab_is_reported(tmp_path):
    ins = inspect_path(write_gguf(tmp_path / "m.gguf", CHATML))
    assert "vocab size" in {f.name for f in ins.disagreements}


@needs_reference
def test_model_name_and_template_disagree(tmp_path):
    p = write_gguf(tmp_path / "m.gguf", _ref("Kimi-K2-Instruct/chat_template.rev2.jinja"),
                   name="Kimi-K2-Instruct-0905")
    ins = inspect_path(p)
    assert ins.identification.dialect == "kimi-k2-instruct@rev2"
    assert ins.needs_fix and ins.fix_dialect == "kimi-k2-instruct-0905"
    assert "the model's name says kimi-k2-instruct-0905, its template is kimi-k2-instruct@rev2" in ins.format_text()


def test_gguf_without_template(tmp_path):
    ins = inspect_path(write_gguf(tmp_path / "m.gguf", None))
    assert ins.identification is None and ins.template_source is None and ins.fix_command is None
    assert any("no tokenizer.chat_template" in n for n in ins.notes)
    with pytest.raises(InspectError, match="no tokenizer.chat_template"):
        load_template(tmp_path / "m.gguf")


# -- model directories, tokenizer_config.json, .jinja -------------------------------------------------


@needs_reference
def test_model_directory_with_the_official_config(tmp_path):
    shutil.copy(reference_file("Kimi-K2-Instruct/tokenizer_config.json"), tmp_path / "tokenizer_config.json")
    ins = inspect_path(tmp_path)
    assert ins.kind == "tokenizer_config" and ins.template_source == "tokenizer_config.json chat_template"
    assert (ins.identification.dialect, ins.identification.kind) == ("kimi-k2-instruct@rev1", "official")
    assert ins.disagreements == []
    assert [p.code for p in ins.identification.problems] == ["no-tool-calls"]
    assert inspect_path(tmp_path / "tokenizer_config.json").identification.dialect == "kimi-k2-instruct@rev1"


@needs_reference
def test_chat_template_jinja_beside_the_config_takes_precedence(tmp_path):
    shutil.copy(reference_file("Kimi-K2-Instruct/tokenizer_config.json"), tmp_path / "tokenizer_config.json")
    (tmp_path / "chat_template.jinja").write_text(_ref("Kimi-K2-Thinking/chat_template.rev1.jinja"), encoding="utf-8")
    ins = inspect_path(tmp_path)
    assert ins.template_source == "chat_template.jinja"
    assert ins.identification.dialect == "kimi-k2-thinking@rev1"
    assert any("takes precedence" in n for n in ins.notes)


@needs_reference
def test_tampered_config_tokens_disagree(tmp_path):
    config = json.loads(reference_file("Kimi-K2-Instruct/tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"][str(M.IM_END.id)]["content"] = "<|im_stop|>"
    config["eos_token"] = "<|im_end|>"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    bad = {f.name: f for f in inspect_path(tmp_path).disagreements}
    assert set(bad) == {"added_tokens_decoder", "eos_token"}
    assert bad["added_tokens_decoder"].value == ["163586: '<|im_stop|>' (official '<|im_end|>')"]


def test_jinja_file_and_directory_of_ggufs(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text(CHATML, encoding="utf-8")
    ins = inspect_path(f)
    assert ins.kind == "jinja" and ins.identification.kind == "unknown" and ins.fix_command is None
    d = tmp_path / "ggufs"
    d.mkdir()
    write_gguf(d / "a-00001-of-00002.gguf", CHATML)
    write_gguf(d / "a-00002-of-00002.gguf", None)
    ins = inspect_path(d)
    assert ins.kind == "gguf" and ins.path.endswith("a-00001-of-00002.gguf")
    assert any("2 .gguf files" in n for n in ins.notes)


def test_bad_paths(tmp_path):
    with pytest.raises(InspectError, match="no such file"):
        inspect_path(tmp_path / "absent.gguf")
    with pytest.raises(InspectError, match="no tokenizer_config.json"):
        inspect_path(tmp_path)
    bad = tmp_path / "tokenizer_config.json"
    bad.write_text("{nope", encoding="utf-8")
    with pytest.raises(InspectError, match="not valid JSON"):
        inspect_path(bad)


# -- CLI ----------------------------------------------------------------------------------------------


@needs_reference
def test_cli_inspect_text_and_json(tmp_path, capsys):
    tokens, types = _full_tokens()
    p = write_gguf(tmp_path / "Kimi-K2-Thinking-Q4.gguf",
                   _ref("llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja"),
                   tokens=tokens, types=types, name="Kimi-K2-Thinking")
    assert main(["inspect", str(p)]) == 0
    out = capsys.readouterr().out
    assert "dialect:   kimi-k2-thinking@rev1 [single-source] — adapted copy of kimi-k2-thinking@rev1" in out
    assert "[warning] reasoning retained for more turns" in out
    assert "tokenizer: agrees with the official tokenizer" in out
    assert (f"fix:       llama-server -m {p} --jinja --chat-template-file {template_path('kimi-k2-thinking@rev1')} "
            "--no-prefill-assistant --no-reasoning-preserve") in out
    assert main(["inspect", str(p), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["identification"]["kind"] == "adapted" and data["identification"]["renders_in_sandbox"] is False
    assert data["disagreements"] == [] and data["needs_fix"] is True
    assert data["fix_template"] == str(template_path("kimi-k2-thinking@rev1"))


def test_cli_inspect_bad_input_exit_2(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "absent.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err
