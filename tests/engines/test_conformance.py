"""``kimi-chat conformance`` / :func:`kimi_chat.engines.native.conformance`: the report's machinery (no
engine needed), the report of the tiny model in llama.cpp (what llama.cpp gets wrong, asserted as
*known*: a fix upstream makes a test fail and the report in docs/engines.md gets regenerated), and ``--server``
against a real llama-server (``$KIMI_CHAT_LLAMA_SERVER`` or ``llama-server`` beside the venv's
python; CI installs it, and there a missing binary fails instead of skipping).

The ik_llama.cpp backend's report is tested in ``tests/engines/test_native_ik.py``."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import IN_CI, needs_reference, require_in_ci, skip_without_reference
from llama_server_support import LlamaServer, missing_reason

from kimi_chat import markers as M
from kimi_chat.engines.conformance import (
    CONTINUATION,
    CONVERSATIONS,
    Check,
    classify,
    ConformanceReport,
    report_from_dict,
    role_note,
    show_text,
    text_difference,
    token_difference,
)
from kimi_chat.prompt import render

try:
    import llama_cpp  # noqa: F401

    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False

require_in_ci(HAVE_LLAMA, "llama-cpp-python (.ci/install-native.sh installs it)")
needs_llama = pytest.mark.skipif(not HAVE_LLAMA, reason="llama-cpp-python is not installed (.ci/install-native.sh)")
DIALECT = "kimi-k2-instruct-0905"
ROOT = Path(__file__).resolve().parents[2]


def readme_report(backend: str) -> str:
    """The report of ``backend`` pasted in docs/engines.md (after its marker comment)."""
    text = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    marker = f"<!-- conformance: {backend} -->\n```text\n"
    assert marker in text, f"docs/engines.md has no {backend} conformance report"
    return text.split(marker, 1)[1].split("```", 1)[0]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "kimi_chat.cli", "conformance", *args], capture_output=True,
                          text=True, env=env, timeout=300)


# --------------------------------------------------------------------------------------------------
# the machinery, without an engine


def test_token_difference_shows_the_differing_span_with_bytes():
    pieces = {1: b"a", 2: b"'s", 3: b"'", 4: b"s", 5: b"!"}
    d = token_difference("a's!", [1, 2, 5], [1, 3, 4, 5], pieces.__getitem__)
    assert d == "\"a's!\" at token 1: kimi_chat [2 \"'s\"], engine [3 \"'\" 4 's']"


def test_token_difference_of_unequal_lengths_shows_the_rest():
    pieces = {1: b"ab", 2: b"a", 3: b"b"}
    assert token_difference("ab", [1], [2, 3], pieces.__getitem__) == "'ab' at token 0: kimi_chat [1 'ab'], engine [2 'a' 3 'b']"


def test_show_text_escapes_combining_marks_after_ascii_only():
    assert show_text("e\u0301's") == "\"e\\u0301's\""
    assert show_text("नमस्ते") == repr("नमस्ते")  # Devanagari signs stay as they are


def test_text_difference_gives_offset_and_context():
    assert text_difference("abcXdef", "abcYdef", context=2) == "at char 3: kimi_chat ...'bcXd'..., engine ...'bcYd'..."
    assert text_difference("ab", "abc", context=5) == "at char 2: kimi_chat 'ab', engine 'abc'"


def test_role_note_names_the_swapped_header():
    messages = [{"role": "user", "content": "Q"}]
    ours = f"{M.IM_USER.text}user{M.IM_MIDDLE.text}Q{M.IM_END.text}"
    engine = f"{M.IM_ASSISTANT.text}assistant{M.IM_MIDDLE.text}Q{M.IM_END.text}"
    note = role_note(ours, engine, messages)
    assert note == ("message 0 (user): engine header '<|im_assistant|>assistant<|im_middle|>', "
                    "kimi_chat '<|im_user|>user<|im_middle|>'")
    assert role_note(ours, ours, messages) is None


def test_report_text_json_and_round_trip():
    r = ConformanceReport("m.gguf", "llama.cpp", "llama-cpp-python 0", "d", "given", None, [
        Check("tokenization", "English", "pass", "3 texts agree"),
        Check("chat format", "x", "fail", "differs", "at char 0: ...", "a note"),
    ])
    assert not r.ok and [c.name for c in r.failures] == ["x"]
    text = r.format_text()
    assert "  PASS  English: 3 texts agree" in text
    assert "  FAIL  x: differs\n        first difference: at char 0: ...\n        note: a note" in text
    assert "2 checks: 1 passed, 1 failed\nwhat to do: the 1 failed check(s) are this model's" in text
    data = json.loads(json.dumps(r.to_dict()))
    assert data["ok"] is False and data["checks"][1]["status"] == "fail"
    assert report_from_dict(data) == r
    assert r.check("chat format", "x").note == "a note"
    with pytest.raises(KeyError, match="no check"):
        r.check("chat format", "nope")


def test_known_engine_problems_are_told_apart_from_failures_of_the_model():
    """What llama.cpp gets wrong on every Kimi GGUF (its pre-tokenizer on combining marks, the converter's
    control-typed markers, its built-in format's missing default system prompt) is reported as a known
    engine problem (upstream, documented), not as a failure of this model: ok stays True (exit status
    0), and one line says what to do. A check failing another way is still a failure."""
    checks = [
        Check("tokenization", "English", "pass", "3 texts agree"),
        Check("tokenization", "Hindi", "fail", "2 of 2 texts split differently", "at token 2: ..."),
        Check("special tokens", "token types", "fail", "12 of 17 markers",
              "<|tool_calls_section_begin|> (163595): engine control, official special=False", "a note"),
        Check("chat format", "built-in format: user only", "fail", "differs from kimi_chat.render", "at char 0",
              "the engine leaves out '...' at the start"),
    ]
    r = ConformanceReport("m.gguf", "llama.cpp", "llama-cpp-python 0", "d", "given", None, classify("llama.cpp", checks))
    assert r.ok and r.failures == [] and [c.name for c in r.known] == ["Hindi", "token types",
                                                                         "built-in format: user only"]
    text = r.format_text()
    assert "  KNOWN  Hindi: 2 of 2 texts split differently" in text
    assert "note: a note; known engine problem (upstream, documented): the GGUF conversion" in text
    assert text.endswith("4 checks: 1 passed, 3 known engine problems (upstream, documented), 0 failed\n"
                         "what to do: nothing for this model or template; the known problems are llama.cpp's: "
                         "where they matter, give the engine kimi_chat's prompt ids (kimi-chat serve, or "
                         "render_tokens)\n")
    back = report_from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r
    # not the known problem: ik_llama.cpp's built-in format is another one; a header swap in llama.cpp is not known
    other = Check("chat format", "built-in format: user only", "fail", "differs", "at char 0",
                  "message 0 (user): engine header '...'")
    (in_llama,), (in_ik,) = classify("llama.cpp", [other]), classify("ik_llama.cpp", [other])
    assert in_llama.status == "fail" and in_ik.status == "known"
    r2 = ConformanceReport("m.gguf", "llama.cpp", "x", "d", "given", None, classify("llama.cpp", [*checks, other]))
    assert not r2.ok and r2.failures == [other]
    assert "1 failed\nwhat to do: the 1 failed check(s) are this model's or its template's" in r2.format_text()


def test_cli_usage_errors_exit_2(tmp_path):
    p = _cli(str(tmp_path / "missing.gguf"))
    assert p.returncode == 2 and "no such GGUF file" in p.stderr
    p = _cli(str(tmp_path / "missing.gguf"), "--backend", "vllm")
    assert p.returncode == 2 and "invalid choice: 'vllm'" in p.stderr


class _FakeServer(http.server.BaseHTTPRequestHandler):
    """Answers /apply-template with kimi_chat's prompt, except for a continuation, where it does what
    llama-server does (no <|im_end|> before the assistant header, <think></think> inserted)."""

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msgs = body["messages"]
        if msgs[-1]["role"] == "assistant":
            header = f"{M.IM_ASSISTANT.text}assistant{M.IM_MIDDLE.text}"
            prompt = render(msgs, dialect=DIALECT, continue_final_message=True).replace(
                M.IM_END.text + header, header + M.THINK_BEGIN.text + M.THINK_END.text)
        else:
            prompt = render(msgs, tools=body.get("tools"), dialect=DIALECT)
        data = json.dumps({"prompt": prompt}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_server_checks_against_a_fake_server():
    from kimi_chat.engines.conformance import _check_server
    from kimi_chat.dialects import get_dialect

    srv = http.server.HTTPServer(("127.0.0.1", 0), _FakeServer)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        checks = _check_server(f"http://127.0.0.1:{srv.server_port}/", get_dialect(DIALECT), 10)
    finally:
        srv.shutdown()
    by_name = {c.name: c for c in checks}
    cont = by_name.pop("server /apply-template: continuation (last message the assistant's)")
    assert all(c.passed for c in by_name.values()) and len(by_name) == len(CONVERSATIONS) + 1
    assert cont.status == "fail"  # unclassified here: the report marks it a known engine problem
    (classified,) = classify("llama.cpp", [cont])
    assert classified.status == "known"
    assert cont.first_difference is not None and cont.first_difference.startswith("at char ")
    assert "'<|im_assistant|>assistant<|im_middle|><think></think>'" in (cont.note or "")


def test_unreachable_server_is_an_error_not_a_failed_check():
    from kimi_chat.engines.conformance import _check_server
    from kimi_chat.dialects import get_dialect
    from kimi_chat.errors import KimiChatError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KimiChatError, match=f"127.0.0.1:{port}/apply-template"):
        _check_server(f"http://127.0.0.1:{port}", get_dialect(DIALECT), 5)


# --------------------------------------------------------------------------------------------------
# the tiny model in llama.cpp



@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kimi_chat.testing.tiny_model import build_tiny_model

    skip_without_reference()  # its vocabulary is the reference tokenizer's

    return build_tiny_model(tmp_path_factory.mktemp("tiny-conf") / "tiny.gguf", dialect=DIALECT)


@pytest.fixture(scope="module")
def report(tiny_gguf: Path) -> ConformanceReport:
    from kimi_chat.engines.native import conformance

    return conformance(tiny_gguf)


# What llama.cpp (llama-cpp-python 0.3.36) gets wrong on the tiny model, KNOWN: the kimi-k2
# pre-tokenizer on combining marks, the GGUF's control type for the special=False markers (and so
# their detokenization), no default system prompt in the built-in format.
LLAMA_CPP_FAILURES = {
    ("tokenization", "Hindi"),
    ("tokenization", "combining marks"),
    ("special tokens", "token types"),
    ("special tokens", "detokenization without special tokens"),
    ("chat format", "built-in format: user only"),
}


@needs_llama
@pytest.mark.native
def test_llama_cpp_report_names_what_llama_cpp_gets_wrong(report):
    assert (report.backend, report.engine, report.dialect) == ("llama.cpp", "llama-cpp-python 0.3.36", DIALECT)
    assert report.failures == [] and report.ok  # no failure of the model: all known engine problems
    assert {(c.group, c.name) for c in report.known} == LLAMA_CPP_FAILURES
    assert len(report.checks) == 17
    # the pre-tokenizer differences on combining marks, their first difference
    marks = report.check("tokenization", "combining marks")
    assert marks.summary == "2 of 4 texts split differently"
    assert marks.first_difference == "\"e\\u0301's\" at token 2: kimi_chat [1048 \"'s\"], engine [6 \"'\" 82 's']"
    hindi = report.check("tokenization", "Hindi")
    assert hindi.first_difference == ("'नमस्ते दुनिया' at token 2: kimi_chat [72819 'स्त'], "
                                      "engine [14564 'स' 21285 '्त']")
    types = report.check("special tokens", "token types")
    assert types.first_difference == "<|tool_calls_section_begin|> (163595): engine control, official special=False"
    detok = report.check("special tokens", "detokenization without special tokens")
    assert detok.first_difference == ("<|tool_calls_section_begin|> (163595): engine b'', official "
                                      "'<|tool_calls_section_begin|>'")
    user_only = report.check("chat format", "built-in format: user only")
    assert user_only.note == ("the engine leaves out '<|im_system|>system<|im_middle|>You are Kimi, an AI "
                              "assistant created by Moonshot AI.<|im_end|>' at the start; known engine problem "
                              "(upstream, documented): llama.cpp's built-in Kimi format leaves out the dialect's "
                              "default system prompt")
    # what passes: markers, EOG ids, the rest of the corpus, generation with a grammar
    specials = report.check("special tokens", "single tokens at official ids")
    assert specials.summary == "17 of 17 markers" and "<think>" in (specials.note or "")
    assert report.check("special tokens", "end-of-generation ids").summary == (
        "engine ends on [EOS] (163585), <|im_end|> (163586), [EOT] (163593), [PAD] (163839)")
    assert report.check("generation", "grammar-forced tool call").passed


@needs_llama
@pytest.mark.native
@needs_reference
@pytest.mark.oracle
def test_k3_gguf_is_checked_with_k3_markers(tmp_path):
    from kimi_chat.engines.native import NativeModel, conformance
    from kimi_chat.testing.tiny_model import build_tiny_model
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    path = build_tiny_model(tmp_path / "k3.gguf", dialect="kimi-k3", tokenizer=KimiTokenizer.from_reference("k3"),
                            chat_template="{{ 'not a Kimi template' }}")
    with NativeModel.load(path, n_ctx=2048, dialect="kimi-k3") as model:
        r = conformance(model)
        ends = model.is_eog(M.K3_END_OF_MSG.id)
    assert r.dialect == "kimi-k3"
    specials = r.check("special tokens", "single tokens at official ids")
    assert specials.passed and specials.summary == f"{len(M.K3_MARKERS)} of {len(M.K3_MARKERS)} markers"
    eog = r.check("special tokens", "end-of-generation ids")
    assert eog.passed == ends
    if not ends:  # what the tiny K3 GGUF says today: the engine picks EOG ids by name
        assert eog.first_difference == "<|end_of_msg|> (163586) does not end generation"
    assert r.check("chat format", "built-in format: user only").summary == (
        "llama.cpp does not recognise the chat template")


@needs_llama
@pytest.mark.native
def test_readme_llama_cpp_report_is_current(report):
    # regenerate: kimi-chat tiny-model /tmp/tiny.gguf && kimi-chat conformance /tmp/tiny.gguf
    assert readme_report("llama.cpp") == report.format_text()


@needs_llama
@pytest.mark.native
def test_cli_conformance_text_and_json(tiny_gguf, report):
    p = _cli(str(tiny_gguf))
    assert p.returncode == 0, p.stderr  # only known engine problems fail: not this model's
    assert p.stdout == report.format_text()
    j = _cli(str(tiny_gguf), "--json")
    assert j.returncode == 0, j.stderr
    assert report_from_dict(json.loads(j.stdout)) == report


# --------------------------------------------------------------------------------------------------
# --server against a real llama-server


@pytest.fixture(scope="module")
def llama_server(tiny_gguf: Path, tmp_path_factory):
    """A real llama-server on the tiny model with its embedded template (the shared
    :class:`llama_server_support.LlamaServer`: found, started and always killed the same way)."""
    reason = missing_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    with LlamaServer(tiny_gguf, None, tmp_path_factory.mktemp("conf-server") / "llama-server.log",
                     n_ctx=2048) as server:
        yield server.url


@needs_llama
@pytest.mark.native
def test_server_report_shows_the_continuation_rewrite(tiny_gguf, llama_server):
    from kimi_chat.engines.native import conformance

    r = conformance(tiny_gguf, server=llama_server)
    server = {c.name.removeprefix("server /apply-template: "): c for c in r.checks
              if c.name.startswith("server /apply-template: ")}
    assert set(server) == {label for label, _ in CONVERSATIONS} | {
        "with a tool", "continuation (last message the assistant's)"}
    # plain conversations: the embedded template in llama.cpp's Jinja engine is the official prompt
    for label, _ in CONVERSATIONS:
        assert server[label].passed, server[label]
    # KNOWN (llama.cpp's own Kimi handling, common/parsers/kimi-k2.cpp): a final assistant message is
    # continued with <think></think> inserted and without the <|im_end|> of the user turn before it
    cont = server["continuation (last message the assistant's)"]
    ours = render(list(CONTINUATION), dialect=DIALECT, continue_final_message=True)
    assert cont.status == "known"  # llama-server-continuation: upstream, documented
    i = ours.index(CONTINUATION[0]["content"]) + len(CONTINUATION[0]["content"])
    assert cont.first_difference is not None and cont.first_difference.startswith(f"at char {i}: ")
    assert cont.note.startswith("message 1 (assistant): engine header '<|im_assistant|>assistant<|im_middle|>"
                                "<think></think>', kimi_chat '<|im_assistant|>assistant<|im_middle|>'; known engine")
    assert r.check("chat format", "built-in format: user only").status == "known"  # as without --server
    p = _cli(str(tiny_gguf), "--server", llama_server, "--json")
    assert p.returncode == 0, p.stderr  # only known engine problems
    assert report_from_dict(json.loads(p.stdout)).check(
        "chat format", "server /apply-template: continuation (last message the assistant's)") == cont
