"""kimi_chat's vLLM parsers on Kimi-K3 output, through vLLM 0.33's own composition code (the same
harness as ``test_vllm.py``: ``ParserManager.get_parser`` -> the renderer's ``adjust_request`` ->
``FastIncrementalDetokenizer`` step by step -> ``ChatStreamProcessor.step``; whole: ``parse``), with a
real HF fast tokenizer of the K3 vocabulary and the same flags that serve K2
(``--tool-call-parser kimi_chat --reasoning-parser kimi_chat``)."""

from __future__ import annotations

import logging

import pytest
from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

from kimi_chat import markers as M
from kimi_chat.servers import family as F
from kimi_chat.servers.stages import ReasoningStage

from . import vllm_harness as H
from .adapter_support import hf_tokenizer
from .k3_support import K3_CASES, TOOLS, K3Case, output_ids, output_text, parsed, prompt_ids
from .test_vllm import _serve_args

LOGGER = "kimi_chat.integrations.vllm"


@pytest.fixture(scope="module", autouse=True)
def registered():
    args = _serve_args()
    init_parser_plugin(args)
    validate_api_server_args(args)


@pytest.fixture(scope="module")
def tok():
    return hf_tokenizer("k3")


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv(F.DIALECT_ENV, raising=False)


def _request(case: K3Case, *, ctk: dict | None = None, **extra) -> ChatCompletionRequest:
    kw = {**case.options, **(ctk or {})}
    return ChatCompletionRequest(model="kimi", messages=list(case.messages), tools=TOOLS, tool_choice="auto",
                                 chat_template_kwargs=kw or None, **extra)


def run_stream(tok, case: K3Case, *, step: int = 1, name: str = "kimi_chat", ctk: dict | None = None,
               reasoning: bool = True):
    cls = H.parser_cls(tok, name, reasoning)
    return H.stream(tok, cls, _request(case, ctk=ctk, stream=True), {**case.options, **(ctk or {})},
                    prompt_ids(case), output_ids(case), stop=case.stop, step=step)


def run_whole(tok, case: K3Case, *, name: str = "kimi_chat", ctk: dict | None = None, reasoning: bool = True):
    cls = H.parser_cls(tok, name, reasoning)
    return H.whole(tok, cls, _request(case, ctk=ctk), {**case.options, **(ctk or {})}, prompt_ids(case),
                   output_ids(case), stop=case.stop)


def _cases(ids_matter: bool):
    """The cases (streaming passes the ids, so the ones only token ids decide hold there too)."""
    return [pytest.param(c, id=c.name) for c in K3_CASES]


# ------------------------------------------------------------------------------------ rule cases


@pytest.mark.parametrize("case", _cases(False), )
def test_expectations_are_the_parsers_own(case):
    """Expectations (written from the format) are kimi_chat.parse's reading of the text (for the cases only
    ids decide: its text-only reading)."""
    assert parsed(case) == (case.text_only_expect or case.expect)


@pytest.mark.parametrize("case", _cases(True))
def test_k3_streamed_token_by_token(case, tok):
    acc, finish, parser = run_stream(tok, case)
    assert acc.result() == case.expect
    assert not acc.id_resent
    if case.stop:
        assert finish == ("tool_calls" if case.expect[2] else "stop")
    calls = case.expect[2]
    if calls:
        tp = parser.tool_parser
        assert tp.streamed_args_for_tool == [a for _, _, a in calls]
        assert tp.get_remaining_unstreamed_args() == ""


@pytest.mark.parametrize("case", _cases(True))
def test_k3_streamed_in_multi_token_steps(case, tok):
    """Several tokens per step: a tag's ``<|open|>``, name and ``<|sep|>`` split across deltas in every way."""
    for step in (2, 3, 7):
        acc, _, _ = run_stream(tok, case, step=step)
        assert acc.result() == case.expect, step


@pytest.mark.parametrize("case", _cases(False))
def test_k3_whole(case, tok):
    """Non-streaming: vLLM's ``DelegatingParser.parse`` passes the parsers text only (no ids), so a
    typed marker in a value is read as the text says."""
    assert run_whole(tok, case) == (case.text_only_expect or case.expect)


# ------------------------------------------------------------------------------------ family, prompt


def test_the_tokenizer_chooses_the_family_and_it_is_logged(tok, caplog):
    F._LOGGED.clear()
    caplog.set_level(logging.INFO, logger=LOGGER)
    cls = H.parser_cls(tok, "kimi_chat")
    p = cls(tok, TOOLS, model_config=None, chat_template_kwargs={})
    assert p.reasoning_parser._family == "k3" and p.tool_parser._family == "k3"
    assert p.tool_parser.structural_tag_model == "kimi_k3"
    msgs = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "INFO"]
    assert any("Kimi-K3" in m and "<|open|>" in m for m in msgs), msgs
    k2 = hf_tokenizer("k2.6")
    q = H.parser_cls(k2, "kimi_chat")(k2, TOOLS, model_config=None, chat_template_kwargs={})
    assert q.reasoning_parser._family == "k2" and q.tool_parser.structural_tag_model == "kimi"


CASE = K3_CASES[0]  # reasoning, content and two calls


def test_env_override_serves_k3_with_a_k2_tokenizer(monkeypatch):
    """``KIMI_CHAT_DIALECT=kimi-k3``: the K3 format is parsed whatever the tokenizer says (here the K2.6
    vocabulary, where the K3 markers are plain text)."""
    k2 = hf_tokenizer("k2.6")
    ids = k2.encode(output_text(CASE), add_special_tokens=False)
    cls = H.parser_cls(k2, "kimi_chat")
    req = _request(CASE)
    without = H.whole(k2, cls, req, {}, [], ids, stop=False)
    assert without[2] == [] and M.K3_OPEN.text in (without[0] or "") + (without[1] or "")
    monkeypatch.setenv(F.DIALECT_ENV, "kimi-k3")
    assert H.whole(k2, cls, _request(CASE), {}, [], ids, stop=False) == CASE.expect


def test_request_override_chat_template_kwargs(tok):
    """``chat_template_kwargs={"kimi_chat_dialect": "kimi-k2.6"}`` on a K3 tokenizer: the K2 format."""
    k2_text = "<think>Two.</think>Hi"
    ids = tok.encode(k2_text, add_special_tokens=False)
    cls = H.parser_cls(tok, "kimi_chat")
    ctk = {F.DIALECT_KWARG: "kimi-k2.6"}
    req = ChatCompletionRequest(model="kimi", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                tool_choice="auto", chat_template_kwargs=ctk)
    p = cls(tok, TOOLS, model_config=None, chat_template_kwargs=ctk)
    assert p.reasoning_parser._family == "k2"
    assert H.whole(tok, cls, req, ctk, [], ids, stop=False) == ("Hi", "Two.", [])


def test_a_bad_override_names_the_setting(tok, monkeypatch):
    monkeypatch.setenv(F.DIALECT_ENV, "kimi-k9")
    with pytest.raises(ValueError, match=F.DIALECT_ENV):
        F.choose_family(tok)


def test_prompt_decides_where_the_output_starts(tok):
    cls = H.parser_cls(tok, "kimi_chat")
    p = cls(tok, TOOLS, model_config=None, chat_template_kwargs={})
    on, off = prompt_ids(CASE), prompt_ids(next(c for c in K3_CASES if not c.thinking))
    assert tok.decode(on).endswith("<|open|>think<|sep|>") and tok.decode(off).endswith("<|open|>response<|sep|>")
    assert p.is_reasoning_end(on) is False
    assert p.is_reasoning_end(off) is True  # thinking off: the output starts in the response channel
    rp = p.reasoning_parser
    rp.set_prompt_token_ids(off)
    assert rp._current_mode() == "none"
    rp.set_prompt_token_ids(on)
    assert rp._current_mode() == "prefilled"


def test_history_with_a_closed_think_does_not_end_reasoning(tok):
    case = next(c for c in K3_CASES if c.name == "multi_turn_think_history")
    prompt = prompt_ids(case)
    text = tok.decode(prompt)
    assert "<|close|>think<|sep|>" in text  # the history really closes a think channel
    p = H.parser_cls(tok, "kimi_chat")(tok, TOOLS, model_config=None, chat_template_kwargs={})
    assert p.is_reasoning_end(prompt) is False
    assert run_stream(tok, case)[0].result() == case.expect


def test_reasoning_end_per_step_and_content_ids(tok):
    """The engine's structured-output gate: reasoning ends at the ``<|sep|>`` of ``<|close|>think<|sep|>``
    (ids, O(tag) per step), not before; ``extract_content_ids`` gives what follows."""
    p = H.parser_cls(tok, "kimi_chat")(tok, TOOLS, model_config=None, chat_template_kwargs={})
    rp = p.reasoning_parser
    prompt, out = prompt_ids(CASE), output_ids(CASE)
    ended = [i for i in range(len(out)) if rp.is_reasoning_end_streaming(prompt + out[:i + 1], out[i:i + 1])]
    close_at = next(i for i in range(len(out) - 2) if out[i:i + 3] == tok.encode("<|close|>think<|sep|>"))
    assert ended[0] == close_at + 2
    assert rp.extract_content_ids(out) == out[close_at + 3:]
    assert rp.is_reasoning_end(prompt + out[:close_at + 2]) is False
    assert rp.is_reasoning_end(prompt + out[:close_at + 3]) is True
    # a typed "<|close|>think<|sep|>" (ordinary tokens) ends nothing
    typed = tok.encode("<|close|>think<|sep|>", add_special_tokens=False, split_special_tokens=True)
    assert M.K3_CLOSE.id not in typed
    assert rp.is_reasoning_end(prompt + typed) is False


@pytest.mark.parametrize("tag", ['<|open|>response lang="en"<|sep|>', '<|open|>tools n="1"<|sep|>'])
def test_content_ids_are_where_the_stages_end_reasoning(tok, tag):
    """A channel opened with attributes instead of the think channel closed (the tag lexer reads
    ``<|open|>response lang="en"<|sep|>`` as the response channel): ``extract_content_ids`` starts at that
    tag, where the reasoning stage hands the rest over and where ``is_reasoning_end`` says reasoning is
    over (one K3 tag reader: the ids reading once took the whole tag body for the name)."""
    p = H.parser_cls(tok, "kimi_chat")(tok, TOOLS, model_config=None, chat_template_kwargs={})
    rp = p.reasoning_parser
    head = tok.encode("Plan.", add_special_tokens=False)
    tail = tok.encode(tag + "Hi", add_special_tokens=False)
    out = head + tail
    reasoning, rest = ReasoningStage.split(tok.decode(out), prefilled=True, family="k3")
    assert (reasoning, rest) == ("Plan.", tag + "Hi")
    assert rp.is_reasoning_end(prompt_ids(CASE) + out) is True
    assert rp.extract_content_ids(out) == tail


def test_thinking_off_from_chat_template_kwargs(tok):
    case = next(c for c in K3_CASES if c.name == "thinking_off_with_call")
    assert case.options == {"thinking": False}
    acc, _, _ = run_stream(tok, case)
    assert acc.result() == case.expect


def test_required_tool_choice_carries_kimi_chats_constraint(tok):
    """``tool_choice="required"``: the request gets kimi_chat's K3 constraint (starting after the think
    channel, where the reasoning parser ends reasoning), not vLLM's ``kimi_k3`` structural tag, and the
    constrained output is parsed by kimi_chat (tests/adapters/test_vllm_constraint.py: the matcher)."""
    from kimi_chat.grammar import constraint

    cls = H.parser_cls(tok, "kimi_chat")
    request = _request(CASE)
    request.tool_choice = "required"
    request = H.adjusted(cls, tok, {}, request, prompt_ids(CASE))
    so = request.structured_outputs
    assert so.structural_tag is None
    assert so.grammar == constraint(TOOLS, dialect="kimi-k3", tool_choice="required", after_reasoning=True).lark
    p = cls(tok, request.tools, model_config=None)
    p.set_prompt_token_ids(prompt_ids(CASE))
    reasoning, content, calls = p.parse(output_text(CASE), request, enable_auto_tools=True)
    assert (content, reasoning, [(c.id, c.name, c.arguments) for c in calls]) == CASE.expect


def test_tool_choice_none_keeps_content_without_markers(tok):
    request = _request(CASE)
    request.tool_choice = "none"
    cls = H.parser_cls(tok, "kimi_chat")
    p = cls(tok, request.tools, model_config=None)
    p.set_prompt_token_ids(prompt_ids(CASE))
    assert p.parse(output_text(CASE), request, enable_auto_tools=True) == ("Two things to do.", "Let me check.", [])
