"""kimi_chat's SGLang detectors, run inside SGLang 0.5.23's own chat-serving code.

Registration goes through the plugin function (what the ``sglang.srt.plugins`` entry point runs) into
SGLang's registries; ``OpenAIServingChat._generate_chat_stream`` (streaming: reasoning parser ->
tool-call parser -> SSE chunks, tool-call ids, finish reason) and ``_build_chat_response``
(non-streaming) are SGLang's own code, loaded from its installed source (see ``sglang_serving``);
only the engine is scripted: the model's output ids, detokenized step by step by the real HF
tokenizer with SGLang's default ``skip_special_tokens=True``.
"""

from __future__ import annotations

import logging

import pytest
from .adapter_support import (
    ALL_CASES, CASES, CUT_BEFORE_ARGS, DIAGNOSTIC_CASES, MULTI_TURN_CASE, TOOLS, Case, Stream, cut_before_args_expect,
    diff_summary, force_withholding, output_ids, prompt_ids, report,
)
from .sglang_serving import UNAVAILABLE, request, run_stream, run_whole, serving_chat

import sglang
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser

BUILTIN_TOOL = FunctionCallParser.ToolCallParserEnum["kimi_k2"]
BUILTIN_REASONING = ReasoningParser.DetectorMap["kimi_k2"]

from kimi_chat import markers as M  # noqa: E402
from kimi_chat.servers import sglang as plugin  # noqa: E402  (registers "kimi_chat")


def test_framework_version_and_loaded_serving_code():
    assert sglang.__version__ == "0.5.23"
    # what could not be imported from serving_chat is off the parsing path
    assert set(UNAVAILABLE) <= {"OpenAIServingBase", "GenerateReqInput", "normalize_hunyuan_reasoning_effort",
                                "uses_hunyuan_reasoning_effort", "render_chat_segments",
                                "detect_inline_system_support"}


def test_plugin_registers_in_sglang_registries(monkeypatch):
    assert FunctionCallParser.ToolCallParserEnum["kimi_chat"] is plugin.KimiChatDetector
    assert ReasoningParser.DetectorMap["kimi_chat"] is plugin.KimiChatReasoningDetector
    assert FunctionCallParser.ToolCallParserEnum["kimi_k2"] is BUILTIN_TOOL  # untouched by default
    # the server's --tool-call-parser / --reasoning-parser choices come from these registries
    from sglang.srt.server_args import _reasoning_parser_choices, _tool_call_parser_choices

    assert "kimi_chat" in _tool_call_parser_choices() and "kimi_chat" in _reasoning_parser_choices()
    monkeypatch.setenv(plugin.NAMES_ENV, "kimi_k2")
    try:
        plugin.register()  # what the entry point runs in each SGLang process
        assert FunctionCallParser.ToolCallParserEnum["kimi_k2"] is plugin.KimiChatDetector
        assert ReasoningParser.DetectorMap["kimi_k2"] is plugin.KimiChatReasoningDetector
    finally:
        FunctionCallParser.ToolCallParserEnum["kimi_k2"] = BUILTIN_TOOL
        ReasoningParser.DetectorMap["kimi_k2"] = BUILTIN_REASONING


@pytest.fixture()
def ours_as_kimi_k2():
    """Ours registered under ``kimi_k2`` (the documented setup: SGLang makes functions.NAME:IDX ids
    only for that name); the built-in is put back afterwards."""
    plugin.register(["kimi_k2"])
    yield "kimi_k2"
    FunctionCallParser.ToolCallParserEnum["kimi_k2"] = BUILTIN_TOOL
    ReasoningParser.DetectorMap["kimi_k2"] = BUILTIN_REASONING


# ------------------------------------------------------------------------------------ harness


def _realistic(case: Case) -> bool:
    """A server for this model runs a reasoning parser: K2-Thinking and K2.5 yes, Instruct no."""
    return case.model != "instruct"


def sglang_expect(case: Case):
    """The format's expectation, as SGLang can report it: SGLang gives its reasoning detector no
    prompt, and sets force_reasoning for Kimi unless thinking is off, so an output of K2-Thinking
    without <think> is reported as (truncated) reasoning; SGLang makes its own tool-call ids
    (``functions.NAME:N``, N counting the calls of the whole conversation)."""
    content, reasoning, calls = case.expect
    if case.name == "thinking_model_answers_without_think":
        content, reasoning = None, content
    history = sum(len(m.get("tool_calls") or ()) for m in case.messages)
    return content, reasoning, [(f"functions.{n}:{history + i}", n, a) for i, (_, n, a) in enumerate(calls)]


def _request(case: Case, stream: bool, ctk: dict | None = None):
    opts = dict(case.options) if ctk is None else ctk
    return request(list(case.messages), TOOLS, stream, **({"chat_template_kwargs": opts} if opts else {}))


def stream_result(tok, case: Case, name: str, step: int = 1, reasoning: bool | None = None, ctk: dict | None = None):
    r = _realistic(case) if reasoning is None else reasoning
    s = serving_chat(tok, name, name if r else None)
    payloads = run_stream(s, _request(case, True, ctk), prompt_ids(tok, case), output_ids(tok, case), case.stop, step)
    acc = Stream()
    finish = None
    for p in payloads:
        for ch in p.get("choices", []):
            d = ch.get("delta") or {}
            acc.add(d.get("content"), d.get("reasoning_content"), d.get("tool_calls"))
            finish = ch.get("finish_reason") or finish
    return acc, finish


def whole_result(tok, case: Case, name: str, reasoning: bool | None = None):
    r = _realistic(case) if reasoning is None else reasoning
    s = serving_chat(tok, name, name if r else None)
    resp = run_whole(s, _request(case, False), prompt_ids(tok, case), output_ids(tok, case), case.stop)
    msg = resp.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in msg.tool_calls or []]
    return (msg.content or None, msg.reasoning_content or None, calls), resp.choices[0].finish_reason


def _tok(case: Case, tok_reasoning, tok_instruct):
    return tok_instruct if case.vocab == "k2" else tok_reasoning


# ------------------------------------------------------------------------------------ rule cases


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_streamed_token_by_token(case, tok_reasoning, tok_instruct, ours_as_kimi_k2):
    acc, finish = stream_result(_tok(case, tok_reasoning, tok_instruct), case, ours_as_kimi_k2)
    assert acc.result() == sglang_expect(case)
    assert not acc.id_resent
    if case.stop:
        assert finish == ("tool_calls" if case.expect[2] else "stop")
    elif case.expect[2]:
        assert finish == "length"  # an unclosed call is not reported as a finished tool call


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_streamed_in_multi_token_steps(case, tok_reasoning, tok_instruct, ours_as_kimi_k2):
    tok = _tok(case, tok_reasoning, tok_instruct)
    for step in (3, 7):
        acc, _ = stream_result(tok, case, ours_as_kimi_k2, step=step)
        assert acc.result() == sglang_expect(case), step


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_whole(case, tok_reasoning, tok_instruct, ours_as_kimi_k2):
    got, finish = whole_result(_tok(case, tok_reasoning, tok_instruct), case, ours_as_kimi_k2)
    assert got == sglang_expect(case)
    if case.stop:
        assert finish == ("tool_calls" if case.expect[2] else "stop")


def test_multi_turn_think_history(tok_reasoning, ours_as_kimi_k2):
    case = MULTI_TURN_CASE
    acc, _ = stream_result(tok_reasoning, case, ours_as_kimi_k2)
    assert acc.result() == case.expect
    assert whole_result(tok_reasoning, case, ours_as_kimi_k2)[0] == case.expect


def test_under_another_name_sglang_makes_random_ids(tok_reasoning):
    """Why the docs say to register as kimi_k2: under ``kimi_chat`` SGLang invents call_<uuid> ids."""
    case = next(c for c in CASES if c.name == "parallel_calls")
    acc, _ = stream_result(tok_reasoning, case, "kimi_chat")
    ids = [i for i, _, _ in acc.result()[2]]
    assert all(i.startswith("call_") for i in ids) and len(set(ids)) == 2
    assert [(n, a) for _, n, a in acc.result()[2]] == [(n, a) for _, n, a in case.expect[2]]


def test_reasoning_parser_on_an_instruct_model_forces_reasoning(tok_instruct, ours_as_kimi_k2):
    """Configured with a reasoning parser, SGLang forces reasoning for Kimi unless thinking is off
    (as with its built-in): the whole answer is reasoning. With thinking off, it is content."""
    case = next(c for c in CASES if c.name == "plain_content")
    acc, _ = stream_result(tok_instruct, case, ours_as_kimi_k2, reasoning=True)
    assert acc.result() == (None, "Hello! How can I help?", [])
    acc, _ = stream_result(tok_instruct, case, ours_as_kimi_k2, reasoning=True, ctk={"thinking": False})
    assert acc.result() == ("Hello! How can I help?", None, [])


def test_stream_reasoning_false_sends_reasoning_at_its_end(tok_reasoning, ours_as_kimi_k2):
    case = next(c for c in CASES if c.name == "k25_prefilled_think")
    s = serving_chat(tok_reasoning, ours_as_kimi_k2, ours_as_kimi_k2)
    req = request(list(case.messages), TOOLS, True, stream_reasoning=False)
    payloads = run_stream(s, req, prompt_ids(tok_reasoning, case), output_ids(tok_reasoning, case), case.stop)
    pieces = [ch["delta"]["reasoning_content"] for p in payloads for ch in p.get("choices", [])
              if (ch.get("delta") or {}).get("reasoning_content")]
    assert pieces == ["The user wants the weather."]


def test_detector_bookkeeping_matches_what_was_streamed():
    det = plugin.KimiChatDetector()
    case = next(c for c in CASES if c.name == "content_then_two_calls")
    for ch in case.output:
        det.parse_streaming_increment(ch, [])
    det.finish([])
    assert det.streamed_args_for_tool == [a for _, _, a in case.expect[2]]
    assert [e["arguments"] for e in det.prev_tool_call_arr] == det.streamed_args_for_tool
    assert det.incomplete_tool_call_indices == set()


# ------------------------------------------------------------------------------------ differential


def _builtin(tok, case: Case):
    out = []
    for run in (lambda: stream_result(tok, case, "kimi_k2")[0].result(), lambda: whole_result(tok, case, "kimi_k2")[0]):
        try:
            out.append(run())
        except Exception as e:  # a crash is a disagreement too
            out.append(f"raised {type(e).__name__}: {e}")
    return out


def test_differential_against_builtin_kimi_k2(tok_reasoning, tok_instruct, capsys):
    """Every case through SGLang's built-in ``kimi_k2`` detectors and ours (registered as kimi_k2),
    each configured as a server for that model would be; every disagreement is listed (printed, and
    appended to $KIMI_CHAT_DIFF_REPORT if set); ours matches the format's expectation on every case."""
    assert FunctionCallParser.ToolCallParserEnum["kimi_k2"] is BUILTIN_TOOL
    rows = []
    for case in ALL_CASES:
        tok = _tok(case, tok_reasoning, tok_instruct)
        b_s, b_w = _builtin(tok, case)
        plugin.register(["kimi_k2"])
        try:
            ours_s = stream_result(tok, case, "kimi_k2")[0].result()
            ours_w = whole_result(tok, case, "kimi_k2")[0]
        finally:
            FunctionCallParser.ToolCallParserEnum["kimi_k2"] = BUILTIN_TOOL
            ReasoningParser.DetectorMap["kimi_k2"] = BUILTIN_REASONING
        exp = sglang_expect(case)
        assert ours_s == exp and ours_w == exp, case.name
        for mode, b in (("stream", b_s), ("whole", b_w)):
            if b != exp:
                rows.append((case.name, mode, diff_summary(exp, b)))
    lines = ["SGLang 0.5.23 built-in kimi_k2 vs kimi_chat (expected = kimi_chat = format rules, SGLang ids)",
             f"{'case':38} {'mode':6} difference", "-" * 120]
    lines += [f"{n:38} {m:6} {d}" for n, m, d in rows]
    lines.append(f"{len(rows)} disagreement(s) over {len(ALL_CASES)} cases x 2 modes")
    table = "\n".join(lines)
    report(capsys, table)
    assert rows, "the built-in detectors agree everywhere: the corpus no longer shows their bugs"


# ------------------------------------------------------------------------------------ diagnostics

LOGGER = "kimi_chat.integrations.sglang"


def _logged(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


@pytest.mark.parametrize("case,level,line", [d for d in DIAGNOSTIC_CASES if d[0].name != "stray_marker_dropped"],
                         ids=lambda v: getattr(v, "name", None))
def test_parse_diagnostics_are_logged(case, level, line, tok_reasoning, tok_instruct, caplog, ours_as_kimi_k2):
    """Parse warnings and non-ok call statuses reach the module logger at the documented level, once
    per request, streamed or whole. (No stray-marker case: SGLang's detokenizer skips special tokens,
    so ``<|im_middle|>`` never reaches the detector.)"""
    tok = _tok(case, tok_reasoning, tok_instruct)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    acc, _ = stream_result(tok, case, ours_as_kimi_k2)
    assert acc.result() == sglang_expect(case)
    assert [lv for lv, m in _logged(caplog) if m.startswith(line)] == [level], _logged(caplog)
    caplog.clear()
    assert whole_result(tok, case, ours_as_kimi_k2)[0] == sglang_expect(case)
    assert [lv for lv, m in _logged(caplog) if m.startswith(line)] == [level], _logged(caplog)


def test_a_call_that_is_not_executable_is_not_returned(tok_instruct, caplog, monkeypatch, ours_as_kimi_k2):
    """A withheld call is neither streamed nor returned; the next call is the client's index 0 (and
    SGLang numbers its id from it), the turn still finishes with ``tool_calls``; WARNING per request."""
    force_withholding(monkeypatch)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    case = CUT_BEFORE_ARGS
    for step in (1, 3, 7):
        acc, finish = stream_result(tok_instruct, case, ours_as_kimi_k2, step=step)
        assert acc.result() == sglang_expect(case), step
        assert finish == "tool_calls"
    got, finish = whole_result(tok_instruct, case, ours_as_kimi_k2)
    assert (got, finish) == (sglang_expect(case), "tool_calls")
    withheld = [m for lv, m in _logged(caplog) if lv == "WARNING" and "not returned to the client" in m]
    assert len(withheld) == 4 and all("'functions.get_weather:0'" in m for m in withheld)


def test_call_cut_before_its_arguments(tok_instruct, ours_as_kimi_k2):
    """With the parser's own statuses: withheld once the parser reports it ``incomplete``."""
    exp = cut_before_args_expect()
    sglang = (None, None, [(f"functions.{n}:{i}", n, a) for i, (_, n, a) in enumerate(exp[2])])
    assert stream_result(tok_instruct, CUT_BEFORE_ARGS, ours_as_kimi_k2)[0].result() == sglang
    assert whole_result(tok_instruct, CUT_BEFORE_ARGS, ours_as_kimi_k2)[0] == sglang


def test_incomplete_indices_are_the_clients(monkeypatch):
    """``incomplete_tool_call_indices`` names the indices SGLang was given (after a withheld call),
    streamed or whole."""
    force_withholding(monkeypatch)
    text = CUT_BEFORE_ARGS.output.replace(f"{{}}{M.TOOL_CALL_END.text}{M.TOOL_CALLS_SECTION_END.text}", '{"a')
    det = plugin.KimiChatDetector()
    for ch in text:
        det.parse_streaming_increment(ch, [])
    det.finish([])
    assert det.incomplete_tool_call_indices == {0}
    det = plugin.KimiChatDetector()
    r = det.detect_and_parse(text, [])
    assert [(c.tool_index, c.name) for c in r.calls] == [(0, "nope")]
    assert det.incomplete_tool_call_indices == {0}
