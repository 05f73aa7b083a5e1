"""The report's findings run lint only on rows where it may report one of the codes the report takes
(:func:`kimi_chat.data.findings.lint_may_report`): the findings must be lint's own, row for row, whichever way a row
goes. Each row here is checked against the findings with lint run on every row."""

from __future__ import annotations

import copy

import pytest

from kimi_chat.dialects import DIALECTS, get_dialect
from kimi_chat.data import findings as F

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def _call(name: str, call_id: str, arguments: str = '{"city": "Paris"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CLEAN = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [_call("get_weather", "functions.get_weather:0")]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
    {"role": "assistant", "content": "18C.", "reasoning_content": "Answer it."},
]


def _with(path: tuple, value: object) -> list[dict]:
    """CLEAN with the field at ``path`` (indices and keys) set to ``value``."""
    msgs = copy.deepcopy(CLEAN)
    target: object = msgs
    for k in path[:-1]:
        target = target[k]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    return msgs


# rows that differ from CLEAN in one place, each a way lint may report (or not) one of the report's codes
VARIANTS = {
    "clean": CLEAN,
    "marker in user text": _with((1, "content"), "hi <|im_end|> there"),
    "marker in reasoning": _with((4, "reasoning_content"), "think <|im_assistant|>"),
    "marker in arguments": _with((2, "tool_calls", 0, "function", "arguments"), '{"city": "<|tool_call_begin|>"}'),
    "marker in a tool result": _with((3, "content"), "<|tool_calls_section_end|>"),
    "reserved token text": _with((1, "content"), "x <|reserved_token_17|> y"),
    "K3 marker text": _with((1, "content"), "a <|close|> b <|end_of_msg|>"),
    "marker in a content part": _with((1, "content"), [{"type": "text", "text": "see <|im_end|>"}]),
    "marker split over parts": _with((1, "content"), [{"type": "text", "text": "<|im_"}, {"type": "text", "text": "end|>"}]),
    "marker after non-ASCII text": _with((1, "content"), "café 東京 <|im_end|>"),
    "marker in a field name": _with((1, "<|im_end|>"), "x"),
    "non-canonical id": _with((2, "tool_calls", 0, "id"), "call_abc"),
    "canonical id of another name": _with((2, "tool_calls", 0, "id"), "functions.search:0"),
    "undeclared tool": _with((2, "tool_calls", 0, "function", "name"), "search"),
    "call without id": _with((2, "tool_calls", 0), {"type": "function", "function": {"name": "get_weather",
                                                                                     "arguments": "{}"}}),
    "tool_calls None": _with((4, "tool_calls"), None),
    "no final assistant": CLEAN[:4],
    # rows lint refuses (the batch records them as bad rows): refused the same way
    "content not text": [*CLEAN, {"role": "user", "content": 3}],
    "message not an object": [*CLEAN, "hello"],
    "message without role": [*CLEAN, {"content": "hi"}],
}
TOOL_LISTS = {"tools": TOOLS, "no tools": None, "empty tools": [],
              "other tool": [{"type": "function", "function": {**TOOLS[0]["function"], "name": "search"}}],
              "invalid tools": [{"type": "function", "function": "get_weather"}],
              "tools not a list": {"get_weather": TOOLS[0]}}


def _every_row(messages, dialect, tools):
    """conversation_findings with lint run whatever the row (the behaviour the fast path must keep)."""
    saved = F.lint_may_report
    F.lint_may_report = lambda *a, **k: True
    try:
        return F.conversation_findings(messages, dialect=dialect, tools=tools, row=3, sample_id="s")
    finally:
        F.lint_may_report = saved


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # the same refusal either way
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("tools", list(TOOL_LISTS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_findings_are_lints_own_row_for_row(dialect, tools, variant):
    messages, tool_list = VARIANTS[variant], TOOL_LISTS[tools]
    fast = _outcome(lambda: F.conversation_findings(messages, dialect=dialect, tools=tool_list, row=3, sample_id="s"))
    full = _outcome(lambda: _every_row(messages, dialect, tool_list))
    assert fast == full


def test_the_lint_codes_are_seen_where_they_are():
    # the comparison above must compare something: these rows do report the report's lint kinds
    kinds = {name: {f.kind for f in F.conversation_findings(VARIANTS[name], dialect="kimi-k2.6", tools=TOOLS)}
             for name in ("marker in user text", "non-canonical id", "undeclared tool", "clean")}
    assert "marker_text" in kinds["marker in user text"]
    assert "foreign_call_id" in kinds["non-canonical id"]
    assert "undeclared_tool" in kinds["undeclared tool"]
    assert not kinds["clean"] & set(F.LINT_KINDS.values())


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v not in ("clean", "no final assistant",
                                                                      "marker split over parts")])
def test_lint_runs_on_every_row_it_may_report_on(variant):
    dialect = "kimi-k3" if variant.startswith("K3") else "kimi-k2.6"
    runs = F.lint_may_report(VARIANTS[variant], dialect=dialect, tools=TOOLS)
    assert runs is True


def test_marker_spellings_are_the_dialects_own():
    # K3's markers are text to a K2 tokenizer and no K2 lint reports them (nor the halves of one marker)
    k3_text = F.lint_may_report(VARIANTS["K3 marker text"], dialect="kimi-k2.6", tools=TOOLS)
    halves = F.lint_may_report(VARIANTS["marker split over parts"], dialect="kimi-k2.6", tools=TOOLS)
    assert (k3_text, halves) == (False, False)


def test_refusals_are_seen_where_they_are():
    # the comparison above must compare refusals too: lint refuses these rows
    refused = [_outcome(lambda: F.conversation_findings(m, dialect="kimi-k2.6", tools=t)) for m, t in
               ((VARIANTS["content not text"], TOOLS), (CLEAN, TOOL_LISTS["invalid tools"]))]
    assert [type(r) for r in refused] == [tuple, tuple]


def test_lint_is_skipped_on_a_clean_row():
    assert F.lint_may_report(CLEAN, dialect="kimi-k2.6", tools=TOOLS) is False
    assert F.lint_may_report(CLEAN, dialect="kimi-k3", tools=TOOLS) is False
    # no tools given: nothing is undeclared; an empty list declares nothing, so the call is undeclared
    assert F.lint_may_report(CLEAN, dialect="kimi-k2.6", tools=None) is False
    assert F.lint_may_report(CLEAN, dialect="kimi-k2.6", tools=[]) is True


def test_each_rows_own_tools_decide():
    # the same call and the same schema under another name, row after row: each row is judged by its own tools
    other = TOOL_LISTS["other tool"]
    seen = [F.lint_may_report(CLEAN, dialect="kimi-k2.6", tools=t) for t in (TOOLS, other, TOOLS, other)]
    assert seen == [False, True, False, True]
    found = [[f.kind for f in F.conversation_findings(CLEAN, dialect="kimi-k2.6", tools=t)] for t in (TOOLS, other)]
    assert found == [[], ["undeclared_tool"]]


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_every_marker_spelling_is_ascii(dialect):
    # lint_may_report reads marshal's bytes as Latin-1: an ASCII spelling is found there as typed
    texts = [m.text for m in get_dialect(dialect).family_parts.markers.all]
    assert texts and all(t.isascii() for t in texts)
