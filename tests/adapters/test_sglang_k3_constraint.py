"""SGLang, Kimi-K3: a forced tool choice carries kimi_chat's constraint (:mod:`kimi_chat.servers.sglang.constraint`)
as the request's EBNF, and SGLang's own reasoning gate starts it right after the think channel's close tag.

SGLang 0.5.23's ``ReasonerGrammarObject`` applies the grammar once the reasoning detector's
``get_think_end_token_ids`` have been generated, matched as a token sequence (``TokenSequenceMatcher``);
kimi_chat's reasoning detector gives K3's close tag by its ids (``<|close|>`` ``think`` ``<|sep|>``), the
ids SGLang's own ``kimi_k3`` reasoning parser gives too. Real SGLang classes: the chat path's
``_process_messages`` (:mod:`.sglang_serving`), ``FunctionCallParser``, ``ChatCompletionRequest.to_sampling_params``,
``GuidanceBackend`` and ``ReasonerGrammarObject``; the outputs are kimi_chat's byte-exact renderings of
assistant turns (:mod:`.k3_support`)."""

from __future__ import annotations

import logging
import pickle

import pytest
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
from sglang.srt.constrained.llguidance_backend import GuidanceBackend
from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject
from sglang.srt.parser.reasoning_parser import ReasoningParser

from kimi_chat import markers as M
from kimi_chat.grammar import constraint
from kimi_chat.servers import family as F
from kimi_chat.servers import sglang as plugin  # noqa: F401  (registers "kimi_chat")

from .adapter_support import hf_tokenizer
from .k3_support import TOOLS, USER, K3Case, _call, _msg, close, k3_tokenizer, output_ids, prompt_ids, tag
from .sglang_serving import NS, request, serving_chat

NS.setdefault("normalize_hunyuan_reasoning_effort", lambda request, reasoning_parser, reasoning_config: None)

K3 = "kimi-k3"
NAMED = {"type": "function", "function": {"name": "search"}}
ONE_CALL = K3Case("one_call", (None, "Just call.", []), assistant=_msg("Just call.", "", [_call(0, "search", {"query": "kimi"})]))
TWO_CALLS = K3Case("two_calls", (None, "Both.", []), assistant=_msg("Both.", "", [
    _call(0, "get_weather", {"city": "Zürich", "days": 3}), _call(1, "search", {"query": "kimi"})]))
OFF_CALL = K3Case("off_call", (None, None, []), assistant=_msg(None, "", [_call(0, "search", {"query": "kimi"})]),
                  thinking=False)


@pytest.fixture(scope="module")
def tok():
    return hf_tokenizer("k3")


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv(F.DIALECT_ENV, raising=False)


def _processed(tok, tool_choice, *, reasoning_parser: str = "kimi_chat", **extra):
    """What SGLang's chat path builds for the request: its tool-call constraint and sampling params."""
    s = serving_chat(tok, "kimi_chat", reasoning_parser, grammar_backend="llguidance")
    req = request(list(USER), TOOLS, False, tool_choice=tool_choice, input_ids=prompt_ids(ONE_CALL), **extra)
    result = s._process_messages(req, False)
    params = req.to_sampling_params(stop=result.stop, model_generation_config={},
                                    tool_call_constraint=result.tool_call_constraint)
    return result.tool_call_constraint, params


def _gated(tok, ebnf: str, *, reasoning: bool = True) -> ReasonerGrammarObject:
    """What SGLang's scheduler runs for the request: its llguidance grammar behind the reasoning gate of
    the reasoning detector's think-end ids (``ReasonerGrammarBackend._make_grammar_object``)."""
    g = GuidanceBackend(tokenizer=tok, n_vocab=len(tok), eos_token_ids=[M.K3_END_OF_MSG.id]).dispatch_ebnf(ebnf)
    assert not isinstance(g, InvalidGrammarObject), getattr(g, "error_message", g)
    detector = ReasoningParser(model_type="kimi_chat", stream_reasoning=False, tokenizer=tok).detector
    obj = ReasonerGrammarObject(grammar=g, think_end_ids=detector.get_think_end_token_ids(tok))
    obj.maybe_init_reasoning(reasoning)
    return obj


def _accepted(obj: ReasonerGrammarObject, ids: list[int]) -> bool:
    try:
        for t in ids:
            obj.accept_token(t)
    except ValueError:  # the matcher refused a token (GuidanceGrammar._check_err)
        return False
    return obj.is_terminated() or obj.grammar.ll_matcher.is_stopped()


@pytest.mark.parametrize("tool_choice", ["required", NAMED], ids=["required", "named"])
def test_forced_tool_choice_carries_kimi_chats_constraint(tok, tool_choice):
    found, params = _processed(tok, tool_choice)
    want = constraint(TOOLS, dialect=K3, tool_choice=tool_choice, after_reasoning=True).lark
    assert found is not None and found == ("ebnf", want)
    assert params["ebnf"] == want and type(params["ebnf"]) is str
    assert not params.get("structural_tag") and not params.get("json_schema")
    # where it is not rebuilt (SGLang's Responses path), it reaches the scheduler as the plain str
    sent = pickle.loads(pickle.dumps(found[1]))
    assert sent == want and type(sent) is str


def test_the_gate_is_the_think_channels_close_tag(tok):
    ours = ReasoningParser(model_type="kimi_chat", stream_reasoning=False, tokenizer=tok).detector
    sglangs = ReasoningParser(model_type="kimi_k3", stream_reasoning=False, tokenizer=tok).detector
    ids = ours.get_think_end_token_ids(tok)
    assert ids == k3_tokenizer().encode(close("think")) == sglangs.get_think_end_token_ids(tok)
    assert ids[0] == M.K3_CLOSE.id and ids[-1] == M.K3_SEP.id and len(ids) == 3


@pytest.mark.parametrize("case", [ONE_CALL, TWO_CALLS], ids=lambda c: c.name)
def test_gated_matcher_accepts_official_output(tok, case):
    assert _accepted(_gated(tok, _processed(tok, "required")[1]["ebnf"]), output_ids(case))


def test_gated_matcher_refuses_malformed_output(tok):
    ebnf = _processed(tok, "required")[1]["ebnf"]
    enc = k3_tokenizer().encode
    think = "Just call." + close("think")
    call = tag("call", 'tool="search" index="1"')
    arg = tag("argument", 'key="query" type="string"') + "kimi" + close("argument")
    ok = think + tag("response") + close("response") + tag("tools") + call + arg + close("call") + close("tools")
    assert _accepted(_gated(tok, ebnf), enc(ok + close("message")) + [M.K3_END_OF_MSG.id])
    for bad in (
        ok.replace('index="1"', 'index="2"'),  # the running index
        ok.replace('tool="search"', 'tool="nope"'),  # unknown function
        ok.replace('key="query"', 'key="q"'),  # an undeclared argument, the required one missing
        ok.replace(tag("response") + close("response"), tag("response") + "Sure." + close("response")),  # content
        think + tag("response") + close("response"),  # no call at all
    ):
        assert not _accepted(_gated(tok, ebnf), enc(bad + close("message")) + [M.K3_END_OF_MSG.id]), bad


def test_typed_close_tag_does_not_open_the_gate_and_typed_markers_are_refused(tok):
    obj = _gated(tok, _processed(tok, "required")[1]["ebnf"])
    enc = k3_tokenizer().encode
    typed_close = enc(close("think"), allow_special=False)
    assert M.K3_CLOSE.id not in typed_close and len(typed_close) > 3
    for t in enc("I will type ") + typed_close:
        obj.accept_token(t)
    assert obj._is_thinking()  # still reasoning: the grammar has not started
    for t in enc(close("think")):
        obj.accept_token(t)
    assert not obj._is_thinking()
    typed_open = enc(tag("response"), allow_special=False)
    assert obj.grammar.ll_matcher.validate_tokens(typed_open) == 0
    assert obj.grammar.ll_matcher.validate_tokens([M.K3_OPEN.id]) == 1


def test_thinking_off_starts_inside_the_response_channel(tok):
    found, params = _processed(tok, "required", chat_template_kwargs={"thinking": False})
    want = constraint(TOOLS, dialect=K3, tool_choice="required", thinking=False, reasoning=False).lark
    assert params["ebnf"] == want and type(params["ebnf"]) is str
    assert found[1] != want  # built without the switch: to_sampling_params makes it the request's
    # thinking off, SGLang's gate is open from the first token (require_reasoning False)
    assert _accepted(_gated(tok, params["ebnf"], reasoning=False), output_ids(OFF_CALL))
    assert not _accepted(_gated(tok, params["ebnf"], reasoning=False), output_ids(ONE_CALL))


def test_sglangs_own_k3_reasoning_parser_gates_the_same(tok):
    found, _ = _processed(tok, "required", reasoning_parser="kimi_k3")
    assert found == ("ebnf", constraint(TOOLS, dialect=K3, tool_choice="required", after_reasoning=True).lark)


def test_a_reasoning_parser_with_another_gate_keeps_sglangs_constraint(tok, caplog):
    caplog.set_level(logging.INFO, logger="kimi_chat.integrations.sglang")
    found, params = _processed(tok, "required", reasoning_parser="kimi_k2")  # </think>: not K3's close
    assert found is None or found[0] != "ebnf"
    assert not params.get("ebnf")
    from kimi_chat.servers import forced as C

    assert any("--reasoning-parser kimi_k2" in w for w in C.KEPT)
