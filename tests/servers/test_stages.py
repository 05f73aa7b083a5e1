"""The two-stage cut both adapters rely on (:mod:`kimi_chat.integrations`): a reasoning stage that
hands the raw rest over, then a body stage, give exactly ``kimi_chat.parse`` of the whole turn, for
any text and any chunking (property test), and never hold on to more than an undecided suffix."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kimi_chat
from conftest import needs_reference
from kimi_chat import KimiTokenizer
from kimi_chat import markers as M
from kimi_chat.servers.stages import BodyStage, ReasoningStage, prompt_reasoning
from kimi_chat.servers import diagnostics
from kimi_chat.servers.diagnostics import NOT_EXECUTABLE, CallGate, is_executable
from kimi_chat.output import ParsedToolCall, ToolCallStatus, parse

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
    """After a reasoning stage, ``<think>``/``</think>`` in the rest are no markers (kept as text, warned),
    as in the whole-turn parse: the body stage must prime its parser with an empty reasoning block, and
    that priming must survive ``python -O`` (it once sat inside an ``assert``: under ``-O`` this
    gave content ``answer`` and the reasoning ``x`` was lost)."""
    m = BodyStage.parse("<think>x</think>answer", tools=None, after_reasoning=True)
    assert (m.content, m.reasoning_content) == ("<think>x</think>answer", None)
    assert [w.kind for w in m.warnings] == ["think_as_text", "think_as_text"]
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


# --------------------------------------------------------------------------------------------------
# Diagnostics: what the stages log, and which calls they hand on (framework-free; the adapters'
# own tests check the same through vLLM and SGLang)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _logger(name: str) -> tuple[logging.Logger, _Records]:
    logger = logging.getLogger(f"kimi_chat.tests.{name}")
    logger.handlers[:] = []
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    h = _Records()
    logger.addHandler(h)
    return logger, h


def _logged_kinds(records: list[logging.LogRecord]) -> list[str]:
    return [r.args[0] for r in records if r.msg.startswith("parse warning")]


@given(texts, st.booleans(), st.lists(st.integers(min_value=1, max_value=400), max_size=8))
def test_stages_log_the_whole_parses_warnings(text, prefilled, cuts):
    """Every warning of the whole-turn parse is logged once by one of the two stages, in order."""
    logger, h = _logger("property")
    points = sorted({c for c in cuts if c < len(text)})
    rs = ReasoningStage(prefilled=prefilled, logger=logger)
    body = BodyStage(tools=None, after_reasoning=True, logger=logger)
    for a, b in zip([0, *points], [*points, len(text)]):
        _, rest = rs.feed(text[a:b])
        if rest is not None:
            body.feed(rest)
    _, rest = rs.finish()
    if rest is not None:
        body.feed(rest)
    body.finish()
    whole = parse(text, dialect="kimi-k2-thinking", thinking_prefilled=prefilled)
    assert _logged_kinds(h.records) == [w.kind for w in whole.warnings]


SECTION, SECTION_END = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
CALL, ARGS, CALL_END = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def test_levels_follow_what_the_client_gets():
    """WARNING: text the model wrote is dropped; INFO: a call handed on with a non-ok status;
    DEBUG: a stray marker dropped (markers never reach the client)."""
    logger, h = _logger("levels")
    text = (f"hi{M.IM_MIDDLE.text}{SECTION}lost{CALL}functions.f:0{ARGS}not json{CALL_END}{SECTION_END}"
            f"{M.IM_END.text}")
    st = BodyStage.run(text, tools=TOOLS, after_reasoning=False, logger=logger)
    assert [c.status for c in st.calls] == [ToolCallStatus.INVALID_JSON]
    got = [(r.levelno, r.getMessage()) for r in h.records]
    assert got == [
        (logging.DEBUG, "parse warning stray_marker: stray marker <|im_middle|> dropped (at offset 2 of the output)"),
        (logging.WARNING, "parse warning text_in_section: text inside a tool-call section, outside any call, "
                          f"dropped (at offset {text.index('lost')} of the output)"),
        (logging.INFO, "tool call 0 (id 'functions.f:0', name 'f') returned with status invalid_json"),
    ]


def test_body_offsets_are_in_the_text_after_reasoning():
    logger, h = _logger("offsets")
    BodyStage.run(f"ab{M.IM_MIDDLE.text}", tools=None, after_reasoning=True, logger=logger)
    assert [r.getMessage() for r in h.records] == [
        "parse warning stray_marker: stray marker <|im_middle|> dropped (at offset 2 of the output after reasoning)"
    ]


def test_not_executable_is_incomplete_only():
    """Only a call cut before its arguments (``incomplete``, where the parser has that status) is
    withheld; ``unclosed``, ``invalid_json`` and ``unknown_tool`` are handed on (diagnostics
    docstring says why)."""
    assert NOT_EXECUTABLE == {s for s in ToolCallStatus if s.value == "incomplete"}
    for s in ToolCallStatus:
        call = ParsedToolCall(0, "functions.f:0", "f", "{}", s, "")
        assert is_executable(call) is (s.value != "incomplete")


def _call(index: int, status: ToolCallStatus) -> ParsedToolCall:
    return ParsedToolCall(index, f"functions.f:{index}", "f", "{}", status, f"raw {index}")


def test_gate_withholds_and_renumbers(monkeypatch):
    monkeypatch.setattr(diagnostics, "NOT_EXECUTABLE", frozenset({ToolCallStatus.INVALID_JSON}))
    logger, h = _logger("gate")
    gate = CallGate(logger)
    calls = [_call(0, ToolCallStatus.INVALID_JSON), _call(1, ToolCallStatus.OK), _call(2, ToolCallStatus.INVALID_JSON),
             _call(3, ToolCallStatus.UNCLOSED)]
    assert [gate.admit(c) for c in calls] == [None, 0, None, 1]
    assert gate.admit(calls[1]) == 0 and gate.client_index(3) == 1 and gate.client_index(0) is None
    assert [(r.levelno, r.getMessage()) for r in h.records] == [
        (logging.WARNING, "tool call 0 (id 'functions.f:0', name 'f') not returned to the client: status "
                          "invalid_json (raw 'raw 0')"),
        (logging.WARNING, "tool call 2 (id 'functions.f:2', name 'f') not returned to the client: status "
                          "invalid_json (raw 'raw 2')"),
    ]


def test_gate_warns_about_a_call_streamed_before_its_status_was_known(monkeypatch):
    monkeypatch.setattr(diagnostics, "NOT_EXECUTABLE", frozenset({ToolCallStatus.INVALID_JSON}))
    logger, h = _logger("late")
    gate = CallGate(logger)
    assert gate.admit(_call(0, ToolCallStatus.UNCLOSED)) == 0  # in progress
    final = [_call(0, ToolCallStatus.INVALID_JSON), _call(1, ToolCallStatus.OK)]
    assert gate.check_final(final) == final
    assert [r.getMessage() for r in h.records] == [
        "tool call 0 (id 'functions.f:0', name 'f') already streamed to the client before its status "
        "invalid_json was known"
    ]


def _client_view(chunks: list[str], tools, logger) -> tuple[str | None, dict[int, list[str | None]]]:
    body = BodyStage(tools=tools, after_reasoning=False, logger=logger)
    content, calls = "", {}
    for m in [*(body.feed(c) for c in chunks), body.finish()]:
        content += m.content or ""
        for c in m.calls:
            e = calls.setdefault(c.index, [None, None, ""])
            e[0] = c.id if c.id is not None else e[0]
            e[1] = c.name if c.name is not None else e[1]
            e[2] += c.arguments
    return content, calls


# call 0 never reaches its arguments (closed by the next call begin); call 1 is to an undeclared tool
CUT = f"{SECTION}{CALL}functions.f:0{CALL}functions.g:1{ARGS}{{}}{CALL_END}{SECTION_END}"


@given(st.lists(st.integers(min_value=1, max_value=len(CUT) - 1), max_size=10))
def test_withheld_call_is_never_streamed(cuts):
    """A call decided not executable is withheld from the stream too (its status is known when its
    first piece comes), and the next call is streamed as index 0. The rule is forced here to hold for
    ``ok`` calls (call 0 is ``ok`` with ``{}`` until the parser says ``incomplete``)."""
    withheld = frozenset({ToolCallStatus.OK, *NOT_EXECUTABLE})
    logger, h = _logger("stream")
    old = diagnostics.NOT_EXECUTABLE
    diagnostics.NOT_EXECUTABLE = withheld
    try:
        points = sorted(set(cuts))
        chunks = [CUT[a:b] for a, b in zip([0, *points], [*points, len(CUT)])]
        content, calls = _client_view(chunks, TOOLS, logger)
        whole = BodyStage.run(CUT, tools=TOOLS, after_reasoning=False, logger=logger)
    finally:
        diagnostics.NOT_EXECUTABLE = old
    assert calls == {0: ["functions.g:1", "g", "{}"]}
    assert [(c.index, c.status) for c in whole.calls] == [(1, ToolCallStatus.UNKNOWN_TOOL)]
    assert [r.levelno for r in h.records if "not returned" in r.msg] == [logging.WARNING, logging.WARNING]


def test_call_without_arguments_is_withheld_once_the_parser_says_incomplete():
    st = BodyStage.run(CUT, tools=TOOLS, after_reasoning=False)
    first = st.message.tool_calls[0]
    assert first.name == "f" and (first.status.value == "incomplete") is (not is_executable(first))
    assert [c.name for c in st.calls] == (["g"] if NOT_EXECUTABLE else ["f", "g"])


def test_gate_withhold_is_silent_and_final():
    logger, h = _logger("withhold")
    gate = CallGate(logger)
    gate.withhold(0)
    assert gate.seen(0) and gate.client_index(0) is None
    assert gate.admit(_call(0, ToolCallStatus.OK)) is None  # decided once
    assert gate.admit(_call(1, ToolCallStatus.OK)) == 0 and h.records == []


@needs_reference
@pytest.mark.parametrize("family, config, closer", [
    ("k2", "k2.5", M.THINK_END.text),
    ("k3", "k3", "<|close|>think<|sep|>"),
])
@pytest.mark.parametrize("step", [1, 3, 100])
def test_reasoning_stage_with_ids_keeps_a_typed_closer_as_reasoning(family, config, closer, step):
    """With token ids, a reasoning closer spelled by ordinary tokens (the user's text echoed) does not
    end reasoning; the special one does. Without ids the text decides (the typed one ends it)."""
    tok = KimiTokenizer.from_reference(config)
    typed = f"the user wrote {closer} here"
    after = "Answer." if family == "k2" else "<|open|>response<|sep|>Answer.<|close|>response<|sep|>"
    ids = tok.encode(typed, allow_special=False) + tok.encode(closer) + tok.encode(after)
    chunks = [ids[i:i + step] for i in range(0, len(ids), step)]

    def run(with_ids: bool) -> tuple[str, str]:
        # several tokens per chunk need the decoder to be exact (the typed and the real closer meet)
        rs = ReasoningStage(prefilled=True, family=family, tokenizer=tok if step > 1 else None)
        reasoning, rest = [], []
        for ch in chunks:
            r, x = rs.feed(tok.decode(ch), ch if with_ids else None)
            reasoning.append(r or "")
            rest.append(x or "")
        r, x = rs.finish()
        return "".join(reasoning) + (r or ""), "".join(rest) + (x or "")

    reasoning, rest = run(with_ids=True)
    assert reasoning == typed
    assert rest == after
    reasoning, rest = run(with_ids=False)
    assert reasoning == "the user wrote "
