"""kimi_chat's vLLM parsers, run inside vLLM 0.33's own composition code.

Each output is run the way the OpenAI server runs it:

* registration as the ``vllm serve`` flags do it (``init_parser_plugin`` with
  ``--tool-parser-plugin`` / ``--reasoning-parser-plugin``, then ``validate_api_server_args``);
* ``ParserManager.get_parser(...)`` composes the tool and reasoning parsers (a ``DelegatingParser``);
* the renderer's step: a parser instance gets the prompt ids and ``adjust_request``s the request;
* the engine's detokenizer (``IncrementalDetokenizer.from_new_request``: vLLM's
  ``FastIncrementalDetokenizer`` over a real HF fast tokenizer) turns the generated ids, one step at a
  time, into delta texts, honouring the stop token and ``skip_special_tokens`` as the engine does;
* streaming: ``ChatStreamProcessor.step`` (the chat server's per-chunk code) -> ``parse_delta``;
* whole: ``set_prompt_token_ids`` + ``parse`` (the non-streaming chat path).

Only the model is missing: its output is a fixed text tokenized by the real tokenizer.
"""

from __future__ import annotations

import argparse
import logging
import sys

import pytest
from .adapter_support import (
    ALL_CASES,
    CASES,
    CUT_BEFORE_ARGS,
    DIAGNOSTIC_CASES,
    MULTI_TURN_CASE,
    TOOLS,
    Case,
    Stream,
    cut_before_args_expect,
    diff_summary,
    force_withholding,
    output_ids,
    prompt_ids,
    report,
)

import vllm
from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
from vllm.parser import ParserManager
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager

from kimi_chat import markers as M
from kimi_chat.output import parse

from . import vllm_harness as H

PLUGIN = "kimi_chat.servers.vllm"
SERVE_FLAGS = [  # the README's `vllm serve` flags (tests/adapters checks that they register and compose)
    "--enable-auto-tool-choice",
    "--tool-parser-plugin", PLUGIN, "--tool-call-parser", "kimi_chat",
    "--reasoning-parser-plugin", PLUGIN, "--reasoning-parser", "kimi_chat",
]


def test_framework_version():
    assert vllm.__version__ == "0.33.0"


def _serve_args() -> argparse.Namespace:
    """The parsed form of SERVE_FLAGS, as vLLM's serve CLI stores them."""
    flags = dict(zip(SERVE_FLAGS[1::2], SERVE_FLAGS[2::2]))
    return argparse.Namespace(
        enable_auto_tool_choice="--enable-auto-tool-choice" in SERVE_FLAGS,
        tool_parser_plugin=flags["--tool-parser-plugin"],
        tool_call_parser=flags["--tool-call-parser"],
        reasoning_parser_plugin=flags["--reasoning-parser-plugin"],
        structured_outputs_config=argparse.Namespace(reasoning_parser=flags["--reasoning-parser"]),
    )


@pytest.fixture(scope="module", autouse=True)
def registered():
    """Register the way `vllm serve` does (import the plugin modules), then validate the names."""
    args = _serve_args()
    init_parser_plugin(args)
    validate_api_server_args(args)
    return args


def test_serve_flags_register_both_parsers(registered):
    from kimi_chat.servers.vllm import KimiChatReasoningParser, KimiChatToolParser

    assert PLUGIN in sys.modules
    assert ToolParserManager.get_tool_parser("kimi_chat") is KimiChatToolParser
    assert ReasoningParserManager.get_reasoning_parser("kimi_chat") is KimiChatReasoningParser


def test_unknown_name_is_refused_by_vllm():
    args = _serve_args()
    args.tool_call_parser = "kimi_chat_nope"
    with pytest.raises(KeyError):
        validate_api_server_args(args)


def test_register_in_place_of_kimi_k2():
    from kimi_chat.servers.vllm import KimiChatToolParser, register

    builtin_tool = ToolParserManager.get_tool_parser("kimi_k2")
    builtin_reasoning = ReasoningParserManager.get_reasoning_parser("kimi_k2")
    try:
        register(["kimi_k2"])
        assert ToolParserManager.get_tool_parser("kimi_k2") is KimiChatToolParser
        cls = ParserManager.get_parser(tool_parser_name="kimi_k2", reasoning_parser_name="kimi_k2",
                                       enable_auto_tools=True)
        assert cls.tool_parser_cls is KimiChatToolParser
    finally:
        ToolParserManager.tool_parsers["kimi_k2"] = builtin_tool
        ReasoningParserManager.reasoning_parsers["kimi_k2"] = builtin_reasoning


def test_entry_point_names_env(monkeypatch):
    from kimi_chat.servers.vllm import KimiChatReasoningParser, register

    monkeypatch.setenv("KIMI_CHAT_VLLM_NAMES", "kimi_chat, kimi_chat_alias")
    register()
    assert ReasoningParserManager.get_reasoning_parser("kimi_chat_alias") is KimiChatReasoningParser
    ToolParserManager.tool_parsers.pop("kimi_chat_alias")
    ReasoningParserManager.reasoning_parsers.pop("kimi_chat_alias")


# ------------------------------------------------------------------------------------ harness


def _ctk(case: Case) -> dict:
    return dict(case.options)


def _request(case: Case, **extra) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        model="kimi", messages=list(case.messages), tools=TOOLS, tool_choice="auto",
        chat_template_kwargs=_ctk(case) or None, **extra,
    )


def _parser_cls(tok, name: str, reasoning: bool = True):
    return H.parser_cls(tok, name, reasoning)


def _adjusted(cls, tok, case: Case, request: ChatCompletionRequest, prompt: list[int]) -> ChatCompletionRequest:
    return H.adjusted(cls, tok, _ctk(case), request, prompt)


def _detokenizer(tok, request: ChatCompletionRequest, prompt: list[int]):
    return H.detokenizer(tok, request, prompt)


def run_stream(tok, case: Case, name: str = "kimi_chat", step: int = 1, reasoning: bool = True):
    """Stream ``case`` through vLLM: detokenizer -> ChatStreamProcessor -> parser.parse_delta."""
    return H.stream(tok, _parser_cls(tok, name, reasoning), _request(case, stream=True), _ctk(case),
                    prompt_ids(tok, case), output_ids(tok, case), stop=case.stop, step=step)


def run_whole(tok, case: Case, name: str = "kimi_chat", reasoning: bool = True):
    """The non-streaming chat path: detokenized output text -> set_prompt_token_ids -> parse."""
    return H.whole(tok, _parser_cls(tok, name, reasoning), _request(case), _ctk(case), prompt_ids(tok, case),
                   output_ids(tok, case), stop=case.stop)


def _tok(case: Case, tok_reasoning, tok_instruct):
    return tok_instruct if case.vocab == "k2" else tok_reasoning


# ------------------------------------------------------------------------------------ rule cases


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_streamed_token_by_token(case, tok_reasoning, tok_instruct):
    tok = _tok(case, tok_reasoning, tok_instruct)
    acc, finish, parser = run_stream(tok, case)
    assert acc.result() == case.expect
    assert not acc.id_resent
    calls = case.expect[2]
    if case.stop:
        assert finish == ("tool_calls" if calls else "stop")
    # the tool parser's bookkeeping equals what was streamed (the base class flushes from it)
    tp = parser.tool_parser
    if calls:
        assert tp.streamed_args_for_tool == [a for _, _, a in calls]
        assert [e["arguments"] for e in tp.prev_tool_call_arr] == [a for _, _, a in calls]
        assert tp.get_remaining_unstreamed_args() == ""


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_streamed_in_multi_token_steps(case, tok_reasoning, tok_instruct):
    """Several tokens per engine step (a call end and the next call begin in one delta, ...)."""
    tok = _tok(case, tok_reasoning, tok_instruct)
    for step in (3, 7):
        acc, _, _ = run_stream(tok, case, step=step)
        assert acc.result() == case.expect, step


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_rule_case_whole(case, tok_reasoning, tok_instruct):
    tok = _tok(case, tok_reasoning, tok_instruct)
    assert run_whole(tok, case) == case.expect


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_expectations_are_the_parsers_own(case):
    """The expectations (written from the format) are what kimi_chat.parse gives for the turn."""
    msg = parse(case.output + (M.IM_END.text if case.stop else ""), dialect=case.dialect, tools=TOOLS,
                **dict(case.options))
    assert (msg.content, msg.reasoning_content, [(c.id, c.name, c.arguments) for c in msg.tool_calls]) == case.expect


# ------------------------------------------------------------------------------------ specifics


def test_multi_turn_think_history_does_not_end_reasoning(tok_reasoning):
    """The prompt's history holds <think>...</think>: reasoning of the new turn is still reasoning."""
    case = MULTI_TURN_CASE
    prompt = prompt_ids(tok_reasoning, case)
    assert M.THINK_END.id in prompt  # the history really has a </think>
    cls = _parser_cls(tok_reasoning, "kimi_chat")
    p = cls(tok_reasoning, TOOLS, model_config=None, chat_template_kwargs={})
    assert p.is_reasoning_end(prompt) is False
    acc, _, _ = run_stream(tok_reasoning, case)
    assert acc.result() == case.expect
    assert run_whole(tok_reasoning, case) == case.expect


def test_prompt_decides_where_the_output_starts(tok_reasoning):
    cls = _parser_cls(tok_reasoning, "kimi_chat")
    p = cls(tok_reasoning, TOOLS, model_config=None, chat_template_kwargs={})
    enc = lambda s: tok_reasoning.encode(s, add_special_tokens=False)  # noqa: E731
    head = f"{M.IM_USER.text}user{M.IM_MIDDLE.text}hi{M.IM_END.text}{M.IM_ASSISTANT.text}assistant{M.IM_MIDDLE.text}"
    assert p.is_reasoning_end(enc(head)) is False  # K2-Thinking: the output may open <think>
    assert p.is_reasoning_end(enc(head + M.THINK_BEGIN.text)) is False  # K2.5 thinking: prefilled
    assert p.is_reasoning_end(enc(head + M.THINK_BEGIN.text + M.THINK_END.text)) is True  # thinking off
    # the engine's structured-output gate asks about prompt + output, and about each new step
    assert p.is_reasoning_end(enc(head + "<think>abc</think>x")) is True
    assert p.is_reasoning_end(enc(head + f"<think>abc{M.TOOL_CALLS_SECTION_BEGIN.text}")) is True
    rp = p.reasoning_parser
    assert rp.is_reasoning_end_streaming([], enc("</think>")) is True
    assert rp.is_reasoning_end_streaming([], enc("more thoughts")) is False
    ids = enc(f"abc</think>Hi{M.IM_END.text}")
    assert rp.extract_content_ids(ids) == enc(f"Hi{M.IM_END.text}")
    ids = enc(f"abc{M.TOOL_CALLS_SECTION_BEGIN.text}x")
    assert rp.extract_content_ids(ids) == enc(f"{M.TOOL_CALLS_SECTION_BEGIN.text}x")


def test_instruct_vocabulary_has_no_reasoning(tok_instruct):
    cls = _parser_cls(tok_instruct, "kimi_chat")
    p = cls(tok_instruct, TOOLS, model_config=None, chat_template_kwargs={})
    assert p.is_reasoning_end([]) is True


def test_adjust_request_keeps_special_tokens(tok_reasoning):
    case = CASES[0]
    cls = _parser_cls(tok_reasoning, "kimi_chat")
    for choice in ("auto", "none", "required"):
        request = _request(case)
        request.tool_choice = choice
        assert request.skip_special_tokens is None
        request = _adjusted(cls, tok_reasoning, case, request, prompt_ids(tok_reasoning, case))
        assert request.skip_special_tokens is False
        assert request.to_sampling_params(16, {}).skip_special_tokens is False


def test_no_reasoning_parser_configured_think_is_content(tok_reasoning):
    """Tool parser alone (no --reasoning-parser): vLLM says reasoning markup is plain content."""
    cls = ParserManager.get_parser(tool_parser_name="kimi_chat", reasoning_parser_name=None,
                                   enable_auto_tools=True, tokenizer=tok_reasoning)
    case = CASES[2]  # parallel_calls, with a <think> block
    request = _request(case)
    p = cls(tok_reasoning, request.tools, model_config=None)
    reasoning, content, calls = p.parse(case.output, request, enable_auto_tools=True)
    assert reasoning is None
    assert content == f"{M.THINK_BEGIN.text}Two cities.{M.THINK_END.text}"
    assert [c.name for c in calls] == ["get_weather", "get_weather"]


def test_reasoning_parser_alone_hands_the_rest_over_raw(tok_reasoning):
    """Reasoning parser without auto tool choice: vLLM passes the rest through as content."""
    cls = ParserManager.get_parser(tool_parser_name="kimi_chat", reasoning_parser_name="kimi_chat",
                                   enable_auto_tools=False, tokenizer=tok_reasoning)
    assert cls.tool_parser_cls is None
    case = CASES[1]
    request = _request(case)
    p = cls(tok_reasoning, request.tools, model_config=None)
    assert p.parse(case.output, request) == ("The user greets me.", "Hello!", [])


def test_tool_choice_none_keeps_content(tok_reasoning):
    case = CASES[3]  # content then two calls
    request = _request(case)
    request.tool_choice = "none"
    cls = _parser_cls(tok_reasoning, "kimi_chat")
    p = cls(tok_reasoning, request.tools, model_config=None)
    reasoning, content, calls = p.parse(case.output, request, enable_auto_tools=True)
    assert (reasoning, content, calls) == (None, "Let me check.", [])


def test_include_reasoning_false_drops_reasoning_only(tok_reasoning):
    case = CASES[1]
    acc, _, _ = run_stream_request(tok_reasoning, case, include_reasoning=False)
    assert acc.result() == ("Hello!", None, [])


def run_stream_request(tok, case, **extra):
    cls = _parser_cls(tok, "kimi_chat")
    prompt = prompt_ids(tok, case)
    out = output_ids(tok, case)
    request = _adjusted(cls, tok, case, _request(case, stream=True, **extra), prompt)
    det = _detokenizer(tok, request, prompt)
    parser = cls(tok, request.tools, model_config=None, chat_template_kwargs=_ctk(case))
    proc = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=cls)
    acc = Stream()
    for i, t in enumerate(out):
        last = i == len(out) - 1
        det.update([t], stop_terminated=last and case.stop)
        r = proc.step(det.get_next_output_text(finished=last, delta=True), [t], "stop" if last else None, prompt)
        if r.delta is not None:
            d = r.delta.model_dump(exclude_none=True)
            acc.add(d.get("content"), d.get("reasoning"), d.get("tool_calls"))
    return acc, None, parser


# ------------------------------------------------------------------------------------ differential


def _realistic(case: Case) -> bool:
    """Whether a server for this model runs a reasoning parser: yes for K2-Thinking and K2.5, no for
    an Instruct model (served with the tool parser alone)."""
    return case.model != "instruct"


def _builtin(tok, case: Case):
    r = _realistic(case)
    try:
        s = run_stream(tok, case, name="kimi_k2", reasoning=r)[0].result()
    except Exception as e:  # a crash is a disagreement too
        s = f"raised {type(e).__name__}: {e}"
    try:
        w = run_whole(tok, case, name="kimi_k2", reasoning=r)
    except Exception as e:
        w = f"raised {type(e).__name__}: {e}"
    return s, w


def test_differential_against_builtin_kimi_k2(tok_reasoning, tok_instruct, capsys):
    """Every case through vLLM's built-in ``kimi_k2`` parsers and ours, each configured as a server
    for that model would be (Instruct: tool parser only; K2-Thinking/K2.5: both parsers); every
    disagreement is listed (printed as a table, and appended to $KIMI_CHAT_DIFF_REPORT if set);
    ours matches the format's expectation on every case."""
    rows = []
    for case in ALL_CASES:
        tok = _tok(case, tok_reasoning, tok_instruct)
        ours_s = run_stream(tok, case, reasoning=_realistic(case))[0].result()
        ours_w = run_whole(tok, case, reasoning=_realistic(case))
        assert ours_s == case.expect and ours_w == case.expect, case.name
        b_s, b_w = _builtin(tok, case)
        for mode, b in (("stream", b_s), ("whole", b_w)):
            if b != case.expect:
                rows.append((case.name, mode, diff_summary(case.expect, b)))
    table = _table("vLLM 0.33.0 built-in kimi_k2 vs kimi_chat (expected = kimi_chat = format rules)", rows)
    report(capsys, table)
    assert rows, "the built-in parser agrees everywhere: the corpus no longer shows its bugs"


def _table(title: str, rows) -> str:
    lines = [title, f"{'case':38} {'mode':6} difference", "-" * 120]
    lines += [f"{n:38} {m:6} {d}" for n, m, d in rows]
    lines.append(f"{len(rows)} disagreement(s) over {len(ALL_CASES)} cases x 2 modes")
    return "\n".join(lines)


def test_required_tool_choice_constrains_to_kimi_format_and_parses_it(tok_reasoning):
    """With tool_choice="required" the request gets kimi_chat's constraint of Kimi's format (a grammar
    for vLLM's guidance backend: tests/adapters/test_vllm_constraint.py), and the output (in Kimi's
    format) is parsed by kimi_chat, not as JSON."""
    case = next(c for c in CASES if c.name == "parallel_calls")
    cls = _parser_cls(tok_reasoning, "kimi_chat")
    request = _request(case)
    request.tool_choice = "required"
    request = _adjusted(cls, tok_reasoning, case, request, prompt_ids(tok_reasoning, case))
    grammar = request.structured_outputs.grammar
    assert grammar is not None and M.TOOL_CALLS_SECTION_BEGIN.text in grammar
    p = cls(tok_reasoning, request.tools, model_config=None)
    p.set_prompt_token_ids(prompt_ids(tok_reasoning, case))
    reasoning, content, calls = p.parse(case.output, request, enable_auto_tools=True)
    assert (content, reasoning, [(c.id, c.name, c.arguments) for c in calls]) == case.expect


# ------------------------------------------------------------------------------------ diagnostics

LOGGER = "kimi_chat.integrations.vllm"


def _logged(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


@pytest.mark.parametrize("case,level,line", DIAGNOSTIC_CASES, ids=lambda v: getattr(v, "name", None))
def test_parse_diagnostics_are_logged(case, level, line, tok_reasoning, tok_instruct, caplog):
    """Parse warnings and non-ok call statuses reach the module logger, at the documented level,
    once per request, streamed or whole; what the client gets is unchanged."""
    tok = _tok(case, tok_reasoning, tok_instruct)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    acc, _, _ = run_stream(tok, case)
    assert acc.result() == case.expect
    assert [lv for lv, m in _logged(caplog) if m.startswith(line)] == [level], _logged(caplog)
    caplog.clear()
    assert run_whole(tok, case) == case.expect
    assert [lv for lv, m in _logged(caplog) if m.startswith(line)] == [level], _logged(caplog)


def test_a_call_that_is_not_executable_is_not_returned(tok_instruct, caplog, monkeypatch):
    """A withheld call is neither streamed nor returned; the next call is the client's index 0 (no
    gap: the OpenAI SDK's accumulator inserts by index), the bookkeeping vLLM flushes from holds only
    what was streamed, and the operator gets a WARNING per request."""
    force_withholding(monkeypatch)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    case = CUT_BEFORE_ARGS
    for step in (1, 3, 7):
        acc, finish, parser = run_stream(tok_instruct, case, step=step)
        assert acc.result() == case.expect, step
        assert finish == "tool_calls"
        assert parser.tool_parser.streamed_args_for_tool == ["{}"]
    assert run_whole(tok_instruct, case) == case.expect
    withheld = [m for lv, m in _logged(caplog) if lv == "WARNING" and "not returned to the client" in m]
    assert len(withheld) == 4 and all("'functions.get_weather:0'" in m for m in withheld)


def test_call_cut_before_its_arguments(tok_instruct):
    """With the parser's own statuses: withheld once the parser reports it ``incomplete``."""
    acc, _, _ = run_stream(tok_instruct, CUT_BEFORE_ARGS)
    assert acc.result() == cut_before_args_expect()
    assert run_whole(tok_instruct, CUT_BEFORE_ARGS) == cut_before_args_expect()


# ------------------------------------------------------------------------------------ typed markers


def _typed_think_end_ids(tok) -> tuple[list[int], str, str]:
    """A K2.6 output whose reasoning mentions ``</think>`` as text (ordinary tokens, as a model writes a
    marker it talks about), right before the real ``</think>`` id: ``(ids, reasoning, content)``."""
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    typed = KimiTokenizer.from_reference("k2.6").encode(M.THINK_END.text, allow_special=False)
    assert M.THINK_END.id not in typed and len(typed) > 1
    enc = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    reasoning = f"I could write {M.THINK_END.text} here"
    ids = enc("I could write ") + typed + enc(" here") + [M.THINK_END.id] + enc("Answer.") + [M.IM_END.id]
    return ids, reasoning, "Answer."


@pytest.mark.parametrize("where", ["one_token", "think_end_last", "with_the_next_token", "whole_output"])
def test_typed_think_end_in_a_multi_token_delta_does_not_end_reasoning(tok_reasoning, where):
    """With several tokens per delta (speculative decoding, ``stream_interval``) the
    typed ``</think>`` and the real one come in one delta; the stages decode the delta's ids with vLLM's
    tokenizer, so only the special id ends reasoning. ``whole_output``: the stop token is in the delta
    too, and vLLM leaves its text out of the delta text."""
    case = next(c for c in ALL_CASES if c.name == "k26_prefilled_think")
    out, reasoning, content = _typed_think_end_ids(tok_reasoning)
    k = out.index(M.THINK_END.id) + 1  # the first delta ends with the real </think>
    step = {"one_token": 1, "think_end_last": k, "with_the_next_token": k + 1, "whole_output": len(out)}[where]
    acc, finish, _ = H.stream(tok_reasoning, _parser_cls(tok_reasoning, "kimi_chat"), _request(case, stream=True),
                              _ctk(case), prompt_ids(tok_reasoning, case), out, stop=True, step=step)
    assert acc.result() == (content, reasoning, [])
    assert finish == "stop"
