"""SGLang: a forced tool choice (``required`` / a named function) carries kimi_chat's constraint
(:mod:`kimi_chat.servers.sglang.constraint`) as the request's EBNF, and SGLang's own llguidance backend
compiles it and, over real Kimi token ids, accepts official-format calls and refuses malformed ones and
typed markers. Real SGLang classes: the chat path's ``_process_messages`` (SGLang's serving code, loaded
by :mod:`.sglang_serving`), ``FunctionCallParser``, ``ChatCompletionRequest.to_sampling_params`` and
``GuidanceBackend``."""

from __future__ import annotations

import json
import logging

import pytest
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
from sglang.srt.constrained.llguidance_backend import GuidanceBackend

from kimi_chat import markers as M
from kimi_chat.grammar import constraint
from kimi_chat.prompt import render
from kimi_chat.servers import sglang as plugin  # noqa: F401  (registers "kimi_chat")
from kimi_chat.tokens.tokenizer import KimiTokenizer

from .sglang_serving import NS, request, serving_chat

# _process_messages calls this Hunyuan-only normaliser, whose module cannot be imported here (the GPU
# stack): for a Kimi request it changes nothing (it reads Hunyuan's reasoning_effort values only)
NS.setdefault("normalize_hunyuan_reasoning_effort", lambda request, reasoning_parser, reasoning_config: None)

K26 = "kimi-k2.6"
SCHEMA = {"type": "object",
          "properties": {"city": {"type": "string", "maxLength": 12},
                         "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
MESSAGES = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def _processed(tok, tool_choice, *, reasoning_parser: str | None = "kimi_chat", backend: str = "llguidance",
               dialect: str = K26):
    """What SGLang's chat path builds for the request: its tool-call constraint and sampling params."""
    s = serving_chat(tok, "kimi_chat", reasoning_parser, grammar_backend=backend)
    prompt = tok.encode(render(MESSAGES, tools=TOOLS, dialect=dialect), add_special_tokens=False)
    req = request(MESSAGES, TOOLS, False, tool_choice=tool_choice, input_ids=prompt)
    result = s._process_messages(req, False)
    params = req.to_sampling_params(stop=result.stop, model_generation_config={},
                                    tool_call_constraint=result.tool_call_constraint)
    return result.tool_call_constraint, params


def _call(name: str, args: str, idx: int = 0) -> str:
    return (M.TOOL_CALL_BEGIN.text + f"functions.{name}:{idx}" + M.TOOL_CALL_ARGUMENT_BEGIN.text + args
            + M.TOOL_CALL_END.text)


def _section(*calls: str) -> str:
    return M.TOOL_CALLS_SECTION_BEGIN.text + "".join(calls) + M.TOOL_CALLS_SECTION_END.text


def _grammar(tok, ebnf: str):
    """SGLang's llguidance backend compiling the request's ``ebnf`` (what the scheduler runs)."""
    backend = GuidanceBackend(tokenizer=tok, n_vocab=len(tok), eos_token_ids=[M.IM_END.id])
    g = backend.dispatch_ebnf(ebnf)
    assert not isinstance(g, InvalidGrammarObject), getattr(g, "error_message", g)
    return g


def _accepted(tok, ebnf: str, text: str) -> bool:
    g = _grammar(tok, ebnf)
    try:
        for t in tok.encode(text, add_special_tokens=False) + [M.IM_END.id]:
            g.accept_token(t)
    except ValueError:  # the matcher refused a token (GuidanceGrammar._check_err)
        return False
    return g.is_terminated() or g.ll_matcher.is_stopped()


@pytest.mark.parametrize("tool_choice", ["required", NAMED], ids=["required", "named"])
def test_forced_tool_choice_carries_kimi_chats_constraint(tok_reasoning, tool_choice):
    found, params = _processed(tok_reasoning, tool_choice)
    # with the reasoning parser, SGLang applies the grammar after the reasoning: the constraint's body
    want = constraint(TOOLS, dialect=K26, tool_choice=tool_choice, after_reasoning=True).lark
    assert found == ("ebnf", want)
    assert params["ebnf"] == want and not params.get("structural_tag") and not params.get("json_schema")


def test_matcher_accepts_official_calls_and_refuses_malformed_ones(tok_reasoning):
    ebnf = _processed(tok_reasoning, "required")[1]["ebnf"]
    ok = _section(_call("get_weather", json.dumps({"city": "Paris", "days": 3})))
    assert _accepted(tok_reasoning, ebnf, ok)
    two = _section(_call("get_weather", '{"city": "Paris", "days": 3}'), _call("get_time", "{}", 1))
    assert _accepted(tok_reasoning, ebnf, two)
    assert _accepted(tok_reasoning, ebnf, _section(_call("get_weather", '{"city":"Oslo","days":7}')))
    for bad in (
        _section(_call("get_weather", '{"city": "Paris", "days": 8}')),  # maximum
        _section(_call("get_weather", '{"city": "Paris"}')),  # required
        _section(_call("get_weather", '{"city": "Paris", "days": 3, "x": 1}')),  # additionalProperties
        _section(_call("get_weather", '{"city": "Paris", "days": 3}', 1)),  # the running index
        _section(_call("nope", "{}")),  # unknown function
        "Sure, calling it." + ok,  # content before the forced call
        "",  # no call at all
    ):
        assert not _accepted(tok_reasoning, ebnf, bad), bad


def test_matcher_refuses_a_typed_marker(tok_reasoning):
    """The section begin spelled by ordinary tokens is not the marker: refused where the id is due."""
    g = _grammar(tok_reasoning, _processed(tok_reasoning, "required")[1]["ebnf"])
    typed = KimiTokenizer.from_reference("k2.6").encode(M.TOOL_CALLS_SECTION_BEGIN.text, allow_special=False)
    assert M.TOOL_CALLS_SECTION_BEGIN.id not in typed and len(typed) > 1
    assert g.ll_matcher.validate_tokens(typed) == 0
    assert g.ll_matcher.validate_tokens([M.TOOL_CALLS_SECTION_BEGIN.id]) == 1


def test_named_choice_allows_only_that_function(tok_reasoning):
    ebnf = _processed(tok_reasoning, NAMED)[1]["ebnf"]
    assert _accepted(tok_reasoning, ebnf, _section(_call("get_weather", '{"city": "Rome", "days": 1}')))
    assert not _accepted(tok_reasoning, ebnf, _section(_call("get_time", "{}")))


def test_a_model_without_reasoning_is_constrained_from_its_first_token(tok_instruct):
    found, _ = _processed(tok_instruct, "required", reasoning_parser=None, dialect="kimi-k2-instruct-0905")
    assert found == ("ebnf", constraint(TOOLS, dialect="kimi-k2-instruct-0905", tool_choice="required").lark)


@pytest.mark.parametrize("backend, parser, why", [
    ("xgrammar", "kimi_chat", "the grammar backend is xgrammar"),
    ("llguidance", None, "no --reasoning-parser runs"),  # a reasoning model: the grammar's start is not known
])
def test_otherwise_sglangs_own_constraint(tok_reasoning, caplog, backend, parser, why):
    caplog.set_level(logging.INFO, logger="kimi_chat.integrations.sglang")
    found, params = _processed(tok_reasoning, "required", reasoning_parser=parser, backend=backend)
    assert found is not None and found[0] == "structural_tag" and not params.get("ebnf")
    assert any(why in r.getMessage() for r in caplog.records) or why in _logged_before(why)


def _logged_before(why: str) -> str:
    # the reason is logged once per process: an earlier test may have logged it
    from kimi_chat.servers import forced as C

    return next((w for w in C.KEPT if why in w), "")


def test_auto_is_left_to_sglang(tok_reasoning):
    found, params = _processed(tok_reasoning, "auto")
    assert not params.get("ebnf") and (found is None or found[0] != "ebnf")
