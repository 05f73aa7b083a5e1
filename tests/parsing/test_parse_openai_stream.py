"""The streamed deltas through the OpenAI SDK's own stream accumulator (``ChatCompletionStreamState``,
what ``client.chat.completions.stream()`` runs): it must accept every delta, and what it accumulates
must be what ``parse().to_openai()`` says."""

from __future__ import annotations

import json

import openai.lib.streaming.chat as openai_streaming  # openai is a test dependency: no skip
import pytest
from openai.types.chat import ChatCompletionChunk
from parse_helpers import AB, CB, CE, END, SB, SE, call, section

from kimi_chat.output import Delta, StreamParser, parse

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"]}}},
]


def _chunk(i: int, delta: dict, finish_reason: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "kimi",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })


def accumulate(chunks: list[str], **kw) -> tuple[dict, str]:
    """Stream ``chunks`` through a StreamParser, one SDK chunk per delta; the SDK's final message
    (as an OpenAI dict) and its finish reason."""
    state = openai_streaming.ChatCompletionStreamState()
    p = StreamParser(**kw)
    deltas: list[Delta] = []
    for c in chunks:
        deltas += p.feed(c)
    deltas += p.finish()
    state.handle_chunk(_chunk(0, {"role": "assistant"}))
    for i, d in enumerate(deltas, 1):
        state.handle_chunk(_chunk(i, d.to_openai()))
    reason = p.message.finish_reason(include_invalid=kw.get("include_invalid", False))
    state.handle_chunk(_chunk(len(deltas) + 1, {}, reason))
    final = state.get_final_completion().choices[0]
    msg = final.message
    out = {"role": "assistant", "content": msg.content}
    if msg.tool_calls:
        out["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.function.name, "arguments": t.function.arguments}}
            for t in msg.tool_calls
        ]
    invalid = (msg.model_extra or {}).get("invalid_tool_calls")
    if invalid:
        out["invalid_tool_calls"] = invalid
    return out, final.finish_reason


CASES = {
    # An opaque header, tools given: the name is inferred only at the call's end
    "opaque header, name inferred": section(call("call_0", '{"city": "Paris"}')),
    "opaque header, name never known": section(call("call_0", '{"nothing": 1}')),
    "opaque header, no tools match twice": section(call("0", '{"query": "x"}'), call("1", '{"city": "y"}')),
    "named calls": "Let me look." + section(call("functions.get_weather:0", '{"city": "Paris"}'),
                                           call("functions.search:1", '{"query": "q", "limit": 3}')) + END,
    "bare name header": section(call("search", '{"query": "q"}')),
    "no arguments marker": section(CB + "functions.get_weather:0" + CE),
    "text only": "Hello there" + END,
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize("include_invalid", [False, True])
def test_sdk_accumulates_what_parse_says(name, size, include_invalid):
    """Both ways of streaming calls: the SDK's message is ``to_openai()``'s with the
    same ``include_invalid`` (by default a call not to execute is only under ``invalid_tool_calls``)."""
    text = CASES[name]
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    got, reason = accumulate(chunks, tools=TOOLS, include_invalid=include_invalid)
    want = parse(text, tools=TOOLS)
    assert got == want.to_openai(include_invalid=include_invalid) | ({"content": None} if want.content is None else {})
    assert reason == want.finish_reason(include_invalid=include_invalid)


def test_first_delta_of_a_call_always_carries_function():
    p = StreamParser(tools=TOOLS, include_invalid=True)
    deltas = p.feed(SB + CB + "call_0" + AB) + p.feed('{"city": "Paris"}' + CE + SE) + p.finish()
    first = [t.to_openai() for d in deltas for t in d.tool_calls][0]
    assert first == {"index": 0, "id": "call_0", "type": "function", "function": {"name": ""}}
    named = [t for d in deltas for t in d.tool_calls if t.name]
    assert [t.name for t in named] == ["get_weather"]  # inferred at the end, sent once
    assert json.loads(parse(SB + CB + "call_0" + AB + '{"city": "Paris"}' + CE + SE,
                            tools=TOOLS).tool_calls[0].arguments) == {"city": "Paris"}


def test_unknown_name_is_the_same_in_the_stream_and_in_to_openai():
    text = section(call("call_7", '{"zzz": 1}'))
    got, _ = accumulate([text], tools=TOOLS, include_invalid=True)
    assert got["tool_calls"][0]["function"]["name"] == "" == parse(text, tools=TOOLS).to_openai(
        include_invalid=True)["tool_calls"][0]["function"]["name"]
