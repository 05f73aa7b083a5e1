"""vLLM: a forced tool choice (``required`` / a named function) carries kimi_chat's constraint
(:mod:`kimi_chat.servers.vllm.structured`) in its structured outputs, and vLLM's own guidance
backend compiles it and, over real Kimi token ids, accepts official-format calls and refuses malformed
ones and typed markers. Real vLLM classes: the composed parser, ``ChatCompletionRequest``,
``StructuredOutputsParams``, the backend validation of ``auto`` mode and ``GuidanceBackend``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams
from vllm.v1.structured_output.backend_guidance import GuidanceBackend, validate_guidance_grammar
from vllm.v1.structured_output.backend_types import StructuredOutputOptions
from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

from kimi_chat import markers as M
from kimi_chat.grammar import constraint
from kimi_chat.prompt import render

from . import vllm_harness as H
from .adapter_support import hf_tokenizer

K26 = "kimi-k2.6"
SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
MESSAGES = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module", autouse=True)
def registered():
    import kimi_chat.servers.vllm  # noqa: F401  (registers kimi_chat)


def _adjusted(tok, tool_choice, reasoning: bool = True, ctk: dict | None = None) -> ChatCompletionRequest:
    request = ChatCompletionRequest(model="kimi", messages=MESSAGES, tools=TOOLS, tool_choice=tool_choice,
                                    chat_template_kwargs=ctk)
    prompt = tok.encode(render(MESSAGES, tools=TOOLS, dialect=K26, **(ctk or {})), add_special_tokens=False)
    return H.adjusted(H.parser_cls(tok, "kimi_chat", reasoning), tok, ctk or {}, request, prompt)


def _call(name: str, args: str, idx: int = 0) -> str:
    return (M.TOOL_CALL_BEGIN.text + f"functions.{name}:{idx}" + M.TOOL_CALL_ARGUMENT_BEGIN.text + args
            + M.TOOL_CALL_END.text)


def _section(*calls: str) -> str:
    return M.TOOL_CALLS_SECTION_BEGIN.text + "".join(calls) + M.TOOL_CALLS_SECTION_END.text


def _guidance(tok, grammar: str):
    """vLLM's guidance backend compiling ``grammar`` for this tokenizer (what the engine core runs)."""
    config = SimpleNamespace(structured_outputs_config=SimpleNamespace(disable_any_whitespace=False,
                                                                       disable_additional_properties=False))
    backend = GuidanceBackend(vllm_config=config, tokenizer=tok, vocab_size=len(tok))
    return backend.compile_grammar(StructuredOutputOptions.GRAMMAR, grammar)


def _accepted(tok, grammar: str, text: str) -> bool:
    g = _guidance(tok, grammar)
    ids = tok.encode(text, add_special_tokens=False) + [M.IM_END.id]
    return g.accept_tokens("r", ids) and g.is_terminated()


@pytest.mark.parametrize("tool_choice", ["required", NAMED], ids=["required", "named"])
def test_forced_tool_choice_carries_kimi_chats_constraint(tok_reasoning, tool_choice):
    request = _adjusted(tok_reasoning, tool_choice)
    so = request.structured_outputs
    # with the reasoning parser, vLLM applies the grammar after the reasoning: the constraint's body
    want = constraint(TOOLS, dialect=K26, tool_choice=tool_choice, thinking=False, reasoning=False).lark
    assert so is not None and so.grammar == want and so.structural_tag is None and so.json is None
    assert request.response_format is None


def test_without_a_reasoning_parser_the_grammar_is_the_whole_output(tok_reasoning):
    request = _adjusted(tok_reasoning, "required", reasoning=False)
    assert request.structured_outputs.grammar == constraint(TOOLS, dialect=K26, tool_choice="required").lark


def test_auto_is_left_to_vllm(tok_reasoning):
    request = _adjusted(tok_reasoning, "auto")
    so = request.structured_outputs
    assert so is None or so.grammar is None


def test_vllm_auto_backend_selection_lands_on_guidance(tok_reasoning):
    """``auto``: xgrammar refuses the grammar (so vLLM falls back), guidance validates it."""
    request = _adjusted(tok_reasoning, "required")
    params = request.to_sampling_params(max_tokens=64, default_sampling_params={})
    assert isinstance(params, SamplingParams) and params.structured_outputs.grammar
    with pytest.raises(VLLMValidationError):
        validate_xgrammar_grammar(params)
    validate_guidance_grammar(params)  # raises on an invalid grammar


def test_guidance_matcher_accepts_official_calls_and_refuses_malformed_ones(tok_reasoning):
    grammar = _adjusted(tok_reasoning, "required").structured_outputs.grammar
    ok = _section(_call("get_weather", json.dumps({"city": "Paris", "days": 3})))
    assert _accepted(tok_reasoning, grammar, ok)
    two = _section(_call("get_weather", '{"city": "Paris", "days": 3}'), _call("get_time", "{}", 1))
    assert _accepted(tok_reasoning, grammar, two)
    assert _accepted(tok_reasoning, grammar, _section(_call("get_weather", '{"city":"Oslo","days":7}')))
    for bad in (
        _section(_call("get_weather", '{"city": "Paris", "days": 8}')),  # maximum
        _section(_call("get_weather", '{"city": "Paris"}')),  # required
        _section(_call("get_weather", '{"city": "Paris", "days": 3, "x": 1}')),  # additionalProperties
        _section(_call("get_weather", '{"city": "Paris", "days": 3}', 1)),  # the running index
        _section(_call("nope", "{}")),  # unknown function
        "Sure, calling it." + ok,  # content before the forced call
        "",  # no call at all
    ):
        assert not _accepted(tok_reasoning, grammar, bad), bad


def test_guidance_matcher_refuses_a_typed_marker(tok_reasoning):
    """The section begin spelled by ordinary tokens is not the marker: refused where the id is due."""
    grammar = _adjusted(tok_reasoning, "required").structured_outputs.grammar
    g = _guidance(tok_reasoning, grammar)
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    typed = KimiTokenizer.from_reference("k2.6").encode(M.TOOL_CALLS_SECTION_BEGIN.text, allow_special=False)
    assert M.TOOL_CALLS_SECTION_BEGIN.id not in typed and len(typed) > 1
    assert g.validate_tokens(typed) == []
    assert g.validate_tokens([M.TOOL_CALLS_SECTION_BEGIN.id]) == [M.TOOL_CALLS_SECTION_BEGIN.id]


def test_named_choice_allows_only_that_function(tok_reasoning):
    grammar = _adjusted(tok_reasoning, NAMED).structured_outputs.grammar
    assert _accepted(tok_reasoning, grammar, _section(_call("get_weather", '{"city": "Rome", "days": 1}')))
    assert not _accepted(tok_reasoning, grammar, _section(_call("get_time", "{}")))


def _k3_case(name: str):
    from .k3_support import K3_CASES

    return next(c for c in K3_CASES if c.name == name)


def _k3_adjusted(tok_k3, tool_choice="required", reasoning: bool = True) -> ChatCompletionRequest:
    from .k3_support import TOOLS as K3_TOOLS, USER, prompt_ids

    case = _k3_case("calls_without_content")
    request = ChatCompletionRequest(model="kimi", messages=list(USER), tools=K3_TOOLS, tool_choice=tool_choice)
    return H.adjusted(H.parser_cls(tok_k3, "kimi_chat", reasoning), tok_k3, {}, request, prompt_ids(case))


def _k3_after_think(name: str) -> list[int]:
    """The output ids of a K3 case after the think channel's close tag, where the reasoning parser says
    reasoning ended and vLLM starts applying the grammar (tests/adapters/test_vllm_k3.py pins that)."""
    from .k3_support import output_ids

    out = output_ids(_k3_case(name))
    close = hf_tokenizer("k3").encode(M.K3_CLOSE.text + "think" + M.K3_SEP.text, add_special_tokens=False)
    at = next(i for i in range(len(out)) if out[i:i + len(close)] == close)
    return out[at + len(close):]


def test_k3_forced_tool_choice_carries_kimi_chats_constraint_after_the_think_channel():
    from .k3_support import TOOLS as K3_TOOLS

    tok_k3 = hf_tokenizer("k3")
    so = _k3_adjusted(tok_k3).structured_outputs
    want = constraint(K3_TOOLS, dialect="kimi-k3", tool_choice="required", after_reasoning=True).lark
    assert so is not None and so.grammar == want and so.structural_tag is None
    # without a reasoning parser the grammar is the whole output, from inside the think channel
    whole = _k3_adjusted(tok_k3, reasoning=False).structured_outputs
    assert whole.grammar == constraint(K3_TOOLS, dialect="kimi-k3", tool_choice="required").lark


def test_k3_guidance_matcher_accepts_the_official_call_and_refuses_the_rest():
    tok_k3 = hf_tokenizer("k3")
    grammar = _k3_adjusted(tok_k3).structured_outputs.grammar
    ok = _k3_after_think("calls_without_content")  # rendered by the official K3 encoder, <|end_of_msg|> last
    assert ok[-1] == M.K3_END_OF_MSG.id

    def accepted(ids: list[int]) -> bool:
        g = _guidance(tok_k3, grammar)
        return g.accept_tokens("r", ids) and g.is_terminated()

    assert accepted(ok)
    assert not accepted(_k3_after_think("reasoning_content_calls"))  # content before a forced call
    assert not accepted(_k3_after_think("content_only"))  # no call
    # the tools channel's open tag typed as ordinary tokens never satisfies the special tokens
    g = _guidance(tok_k3, grammar)
    head = ok[:ok.index(M.K3_OPEN.id, 1) + 1]  # <|open|>response<|sep|><|close|>response<|sep|><|open|>
    assert g.validate_tokens(head) == head
    typed = tok_k3.encode("<|open|>", add_special_tokens=False, split_special_tokens=True)
    assert M.K3_OPEN.id not in typed
    assert g.validate_tokens(head[:-1] + typed) == head[:-1]
