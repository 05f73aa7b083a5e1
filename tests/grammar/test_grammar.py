"""kimi_chat.grammar without an engine: the GBNF it writes is checked with a small GBNF recognizer
(tests/gbnf_recognizer.py; special-token references match their spelling), against outputs our renderer writes and
against outputs the parser would misread. The same grammars run in llama.cpp in test_native.py."""

from __future__ import annotations

import json

import pytest

import kimi_chat

from kimi_chat import markers as M
from kimi_chat.grammar import (
    GrammarError,
    default_token_markers,
    forbidden_text,
    tool_call_grammar,
)
from kimi_chat.output import parse

from gbnf_recognizer import Gbnf, accepts

SB, SE = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
CB, AB, CE = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 1},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
                "exact": {"type": "boolean"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
            "required": ["query", "exact"],
        },
    },
}
TOOLS = [WEATHER, SEARCH]


def call(name: str, index: int, args: dict | str) -> str:
    a = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f"{CB}functions.{name}:{index}{AB}{a}{CE}"


def section(*calls: str) -> str:
    return SB + "".join(calls) + SE


def test_required_accepts_well_formed_calls_and_the_parser_agrees():
    g = tool_call_grammar(TOOLS, tool_choice="required")
    outs = [
        section(call("get_weather", 0, {"city": "Paris"})),
        section(call("get_weather", 0, {"city": "Paris", "unit": "c", "days": 3})),
        section(call("get_weather", 0, {"city": "Oslo", "days": 10})),
        section(call("search", 0, {"query": "kimi <b>", "exact": False, "limit": None})),
        section(call("search", 0, {"query": "", "tags": ["a", "bb"], "exact": True, "limit": 7}),
                call("get_weather", 1, {"city": "x"})),
        section(call("get_weather", 0, '{"city":"Rome"}')),  # compact separators
    ]
    for out in outs:
        assert accepts(g, out), out
        msg = parse(out, tools=TOOLS)
        assert msg.tool_calls and all(c.status.value == "ok" for c in msg.tool_calls)


@pytest.mark.parametrize(
    "out, why",
    [
        ("Sure.", "no call"),
        ("", "no call"),
        (section(), "empty section"),
        ("I will call it. " + section(call("get_weather", 0, {"city": "Paris"})), "content before the calls"),
        (section(call("get_weather", 1, {"city": "Paris"})), "first index is 0"),
        (section(call("get_weather", 0, {"city": "Paris"}), call("search", 0, {"query": "q", "exact": True})),
         "indices count up"),
        (section(call("nope", 0, {})), "unknown tool"),
        (section(call("get_weather", 0, {})), "missing required property"),
        (section(call("get_weather", 0, {"city": "Paris", "unit": "k"})), "not in the enum"),
        (section(call("get_weather", 0, {"city": "a much too long city"})), "maxLength"),
        (section(call("get_weather", 0, {"city": "Paris", "days": -1})), "minimum 0 drops the sign"),
        (section(call("get_weather", 0, {"city": "Paris", "days": 1.5})), "integer"),
        (section(call("get_weather", 0, {"unit": "c", "city": "Paris"})), "declaration order"),
        (section(call("get_weather", 0, {"city": "Paris", "extra": 1})), "undeclared property"),
        (section(call("search", 0, {"query": "q", "exact": True, "tags": ["a", "b", "c", "d"]})), "maxItems"),
        (section(call("get_weather", 0, {"city": "a<|im_end|>"})), "marker spelled in a bounded string"),
        (section(call("search", 0, {"query": "x<|im_end|>", "exact": True})), "marker spelled in a string"),
        (section(call("search", 0, {"query": "x[EOS]", "exact": True})), "[EOS] spelled in a string"),
        (section(call("get_weather", 0, {"city": "Paris"})) + "done", "text after the section"),
        (section(call("get_weather", 0, {"city": "Paris"})) + M.IM_END.text, "end marker (the engine adds it)"),
    ],
)
def test_required_rejects(out, why):
    g = tool_call_grammar(TOOLS, tool_choice="required")
    assert not accepts(g, out), why


def test_auto_allows_content_then_at_most_one_section():
    g = tool_call_grammar(TOOLS, tool_choice="auto")
    assert accepts(g, "")
    assert accepts(g, "Hello there, 2 < 3 and [x] is fine.\n")
    assert accepts(g, "Let me check." + section(call("get_weather", 0, {"city": "Paris"})))
    assert not accepts(g, "a" + section(call("get_weather", 0, {"city": "P"})) + section(call("get_weather", 1, {"city": "Q"})))
    for bad in ("<|im_end|>", "[EOS]", "x<|tool_call_begin|>", "<|reserved_token_163700|>", "<|im_user|>"):
        assert not accepts(g, "text " + bad), bad
    # <think> is literal text for an Instruct dialect, a marker for a Thinking one
    assert accepts(g, "<think>")
    assert not accepts(tool_call_grammar(TOOLS, dialect="kimi-k2-thinking"), "a <think>")


def test_named_and_single_call():
    named = tool_call_grammar(TOOLS, tool_choice={"type": "function", "function": {"name": "search"}})
    assert accepts(named, section(call("search", 0, {"query": "q", "exact": True})))
    assert not accepts(named, section(call("get_weather", 0, {"city": "Paris"})))
    single = tool_call_grammar(TOOLS, tool_choice="required", parallel_tool_calls=False)
    one = call("get_weather", 0, {"city": "Paris"})
    assert accepts(single, section(one))
    assert not accepts(single, section(one, call("get_weather", 1, {"city": "Rome"})))
    capped = tool_call_grammar(TOOLS, tool_choice="required", max_calls=2)
    three = [call("get_weather", i, {"city": "P"}) for i in range(3)]
    assert accepts(capped, section(*three[:2]))
    assert not accepts(capped, section(*three))
    shifted = tool_call_grammar(TOOLS, tool_choice="required", first_index=5)
    assert accepts(shifted, section(call("get_weather", 5, {"city": "P"}), call("get_weather", 6, {"city": "Q"})))


def test_none_is_content_without_markers():
    g = tool_call_grammar(TOOLS, tool_choice="none")
    assert accepts(g, "Just text.")
    assert not accepts(g, section(call("get_weather", 0, {"city": "Paris"})))
    assert tool_call_grammar(None) == tool_call_grammar([], tool_choice="none")


def test_reasoning_dialects():
    g = tool_call_grammar(TOOLS, tool_choice="required", dialect="kimi-k2-thinking")
    body = section(call("get_weather", 0, {"city": "Paris"}))
    assert accepts(g, body)
    assert accepts(g, "<think>Let me think.</think>" + body)
    assert not accepts(g, "<think>a <think> b</think>" + body)
    no_think = tool_call_grammar(TOOLS, tool_choice="required", dialect="kimi-k2-thinking", reasoning=False)
    assert not accepts(no_think, "<think>x</think>" + body)
    # K2.5 with thinking on: the prompt opened <think>, so the output starts inside reasoning
    k25 = tool_call_grammar(TOOLS, tool_choice="required", dialect="kimi-k2.5")
    assert accepts(k25, "plan</think>" + body)
    assert not accepts(k25, body)
    k25_off = tool_call_grammar(TOOLS, tool_choice="required", dialect="kimi-k2.5", thinking=False)
    assert accepts(k25_off, body)


def test_token_references():
    g = tool_call_grammar(TOOLS, tool_choice="required")
    assert "<|tool_calls_section_begin|>" in g and '"<|tool_calls_section_begin|>"' not in g
    literal = tool_call_grammar(TOOLS, tool_choice="required", token_markers=())
    assert '"<|tool_call_begin|>"' in literal
    assert M.THINK_BEGIN.text in default_token_markers("kimi-k2-thinking")  # 163606 in its vocabulary
    assert M.THINK_BEGIN.text not in default_token_markers("kimi-k2-instruct-0905")  # plain text there
    assert M.THINK_BEGIN.text in default_token_markers("kimi-k2.5")
    g25 = tool_call_grammar(TOOLS, dialect="kimi-k2.5")
    assert "</think>" in g25 and '"</think>"' not in g25


def test_end_of_turn_is_never_in_the_grammar():
    for choice in ("none", "auto", "required"):
        g = tool_call_grammar(TOOLS, tool_choice=choice)
        assert M.IM_END.text not in g.replace("\\x", "")
        assert "[EOS]" not in g


def test_errors():
    with pytest.raises(GrammarError, match="not a declared function tool"):
        tool_call_grammar(TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(GrammarError, match="needs at least one"):
        tool_call_grammar([], tool_choice="required")
    with pytest.raises(GrammarError, match="tool_choice"):
        tool_call_grammar(TOOLS, tool_choice="sometimes")
    with pytest.raises(GrammarError, match=r"tools\[1\]: duplicate function name 'get_weather' \(also tools\[0\]\)"):
        tool_call_grammar([WEATHER, WEATHER])
    with pytest.raises(GrammarError, match=r"tools\['f'\].parameters/properties/a: a false schema"):
        tool_call_grammar([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": False}, "required": ["a"]}}}])


def test_forbidden_text_comes_from_the_format():
    f = forbidden_text()
    for m in (M.IM_END, M.EOS, M.IM_USER, M.TOOL_CALL_BEGIN, M.MEDIA_START):
        assert m.text in f
    assert M.THINK_BEGIN.text not in f
    assert M.THINK_BEGIN.text in forbidden_text("kimi-k2-thinking")
    assert "<|reserved_token_" in f


def test_every_rule_is_defined_and_reachable():
    for kwargs in ({}, {"tool_choice": "required"}, {"dialect": "kimi-k2.5"}, {"tool_choice": "none"}):
        g = tool_call_grammar(TOOLS, **kwargs)
        names = [line.split(" ::= ")[0] for line in g.splitlines()]
        assert names[0] == "root" and len(names) == len(set(names))
        Gbnf(g)  # raises on an undefined rule


# --------------------------------------------------------------------------------------------------
# kimi_chat.grammar.gbnf: the primitives on their own


def test_gbnf_literal_and_class_escaping():
    from kimi_chat.grammar.gbnf import char_class, literal

    for s in ['plain', 'q"uote\\back', "tab\tnl\ncr\r", "é中🦄", "\x00\x7f", "[^]-"]:
        lit = literal(s)
        assert accepts(f"root ::= {lit}\n", s), s
        assert not accepts(f"root ::= {lit}\n", s + "x"), s
    cls = char_class(["]", "^", "-", "\\", "a"], negate=True)
    g = f"root ::= {cls}*\n"
    assert accepts(g, "bcd") and not accepts(g, "b-") and not accepts(g, "]") and not accepts(g, "a")


def test_gbnf_alternation_optional_and_rules():
    from kimi_chat.grammar.gbnf import Rules, alternation, optional

    assert alternation(['"a"']) == '"a"'
    assert alternation(['"a"', '"b"', '"a"', ""]) == '("a" | "b" | "")'
    assert optional("") == "" and optional("x") == "x?" and optional('"a" "b"') == '("a" "b")?'
    r = Rules()
    assert [r.fresh("n"), r.fresh("n"), r.fresh("n")] == ["n", "n-2", "n-3"]
    r.set("n", 'n-2 "x"')
    r.set("n-2", '"<" [a-z] "n-3"')  # n-3 inside a literal is not a reference
    r.set("n-3", '"unreached"')
    assert r.pruned("n") == 'n ::= n-2 "x"\nn-2 ::= "<" [a-z] "n-3"\n'


def test_gbnf_avoiding_given_strings():
    from kimi_chat.grammar.gbnf import Rules, avoiding

    r = Rules()
    r.fresh("root")
    r.set("root", avoiding(r, ["<|x|>", "ab"], "t", json_string=False))
    g = r.text()
    for ok in ["", "a", "b a", "<|x", "|x|>", "<||x|>", "aac"]:
        assert accepts(g, ok), ok
    for bad in ["ab", "xxab", "<|x|>", "a<|x|>b", "<<|x|>", "\x00"]:
        assert not accepts(g, bad), bad
    empty = Rules()
    empty.fresh("root")
    empty.set("root", avoiding(empty, [], "t", json_string=False))
    assert accepts(empty.text(), "anything <|x|>")


def test_one_tools_rule_for_grammar_and_parse():
    """grammar and parse read ``tools`` through the same normaliser: the same tools are refused by
    both, with the same message (parse used to keep the second of two ``f``)."""
    tools = [WEATHER, {"type": "function", "function": {"name": "other"}}, WEATHER]
    with pytest.raises(GrammarError) as g:
        tool_call_grammar(tools)
    with pytest.raises(ValueError) as p:
        kimi_chat.parse("hi", tools=tools)
    assert str(g.value) == "tools[2]: duplicate function name 'get_weather' (also tools[0])"
    # parse's error is render's class (InvalidToolsError), naming the field too: the same problem
    assert str(p.value).endswith("tools[2].function.name: duplicate function name 'get_weather' (also tools[0])")
