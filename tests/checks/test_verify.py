"""identify / verify: exact and behavioural identification of templates, hypothesis search for a
minimal counterexample, readable diffs, the `kimi-chat verify` CLI."""

from __future__ import annotations

import importlib
import json

import pytest

from kimi_chat.dialects import DIALECTS as ALL_DIALECTS
from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import UnknownDialectError, render
from kimi_chat.cli import main
from kimi_chat.checks.known_problems import DIALECT_PROBLEMS, KNOWN_TEMPLATES, PROBLEMS
from kimi_chat.reference.oracle import OracleUnavailable, oracle_template, render_template
from kimi_chat.reference import reference_file
from kimi_chat.checks.verification import (
    PROBES,
    TemplateCompileError,
    identify,
    normalize_template,
    own_template_path,
    own_template_text,
    prompt_diff,
    template_sha256,
    verify,
    visible,
)

from conftest import needs_reference

ADAPTATIONS = [t for t in KNOWN_TEMPLATES if t.kind == "adapted" and t.dialect in DIALECTS]  # K2 (K3: test_k3_identify.py)
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _ref(relpath: str) -> str:
    p = reference_file(relpath)
    assert p is not None, relpath
    return p.read_text(encoding="utf-8")


# -- text helpers -------------------------------------------------------------------------------------


def test_visible_marks_whitespace_and_keeps_special_tokens():
    assert visible("a b\tc\n<|im_end|>\r") == "a·b→c␊<|im_end|>␍"


def test_prompt_diff_points_at_the_first_difference():
    exp = "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>"
    act = "<|im_user|>user<|im_middle|>hi <|im_end|><|im_assistant|>assistant<|im_middle|>"
    d = prompt_diff(exp, act)
    assert d.startswith("first difference at character 30")
    assert "-<|im_user|>user<|im_middle|>hi<|im_end|>" in d
    assert "+<|im_user|>user<|im_middle|>hi·<|im_end|>" in d
    assert prompt_diff(exp, exp) == ""


def test_normalize_template_newlines():
    assert normalize_template("a\r\nb\rc\n\n") == "a\nb\nc"
    assert template_sha256("x\r\ny\n") == template_sha256("x\ny")


def test_known_problem_codes_exist():
    for codes in DIALECT_PROBLEMS.values():
        assert all(c in PROBLEMS for c in codes)
    for t in KNOWN_TEMPLATES:
        assert all(c in PROBLEMS for c in t.problems) and t.dialect in ALL_DIALECTS
    assert set(DIALECT_PROBLEMS) == set(ALL_DIALECTS)
    assert all(p.problem in PROBLEMS for p in PROBES if p.problem is not None)


def test_probes_render_in_every_dialect():
    for d in DIALECTS:
        for p in PROBES:
            if not p.applies_to(DIALECTS[d]):
                continue
            render(list(p.messages), tools=list(p.tools) if p.tools else None, dialect=d,
                   add_generation_prompt=p.add_generation_prompt, **p.options_for(DIALECTS[d]))


def test_probes_tell_every_dialect_apart():
    outputs = {d: tuple(render(list(p.messages), tools=list(p.tools) if p.tools else None, dialect=d,
                               add_generation_prompt=p.add_generation_prompt, **p.options_for(DIALECTS[d]))
                        for p in PROBES if p.applies_to(DIALECTS[d])) for d in DIALECTS}
    assert len(set(outputs.values())) == len(DIALECTS)


# -- identify: exact ---------------------------------------------------------------------------------


@needs_reference
@pytest.mark.parametrize("known", KNOWN_TEMPLATES, ids=lambda t: t.source)
def test_known_hashes_are_the_reference_files(known):
    assert template_sha256(_ref(known.source)) == known.sha256


@needs_reference
@pytest.mark.parametrize("dialect", [name for name, d in DIALECTS.items() if not d.oracle_options])
def test_identify_official_templates(dialect):
    ident = identify(oracle_template(dialect))
    assert (ident.dialect, ident.kind, ident.match, ident.confidence) == (dialect, "official", "exact", 1.0)
    assert ident.status == DIALECTS[dialect].status
    assert [p.code for p in ident.problems] == list(DIALECT_PROBLEMS[dialect])


@needs_reference
def test_a_template_with_forced_options_is_its_siblings():
    # Kimi-K2.7-Code's oracle is Kimi-K2.6's template rendered with its switches forced: the text is K2.6's, and
    # only kimi_chat's own K2.7-Code template (which reads no switch) is K2.7-Code's
    assert DIALECTS["kimi-k2.7-code"].oracle == DIALECTS["kimi-k2.6"].oracle
    ident = identify(oracle_template("kimi-k2.7-code"))
    assert (ident.dialect, ident.kind) == ("kimi-k2.6", "official")
    ours = identify(own_template_text("kimi-k2.7-code"))
    assert (ours.dialect, ours.kind, ours.match) == ("kimi-k2.7-code", "ours", "exact")


@needs_reference
def test_identify_crlf_copy_is_rev1():
    ident = identify(_ref("Kimi-K2-Instruct/chat_template.rev1-crlf.jinja"))
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2-instruct@rev1", "official", "exact")


@needs_reference
def test_identify_official_without_reference_dir_uses_known_hashes(monkeypatch, tmp_path):
    text = oracle_template("kimi-k2-thinking@rev1")
    monkeypatch.setenv("KIMI_CHAT_REFERENCE_DIR", str(tmp_path / "absent"))
    ident = identify(text, behavioural=False)
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2-thinking@rev1", "official", "exact")


@needs_reference
@pytest.mark.parametrize("known", ADAPTATIONS, ids=lambda t: t.source)
def test_identify_llama_cpp_adaptations(known):
    ident = identify(_ref(known.source))
    assert ident.kind == "adapted" and ident.match == "exact" and ident.dialect == known.dialect
    assert ident.label == f"adapted copy of {known.dialect}"
    assert ident.renders_in_sandbox is False
    codes = [p.code for p in ident.problems]
    assert codes[0] == "sandbox-security-error" and codes == list(known.problems)
    # the differences are real: what the adapted template renders outside transformers' sandbox
    assert ident.differences and all(d.actual != d.expected for d in ident.differences)
    assert any(d.lenient for d in ident.differences)


@needs_reference
def test_thinking_adaptations_keep_reasoning_longer():
    for known in ADAPTATIONS:
        if known.dialect != "kimi-k2-thinking@rev1":
            continue
        ident = identify(_ref(known.source))
        diff = {d.probe: d for d in ident.differences}["reasoning in history"]
        # the official template drops the second plain turn's reasoning; the adaptations keep it
        assert "<think>Add again.</think>" in diff.actual and "<think>Add again.</think>" not in diff.expected


@needs_reference
def test_identify_variants():
    b = identify(_ref("unverified/Kimi-K2-Instruct-0905.chat_template.candidate-B.jinja"))
    assert (b.dialect, b.kind) == ("kimi-k2-instruct-0905", "variant")
    assert b.renders_in_sandbox is True and b.differences
    k26 = identify(_ref("unverified/Kimi-K2.6-derived.chat_template.jinja"))
    assert (k26.dialect, k26.kind) == ("kimi-k2.6", "variant")


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_identify_our_own_templates(dialect):
    ident = identify(own_template_text(dialect))
    assert (ident.dialect, ident.kind, ident.match) == (dialect, "ours", "exact")
    assert ident.source == str(own_template_path(dialect))


# -- identify: behavioural ----------------------------------------------------------------------------


@needs_reference
def test_identify_modified_copy_names_the_difference():
    text = oracle_template("kimi-k2-instruct@rev2").replace("You are a helpful assistant", "You are a helpful bot")
    ident = identify(text)
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2-instruct@rev2", "modified", "behavioural")
    assert ident.renders_in_sandbox is True and 0.9 < ident.confidence < 1.0
    assert ident.problems == ()  # an unknown text's problems are its differences, not rev2's list
    assert any("helpful·' expected 'assistant<|im_end|>" in d.summary and "got 'bot<|im_end|>" in d.summary
               for d in ident.differences)
    assert ident.scores["kimi-k2-instruct@rev2"] == max(ident.scores.values())


@needs_reference
def test_identify_equivalent_rewrite():
    text = oracle_template("kimi-k2-thinking@rev1") + "\n{# a comment changes the text, not the prompt #}"
    ident = identify(text)
    assert (ident.dialect, ident.kind, ident.match, ident.confidence) == (
        "kimi-k2-thinking@rev1", "equivalent", "behavioural", 1.0)
    assert [p.code for p in ident.problems] == list(DIALECT_PROBLEMS["kimi-k2-thinking@rev1"])


@needs_reference
def test_identify_edited_adaptation_is_still_an_adapted_copy():
    text = _ref("llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja") + "{# edited #}"
    ident = identify(text)
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2-thinking@rev1", "adapted", "behavioural")
    assert ident.renders_in_sandbox is False
    assert [p.code for p in ident.problems] == ["sandbox-security-error"]
    # the preserve_thinking probe has the same messages (K2-Thinking does not read the flag)
    assert {d.probe for d in ident.differences} == {"tool results out of order", "reasoning in history",
                                                   "reasoning in history, preserve_thinking"}


def test_identify_unknown_template():
    ident = identify(CHATML)
    assert ident.dialect is None and ident.kind == "unknown" and ident.match == "none"
    assert ident.confidence < 0.9 and ident.differences
    assert json.loads(json.dumps(ident.to_dict()))["kind"] == "unknown"
    assert identify(CHATML, behavioural=False).scores == {}


def test_identify_without_transformers_says_what_to_install(monkeypatch):
    # the module identify() looks render_with_dialect up in
    v = importlib.import_module("kimi_chat.checks.verification.identification")

    def missing(*a, **k):
        raise OracleUnavailable("rendering a template the official way needs transformers: pip install -e '.[verify]' (run in the kimi_chat checkout)")

    monkeypatch.setattr(v, "render_with_dialect", missing)
    ident = identify(CHATML)
    assert ident.kind == "unknown" and any("pip install -e '.[verify]'" in n for n in ident.notes)


# -- verify -------------------------------------------------------------------------------------------


@needs_reference
def test_verify_finds_minimal_counterexample_rev2_vs_0905():
    template = oracle_template("kimi-k2-instruct@rev2")
    report = verify(template, "kimi-k2-instruct-0905", seed=0)
    assert not report.equivalent and report.error is None
    req = report.counterexample
    assert req["tools"] is None and req["options"] == {}
    # minimal: one message with no optional keys (the default system prompts differ)
    assert len(req["messages"]) == 1 and set(req["messages"][0]) == {"role", "content"}
    assert report.expected == render(req["messages"], dialect="kimi-k2-instruct-0905",
                                     add_generation_prompt=req["add_generation_prompt"])
    assert report.actual == render_template(template, req["messages"],
                                            add_generation_prompt=req["add_generation_prompt"])
    assert report.expected != report.actual
    assert "You·are·Kimi,·an·AI·assistant" in report.diff and "You·are·a·helpful·assistant" in report.diff
    assert "NOT equivalent to kimi-k2-instruct-0905" in report.summary()


@needs_reference
def test_verify_is_reproducible_with_a_seed():
    template = oracle_template("kimi-k2-thinking@rev1")
    a = verify(template, "kimi-k2.5", examples=50, seed=7)
    b = verify(template, "kimi-k2.5", examples=50, seed=7)
    assert not a.equivalent and a.to_dict() == b.to_dict()


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_verify_own_template_is_equivalent(dialect):
    report = verify(own_template_text(dialect), dialect, examples=40, seed=1)
    assert report.equivalent, report.summary()
    assert report.examples >= 30 and report.counterexample is None


@needs_reference
def test_verify_adaptation_fails_in_sandbox_and_differs_outside_it():
    template = _ref("llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Thinking.jinja")
    strict = verify(template, "kimi-k2-thinking", examples=200, seed=4)
    assert not strict.equivalent and strict.actual is None
    assert strict.error.startswith("SecurityError") and "append" in strict.error
    assert any(m.get("tool_calls") for m in strict.counterexample["messages"])
    assert "SecurityError" in strict.summary()
    assert strict.lenient_diff is not None  # what the template renders outside the sandbox was compared
    lenient = verify(template, "kimi-k2-thinking", examples=200, seed=4, lenient=True)
    assert not lenient.equivalent and lenient.error is None and lenient.lenient
    assert lenient.actual != lenient.expected and lenient.diff


def test_template_that_does_not_compile():
    ident = identify("{% if %}")
    assert ident.kind == "unknown" and ident.description == "not valid Jinja"
    assert any("does not compile: line 1" in n for n in ident.notes)
    with pytest.raises(TemplateCompileError, match="does not compile"):
        verify("{% if %}", "kimi-k2.5", examples=5)


def test_own_template_of_an_unknown_dialect_raises():
    with pytest.raises(UnknownDialectError, match="nope"):
        own_template_text("nope")
    with pytest.raises(UnknownDialectError, match="nope"):
        own_template_path("nope")


def test_own_templates_are_there_for_every_dialect():
    for dialect in DIALECTS:
        path = own_template_path(dialect)
        assert path is not None and path.name == f"{dialect}.jinja"
        assert own_template_text(dialect) == path.read_text(encoding="utf-8")


def test_verify_refuses_bad_arguments():
    with pytest.raises(ValueError):
        verify(CHATML, "kimi-k2.5", examples=0)
    with pytest.raises(ValueError):
        verify(CHATML, "no-such-dialect", examples=5)


def test_verify_without_transformers_says_what_to_install(monkeypatch):
    v = importlib.import_module("kimi_chat.checks.verification.rendering")  # where the template is compiled

    def missing():
        raise OracleUnavailable("rendering a template the official way needs transformers: pip install -e '.[verify]' (run in the kimi_chat checkout)")

    monkeypatch.setattr(v, "_chat_template_utils", missing)
    with pytest.raises(OracleUnavailable, match=r"pip install -e '\.\[verify\]'"):
        verify(CHATML, "kimi-k2.5", examples=5)


# -- CLI ----------------------------------------------------------------------------------------------


def _run(capsys, *argv):
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


@needs_reference
def test_cli_verify_counterexample_exit_1(capsys, tmp_path):
    f = tmp_path / "rev2.jinja"
    f.write_text(oracle_template("kimi-k2-instruct@rev2"), encoding="utf-8")
    status, out, _ = _run(capsys, "verify", str(f), "--dialect", "kimi-k2-instruct-0905", "--seed", "0")
    assert status == 1 and "NOT equivalent to kimi-k2-instruct-0905" in out and "+++ template" in out
    status, out, _ = _run(capsys, "verify", str(f), "-d", "kimi-k2-instruct-0905", "--seed", "0", "--json")
    data = json.loads(out)
    assert status == 1 and data["equivalent"] is False and data["counterexample"]["messages"]


def test_cli_verify_equivalent_exit_0(capsys, tmp_path):
    dialect = "kimi-k2-instruct-0905"
    path = own_template_path(dialect)
    status, out, _ = _run(capsys, "verify", str(path), "-d", dialect, "-n", "10", "--seed", "2")
    assert status == 0 and out.startswith(f"equivalent: no difference from {dialect}")
    # without --dialect the identified dialect is used
    status, out, _ = _run(capsys, "verify", str(path), "-n", "5", "--seed", "2")
    assert status == 0 and dialect in out


def test_cli_verify_bad_input_exit_2(capsys, tmp_path):
    status, _, err = _run(capsys, "verify", str(tmp_path / "missing.jinja"), "-d", "kimi-k2.5")
    assert status == 2 and "no such file" in err
    f = tmp_path / "t.jinja"
    f.write_text(CHATML, encoding="utf-8")
    status, _, err = _run(capsys, "verify", str(f), "-d", "kimi-k9")
    assert status == 2 and "unknown dialect 'kimi-k9'" in err
    status, _, err = _run(capsys, "verify", str(f), "-d", "kimi-k2.5", "-n", "0")
    assert status == 2 and "--examples" in err
    status, _, err = _run(capsys, "verify", str(f))
    assert status == 2 and "--dialect" in err
    f.write_text("{% if %}", encoding="utf-8")
    status, _, err = _run(capsys, "verify", str(f), "-d", "kimi-k2.5")
    assert status == 2 and "does not compile" in err


# -- regressions -------------------------------------------------------------------------------------

# our own template made to fail in transformers' sandbox (a list append, as llama.cpp's adaptations
# do) while rendering the same outside it: append returns None, so the `if` writes nothing
_APPENDS = "{%- set _seen = [] %}{%- if _seen.append(1) %}{% endif %}"


def test_strict_verify_that_falls_back_reports_lenient_false(capsys, tmp_path):
    template = _APPENDS + own_template_text("kimi-k2-instruct-0905")
    report = verify(template, "kimi-k2-instruct-0905", examples=5, seed=3)
    assert not report.equivalent and report.error.startswith("SecurityError")
    assert report.lenient is False  # a strict run, whatever the fallback rendered
    assert report.lenient_diff == ""  # outside the sandbox it renders what the dialect does
    assert "(lenient sandbox)" not in report.summary()
    assert "renders this the same" in report.summary()
    f = tmp_path / "t.jinja"
    f.write_text(template, encoding="utf-8")
    status, out, _ = _run(capsys, "verify", str(f), "-d", "kimi-k2-instruct-0905", "-n", "5", "--seed", "3", "--json")
    data = json.loads(out)
    assert status == 1 and data["lenient"] is False and data["lenient_diff"] == ""


@needs_reference
@pytest.mark.parametrize("dialect, other", [("kimi-k2.5", "kimi-k2.6"), ("kimi-k2.6", "kimi-k2.5")])
def test_identify_tells_k25_from_k26_by_behaviour(dialect, other):
    """A renamed-variable copy of each oracle (no exact match) is told apart by the preserve_thinking
    probe: K2.6 keeps every turn's reasoning with it, K2.5 (which does not read it) does not."""
    text = oracle_template(dialect).replace("hist_msgs", "history_msgs")
    assert text != oracle_template(dialect)
    ident = identify(text)
    assert (ident.dialect, ident.kind, ident.match) == (dialect, "equivalent", "behavioural")
    assert ident.scores[dialect] == 1.0 > ident.scores[other]
    other_diffs = [d.probe for d in identify(oracle_template(other)).differences]
    assert other_diffs == []  # exact matches carry no differences


@needs_reference
def test_superseded_k25_file_is_the_k26_template():
    """The file once used as the K2.5 oracle has K2.6's bytes (PROVENANCE.md): identified as K2.6."""
    ident = identify(_ref("unverified/Kimi-K2.5.chat_template.reconstructed.jinja"))
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k2.6", "official", "exact")
    v2 = identify(_ref("unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja"))
    assert (v2.dialect, v2.kind, v2.match) == ("kimi-k2.5", "official", "exact")
