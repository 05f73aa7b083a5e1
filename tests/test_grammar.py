"""kimi_chat.grammar without an engine: the GBNF it writes is checked with a small GBNF recognizer
(below; special-token references match their spelling), against outputs our renderer writes and
against outputs the parser would misread. The same grammars run in llama.cpp in test_native.py."""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache

import pytest

from kimi_chat import markers as M
from kimi_chat.grammar import (
    GrammarError,
    default_token_markers,
    forbidden_text,
    json_schema_to_gbnf,
    tool_call_grammar,
)
from kimi_chat.parse import parse

# --------------------------------------------------------------------------------------------------
# A small GBNF recognizer (the subset kimi_chat.grammar writes, which is llama.cpp's syntax)


def _parse_char(s: str, i: int) -> tuple[str, int]:
    if s[i] == "\\":
        c = s[i + 1]
        if c == "x":
            return chr(int(s[i + 2 : i + 4], 16)), i + 4
        if c == "u":
            return chr(int(s[i + 2 : i + 6], 16)), i + 6
        if c == "U":
            return chr(int(s[i + 2 : i + 10], 16)), i + 10
        return {"n": "\n", "r": "\r", "t": "\t"}.get(c, c), i + 2
    return s[i], i + 1


class Gbnf:
    def __init__(self, text: str) -> None:
        self.rules: dict[str, object] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            name, body = line.split(" ::= ", 1)
            node, i = self._alt(body, 0)
            assert i == len(body), (line, i)
            self.rules[name] = node
        for name in self.rules:
            self._check_refs(self.rules[name])

    def _check_refs(self, node: object) -> None:
        kind = node[0]  # type: ignore[index]
        if kind == "ref":
            assert node[1] in self.rules, f"undefined rule {node[1]}"  # type: ignore[index]
        elif kind in ("alt", "seq"):
            for k in node[1]:  # type: ignore[index]
                self._check_refs(k)
        elif kind == "rep":
            self._check_refs(node[1])  # type: ignore[index]

    def _ws(self, s: str, i: int) -> int:
        while i < len(s) and s[i] == " ":
            i += 1
        return i

    def _alt(self, s: str, i: int) -> tuple[object, int]:
        alts = []
        seq, i = self._seq(s, i)
        alts.append(seq)
        while i < len(s) and s[i] == "|":
            seq, i = self._seq(s, self._ws(s, i + 1))
            alts.append(seq)
        return ("alt", tuple(alts)), i

    def _seq(self, s: str, i: int) -> tuple[object, int]:
        items = []
        while i < len(s) and s[i] not in "|)":
            item, i = self._atom(s, i)
            # suffixes
            if i < len(s) and s[i] in "?*+":
                lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[s[i]]
                item = ("rep", item, lo, hi)
                i += 1
            elif i < len(s) and s[i] == "{":
                j = s.index("}", i)
                spec = s[i + 1 : j]
                if "," in spec:
                    a, b = spec.split(",")
                    item = ("rep", item, int(a), int(b) if b else None)
                else:
                    item = ("rep", item, int(spec), int(spec))
                i = j + 1
            items.append(item)
            i = self._ws(s, i)
        return ("seq", tuple(items)), i

    def _atom(self, s: str, i: int) -> tuple[object, int]:
        c = s[i]
        if c == '"':
            i += 1
            out = []
            while s[i] != '"':
                ch, i = _parse_char(s, i)
                out.append(ch)
            return ("lit", "".join(out)), i + 1
        if c == "[":
            i += 1
            neg = s[i] == "^"
            if neg:
                i += 1
            ranges = []
            while s[i] != "]":
                a, i = _parse_char(s, i)
                b = a
                if s[i] == "-" and s[i + 1] != "]":
                    b, i = _parse_char(s, i + 1)
                ranges.append((a, b))
            return ("cls", neg, tuple(ranges)), i + 1
        if c == "<":
            j = s.index(">", i)
            tok = s[i : j + 1]
            if tok.startswith("<["):
                tok = M.BY_ID[int(tok[2:-2])].text
            return ("tok", tok), j + 1
        if c == "(":
            node, i = self._alt(s, self._ws(s, i + 1))
            assert s[i] == ")"
            return node, i + 1
        m = re.compile(r"[a-zA-Z0-9-]+").match(s, i)
        assert m, s[i:]
        return ("ref", m.group()), m.end()

    def matches(self, text: str, root: str = "root") -> bool:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
        memo: dict[tuple[int, int], frozenset[int]] = {}

        def m(node, pos: int) -> frozenset[int]:
            key = (id(node), pos)
            if key in memo:
                return memo[key]
            kind = node[0]
            if kind == "lit" or kind == "tok":
                r = frozenset([pos + len(node[1])]) if text.startswith(node[1], pos) else frozenset()
            elif kind == "cls":
                if pos < len(text):
                    ch = text[pos]
                    inside = any(a <= ch <= b for a, b in node[2])
                    r = frozenset([pos + 1]) if inside != node[1] else frozenset()
                else:
                    r = frozenset()
            elif kind == "ref":
                r = m(self.rules[node[1]], pos)
            elif kind == "alt":
                r = frozenset().union(*(m(a, pos) for a in node[1]))
            elif kind == "seq":
                cur = frozenset([pos])
                for it in node[1]:
                    cur = frozenset().union(*(m(it, p) for p in cur)) if cur else cur
                r = cur
            else:  # rep
                _, inner, lo, hi = node
                cur, out, n = frozenset([pos]), set(), 0
                if lo == 0:
                    out.add(pos)
                while cur and (hi is None or n < hi):
                    cur = frozenset().union(*(m(inner, p) for p in cur)) - ({pos} if hi is None else set())
                    n += 1
                    if n >= lo:
                        out |= cur
                    if hi is None and n > len(text) + 1:
                        break
                r = frozenset(out)
            memo[key] = r
            return r

        return len(text) in m(("ref", root), 0)


@lru_cache(maxsize=None)
def compiled(text: str) -> Gbnf:
    return Gbnf(text)


def accepts(grammar: str, text: str) -> bool:
    return compiled(grammar).matches(text)


# --------------------------------------------------------------------------------------------------

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
    assert M.THINK_BEGIN.text not in default_token_markers("kimi-k2-thinking")
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
    with pytest.raises(GrammarError, match="duplicate"):
        tool_call_grammar([WEATHER, WEATHER])
    with pytest.raises(GrammarError, match="false schema"):
        json_schema_to_gbnf({"type": "object", "properties": {"a": False}, "required": ["a"]})
    with pytest.raises(GrammarError, match="cannot resolve"):
        json_schema_to_gbnf({"$ref": "#/$defs/missing"})
    with pytest.raises(GrammarError, match="only local"):
        json_schema_to_gbnf({"$ref": "https://example.com/s.json"})


@pytest.mark.parametrize(
    "schema, good, bad",
    [
        ({"type": "boolean"}, ["true", "false"], ["1", '"true"']),
        ({"type": "null"}, ["null"], ["None"]),
        ({"type": "number"}, ["0", "-1.5", "3e10", "2.25E-3"], ["01", "1.", ".5", "NaN"]),
        ({"type": "integer"}, ["0", "-12", "123456"], ["1.0", "+1", "007"]),
        ({"type": ["string", "null"]}, ['"a"', "null"], ["1"]),
        ({"type": "string", "nullable": True}, ['"a"', "null"], ["1"]),
        ({"enum": ["a", 1, None, True]}, ['"a"', "1", "null", "true"], ['"b"', "2"]),
        ({"const": {"k": [1]}}, ['{"k": [1]}'], ['{"k":[1]}', "{}"]),
        ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"\\u003c|"'], ['"a"', '"abcd"', '"<"']),
        ({"type": "array", "items": {"type": "integer"}, "minItems": 1}, ["[1]", "[1, 2]", "[1,2]"], ["[]", '["a"]']),
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}, ['[1, "a"]'], ["[1]", '["a", 1]']),
        ({"type": "object"}, ["{}", '{"a": [1, {"b": null}]}'], ["[]"]),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, ['{"x": 1, "y": 2}'], ['{"x": "1"}']),
        ({"type": "object", "additionalProperties": False}, ["{}"], ['{"a": 1}']),
        ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
         ['{"a": 1, "b": true}'], ['{"a": 1}', '{"b": true}']),
        ({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                             "required": ["next"]}},
          "$ref": "#/$defs/node"},
         ['{"next": null}', '{"next": {"next": {"next": null}}}'], ['{"next": 1}']),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}},
         ["{}", '{"a": 1}', '{"b": 1}', '{"a": 1, "c": 2}', '{"a": 1, "b": 2, "c": 3}'], ['{"c": 1, "a": 2}', '{, "a": 1}']),
        ({}, ['"x"', "1", "[true]", '{"a": {}}'], ["", "tru"]),
        ({"type": "string"}, ['""', '"é ü \\" \\\\ \\n"', '"<b> [x] <|"'], ['"<|im_end|>"', '"\\x"', '"a\nb"']),
    ],
)
def test_json_schema(schema, good, bad):
    g = json_schema_to_gbnf(schema)
    for s in good:
        assert accepts(g, s), s
        json.loads(s)
    for s in bad:
        assert not accepts(g, s), s


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
