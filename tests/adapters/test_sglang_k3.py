"""kimi_chat's SGLang detectors on Kimi-K3 output, inside SGLang 0.5.23's own chat-serving code (the
harness of ``test_sglang.py``: the real ``_generate_chat_stream`` / ``_build_chat_response``, a scripted
engine detokenizing the ids step by step), with a real HF fast tokenizer of the K3 vocabulary.

SGLang passes its detectors text only (no ids), and gives them the tokenizer: the family is chosen from
it. It keeps K3's special tokens in the decoded text only for a reasoning parser named ``kimi_k3`` or
when the request declares tools (``skip_special_tokens`` is otherwise on), and makes ``NAME:N`` ids for
a tool parser named ``kimi_k3``: the documented K3 setup is ours registered as ``kimi_k3``.
"""

from __future__ import annotations

import pytest
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser

from kimi_chat.servers import family as F
from kimi_chat.servers import sglang as plugin

from .adapter_support import Stream, hf_tokenizer
from .k3_support import K3_CASES, TOOLS, K3Case, output_ids, prompt_ids
from .sglang_serving import request, run_stream, run_whole, serving_chat

BUILTIN_TOOL = FunctionCallParser.ToolCallParserEnum["kimi_k3"]
BUILTIN_REASONING = ReasoningParser.DetectorMap["kimi_k3"]


@pytest.fixture(scope="module")
def tok():
    return hf_tokenizer("k3")


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv(F.DIALECT_ENV, raising=False)


@pytest.fixture()
def ours_as_kimi_k3():
    plugin.register(["kimi_k3"])
    yield "kimi_k3"
    FunctionCallParser.ToolCallParserEnum["kimi_k3"] = BUILTIN_TOOL
    ReasoningParser.DetectorMap["kimi_k3"] = BUILTIN_REASONING


def sglang_expect(case: K3Case, name: str = "kimi_k3"):
    """The format's expectation as SGLang can report it: text only (a typed marker reads as the text
    says), SGLang's own ids (``NAME:N`` under ``kimi_k3``, N counting the conversation's calls)."""
    content, reasoning, calls = case.text_only_expect or case.expect
    history = sum(len(m.get("tool_calls") or ()) for m in case.messages)
    ids = [f"{n}:{history + i}" for i, (_, n, _) in enumerate(calls)] if name == "kimi_k3" else [None] * len(calls)
    return content, reasoning, [(i, n, a) for i, (_, n, a) in zip(ids, calls)]


def _req(case: K3Case, stream: bool, tools=TOOLS):
    return request(list(case.messages), tools, stream, **({"chat_template_kwargs": case.options} if case.options else {}))


def _prepared(s, req):
    """What SGLang's ``_process_messages`` decides about ``skip_special_tokens`` (the harness skips the
    template step): its own ``_patch_reasoning_skip_special_tokens``, and (serving_chat.py, "Apply chat
    template") ``False`` when tools are declared and ``tool_choice`` is not ``none``."""
    s._patch_reasoning_skip_special_tokens(req)
    if req.tools and req.tool_choice != "none":
        req.skip_special_tokens = False
    return req


def stream_result(tok, case: K3Case, name: str, step: int = 1, tools=TOOLS):
    s = serving_chat(tok, name, name)
    payloads = run_stream(s, _prepared(s, _req(case, True, tools)), prompt_ids(case), output_ids(case), case.stop, step)
    acc = Stream()
    finish = None
    for p in payloads:
        for ch in p.get("choices", []):
            d = ch.get("delta") or {}
            acc.add(d.get("content"), d.get("reasoning_content"), d.get("tool_calls"))
            finish = ch.get("finish_reason") or finish
    return acc, finish


def whole_result(tok, case: K3Case, name: str, tools=TOOLS):
    s = serving_chat(tok, name, name)
    resp = run_whole(s, _prepared(s, _req(case, False, tools)), prompt_ids(case), output_ids(case), case.stop)
    msg = resp.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in msg.tool_calls or []]
    return (msg.content or None, msg.reasoning_content or None, calls), resp.choices[0].finish_reason


def _anon(e):
    return (e[0], e[1], [(n, a) for _, n, a in e[2]])


CASES = [pytest.param(c, id=c.name) for c in K3_CASES]


@pytest.mark.parametrize("case", CASES)
def test_k3_streamed_token_by_token(case, tok, ours_as_kimi_k3):
    acc, finish = stream_result(tok, case, ours_as_kimi_k3)
    assert acc.result() == sglang_expect(case)
    if case.stop:
        assert finish == ("tool_calls" if case.expect[2] else "stop")


@pytest.mark.parametrize("case", CASES)
def test_k3_streamed_in_multi_token_steps(case, tok, ours_as_kimi_k3):
    for step in (2, 3, 7):
        assert stream_result(tok, case, ours_as_kimi_k3, step=step)[0].result() == sglang_expect(case), step


@pytest.mark.parametrize("case", CASES)
def test_k3_whole(case, tok, ours_as_kimi_k3):
    assert whole_result(tok, case, ours_as_kimi_k3)[0] == sglang_expect(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.values[0].name in ("reasoning_content_calls", "thinking_off")])
def test_under_kimi_chat_with_tools(case, tok):
    """Under ``kimi_chat`` (the vLLM flag name) the detectors parse K3 the same; SGLang keeps the markers
    because the request declares tools, and makes call_<uuid> ids."""
    acc, _ = stream_result(tok, case, "kimi_chat")
    assert _anon(acc.result()) == _anon(sglang_expect(case))
    assert all(i.startswith("call_") for i, _, _ in acc.result()[2])


def test_under_kimi_chat_without_tools_sglang_strips_the_markers(tok):
    """Why the docs say to register as ``kimi_k3`` for K3 on SGLang: under another name and without
    tools, SGLang decodes with ``skip_special_tokens`` and the K3 tags never reach any parser."""
    case = next(c for c in K3_CASES if c.name == "content_only")
    acc, _ = stream_result(tok, case, "kimi_chat", tools=None)
    assert acc.result()[0] != case.expect[0]
    plugin.register(["kimi_k3"])
    try:
        assert stream_result(tok, case, "kimi_k3", tools=None)[0].result() == case.expect
    finally:
        FunctionCallParser.ToolCallParserEnum["kimi_k3"] = BUILTIN_TOOL
        ReasoningParser.DetectorMap["kimi_k3"] = BUILTIN_REASONING


def test_the_tokenizer_chooses_the_family(tok):
    assert plugin.KimiChatDetector(tokenizer=tok).family == "k3"
    assert plugin.KimiChatReasoningDetector(force_reasoning=True, tokenizer=tok).family == "k3"
    # per detector: a K2 tokenizer after a K3 one is K2, and the K3 one stays K3
    k2 = hf_tokenizer("k2.6")
    assert plugin.KimiChatDetector(tokenizer=k2).family == "k2"
    assert plugin.KimiChatReasoningDetector(force_reasoning=True, tokenizer=tok).family == "k3"
    # no server in this process: a detector built without a tokenizer does not follow earlier detectors
    assert plugin.KimiChatDetector(tokenizer=tok).family == "k3"
    assert plugin.KimiChatDetector().family == "k2"


def test_a_detector_without_a_tokenizer_reads_the_servers(tok, monkeypatch):
    """SGLang builds a detector without a tokenizer for the structural tag of ``tool_choice``; the
    family is then the one of the tokenizer SGLang's own server state holds (one model per server)."""
    import sys
    import types

    server = types.ModuleType(plugin.constraint._HTTP_SERVER)
    state = types.SimpleNamespace(tokenizer_manager=types.SimpleNamespace(tokenizer=tok))
    server.get_global_state = lambda: state
    monkeypatch.setitem(sys.modules, plugin.constraint._HTTP_SERVER, server)
    assert plugin.KimiChatDetector().family == "k3"
    state.tokenizer_manager.tokenizer = hf_tokenizer("k2.6")
    assert plugin.KimiChatDetector().family == "k2"
    assert plugin.KimiChatDetector(tokenizer=tok).family == "k3"  # its own tokenizer first


def test_env_override(monkeypatch):
    monkeypatch.setenv(F.DIALECT_ENV, "kimi-k3")
    assert plugin.KimiChatDetector(tokenizer=hf_tokenizer("k2.6")).family == "k3"


def test_k3_structural_tag_is_sglangs_own(tok):
    from sglang.srt.entrypoints.openai.protocol import Tool

    det = plugin.KimiChatDetector(tokenizer=tok)
    tag = det.get_structural_tag([Tool.model_validate(t) for t in TOOLS], "required")
    assert "<|open|>tools<|sep|>" in tag.model_dump_json()
    with pytest.raises(NotImplementedError):
        det.structure_info()
