"""Our ``templates/<dialect>.jinja`` render, under transformers' sandboxed Jinja environment, exactly
what :func:`kimi_chat.render` renders.

The templates are rendered with ``kimi_chat.reference.oracle.render_template(..., sort_tool_keys=False)``: the
templates of dialects whose official tokenizer sorts tool keys must sort them themselves. For
``kimi-k2.5`` and ``kimi-k2.6`` the caller passes ``tools_ts_str`` as the official tokenizer does. No reference data is
needed (transformers and the templates are always available), so nothing here skips.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, note, strategies as st

from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import RenderError, UnknownDialectError, get_dialect, render, tools_to_typescript
from kimi_chat.reference.oracle import deep_sort_dict, render_template
from kimi_chat.templates import template_dirs, template_path, template_text
from kimi_chat.testing.strategies import ODD_KINDS, odd_requests, requests

ALL = list(DIALECTS)
SORTED = [name for name, d in DIALECTS.items() if d.spec.sort_tool_keys]
UNSORTED = [name for name, d in DIALECTS.items() if not d.spec.sort_tool_keys]
TEMPLATE_ODD_KINDS = tuple(k for k in ODD_KINDS if k != "non-bool option")


def ours(dialect, messages, tools=None, add_generation_prompt=True, ts=True, **options):
    """Our template rendered the way the official tokenizer renders its own (without sorting)."""
    d = get_dialect(dialect)
    kwargs = dict(options)
    if ts and d.spec.tools_typescript and tools:
        kwargs["tools_ts_str"] = tools_to_typescript(tools)
    return render_template(template_text(d), messages, tools=tools, add_generation_prompt=add_generation_prompt,
                           sort_tool_keys=False, **kwargs)


def dumps(tools, dialect):
    return json.dumps(deep_sort_dict(tools), ensure_ascii=False, separators=get_dialect(dialect).spec.tools_separators)


# -- the property -------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ALL)
@given(data=st.data())
def test_template_equals_render(dialect, data):
    # odd-but-real inputs too: render gives the official bytes for them, and so must our templates
    # (options are specified as bools in our templates: a non-bool option is left out here)
    req = data.draw(st.one_of(requests(dialect), odd_requests(dialect, kinds=TEMPLATE_ODD_KINDS)))
    tools = req["tools"]
    if tools and data.draw(st.booleans(), label="tools already sorted"):
        tools = deep_sort_dict(tools)
    note(repr(req))
    args = dict(tools=tools, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    try:
        expected = render(req["messages"], dialect=dialect, **args)
    except ValueError:
        # render refuses this input: the template must not render a prompt for it either
        with pytest.raises(Exception):
            ours(dialect, req["messages"], **args)
        return
    assert ours(dialect, req["messages"], **args) == expected


# -- unit checks --------------------------------------------------------------------------------

UNSORTED_TOOLS = [
    {
        "type": "function",
        "function": {
            "parameters": {
                "type": "object",
                "required": ["city"],
                "properties": {"unit": {"enum": ["c", "f"], "type": "string"}, "city": {"type": "string", "description": "Ville / 城市 🌆"}},
            },
            "name": "get_weather",
            "description": "Get the weather",
        },
    },
    {"function": {"name": "noop", "description": 'quote " backslash \\ tab \t nl \n'}, "type": "function"},
]

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the tool.", "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "noop", "arguments": {"x": [1, 2.5, None]}}},
    ]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18°C, sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "ok"}]},
    {"role": "assistant", "content": "18°C and sunny.", "reasoning_content": "Answer now."},
    {"role": "user", "name": "alice", "content": [{"type": "text", "text": "And this?"},
                                                  {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
]


def test_every_dialect_has_a_template():
    assert template_dirs(), "no templates directory found"
    for name, d in DIALECTS.items():
        path = template_path(name)
        assert path.name == name + ".jinja"
        text = template_text(name)
        head = text[: text.index("-#}")]
        assert text.startswith("{#-") and "kimi_chat" in head and name in head
        assert d.oracle.rsplit("/", 1)[-1] in head, "the header comment says where the official template lives"
    for alias in ("kimi-k2-instruct", "kimi-k2-thinking"):
        assert template_path(alias) == template_path(get_dialect(alias).name)
    with pytest.raises(UnknownDialectError):
        template_path("kimi-k9")


def test_template_copies_are_identical():
    # the repository's templates/ and the packaged copy (when present) hold the same text
    for d in template_dirs():
        for name in DIALECTS:
            assert (d / (name + ".jinja")).read_text(encoding="utf-8") == template_text(name)


@pytest.mark.parametrize("dialect", ALL)
def test_no_constructs_that_break_sandboxes_or_llama_cpp(dialect):
    code = re.sub(r"\{#.*?#\}", "", template_text(dialect), flags=re.S)  # comments may name them
    for bad in (".append(", ".update(", ".items(", ".pop(", ".extend(", ".insert("):
        assert bad not in code, bad
    statements = set(re.findall(r"\{%-?\s*(\w+)", code))
    assert statements <= {"if", "elif", "else", "endif", "for", "endfor", "set", "macro", "endmacro"}, statements


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("agp", [True, False])
def test_realistic_conversation(dialect, agp):
    choices = ({}, {"thinking": False}, {"preserve_thinking": True}, {"thinking": False, "preserve_thinking": True})
    for options in (o for o in choices if set(o) <= set(DIALECTS[dialect].options)):
        expected = render(CONVERSATION, tools=UNSORTED_TOOLS, dialect=dialect, add_generation_prompt=agp, **options)
        assert ours(dialect, CONVERSATION, UNSORTED_TOOLS, agp, **options) == expected


# a tool the official TypeScript encoder rejects (a $ref it cannot resolve): K2.5/K2.6 then declare JSON
TS_REJECTED = {"type": "function", "function": {"name": "bad", "parameters": {
    "type": "object", "properties": {"x": {"$ref": "#/definitions/X"}}}}}


def json_fallback(tools, dialect):
    """``tools``, plus for K2.5/K2.6 a tool that sends the template to its JSON declaration."""
    return tools + [TS_REJECTED] if get_dialect(dialect).spec.tools_typescript else tools


@pytest.mark.parametrize("dialect", SORTED)
def test_unsorted_tools_are_sorted(dialect):
    msgs = [{"role": "user", "content": "hi"}]
    assert json.dumps(UNSORTED_TOOLS, ensure_ascii=False) != json.dumps(deep_sort_dict(UNSORTED_TOOLS), ensure_ascii=False)
    tools = json_fallback(UNSORTED_TOOLS, dialect)
    out = ours(dialect, msgs, tools, ts=False)  # K2.5 without tools_ts_str: the JSON fallback
    assert dumps(tools, dialect) in out
    if not get_dialect(dialect).spec.tools_typescript:
        assert out == render(msgs, tools=UNSORTED_TOOLS, dialect=dialect)
    else:  # the TypeScript declaration, computed by the template itself
        assert ours(dialect, msgs, UNSORTED_TOOLS, ts=False) == ours(dialect, msgs, UNSORTED_TOOLS)
    # already-sorted tools render the same bytes
    assert ours(dialect, msgs, deep_sort_dict(tools), ts=False) == out


@pytest.mark.parametrize("dialect", UNSORTED)
def test_unsorted_dialects_keep_tool_key_order(dialect):
    msgs = [{"role": "user", "content": "hi"}]
    out = ours(dialect, msgs, UNSORTED_TOOLS)
    assert json.dumps(UNSORTED_TOOLS, ensure_ascii=False) in out
    assert out == render(msgs, tools=UNSORTED_TOOLS, dialect=dialect)


@pytest.mark.parametrize("dialect", SORTED)
def test_sorted_json_matches_json_dumps_byte_for_byte(dialect):
    # scalars, escapes and containers the in-template serialiser must write exactly as json.dumps
    params = {
        "z": [1e-07, 1.5, -0.0, 1e16, 123456789012345678901234567890, True, False, None, 0],
        "é": "\u2028 \x00 \x1f \x7f 🦄 \"q\" \\ </script> &<>'",
        "Z": {}, "a": [], "_": [{"b": 1, "a": {"d": [], "c": "x"}}, [[{}]]],
        "tuple": ("keep", {"y": 1, "x": 2}),
        "中": {"B": 1, "a": 2, "A": 3, "b": 4, "": 5, " ": 6},
    }
    tools = json_fallback([{"type": "function", "function": {"name": "f", "parameters": params}}], dialect)
    msgs = [{"role": "user", "content": "hi"}]
    out = ours(dialect, msgs, tools, ts=False)
    declared = out.split("<|im_middle|>", 1)[1].split("<|im_end|>", 1)[0]
    assert declared == get_dialect(dialect).spec.tools_prefix + dumps(tools, dialect)
    if not get_dialect(dialect).spec.tools_typescript:
        assert out == render(msgs, tools=tools, dialect=dialect)


@pytest.mark.parametrize("dialect", ["kimi-k2.5", "kimi-k2.6"])
def test_k25_tools_ts_str_is_used_when_given(dialect):
    msgs = [{"role": "user", "content": "hi"}]
    ts = tools_to_typescript(UNSORTED_TOOLS)
    assert ts
    assert ours(dialect, msgs, UNSORTED_TOOLS).startswith("<|im_system|>tool_declare<|im_middle|>" + ts + "<|im_end|>")
    assert ours(dialect, msgs, UNSORTED_TOOLS) == render(msgs, tools=UNSORTED_TOOLS, dialect=dialect)


@pytest.mark.parametrize("dialect", [n for n, d in DIALECTS.items() if d.spec.tool_calls and d.spec.tool_call_ids == "given"])
def test_tool_call_without_id_is_written_empty_like_render(dialect):
    # official parity: the official templates write an empty id (no raise_exception in ours any more)
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]
    expected = render(msgs, dialect=dialect)
    assert "<|tool_call_begin|><|tool_call_argument_begin|>{}<|tool_call_end|>" in expected
    assert ours(dialect, msgs) == expected
    assert "raise_exception" not in template_text(get_dialect(dialect))


def test_rev2_regenerates_ids_so_a_missing_id_is_fine():
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "r"}]
    out = ours("kimi-k2-instruct@rev2", msgs)
    assert out == render(msgs, dialect="kimi-k2-instruct@rev2")
    assert '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"{}"' in out
    assert "## Return of functions.f:0\\nr<|im_end|>" in out


def test_k3_has_no_jinja_template_and_says_so():
    with pytest.raises(FileNotFoundError, match="'kimi-k3' has no Jinja chat template"):
        template_path("kimi-k3")
