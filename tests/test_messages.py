"""Input validation: errors name the message index and field; objects and typed dicts are accepted."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import BaseModel

from kimi_chat import InvalidMessagesError, InvalidToolsError, RenderError, render
from kimi_chat.errors import StrictModeError
from kimi_chat.messages import normalize_messages

from conftest import needs_reference

pytestmark = pytest.mark.usefixtures("message_paths")  # every test with the plain-dict fast path and without

def test_missing_field_names_index_and_field_under_strict():
    msgs = [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]
    # parity: the official template writes '## Return of ' and no id
    assert "## Return of \n    x" in render(msgs)
    with pytest.raises(StrictModeError) as e:
        render(msgs, strict=True)
    assert "messages[1].tool_call_id" in str(e.value)
    assert [(p.code, p.message_index, p.field) for p in e.value.problems] == [("missing-tool-call-id", 1, "tool_call_id")]


def test_unknown_role_renders_as_the_template_and_strict_names_it():
    msgs = [{"role": "developer", "content": "x"}]
    assert render(msgs).endswith("<|im_system|>developer<|im_middle|>x<|im_end|><|im_assistant|>assistant<|im_middle|>")
    with pytest.raises(StrictModeError) as e:
        render(msgs, strict=True)
    assert "messages[0].role" in str(e.value) and "developer" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_unknown_field_is_ignored_by_default_and_refused_under_strict():
    # a typo silently drops the tool calls from the prompt, as in the official template: strict catches it
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_call": []}]
    assert render(msgs) == render([msgs[0], {"role": "assistant"}])
    with pytest.raises(StrictModeError) as e:
        render(msgs, strict=True)
    assert "messages[1].tool_call" in str(e.value)


def test_nested_field_path():
    bad = {"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}
    with pytest.raises(InvalidMessagesError) as e:
        render([{"role": "user", "content": "hi"}, bad])
    assert "messages[1].tool_calls[0].function.name" in str(e.value)


def test_wrong_content_type():
    with pytest.raises(InvalidMessagesError) as e:
        render([{"role": "user", "content": 5}])
    assert "messages[0].content" in str(e.value)


def test_bad_tools():
    with pytest.raises(InvalidToolsError) as e:
        render([{"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {"description": "no name"}}])
    assert "tools[0].function.name" in str(e.value)


def test_not_a_list():
    with pytest.raises(InvalidMessagesError):
        render({"role": "user", "content": "hi"})


def test_empty_conversation_is_a_render_error():
    with pytest.raises(RenderError):
        render([])


def test_none_valued_keys_dropped_like_transformers():
    msgs = normalize_messages([{"role": "assistant", "content": None, "tool_calls": None, "name": None}])
    assert msgs == [{"role": "assistant"}]


def test_missing_tool_call_id_where_the_dialect_writes_ids():
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    # parity: an empty id, as the official template writes it
    assert "<|tool_call_begin|><|tool_call_argument_begin|>{}" in render(msgs, dialect="kimi-k2-instruct-0905")
    with pytest.raises(StrictModeError) as e:
        render(msgs, dialect="kimi-k2-instruct-0905", strict=True)
    assert "messages[1].tool_calls[0].id" in str(e.value)
    # rev2 regenerates ids, so it needs none, strict or not
    assert "functions.f:0" in render(msgs, dialect="kimi-k2-instruct@rev2", strict=True)


def test_non_json_arguments_named():
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": {1, 2}}}}]}]
    with pytest.raises(RenderError) as e:
        render(msgs)
    assert "messages[1].tool_calls[0].function.arguments" in str(e.value)


def test_pydantic_and_dataclass_messages_render_like_dicts():
    class Msg(BaseModel):
        role: str
        content: str | None = None

    @dataclasses.dataclass
    class DMsg:
        role: str
        content: str

    as_dicts = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert render([Msg(role="user", content="hi"), DMsg("assistant", "yo")]) == render(as_dicts)


def test_openai_sdk_objects():
    openai = pytest.importorskip("openai", reason="the OpenAI SDK is a test dependency")
    from openai.types.chat import ChatCompletionMessage
    from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function

    sdk = ChatCompletionMessage(
        role="assistant", content=None,
        tool_calls=[ChatCompletionMessageFunctionToolCall(id="functions.f:0", type="function",
                                                          function=Function(name="f", arguments='{"a": 1}'))],
    )
    plain = {"role": "assistant", "tool_calls": [{"id": "functions.f:0", "type": "function",
                                                   "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    user = {"role": "user", "content": "hi"}
    assert render([user, sdk]) == render([user, plain])
    assert openai.__version__


def test_unknown_option_ignored_by_default_refused_under_strict():
    msgs = [{"role": "user", "content": "hi"}]
    assert render(msgs, dialect="kimi-k2-instruct", thinking=False) == render(msgs, dialect="kimi-k2-instruct")
    # a non-bool thinking is what the template sees: not `false`, so thinking stays on
    assert render(msgs, dialect="kimi-k2.5", thinking="false").endswith("<think>")
    with pytest.raises(StrictModeError, match="thinking"):
        render(msgs, dialect="kimi-k2-instruct", thinking=False, strict=True)
    with pytest.raises(StrictModeError, match="bool"):
        render(msgs, dialect="kimi-k2.5", thinking="false", strict=True)


@pytest.mark.parametrize(
    "messages, where",
    [
        ([{"role": "user", "content": {"a": 1}}], "messages[0].content"),
        ([{"content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": ["x"]}], "messages[0].content[0]"),
        ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": 7, "arguments": "{}"}}]}],
         "messages[0].tool_calls[0].function.name"),
    ],
)
def test_error_paths_are_readable(messages, where):
    with pytest.raises(InvalidMessagesError) as e:
        render(messages)
    assert f"{where}: " in str(e.value)


@pytest.mark.parametrize(
    "messages, where",
    [
        ([{"role": "user", "content": [{"type": "audio"}]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"type": "text"}]}], "messages[0].content[0].text"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": 1}]}],
         "messages[1].content[0].text"),
    ],
)
def test_strict_error_paths_are_readable(messages, where):
    render(messages)  # the official template renders these (parity)
    with pytest.raises(StrictModeError) as e:
        render(messages, strict=True)
    assert f"{where}: " in str(e.value)
    assert "tagged-union" not in str(e.value) and ".str" not in str(e.value)


def test_numpy_values_render_like_transformers_makes_them_plain():
    np = pytest.importorskip("numpy", reason="numpy comes with the test dependencies")
    plain = [{"role": "user", "content": "hi"},
             {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.f:0", "type": "function",
              "function": {"name": "f", "arguments": {"a": 3, "b": 0.5}}}]}]
    numpy = [{"role": "user", "content": np.str_("hi")},
             {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.f:0", "type": "function",
              "function": {"name": "f", "arguments": {"a": np.int64(3), "b": np.float64(0.5)}}}]}]
    for dialect in ("kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2", "kimi-k2-instruct-0905", "kimi-k2-thinking"):
        assert render(numpy, dialect=dialect) == render(plain, dialect=dialect)


def test_bytes_content_is_a_validation_error():
    with pytest.raises(InvalidMessagesError, match=r"messages\[0\]\.content"):
        render([{"role": "user", "content": b"x"}])


def test_tool_description_none_as_the_openai_sdk_dumps_it():
    tools = [{"type": "function", "function": {"name": "f", "description": None, "parameters": None}}]
    out = render([{"role": "user", "content": "hi"}], tools=tools, dialect="kimi-k2-instruct-0905")
    assert '"description": null' in out


def test_openai_sdk_objects_nested_in_dict_messages():
    """The pattern of OpenAI's function-calling docs: SDK tool-call objects inside a dict message, and
    SDK / pydantic / dataclass objects at every other level, render like the plain dicts (and like the
    official machinery, which makes them plain the same way)."""
    pytest.importorskip("openai", reason="the OpenAI SDK is a test dependency")
    from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function
    from openai.types.shared_params import FunctionDefinition

    call = ChatCompletionMessageFunctionToolCall(id="functions.f:0", type="function",
                                                 function=Function(name="f", arguments='{"a": 1}'))
    plain_call = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}

    class Args(BaseModel):
        a: int

    @dataclasses.dataclass
    class Part:
        type: str
        text: str

    user = {"role": "user", "content": [Part("text", "hi")]}
    plain_user = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    msgs = [user, {"role": "assistant", "tool_calls": [call]},
            {"role": "assistant", "tool_calls": [{"id": "functions.f:1", "type": "function",
                                                  "function": {"name": "f", "arguments": Args(a=1)}}]}]
    plain = [plain_user, {"role": "assistant", "tool_calls": [plain_call]},
             {"role": "assistant", "tool_calls": [{"id": "functions.f:1", "type": "function",
                                                   "function": {"name": "f", "arguments": {"a": 1}}}]}]

    @dataclasses.dataclass
    class Schema:
        type: str = "object"

    tools = [{"type": "function", "function": {"name": "f", "parameters": Schema()}}]
    plain_tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    fd: FunctionDefinition = {"name": "g", "description": "d"}
    for dialect in ("kimi-k2-instruct@rev2", "kimi-k2-instruct-0905", "kimi-k2-thinking", "kimi-k2.5"):
        assert render(msgs, tools=tools, dialect=dialect) == render(plain, tools=plain_tools, dialect=dialect)
        assert render(msgs, tools=[{"type": "function", "function": fd}], dialect=dialect)
    # still refused where the plain value is wrong: the error names the nested field
    bad = ChatCompletionMessageFunctionToolCall.model_construct(id="x", type="function", function={"arguments": "{}"})
    with pytest.raises(InvalidMessagesError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.name"):
        render([plain_user, {"role": "assistant", "tool_calls": [bad]}])


@pytest.mark.oracle
@needs_reference
def test_nested_objects_match_official():
    pytest.importorskip("openai", reason="the OpenAI SDK is a test dependency")
    from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function
    from kimi_chat.reference.oracle import render_official

    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [ChatCompletionMessageFunctionToolCall(
                id="functions.f:0", type="function", function=Function(name="f", arguments='{"a": 1}'))]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"}]
    for dialect in ("kimi-k2-instruct@rev2", "kimi-k2-instruct-0905", "kimi-k2-thinking"):
        assert render(msgs, dialect=dialect) == render_official(msgs, dialect=dialect)


def _deep_list(depth):
    root = cur = []
    for _ in range(depth):
        nxt = []
        cur.append(nxt)
        cur = nxt
    return root


def test_deeply_nested_input_is_a_clear_error_not_recursion():
    """A value nested deeper than the interpreter's recursion limit (item 18): a RenderError naming
    the field, not a bare RecursionError (the official template's tojson cannot write it either)."""
    deep = _deep_list(30_000)
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": deep}}]}]
    with pytest.raises(RenderError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments: nested 30001 levels deep"):
        render(msgs, dialect="kimi-k2-instruct@rev2")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"default": deep}}}]
    with pytest.raises(InvalidMessagesError, match=r"^invalid tools: tools\[0\]\.function\.parameters\.default\[0\].*: nested 30004 levels deep"):
        render([{"role": "user", "content": "q"}], tools=tools, dialect="kimi-k2-instruct@rev2")


def test_to_plain_any_depth_keeps_order_and_types():
    from kimi_chat.messages import to_plain

    @dataclasses.dataclass
    class P:
        a: object

    class M(BaseModel):
        b: list

    value = {"x": (1, [2, (3, P((4, M(b=[5]))))]), "y": None, "z": {"b": 1, "a": 2}}
    got = to_plain(value)
    assert got == {"x": (1, [2, (3, {"a": (4, {"b": [5]})})]), "y": None, "z": {"b": 1, "a": 2}}
    assert list(got) == ["x", "y", "z"] and list(got["z"]) == ["b", "a"]
    deep = _deep_list(30_000)
    plain = to_plain([P(deep)])
    depth, cur = 0, plain[0]["a"]
    while cur:
        cur, depth = cur[0], depth + 1
    assert depth == 30_000
