"""Kimi-K3 cases for the adapter tests and the differential run: completions rendered by kimi_chat's
``kimi-k3`` renderer (an assistant turn written the way ``encoding_k3`` writes history, which is what a
model's output mirrors), plus the edge cases of the K3 output format, with expectations written from the format.

Token ids come from :func:`kimi_chat.tokens.rendered.render_tokens` with the K3 tokenizer: marker text typed
inside a value is ordinary tokens there, as the model would spell it. No framework is imported here.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from kimi_chat import markers as M
from kimi_chat.output import parse
from kimi_chat.tokens.tokenizer import KimiTokenizer
from kimi_chat.tokens.rendered import render_tokens

O, C, S, EOM = M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text


def tag(name: str, attrs: str = "") -> str:
    return f"{O}{name}{' ' + attrs if attrs else ''}{S}"


def close(name: str) -> str:
    return f"{C}{name}{S}"


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "number"}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Web search",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
]
USER = ({"role": "user", "content": "What's the weather in Zürich? Also search for kimi."},)
BIG = "x" * 12000 + " " + "日本" * 2000
MARKER_VALUE = f"a{close('argument')}b"
"""A string value that spells the argument closer (a user typed it; the model echoes it)."""

CALL_SEARCH, CALL_WEATHER = tag("call", 'tool="search" index="1"'), tag("call", 'tool="get_weather" index="1"')
ARG_QUERY, ARG_CITY = tag("argument", 'key="query" type="string"'), tag("argument", 'key="city" type="string"')

Expect = tuple  # (content, reasoning, [(id, name, arguments), ...])


def _call(i: int, name: str, args: Any) -> dict:
    return {"id": f"functions.{name}:{i}", "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}}


@dataclass(frozen=True)
class K3Case:
    name: str
    expect: Expect
    assistant: tuple = ()
    """The assistant message (as ``((key, value), ...)``) whose rendering is the output; or empty."""
    text: str = ""
    """The output text, when not rendered from :attr:`assistant`."""
    stop: bool = True
    """The output ended with ``<|end_of_msg|>`` (the stop token); else it was cut (max_tokens)."""
    messages: tuple = USER
    thinking: bool = True
    text_only_expect: Expect | None = None
    """What the format allows from the text alone when it differs from :attr:`expect` (ids needed)."""
    needs_ids: bool = False
    """Only token ids tell the format's reading (a typed marker in a value)."""
    why: str = ""

    @property
    def options(self) -> dict:
        return {} if self.thinking else {"thinking": False}


def _msg(reasoning: str | None, content: str, calls: list | None = None) -> tuple:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = calls
    return tuple(m.items())


MULTI_TURN = USER + (
    dict(_msg("I should call the tool.", "", [_call(0, "get_weather", {"city": "Zürich"})])),
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C and sunny"},
)

K3_CASES: list[K3Case] = [
    K3Case("reasoning_content_calls",
           ("Let me check.", "Two things to do.",
            [("functions.get_weather:0", "get_weather", '{"city":"Zürich","days":3}'),
             ("functions.search:1", "search", '{"query":"kimi"}')]),
           assistant=_msg("Two things to do.", "Let me check.",
                          [_call(0, "get_weather", {"city": "Zürich", "days": 3}), _call(1, "search", {"query": "kimi"})])),
    K3Case("content_only", ("Hello! How can I help?", "A greeting.", []),
           assistant=_msg("A greeting.", "Hello! How can I help?")),
    K3Case("calls_without_content", (None, "Just call.", [("functions.search:0", "search", '{"query":"kimi"}')]),
           assistant=_msg("Just call.", "", [_call(0, "search", {"query": "kimi"})])),
    K3Case("big_string_argument", (None, "Big.", [("functions.search:0", "search", json.dumps({"query": BIG}, ensure_ascii=False, separators=(",", ":")))]),
           assistant=_msg("Big.", "", [_call(0, "search", {"query": BIG})])),
    K3Case("json_element", (None, "Cut arguments.", [("functions.get_weather:0", "get_weather", '{"city": "Paris"')]),
           assistant=_msg("Cut arguments.", "", [_call(0, "get_weather", '{"city": "Paris"')]),
           why="arguments that are not a JSON object are written as one json element (encoding_k3 _xtml_json_block)"),
    K3Case("string_value_spells_the_closer",
           (None, "Echo.", [("functions.search:0", "search", json.dumps({"query": MARKER_VALUE}, separators=(",", ":")))]),
           assistant=_msg("Echo.", "", [_call(0, "search", {"query": MARKER_VALUE})]), needs_ids=True,
           text_only_expect=(None, "Echo.", [("functions.search:0", "search", '{"query":"a"}')]),
           why="the value's <|close|>argument<|sep|> is ordinary tokens: only the ids tell it from the closer"),
    K3Case("truncated_reasoning", (None, "Still thinking about", []), text="Still thinking about", stop=False,
           why="cut inside the think channel: reasoning, not content"),
    K3Case("think_skipped_response_opened", ("Direct answer.", None, []),
           text=f"{tag('response')}Direct answer.{close('response')}{close('message')}",
           why="the model opened the response channel without closing think (recovery think_unclosed)"),
    K3Case("think_skipped_tools_opened", (None, None, [("functions.search:0", "search", '{"query":"kimi"}')]),
           text=f"{tag('tools')}{CALL_SEARCH}{ARG_QUERY}kimi"
                f"{close('argument')}{close('call')}{close('tools')}{close('message')}",
           why="tools channel straight from the think channel (no response channel)"),
    K3Case("truncated_in_call",
           ("Checking.", "Weather.", [("functions.get_weather:0", "get_weather", '{"city":"Zür')]),
           text=f"Weather.{close('think')}{tag('response')}Checking.{close('response')}{tag('tools')}"
                f"{CALL_WEATHER}{ARG_CITY}Zür",
           stop=False),
    K3Case("truncated_in_response", ("Partial ans", "Short.", []),
           text=f"Short.{close('think')}{tag('response')}Partial ans", stop=False),
    K3Case("bare_response_close_in_think", (None, "Hi there.", []),
           text=f"Hi there.{close('response')}{close('message')}",
           why="debatable: the model wrote its reply with no think close and no response open. The grammar "
               "keeps the text in the think channel, as streamed (the response close ends it, warned "
               "reply_in_think); SGLang's built-in guesses it was the response"),
    K3Case("thinking_off", ("Plain answer.", None, []), text=f"Plain answer.{close('response')}{close('message')}",
           thinking=False),
    K3Case("thinking_off_with_call", ("Sure.", None, [("functions.get_weather:0", "get_weather", '{"city":"Zürich"}')]),
           text=f"Sure.{close('response')}{tag('tools')}{CALL_WEATHER}"
                f"{ARG_CITY}Zürich{close('argument')}{close('call')}"
                f"{close('tools')}{close('message')}",
           thinking=False),
    K3Case("multi_turn_think_history", ("It is 18°C and sunny.", "The tool says 18C.", []),
           assistant=_msg("The tool says 18C.", "It is 18°C and sunny."), messages=MULTI_TURN,
           why="the history holds <|close|>think<|sep|>: this turn's reasoning is still reasoning"),
    K3Case("unicode_and_attribute_escapes",
           ("東京?", "😀 é", [("functions.search:0", "search", '{"query":"say \\"hi\\" & bye"}')]),
           assistant=_msg("😀 é", "東京?", [_call(0, "search", {"query": 'say "hi" & bye'})])),
]


@functools.lru_cache(maxsize=None)
def k3_tokenizer() -> KimiTokenizer:
    return KimiTokenizer.from_reference("k3")


def prompt_ids(case: K3Case) -> list[int]:
    r = render_tokens(list(case.messages), tokenizer=k3_tokenizer(), tools=TOOLS, dialect="kimi-k3", **case.options)
    return list(r.ids)


_RENDERED: dict[str, tuple[str, tuple[int, ...]]] = {}


def _rendered(case: K3Case) -> tuple[str, tuple[int, ...]]:
    """(text, ids) of the output, without the stop token (cached per case name)."""
    if case.name not in _RENDERED:
        _RENDERED[case.name] = _render(case)
    return _RENDERED[case.name]


def _render(case: K3Case) -> tuple[str, tuple[int, ...]]:
    tok = k3_tokenizer()
    if not case.assistant:
        return case.text, tuple(tok.encode(case.text))
    full = render_tokens(list(case.messages) + [dict(case.assistant)], tokenizer=tok, tools=TOOLS, dialect="kimi-k3",
                         add_generation_prompt=False, **case.options)
    prompt = prompt_ids(case)
    ids = list(full.ids)
    if ids[:len(prompt)] != prompt:
        raise AssertionError(f"{case.name}: the rendered assistant turn does not extend the prompt")
    out = ids[len(prompt):]
    if out[-1:] == [M.K3_END_OF_MSG.id]:
        out = out[:-1]
    return tok.decode(out), tuple(out)


def output_text(case: K3Case) -> str:
    return _rendered(case)[0]


def output_ids(case: K3Case) -> list[int]:
    """The generated ids, the stop token ``<|end_of_msg|>`` included when the output stopped."""
    ids = list(_rendered(case)[1])
    return ids + [M.K3_END_OF_MSG.id] if case.stop else ids


def parsed(case: K3Case, text: str | None = None) -> Expect:
    """kimi_chat.parse of the output text (what the text alone says)."""
    t = output_text(case) if text is None else text
    msg = parse(t + (EOM if case.stop else ""), dialect="kimi-k3", tools=TOOLS, **case.options)
    return msg.content, msg.reasoning_content, [(c.id, c.name, c.arguments) for c in msg.tool_calls]
