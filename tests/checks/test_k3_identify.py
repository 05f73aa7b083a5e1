"""identify / inspect / verify know Kimi-K3: llama.cpp's Jinja port of the K3 encoder
(`llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja`) is recognised by its hash and by its behaviour, with
its known problems; verify compares a K3 port with `kimi-k3` as llama.cpp runs it (arguments parsed
first) and shrinks a counterexample."""

from __future__ import annotations

import json

import pytest

from kimi_chat import render
from kimi_chat.cli import main
from kimi_chat.checks.inspection import inspect_path
from kimi_chat.families.k3.tooling import K3_FIX_HINT
from kimi_chat.checks.known_problems import KNOWN_TEMPLATES, PROBLEMS
from kimi_chat.reference import reference_file
from kimi_chat.checks.verification import PROBES, identify, template_sha256, verify
from kimi_chat.checks.verification.rendering import host_parsed_arguments, render_with_dialect

from conftest import needs_reference

PORT_SOURCE = "llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja"
PORT_PROBLEMS = ("accepts-medium-effort", "needs-parsed-arguments", "accepts-non-object-arguments",
                 "case-insensitive-key-sort")
MEDIUM_CHECK = "thinking_effort not in ['low', 'medium', 'high', 'max']"


def _port() -> str:
    p = reference_file(PORT_SOURCE)
    assert p is not None, PORT_SOURCE
    return p.read_text(encoding="utf-8")


def _whitespace_changed(text: str) -> str:
    """The port with blank lines and indentation added between its macros (`-` trims them: the same
    output), so that its hash is no longer the known one."""
    out = text.replace("{%- endmacro -%}\n", "{%- endmacro -%}\n\n    \n")
    assert out != text
    return out


def _medium_refused(text: str) -> str:
    """The port with its effort check fixed: ``medium`` refused as the official encoder does."""
    assert MEDIUM_CHECK in text
    return text.replace(MEDIUM_CHECK, "thinking_effort not in ['low', 'high', 'max']")


def _keys_by_code_point(text: str) -> str:
    """The port with its key sort made case-sensitive (as Python's ``sorted``)."""
    assert "|dictsort" in text
    return text.replace("|dictsort", "|dictsort(true)")


_CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
_CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [_CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "18 °C"},
]


# -- data ---------------------------------------------------------------------------------------------


def test_port_record():
    (port,) = [t for t in KNOWN_TEMPLATES if t.dialect == "kimi-k3"]
    assert (port.kind, port.source, port.problems) == ("adapted", PORT_SOURCE, PORT_PROBLEMS)
    assert all(code in PROBLEMS for code in port.problems)
    # every problem of the port has a diagnostic probe that detects it
    assert {p.problem for p in PROBES if p.problem is not None} == set(PORT_PROBLEMS)


def test_host_parsed_arguments_as_llama_cpp():
    msgs = [{"role": "assistant", "tool_calls": [
        {"function": {"name": "f", "arguments": '{"a": [1, "x"]}'}},
        {"name": "g", "arguments": "not json"},
        {"function": {"name": "h", "arguments": '{"a": NaN}'}},  # llama.cpp's JSON parser refuses NaN
        {"function": {"name": "k", "arguments": {"b": 2}}},
    ]}, {"role": "user", "content": "hi"}]
    before = json.dumps(msgs)
    calls = host_parsed_arguments(msgs)[0]["tool_calls"]
    assert [c.get("function", c)["arguments"] for c in calls] == [{"a": [1, "x"]}, "not json", '{"a": NaN}', {"b": 2}]
    assert json.dumps(msgs) == before  # the input is not mutated


@needs_reference
def test_port_renders_like_kimi_k3_once_the_host_parsed_arguments():
    expected = render(_CONVERSATION, dialect="kimi-k3")
    assert render_with_dialect(_port(), _CONVERSATION, "kimi-k3") == expected
    as_given = render_with_dialect(_port(), _CONVERSATION, "kimi-k3", parse_arguments=False)
    assert '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>' in expected
    assert '<|open|>json type="object"<|sep|>{"city": "Paris"}<|close|>json<|sep|>' in as_given


# -- identify -----------------------------------------------------------------------------------------


@needs_reference
def test_identify_port_exact():
    ident = identify(_port())
    assert (ident.dialect, ident.kind, ident.match, ident.confidence) == ("kimi-k3", "adapted", "exact", 1.0)
    assert ident.label == "adapted copy of kimi-k3" and ident.source == PORT_SOURCE
    assert ident.sha256 == template_sha256(_port())
    assert tuple(p.code for p in ident.problems) == PORT_PROBLEMS
    assert ident.renders_in_sandbox is True  # it mutates no list: transformers' sandbox renders it too
    assert ident.scores["kimi-k3"] == 1.0 and max(v for k, v in ident.scores.items() if k != "kimi-k3") < 1.0
    diffs = {d.probe: d for d in ident.differences}
    assert diffs["thinking effort medium"].expected is None
    assert "thinking_effort=medium" in (diffs["thinking effort medium"].actual or "")
    unparsed = diffs["string arguments, the host passing them as given"]
    assert '<|open|>json type="object"' in (unparsed.actual or "")
    assert '<|open|>argument key="city"' in (unparsed.expected or "")


@needs_reference
def test_identify_whitespace_changed_port_by_behaviour():
    text = _whitespace_changed(_port())
    assert template_sha256(text) != template_sha256(_port())
    ident = identify(text)
    assert (ident.dialect, ident.kind, ident.match) == ("kimi-k3", "adapted", "behavioural")
    assert ident.confidence == 1.0 and ident.scores["kimi-k3"] == 1.0
    assert {p.code for p in ident.problems} == set(PORT_PROBLEMS)
    assert "known problem" in ident.description


@needs_reference
def test_diagnostic_probe_tells_a_fixed_port_apart():
    # the medium probe detects the problem, not a constant: the port with its check fixed is free of it
    ident = identify(_medium_refused(_whitespace_changed(_port())))
    codes = {p.code for p in ident.problems}
    assert ident.dialect == "kimi-k3" and "accepts-medium-effort" not in codes
    assert codes == set(PORT_PROBLEMS) - {"accepts-medium-effort"}


def test_k2_templates_are_not_taken_for_k3():
    ident = identify("{% for m in messages %}<|open|>{{ m.content }}{% endfor %}")
    assert ident.dialect != "kimi-k3"


# -- verify -------------------------------------------------------------------------------------------


@needs_reference
def test_verify_finds_medium_with_a_shrunk_counterexample():
    report = verify(_port(), "kimi-k3", examples=300, seed=1)
    assert not report.equivalent and report.parse_arguments
    assert report.counterexample == {"messages": [], "tools": None, "add_generation_prompt": True,
                                     "options": {"thinking_effort": "medium"}}
    assert report.expected is None and report.refusal is not None and "medium" in report.refusal
    assert "thinking_effort=medium" in (report.actual or "")
    text = report.summary()
    assert "kimi-k3 refuses this input" in text and "the template renders" in text
    assert report.to_dict()["refusal"] == report.refusal


@needs_reference
def test_verify_finds_string_arguments_when_the_host_does_not_parse_them():
    text = _keys_by_code_point(_medium_refused(_port()))
    report = verify(text, "kimi-k3", examples=300, seed=1, parse_arguments=False)
    assert not report.equivalent and not report.parse_arguments
    (message,) = report.counterexample["messages"]  # shrunk: one assistant message, one call
    (call,) = message["tool_calls"]
    arguments = call.get("function", call)["arguments"]
    assert isinstance(arguments, str)
    assert f'<|open|>json type="object"<|sep|>{arguments}<|close|>json<|sep|>' in (report.actual or "")
    assert "(arguments passed as given)" in report.summary()


@needs_reference
def test_verify_finds_the_case_insensitive_key_sort():
    report = verify(_medium_refused(_port()), "kimi-k3", examples=300, seed=1)
    assert not report.equivalent and report.expected is not None and report.actual is not None
    # the same keys, in another order: only the sort differs
    assert sorted(report.expected) == sorted(report.actual) and report.diff
    # and the case-sensitive sort is the fix: the counterexample renders as kimi-k3 through the fixed port
    req = report.counterexample
    fixed = render_with_dialect(_keys_by_code_point(_medium_refused(_port())), req["messages"], "kimi-k3",
                                tools=req["tools"], add_generation_prompt=req["add_generation_prompt"],
                                **req["options"])
    assert fixed == report.expected


# -- inspect and the CLI ------------------------------------------------------------------------------


@needs_reference
def test_inspect_reports_the_port():
    ins = inspect_path(reference_file(PORT_SOURCE))
    text = ins.format_text()
    assert "dialect:   kimi-k3 [single-source] — adapted copy of kimi-k3" in text
    for code in PORT_PROBLEMS:
        assert PROBLEMS[code].title in text
    assert f"fix:       {K3_FIX_HINT}" in text
    assert ins.needs_fix and ins.fix_template is None and ins.fix_command is None
    assert ins.fix_hint == K3_FIX_HINT and 'kimi_chat.render(messages, dialect="kimi-k3")' in K3_FIX_HINT


def _run(capsys, *argv):
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


@needs_reference
def test_cli_inspect_json(capsys, tmp_path):
    f = tmp_path / "chat_template.jinja"
    f.write_text(_whitespace_changed(_port()), encoding="utf-8")
    status, out, _ = _run(capsys, "inspect", str(f), "--json")
    data = json.loads(out)
    assert status == 0
    ident = data["identification"]
    assert (ident["dialect"], ident["kind"], ident["match"]) == ("kimi-k3", "adapted", "behavioural")
    assert {p["code"] for p in ident["problems"]} == set(PORT_PROBLEMS)
    assert data["fix_template"] is None and data["fix_hint"] == K3_FIX_HINT and data["needs_fix"]


@needs_reference
def test_cli_verify_json(capsys, tmp_path):
    f = tmp_path / "Kimi-K3.jinja"
    f.write_text(_port(), encoding="utf-8")
    # no --dialect: identify() says kimi-k3
    status, out, _ = _run(capsys, "verify", str(f), "--seed", "1", "-n", "300", "--json")
    data = json.loads(out)
    assert status == 1 and data["dialect"] == "kimi-k3" and not data["equivalent"]
    assert data["counterexample"]["options"] == {"thinking_effort": "medium"} and data["expected"] is None
    status, out, _ = _run(capsys, "verify", str(f), "-d", "kimi-k3", "--seed", "1", "-n", "300",
                          "--arguments-as-given", "--json")
    assert status == 1 and json.loads(out)["parse_arguments"] is False


@pytest.mark.parametrize("effort", ["low", "high", "max"])
@needs_reference
def test_port_agrees_on_valid_efforts(effort):
    msgs = [{"role": "user", "content": "Hi"}]
    assert render_with_dialect(_port(), msgs, "kimi-k3", thinking_effort=effort) == render(
        msgs, dialect="kimi-k3", thinking_effort=effort)


@needs_reference
def test_gguf_facts_of_a_k3_model(tmp_path):
    from kimi_chat import markers as M
    from test_inspect import write_gguf

    top = max(m.id for m in M.K3_MARKERS)
    tokens = [f"tok{i}" for i in range(top + 1)]
    for m in M.K3_MARKERS:
        tokens[m.id] = m.text
    good = inspect_path(write_gguf(tmp_path / "k3.gguf", _port(), tokens=tokens, eos=M.K3_END_OF_MSG.id))
    assert good.identification.dialect == "kimi-k3"
    facts = {f.name: f for f in good.facts}
    assert facts["marker tokens"].ok and facts["<|end_of_msg|> is end-of-generation"].ok
    # a K2 vocabulary under the K3 port: K3's ids hold K2's markers (163587 is <|im_user|> there)
    for m in (M.IM_END, M.IM_USER, M.IM_ASSISTANT):
        tokens[m.id] = m.text
    bad = inspect_path(write_gguf(tmp_path / "k2vocab.gguf", _port(), tokens=tokens, eos=M.K3_END_OF_MSG.id))
    wrong = {f.name: f for f in bad.facts}["marker tokens"]
    assert not wrong.ok and any("<|open|>" in w for w in wrong.value)
