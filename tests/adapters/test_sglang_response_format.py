"""SGLang: ``response_format`` (``json_object`` / ``json_schema``) carries kimi_chat's constraint of the turn
(:func:`kimi_chat.servers.sglang.constraint.kimi_response_format`) as the request's EBNF in place of SGLang's
bare ``json_schema``: the reply is constrained inside the Kimi format (K3's response channel, K2's content
after ``</think>``), which SGLang's own JSON grammar, applied from the reasoning's end, leaves out.

Real SGLang classes: the chat path's ``_process_messages`` (:mod:`.sglang_serving`),
``ChatCompletionRequest.to_sampling_params``, ``GuidanceBackend`` and ``ReasonerGrammarObject``; the server's
tokenizer is published as SGLang's ``http_server`` global state publishes it."""

from __future__ import annotations

import json
import sys
import types

import pytest
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
from sglang.srt.constrained.llguidance_backend import GuidanceBackend
from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject
from sglang.srt.parser.reasoning_parser import ReasoningParser

from kimi_chat import markers as M
from kimi_chat.grammar import constraint
from kimi_chat.servers import family as F
from kimi_chat.servers import sglang as plugin  # noqa: F401  (registers "kimi_chat")
from kimi_chat.servers.sglang import constraint as C

from .adapter_support import hf_tokenizer
from .k3_support import TOOLS, USER, K3Case, _msg, close, k3_tokenizer, output_ids, prompt_ids, tag
from .sglang_serving import NS, request, serving_chat

NS.setdefault("normalize_hunyuan_reasoning_effort", lambda request, reasoning_parser, reasoning_config: None)

K3 = "kimi-k3"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": False}
RF = {"type": "json_schema", "json_schema": {"name": "weather", "schema": SCHEMA}}
REPLY = K3Case("json_reply", (None, None, []), assistant=_msg("Fill it.", json.dumps({"city": "Paris", "days": 3})))


@pytest.fixture(scope="module")
def tok():
    return hf_tokenizer("k3")


@pytest.fixture(autouse=True)
def _server(monkeypatch):
    monkeypatch.delenv(F.DIALECT_ENV, raising=False)


def _publish(monkeypatch, tok) -> None:
    """The tokenizer as SGLang's ``http_server.get_global_state().tokenizer_manager.tokenizer``."""
    state = types.SimpleNamespace(tokenizer_manager=types.SimpleNamespace(tokenizer=tok))
    monkeypatch.setitem(sys.modules, C._HTTP_SERVER, types.SimpleNamespace(get_global_state=lambda: state))


def _params(tok, response_format, *, tool_parser="kimi_chat", tools=None, tool_choice=None, prompt=None):
    s = serving_chat(tok, tool_parser, "kimi_chat", grammar_backend="llguidance")
    extra = {"tool_choice": tool_choice} if tool_choice else {}
    req = request(list(USER), tools, False, response_format=response_format,
                  input_ids=prompt or prompt_ids(REPLY), **extra)
    result = s._process_messages(req, False)
    return req.to_sampling_params(stop=result.stop, model_generation_config={},
                                  tool_call_constraint=result.tool_call_constraint)


def _accepted(tok, ebnf: str, ids: list[int], eos: int) -> bool:
    g = GuidanceBackend(tokenizer=tok, n_vocab=len(tok), eos_token_ids=[eos]).dispatch_ebnf(ebnf)
    assert not isinstance(g, InvalidGrammarObject), getattr(g, "error_message", g)
    detector = ReasoningParser(model_type="kimi_chat", stream_reasoning=False, tokenizer=tok).detector
    obj = ReasonerGrammarObject(grammar=g, think_end_ids=detector.get_think_end_token_ids(tok))
    obj.maybe_init_reasoning(True)
    try:
        for t in ids:
            obj.accept_token(t)
    except ValueError:
        return False
    return obj.is_terminated() or g.ll_matcher.is_stopped()


def test_k3_json_schema_is_the_response_channel(monkeypatch, tok):
    _publish(monkeypatch, tok)
    params = _params(tok, RF)
    assert "json_schema" not in params
    assert params["ebnf"] == constraint(None, dialect=K3, response_format=RF, after_reasoning=True).lark
    eom = M.K3_END_OF_MSG.id
    assert _accepted(tok, params["ebnf"], output_ids(REPLY), eom)
    enc = k3_tokenizer().encode
    think = "Fill it." + close("think")
    for bad in ('{"city": "Paris", "days": 8}', '{"city": "Paris"}'):  # maximum; required
        text = think + tag("response") + bad + close("response") + close("message")
        assert not _accepted(tok, params["ebnf"], enc(text) + [eom], eom), bad
    # the bare JSON SGLang's own json_schema grammar would have the model write after the gate
    assert not _accepted(tok, params["ebnf"], enc(think + '{"city": "Paris", "days": 3}') + [eom], eom)


def test_k3_tools_with_auto_and_a_json_reply(monkeypatch, tok):
    _publish(monkeypatch, tok)
    params = _params(tok, RF, tools=TOOLS, tool_choice="auto")
    assert "json_schema" not in params
    assert params["ebnf"] == constraint(TOOLS, dialect=K3, tool_choice="auto", response_format=RF,
                                        after_reasoning=True).lark


def test_k2_json_object_is_the_content(monkeypatch):
    tok = hf_tokenizer("k2.6")
    _publish(monkeypatch, tok)
    params = _params(tok, {"type": "json_object"}, prompt=[M.IM_END.id])
    want = constraint(None, dialect="kimi-k2.6", response_format={"type": "json_object"}, after_reasoning=True).lark
    assert "json_schema" not in params and params["ebnf"] == want
    enc = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    end = M.IM_END.id
    assert _accepted(tok, want, enc("Think." + M.THINK_END.text + '{"a": 1}') + [end], end)
    assert not _accepted(tok, want, enc("Think." + M.THINK_END.text + "Sure: {}") + [end], end)


def test_another_tool_parser_keeps_sglangs_json_schema(monkeypatch, tok):
    _publish(monkeypatch, tok)
    params = _params(tok, RF, tool_parser="kimi_k3")
    assert json.loads(params["json_schema"]) == SCHEMA and not params.get("ebnf")
