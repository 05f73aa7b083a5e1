"""The two-stage cut both adapters rely on (:mod:`kimi_chat.integrations`): a reasoning stage that
hands the raw rest over, then a body stage, give exactly ``kimi_chat.parse`` of the whole turn, for
any text and any chunking (property test), and never hold on to more than an undecided suffix."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import kimi_chat
from kimi_chat import markers as M
from kimi_chat.integrations import BodyStage, ReasoningStage, prompt_reasoning
from kimi_chat.parse import parse

PIECES = [
    M.THINK_BEGIN.text, M.THINK_END.text, M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text,
    M.TOOL_CALL_SECTION_BEGIN_SINGULAR.text, M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text,
    M.TOOL_CALL_END.text, M.IM_END.text, M.IM_USER.text, M.IM_MIDDLE.text, "functions.get_weather:0",
    "functions.a.b:c-d:7", "0", '{"city": "Paris"}', '"{\\"a\\": 1}"', " ", "\n", "abc", "é😀", "<", "<|",
    "<|tool", "</thi", "<thi", "{",
]

texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def expected(text: str, prefilled: bool):
    m = parse(text, dialect="kimi-k2-thinking", thinking_prefilled=prefilled)
    return m.content, m.reasoning_content, [(c.index, c.id, c.name, c.arguments, c.status) for c in m.tool_calls]


def staged(chunks: list[str], prefilled: bool):
    rs = ReasoningStage(prefilled=prefilled)
    body = BodyStage(tools=None, after_reasoning=True)
    reasoning = None
    for ch in chunks:
        r, rest = rs.feed(ch)
        if r is not None:
            reasoning = (reasoning or "") + r
        if rest is not None:
            body.feed(rest)
    r, rest = rs.finish()
    if r is not None:
        reasoning = (reasoning or "") + r
    if rest is not None:
        body.feed(rest)
    body.finish()
    m = body.message
    return m.content, reasoning, [(c.index, c.id, c.name, c.arguments, c.status) for c in m.tool_calls]


@given(texts, st.booleans(), st.lists(st.integers(min_value=1, max_value=400), max_size=8))
def test_stages_equal_the_whole_parse(text, prefilled, cuts):
    points = sorted({c for c in cuts if c < len(text)})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]
    assert staged(chunks, prefilled) == expected(text, prefilled)


@given(texts, st.booleans())
def test_stages_char_by_char(text, prefilled):
    assert staged(list(text), prefilled) == expected(text, prefilled)


@given(texts, st.booleans())
def test_whole_split(text, prefilled):
    reasoning, rest = ReasoningStage.split(text, prefilled=prefilled)
    content = calls = None
    if rest is not None:
        m = BodyStage.parse(rest, tools=None, after_reasoning=True)
        content, calls = m.content, [(c.index, c.id, c.name, c.arguments, c.status) for c in m.tool_calls]
    exp = expected(text, prefilled)
    assert (content, reasoning, calls or []) == exp


def test_reasoning_stage_holds_only_an_undecided_suffix():
    rs = ReasoningStage(prefilled=True)
    for _ in range(1000):
        assert rs.feed("thinking hard ") == ("thinking hard ", None)
    assert rs.feed("<|tool") == (None, None)
    assert rs.feed("_call_begin|>functions.f:0") == (None, "<|tool_call_begin|>functions.f:0")
    assert rs.ended and rs.feed("more") == (None, "more")


def test_prompt_reasoning_reads_the_current_turn_only():
    a, t, e, s = M.IM_ASSISTANT.id, M.THINK_BEGIN.id, M.THINK_END.id, M.TOOL_CALLS_SECTION_BEGIN.id
    history = [a, 1, t, 2, e, s, 3, M.IM_END.id, M.IM_SYSTEM.id, 4, M.IM_END.id]
    assert prompt_reasoning(history + [a, 5]) == prompt_reasoning([a, 5])
    assert not prompt_reasoning(history + [a, 5]).open and not prompt_reasoning(history + [a, 5]).closed
    assert prompt_reasoning(history + [a, 5, t]).open
    assert prompt_reasoning(history + [a, 5, t, e]).closed


def test_body_stage_after_reasoning_is_primed():
    """After a reasoning stage, ``<think>``/``</think>`` in the rest are stray markers (dropped), as in
    the whole-turn parse: the body stage must prime its parser with an empty reasoning block, and
    that priming must survive ``python -O`` (it once sat inside an ``assert``: under ``-O`` this
    gave content ``answer`` and the reasoning ``x`` was lost)."""
    m = BodyStage.parse("<think>x</think>answer", tools=None, after_reasoning=True)
    assert (m.content, m.reasoning_content) == ("xanswer", None)
    assert [w.kind for w in m.warnings] == ["stray_marker", "stray_marker"]
    whole = parse("<think></think><think>x</think>answer", dialect="kimi-k2-thinking")
    assert (m.content, m.reasoning_content) == (whole.content, whole.reasoning_content)


def _asserts_doing_work(tree: ast.AST) -> list[str]:
    """The asserts of a module whose test calls something other than ``isinstance`` (or binds a
    name): under ``python -O`` that work would not be done."""
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for sub in ast.walk(node):
            call = isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id == "isinstance")
            if call or isinstance(sub, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                bad.append(f"line {node.lineno}: {ast.unparse(node)}")
                break
    return bad


def test_asserts_doing_work_are_found():
    tree = ast.parse("assert not self.parser.feed(x)\nassert isinstance(a, int)\nassert (n := 1)\nassert a is not None\n")
    assert _asserts_doing_work(tree) == ["line 1: assert not self.parser.feed(x)", "line 3: assert (n := 1)"]


def test_no_assert_in_kimi_chat_does_work():
    """No ``assert`` anywhere in ``kimi_chat/`` carries work (CI runs the parser tests under ``-O``)."""
    root = Path(kimi_chat.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        bad = _asserts_doing_work(ast.parse(path.read_text(encoding="utf-8")))
        if bad:
            found[str(path.relative_to(root))] = bad
    assert found == {}
