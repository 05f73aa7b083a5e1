"""Kimi-K3 rendering of input the official encoder cannot encode: arguments or schemas
nested past Python's recursion limit, integers of more digits than ``int_max_str_digits``. The official
``encoding_k3`` raises there too (``json.dumps`` / ``json.loads`` / ``str``); kimi_chat raises a
RenderError (or InvalidToolsError) naming the message and field, on every render path."""

from __future__ import annotations

import sys

import pytest

from kimi_chat import render
from kimi_chat.errors import RenderError
from kimi_chat.messages import InvalidToolsError
from kimi_chat.reference import reference_file
from kimi_chat.prompt import render_segments

K3 = "kimi-k3"
DEPTH = sys.getrecursionlimit()  # json.dumps / json.loads of this many levels raise RecursionError
BIG = 10 ** (sys.get_int_max_str_digits() + 10) if hasattr(sys, "get_int_max_str_digits") else None


def _nested(n: int) -> list:
    v: list = []
    for _ in range(n - 1):
        v = [v]
    return v


def _schema(n: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(n):
        s = {"type": "object", "properties": {"a": s}}
    return s


def _call(arguments) -> list[dict]:
    return [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}]


CASES = [
    ("deep arguments", _call({"x": _nested(DEPTH)}), None, RenderError,
     r"messages\[1\]\.tool_calls\[0\]\.function\.arguments\.x: nested \d+ levels deep"),
    ("deep arguments text", _call('{"x": ' + "[" * DEPTH + "]" * DEPTH + "}"), None, RenderError,
     r"messages\[1\]\.tool_calls\[0\]\.function\.arguments: JSON nested too deeply"),
    ("deep schema", [{"role": "user", "content": "hi"}],
     [{"type": "function", "function": {"name": "f", "parameters": _schema(DEPTH)}}], InvalidToolsError,
     r"tools\[0\]\.function\.parameters.*nested \d+ levels deep"),
]
if BIG is not None:
    CASES += [
        ("huge integer argument", _call({"x": BIG}), None, RenderError,
         r"messages\[1\]\.tool_calls\[0\]\.function\.arguments\.x: not JSON-serialisable"),
        ("huge integer in argument text", _call('{"x": ' + "1" * (sys.get_int_max_str_digits() + 1) + "}"), None,
         RenderError, r"messages\[1\]\.tool_calls\[0\]\.function\.arguments: JSON the K3 encoder cannot read"),
    ]


def _deep_dict(n: int) -> dict:
    v: dict = {}
    for _ in range(n):
        v = {"a": v}
    return v


def _schema_format(schema) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


@pytest.mark.parametrize("schema, match", [
    (_deep_dict(DEPTH), r"^response_schema: nested \d+ levels deep"),
    *([({"default": BIG}, r"^response_schema: not JSON-serialisable")] if BIG is not None else []),
])
def test_k3_unencodable_response_schema_names_the_field(schema, match):
    with pytest.raises(RenderError, match=match):
        render([{"role": "user", "content": "hi"}], dialect=K3, response_format=_schema_format(schema))


def _paths():
    yield "render", lambda m, t: render(m, tools=t, dialect=K3)
    yield "strict", lambda m, t: render(m, tools=t, dialect=K3, strict=True)
    yield "segments", lambda m, t: render_segments(m, tools=t, dialect=K3)
    if reference_file("tokenizer/tiktoken.model") is not None:
        from kimi_chat.tokens.tokenizer import KimiTokenizer
        from kimi_chat.tokens.rendered import render_tokens

        tok = KimiTokenizer.from_reference("k3")
        yield "tokens", lambda m, t: render_tokens(m, tokenizer=tok, tools=t, dialect=K3)


PATHS = list(_paths())


@pytest.mark.parametrize("path, run", PATHS, ids=[p for p, _ in PATHS])
@pytest.mark.parametrize("case, messages, tools, error, match", CASES, ids=[c[0] for c in CASES])
def test_k3_unencodable_input_is_a_kimi_chat_error(path, run, case, messages, tools, error, match):
    with pytest.raises(error, match=match):
        run(messages, tools)
