"""Values that contain themselves: every entry point answers with a kimi_chat error
naming where, in bounded time, instead of hanging with unbounded memory (or a RecursionError).

Each call runs under an alarm: before the fix they never returned (memory grew ~36 MB/s), so the
alarm turns that hang into a failure instead of a stuck run; it bounds the time, it measures nothing."""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import kimi_chat
from kimi_chat import InvalidMessagesError, InvalidToolsError, KimiChatError
from kimi_chat.messages import to_plain

_BOUND_SECONDS = 20


@contextmanager
def _bounded() -> Iterator[None]:
    def hang(*_: Any) -> None:
        raise AssertionError(f"no answer within {_BOUND_SECONDS}s: the walk does not end")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(_BOUND_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _raises(call: Callable[[], Any], error: type[Exception], match: str) -> None:
    with _bounded(), pytest.raises(error, match=match):
        call()


@dataclasses.dataclass
class Node:
    type: str
    child: Any = None


def _self_dict() -> dict[str, Any]:
    m: dict[str, Any] = {"role": 5}
    m["self"] = m
    return m


def _self_list() -> list[Any]:
    lst: list[Any] = []
    lst.append(lst)
    return lst


def _self_node() -> Node:
    n = Node("object")
    n.child = n
    return n


_K2 = ("kimi-k2-instruct", "kimi-k2-instruct@rev2", "kimi-k2-thinking", "kimi-k2.5")
_USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("dialect", _K2)
def test_a_dict_containing_itself_is_named_by_render_and_lint(dialect):
    where = r"messages\[0\]\.self: circular reference: this dict is messages\[0\] again"
    _raises(lambda: kimi_chat.render([_self_dict()], dialect=dialect), InvalidMessagesError, where)
    _raises(lambda: kimi_chat.render_segments([_self_dict()], dialect=dialect), InvalidMessagesError, where)
    _raises(lambda: kimi_chat.lint([_self_dict()], dialect=dialect), InvalidMessagesError, where)


def test_k3_drops_a_message_of_an_unknown_role_containing_itself():
    # K3's encoder drops a message whose role it does not know without reading it: the official result
    # (a prompt without it) in bounded time, and lint says so
    with _bounded():
        assert kimi_chat.render([_self_dict(), _USER], dialect="kimi-k3") == kimi_chat.render([_USER], dialect="kimi-k3")
        assert [w.code for w in kimi_chat.lint([_self_dict(), _USER], dialect="kimi-k3")] == ["unknown-role"]


@pytest.mark.parametrize("dialect", _K2)
def test_a_list_containing_itself_as_content(dialect):
    _raises(lambda: kimi_chat.render([{"role": "user", "content": _self_list()}], dialect=dialect),
            InvalidMessagesError, r"messages\[0\]\.content\[0\]: circular reference: this list is messages\[0\]\.content again")


@pytest.mark.parametrize("dialect", (*_K2, "kimi-k3"))
def test_a_message_object_holding_a_cycle(dialect):
    _raises(lambda: kimi_chat.render([_USER, Node("user", _self_list())], dialect=dialect),
            InvalidMessagesError, r"messages\[1\]\.child\[0\]: circular reference")


@pytest.mark.parametrize("dialect", (*_K2, "kimi-k3"))
def test_a_self_referencing_dataclass_in_a_tools_parameters(dialect):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                           "properties": {"x": _self_node()}}}}]
    _raises(lambda: kimi_chat.render([_USER], tools=tools, dialect=dialect), InvalidToolsError,
            r"tools\[0\]\.function\.parameters\.properties\.x\.child: circular reference: this Node is "
            r"tools\[0\]\.function\.parameters\.properties\.x again")


@pytest.mark.parametrize("dialect", ("kimi-k2-instruct", "kimi-k3"))
def test_parse_with_a_cyclic_tool_object_is_an_error_not_recursion(dialect):
    tools = [Node("function", {"name": "f", "parameters": _self_node()})]
    _raises(lambda: kimi_chat.parse("hi", tools=tools, dialect=dialect), InvalidToolsError,
            r"tools\[0\]\.child\.parameters\.child: circular reference")
    _raises(lambda: kimi_chat.StreamParser(dialect=dialect, tools=tools), InvalidToolsError, "circular reference")


@pytest.fixture(scope="module")
def k2_tokenizer() -> Any:
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    from kimi_chat.reference import reference_dir

    ref = reference_dir()
    if ref is None or not (ref / "tokenizer" / "tiktoken.model").is_file():
        pytest.skip("reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference")
    return kimi_chat.KimiTokenizer.from_reference("k2")


def test_render_tokens_with_a_cycle(k2_tokenizer):
    _raises(lambda: kimi_chat.render_tokens([_self_dict()], tokenizer=k2_tokenizer), InvalidMessagesError,
            r"messages\[0\]\.self: circular reference")
    tools = [{"type": "function", "function": {"name": "f", "parameters": _self_node()}}]
    _raises(lambda: kimi_chat.render_tokens([_USER], tools=tools, tokenizer=k2_tokenizer), InvalidToolsError,
            r"tools\[0\]\.function\.parameters\.child: circular reference")


def test_a_shared_value_is_not_a_cycle():
    shared = {"type": "string"}
    value = {"a": Node("x", shared), "b": [shared, shared]}
    with _bounded():
        assert to_plain(value) == {"a": {"type": "x", "child": shared}, "b": [shared, shared]}
    # the same object twice in one tools list renders like two copies
    tool = {"type": "function", "function": {"name": "f", "parameters": Node("object")}}
    with _bounded():
        out = kimi_chat.render([_USER], tools=[tool, dict(tool)])
    assert out.count('"name": "f"') == 2


def test_every_cycle_error_is_a_kimi_chat_value_error():
    with _bounded(), pytest.raises(KimiChatError) as info:
        to_plain([_self_list()])
    assert isinstance(info.value, ValueError)
    assert str(info.value) == ("invalid messages: messages[0][0]: circular reference: this list is messages[0] "
                               "again (a value that contains itself cannot be rendered)")


@pytest.mark.parametrize("dialect", ("kimi-k2-instruct", "kimi-k3"))
def test_lint_of_a_valid_message_with_a_cyclic_extra_field(dialect):
    # the templates ignore the extra field (it renders); lint reports it, in bounded time
    extra = _self_dict()
    msgs = [{"role": "user", "content": "hi", "extra": extra}]
    with _bounded():
        assert kimi_chat.render(msgs, dialect=dialect) == kimi_chat.render([_USER], dialect=dialect)
        assert [w.code for w in kimi_chat.lint(msgs, dialect=dialect)] == ["unknown-field"]
