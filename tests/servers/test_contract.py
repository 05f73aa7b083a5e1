"""The request contract (kimi_chat.servers.contract), one test per rule of Moonshot's Kimi Vendor Verifier
(KVV, ../shared/kvv/tests): every bad request is a RequestError with status 400 naming the field
(``param``), every good one a ChatRequest with the render options the dialect reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kimi_chat.errors import KimiChatError, RequestError
from kimi_chat.servers.contract import ChatRequest, prompt_tokens, read_chat_request

from conftest import needs_reference

K3 = "kimi-k3"
USER = {"role": "user", "content": "what is the weather in beijing?"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _fn(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": "A tool.",
                                             "parameters": {"type": "object", "properties": {}}}}


def _dyn(*tools: Any, content: Any = "") -> dict[str, Any]:
    return {"role": "system", "content": content, "tools": list(tools)}


def _read(body: dict[str, Any], dialect: str = K3, contract: str = "open") -> ChatRequest:
    return read_chat_request({"model": "kimi", **body}, dialect=dialect, contract=contract)


def _refused(body: dict[str, Any], dialect: str = K3, contract: str = "open") -> RequestError:
    with pytest.raises(RequestError) as info:
        _read(body, dialect, contract)
    return info.value


# ----------------------------------------------------------------------------- the error shape


def test_error_body_is_openai_shaped_and_names_the_field():
    e = _refused({"messages": [{"role": "tool", "content": "x"}, USER]})
    assert e.status == 400
    assert isinstance(e, KimiChatError)
    assert e.body() == {"error": {"message": str(e), "type": "invalid_request_error",
                                  "param": "messages[0].tool_call_id", "code": "missing_field"}}
    assert str(e).startswith("messages[0].tool_call_id: ")


@pytest.mark.parametrize("body, param", [
    ([], None),
    ({"messages": [USER]}, "model"),
    ({"model": 3, "messages": [USER]}, "model"),
    ({"model": "kimi"}, "messages"),
    ({"model": "kimi", "messages": []}, "messages"),
    ({"model": "kimi", "messages": "hi"}, "messages"),
    ({"model": "kimi", "messages": [None]}, "messages[0]"),
    ({"model": "kimi", "messages": [{"content": "hi"}]}, "messages[0].role"),
    ({"model": "kimi", "messages": [USER], "functions": []}, "functions"),
])
def test_malformed_bodies(body, param):
    with pytest.raises(RequestError) as info:
        read_chat_request(body, dialect=K3)
    assert info.value.param == param


# ----------------------------------------------------------------------------- dynamic tools (KVV test_dynamic_tools)


@pytest.mark.parametrize("messages", [
    [_dyn(WEATHER), USER],
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "hi"},
     {"role": "assistant", "content": "Hello!"}, _dyn(WEATHER), USER],
    [USER, _dyn(WEATHER)],
    [_dyn(_fn("get_weather"), _fn("get_time"), _fn("get_news")), USER],
    [_dyn(_fn("get_weather")), _dyn(_fn("get_time")), USER],
])
def test_dynamic_tools_accepted_and_callable(messages):
    req = _read({"messages": messages, "tool_choice": "required"})
    assert req.tools is None
    declared = [t["function"]["name"] for m in messages for t in m.get("tools", [])]
    assert [t["function"]["name"] for t in req.callable_tools] == declared
    assert req.tool_choice == "required"
    assert req.render_options["tool_choice"] == "required"  # the K3 encoder's tool-choice message


def test_global_and_dynamic_tools_coexist_in_order():
    req = _read({"tools": [_fn("get_stock_price")], "messages": [_dyn(WEATHER), USER], "tool_choice": "required"})
    assert [t["function"]["name"] for t in req.callable_tools] == ["get_stock_price", "get_weather"]
    assert [t["function"]["name"] for t in req.tools] == ["get_stock_price"]


def test_dynamic_tool_strict_false_accepted():
    tool = copy.deepcopy(WEATHER)
    tool["function"]["strict"] = False
    req = _read({"messages": [_dyn(tool), USER], "tool_choice": "required"})
    assert req.dynamic_tools == [tool]


def _without(field: str) -> dict[str, Any]:
    tool = _fn("good_tool")
    del (tool["function"] if field == "name" else tool)[field]
    return tool


@pytest.mark.parametrize("messages, param", [
    ([{"role": "user", "content": "hi", "tools": [WEATHER]}, USER], "messages[0].tools"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "tools": [WEATHER]}, USER],
     "messages[1].tools"),
    ([_dyn(WEATHER, content="not empty"), USER], "messages[0].content"),
    ([_dyn(_without("type")), USER], "messages[0].tools[0].type"),
    ([_dyn(_without("function")), USER], "messages[0].tools[0].function"),
    ([_dyn(_without("name")), USER], "messages[0].tools[0].function.name"),
    ([_dyn(_fn("1bad_name")), USER], "messages[0].tools[0].function.name"),
    ([_dyn(_fn("bad@name")), USER], "messages[0].tools[0].function.name"),
    ([_dyn(_fn("")), USER], "messages[0].tools[0].function.name"),
    ([_dyn(_fn("a" * 257)), USER], "messages[0].tools[0].function.name"),
    ([_dyn({"type": "bogus", "function": {"name": "x"}}), USER], "messages[0].tools[0].type"),
    ([_dyn(_fn("good_tool"), {"type": "bogus", "function": {"name": "x"}}), USER], "messages[0].tools[1].type"),
    ([{"role": "system", "content": "", "tools": {"type": "function"}}, USER], "messages[0].tools"),
    ([{"role": "system", "content": "", "tools": [None]}, USER], "messages[0].tools[0]"),
    ([_dyn(_fn("dup"), _fn("dup")), USER], "messages[0].tools[1].function.name"),
    ([_dyn(_fn("dup")), _dyn(_fn("dup")), USER], "messages[1].tools[0].function.name"),
    ([{"role": "tool", "content": "some tool result"}, USER], "messages[0].tool_call_id"),
])
def test_dynamic_tool_rejections(messages, param):
    e = _refused({"messages": messages})
    assert e.param == param


def test_duplicate_name_between_global_and_dynamic_tools():
    e = _refused({"tools": [_fn("dup")], "messages": [_dyn(_fn("dup")), USER]})
    assert e.param == "messages[0].tools[0].function.name" and e.code == "duplicate_tool_name"
    assert "tools[0]" in str(e)


def test_request_level_tools_checked_the_same_way():
    e = _refused({"tools": [_fn("ok"), _fn("9lives")], "messages": [USER]})
    assert e.param == "tools[1].function.name"
    e = _refused({"tools": "x", "messages": [USER]})
    assert e.param == "tools"


def test_k2_dialects_refuse_dynamic_tools_their_template_ignores():
    e = _refused({"messages": [_dyn(WEATHER), USER]}, dialect="kimi-k2.6")
    assert e.param == "messages[0].tools" and "unknown-field" in str(e)


def test_lint_errors_are_refused_naming_message_and_field():
    e = _refused({"messages": [{"role": "moderator", "content": "x"}, USER]})
    assert e.param == "messages[0].role" and "unknown-role" in str(e)
    e = _refused({"messages": [{"role": "user", "content": "hi", "tool_call": []}]}, dialect="kimi-k2-instruct-0905")
    assert e.param == "messages[0].tool_call"


def test_every_lint_error_code_has_a_decision():
    """Each lint error is refused (LINT_REFUSED, with its reason) or is a template option dropped with a
    warning: a new error code cannot slip through unrefused without a decision here."""
    from kimi_chat.checks.lint import ERROR_CODES
    from kimi_chat.servers._fields import _UNREAD_OPTION_CODES, LINT_REFUSED

    assert set(LINT_REFUSED) | set(_UNREAD_OPTION_CODES) == ERROR_CODES
    assert not set(LINT_REFUSED) & set(_UNREAD_OPTION_CODES)


DEVELOPER = {"role": "developer", "content": "Answer in French."}
NAME_OR_ROLE = ["kimi-k2-instruct-0905", "kimi-k2-thinking@rev1", "kimi-k2.5", "kimi-k2.6"]


@pytest.mark.parametrize("dialect", NAME_OR_ROLE)
def test_developer_message_served_where_the_template_writes_it_as_a_turn(dialect):
    """The name-or-role K2 templates head a developer message ``<|im_system|>developer<|im_middle|>``: a
    valid OpenAI request the template renders as a turn is not refused (the lint error is a warning)."""
    req = _read({"messages": [DEVELOPER, USER]}, dialect=dialect)
    assert req.messages[0] == DEVELOPER
    assert [w for w in req.warnings if w.startswith("messages[0].role: ") and "developer-role" in w]


@needs_reference
@pytest.mark.parametrize("dialect", NAME_OR_ROLE)
def test_developer_message_renders_as_the_official_template(dialect):
    from kimi_chat import render
    from kimi_chat.reference.oracle import render_official

    req = _read({"messages": [DEVELOPER, USER]}, dialect=dialect)
    ours = render(req.messages, dialect=dialect, add_generation_prompt=True, **req.render_options)
    official = render_official(req.messages, dialect=dialect, add_generation_prompt=True, **req.render_options)
    assert ours == official
    assert "<|im_system|>developer<|im_middle|>Answer in French.<|im_end|>" in official


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2"])
def test_developer_message_refused_where_the_template_writes_no_header(dialect):
    """rev1 / rev2 have fixed role headers: a developer message's text would run into the previous turn."""
    e = _refused({"messages": [DEVELOPER, USER]}, dialect=dialect)
    assert e.param == "messages[0].role" and "developer-role" in str(e)


def test_developer_message_on_k3_is_dropped_as_its_encoder_does():
    req = _read({"messages": [DEVELOPER, USER]})
    assert req.messages[0] == DEVELOPER


@pytest.mark.parametrize("dialect", [K3, "kimi-k2-instruct-0905", "kimi-k2.6", "kimi-k2-instruct@rev1"])
@pytest.mark.parametrize("message, param", [
    ({"role": "system"}, "messages[0].content"),
    ({"role": "user", "content": None}, "messages[0].content"),
    ({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]},
     "messages[0].content[0]"),
    ({"role": "user", "content": "hi", "foo": 1}, "messages[0].foo"),
    ({"role": "function", "name": "f", "content": "x"}, "messages[0].role"),
])
def test_schema_departures_refused_in_every_dialect(dialect, message, param):
    e = _refused({"messages": [message, USER]}, dialect=dialect)
    assert e.param == param and e.status == 400


@pytest.mark.parametrize("dialect", [K3, "kimi-k2-instruct-0905", "kimi-k2.6"])
def test_an_echoed_sdk_assistant_message_is_served(dialect):
    """What the OpenAI SDK's ``message.model_dump()`` sends back (its null fields, reasoning_content)."""
    echo = {"role": "assistant", "content": "OK", "refusal": None, "annotations": None, "audio": None,
            "function_call": None, "tool_calls": None, "reasoning_content": "r"}
    req = _read({"messages": [USER, echo, USER]}, dialect=dialect)
    assert len(req.messages) == 3


def test_missing_tool_call_id_on_a_call_refused_where_the_template_writes_it():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
    e = _refused({"tools": [WEATHER], "messages": [USER, call, {"role": "tool", "tool_call_id": "x", "content": "r"}]},
                 dialect="kimi-k2-instruct-0905")
    assert e.param == "messages[1].tool_calls[0].id"


def test_non_bool_template_option_refused():
    e = _refused({"messages": [USER], "chat_template_kwargs": {"thinking": "false"}}, dialect="kimi-k2.6")
    assert e.param == "chat_template_kwargs.thinking"


# ----------------------------------------------------------------------------- tool_choice (KVV test_tool_choice)


@pytest.mark.parametrize("choice", ["auto", "none", "required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_choice_values_with_tools(choice):
    req = _read({"messages": [USER], "tools": [WEATHER], "tool_choice": choice})
    assert req.tool_choice == choice


@pytest.mark.parametrize("choice", ["none", "auto"])
def test_tool_choice_without_tools_field_accepted(choice):
    req = _read({"messages": [USER], "tool_choice": choice})
    assert req.callable_tools is None and req.tool_choice == choice


@pytest.mark.parametrize("body, param", [
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [], "tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "bogus"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": 3}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "bogus", "function": {"name": "get_weather"}}}, "tool_choice.type"),
])
def test_tool_choice_rejections(body, param):
    e = _refused({"messages": [USER], **body})
    assert e.param == param


# ----------------------------------------------------------------------------- response_format (KVV test_response_format)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize("rf", [
    {"type": "text"},
    {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "weather", "strict": True, "schema": SCHEMA}},
    {"type": "json_schema", "json_schema": {"name": "weather", "strict": False, "schema": SCHEMA}},
])
def test_response_formats_accepted(rf):
    req = _read({"messages": [USER], "response_format": rf})
    assert req.response_format == rf
    assert req.render_options.get("response_format") == (None if rf["type"] == "text" else rf)


@pytest.mark.parametrize("rf, param", [
    ({"type": "bogus"}, "response_format.type"),
    ("json_object", "response_format"),
    ({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "weather"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "weather", "strict": "yes", "schema": {"type": "object"}}},
     "response_format.json_schema.strict"),
    ({"type": "json_schema", "json_schema": {"name": "weather", "schema": "x"}}, "response_format.json_schema.schema"),
])
def test_response_format_rejections(rf, param):
    e = _refused({"messages": [USER], "response_format": rf})
    assert e.param == param


# ----------------------------------------------------------------------------- thinking (KVV test_thinking_effort)


@pytest.mark.parametrize("fields, options", [
    ({"thinking": {"type": "enabled", "keep": "all", "effort": "high"}}, {"thinking": True, "thinking_effort": "high"}),
    ({"thinking": {"keep": "all"}}, {}),
    ({"thinking": {"type": "enabled", "keep": "all", "effort": "low"}, "reasoning_effort": "max"},
     {"thinking": True, "thinking_effort": "low"}),
    ({"thinking": {"type": "enabled", "keep": "all"}, "reasoning_effort": "max"},
     {"thinking": True, "thinking_effort": "max"}),
    ({"thinking": {"type": "disabled", "keep": "all", "effort": "high"}}, {"thinking": False}),
    ({"chat_template_kwargs": {"thinking": False}}, {"thinking": False}),
])
def test_thinking_fields_become_render_options(fields, options):
    req = _read({"messages": [USER], **fields})
    assert req.render_options == options
    assert req.thinking is options.get("thinking", True)


def test_reasoning_effort_ignored_under_thinking_effort_is_a_warning():
    req = _read({"messages": [USER], "thinking": {"type": "enabled", "effort": "low"}, "reasoning_effort": "max"})
    assert any("reasoning_effort" in w and "ignored" in w for w in req.warnings)


@pytest.mark.parametrize("fields, param", [
    ({"thinking": True}, "thinking"),
    ({"thinking": {"type": "off"}}, "thinking.type"),
    ({"thinking": {"effort": "medium"}}, "thinking.effort"),
    ({"reasoning_effort": "none"}, "reasoning_effort"),
    ({"thinking": {"type": "disabled"}, "chat_template_kwargs": {"thinking": True}}, "chat_template_kwargs.thinking"),
    ({"chat_template_kwargs": "x"}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"thinking": "yes"}}, "chat_template_kwargs.thinking"),
    ({"chat_template_kwargs": {"tokenize": True}}, "chat_template_kwargs.tokenize"),
])
def test_thinking_rejections(fields, param):
    e = _refused({"messages": [USER], **fields})
    assert e.param == param


def test_opensource_thinking_kwarg_on_k2():
    req = _read({"messages": [USER], "chat_template_kwargs": {"thinking": True}}, "kimi-k2.6")
    assert req.render_options == {"thinking": True}
    # a dialect whose template has no thinking switch ignores it (as the template does), said in a warning
    req = _read({"messages": [USER], "chat_template_kwargs": {"thinking": True}}, "kimi-k2-instruct-0905")
    assert req.render_options == {} and any("thinking" in w for w in req.warnings)
    req = _read({"messages": [USER], "thinking": {"type": "disabled"}}, "kimi-k2-instruct-0905")
    assert req.render_options == {} and req.warnings


# ----------------------------------------------------------------------------- sampling (KVV tests/params)

KVV_DEFAULTS = [("temperature", 0.6), ("temperature", 0.0), ("temperature", 1.0), ("top_p", 0.95),
                ("presence_penalty", 0), ("frequency_penalty", 0), ("n", 1)]
KVV_WRONG = [("temperature", 1.1), ("temperature", 2.0), ("temperature", -0.1), ("top_p", 0.8),
             ("presence_penalty", 0.5), ("frequency_penalty", 0.5), ("n", 2)]


@pytest.mark.parametrize("thinking", ["enabled", "disabled"])
@pytest.mark.parametrize("name, value", KVV_DEFAULTS)
def test_moonshot_contract_accepts_its_defaults(thinking, name, value):
    req = _read({"messages": [USER], "thinking": {"type": thinking}, name: value}, contract="moonshot")
    assert getattr(req, name) == value


@pytest.mark.parametrize("name, value", KVV_WRONG)
def test_moonshot_contract_refuses_other_values(name, value):
    e = _refused({"messages": [USER], name: value}, contract="moonshot")
    assert e.param == name and e.status == 400


@pytest.mark.parametrize("name, value", [kv for kv in KVV_WRONG if kv != ("temperature", -0.1)])
def test_open_contract_passes_valid_values_through(name, value):
    req = _read({"messages": [USER], name: value})
    assert getattr(req, name) == value


def test_moonshot_default_temperature_follows_thinking():
    on = _read({"messages": [USER]}, contract="moonshot")
    off = _read({"messages": [USER], "thinking": {"type": "disabled"}}, contract="moonshot")
    given = _read({"messages": [USER]})
    assert (on.temperature, off.temperature, given.temperature) == (1.0, 0.6, None)


@pytest.mark.parametrize("dialect, temperature", [("kimi-k2-instruct-0905", 0.6), ("kimi-k2-instruct@rev1", 0.6),
                                                  ("kimi-k2-thinking@rev1", 1.0), ("kimi-k2.6", 1.0)])
def test_moonshot_default_temperature_of_a_k2_dialect_follows_whether_it_thinks(dialect, temperature):
    """An instruct model does not think (Moonshot's non-thinking default, 0.6); K2-Thinking always does."""
    assert _read({"messages": [USER]}, dialect=dialect, contract="moonshot").temperature == temperature


@pytest.mark.parametrize("fields, param", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"n": 0}, "n"),
    ({"n": True}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_completion_tokens": 1.5}, "max_completion_tokens"),
    ({"seed": "1"}, "seed"),
    ({"stop": [""]}, "stop[0]"),
    ({"stop": 3}, "stop"),
    ({"stream": "yes"}, "stream"),
    ({"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
    ({"parallel_tool_calls": "no"}, "parallel_tool_calls"),
])
def test_sampling_rejections(fields, param):
    e = _refused({"messages": [USER], **fields})
    assert e.param == param


def test_sampling_fields_read():
    req = _read({"messages": [USER], "stream": True, "stream_options": {"include_usage": True},
                 "max_completion_tokens": 7, "max_tokens": 9, "seed": 3, "stop": "END", "parallel_tool_calls": False})
    assert (req.stream, req.include_usage, req.max_tokens, req.seed, req.stop, req.parallel_tool_calls) == (
        True, True, 7, 3, ["END"], False)


def test_unknown_contract_is_a_programming_error():
    with pytest.raises(ValueError, match="contract"):
        read_chat_request({"model": "kimi", "messages": [USER]}, dialect=K3, contract="strict")


# ----------------------------------------------------------------------------- usage.prompt_tokens (KVV ground truths)

# KVV test_response_format.py's RF_WITHOUT_JSON / RF_WITH_JSON (MIT), whose usage.prompt_tokens Moonshot's
# production tokenizer counts as 36 / 119 (../shared/kvv/SOURCE.md); the release's tokenizer gives 39 / 122.
_QUESTION = "请用 JSON 格式回答：北京是中国的首都吗？答案需要包含键 capital。"
_CAPITAL = {"type": "json_schema", "json_schema": {"name": "capital_answer", "schema": {
    "type": "object", "properties": {"capital": {"type": "boolean"}}, "required": ["capital"],
    "additionalProperties": False}}}


@needs_reference
@pytest.mark.parametrize("fields, release, moonshot", [({}, 39, 36), ({"response_format": _CAPITAL}, 122, 119)])
def test_prompt_tokens_match_kvv_ground_truths(fields, release, moonshot):
    from kimi_chat import render_tokens
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    req = _read({"messages": [{"role": "user", "content": _QUESTION}], "thinking": {"type": "disabled"}, **fields})
    ids = render_tokens(req.messages, tools=req.tools, dialect=K3, tokenizer=KimiTokenizer.from_reference("k3"),
                        **req.render_options).ids
    assert len(ids) == release
    count = prompt_tokens(ids, dialect=K3, request=req)
    assert count == moonshot


def test_prompt_tokens_pending_channel_rule():
    from kimi_chat import markers as M

    opened = [1, 2, M.K3_OPEN.id, 99, M.K3_SEP.id]
    count = prompt_tokens(opened, dialect=K3)
    assert count == 2
    count = prompt_tokens([1, 2, M.K3_CLOSE.id, 99, M.K3_SEP.id], dialect=K3)
    assert count == 5  # a closing tag: not pending
    count = prompt_tokens([1, 2, 3], dialect=K3)
    assert count == 3
    count = prompt_tokens(opened, dialect="kimi-k2.6")
    assert count == 5
