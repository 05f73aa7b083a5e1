"""The family-generic suite: every property here runs once per registered format family
(:data:`kimi_chat.families.REGISTRY`) and once per dialect of it, through the family-agnostic API only, so a new
family is tested by registering it. Family-specific behaviour is tested in the family's own files
(``test_k3_*.py``, ``test_parse*.py``, …); this file holds what every family must do the same way:

* prompt: ``render_segments`` cuts exactly the text ``render`` writes, message by message, in order; the
  generation prompt is the last segment's tail; ``strict=True`` refuses exactly lint's errors;
* output: the parser never raises, loses nothing at any split (any chunking gives the message of the whole text),
  and keeps marker spellings out of the text fields; an empty output is an empty message;
* grammar: a tool-call grammar builds for every dialect and tool choice.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimi_chat import StreamParser, StrictModeError, lint, parse, render, render_segments
from kimi_chat.dialects import DIALECTS
from kimi_chat.families import REGISTRY, family_of
from kimi_chat.grammar import tool_call_grammar

FAMILY_DIALECTS = sorted((d.family, name) for name, d in DIALECTS.items())
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                                                         "function": {"name": "get_weather",
                                                                      "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny, 21 C"},
    {"role": "assistant", "content": "Sunny, 21 C."},
    {"role": "user", "content": "And tomorrow?"},
]


def test_every_dialect_belongs_to_a_registered_family() -> None:
    assert {d.family for d in DIALECTS.values()} <= set(REGISTRY)


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_segments_cut_exactly_the_rendered_text(family: str, dialect: str) -> None:
    text = render(CONVERSATION, tools=TOOLS, dialect=dialect)
    segments = render_segments(CONVERSATION, tools=TOOLS, dialect=dialect)
    indices = [s.message_index for s in segments if s.message_index >= 0]  # -1: scaffolding of no message
    assert "".join(s.text for s in segments) == text
    assert indices == sorted(indices) and set(indices) == set(range(len(CONVERSATION)))
    assert all(s.message_index >= -1 for s in segments)


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_the_layout_is_the_segments_attribution(family: str, dialect: str) -> None:
    """``render_layout`` works for every family: its parts are the rendered text, and its pieces carry the
    attribution ``render_segments`` gives (characterwise), the input text among the non-literal pieces."""
    from kimi_chat.prompt import render_layout

    lay = render_layout(CONVERSATION, tools=TOOLS, dialect=dialect)
    segments = render_segments(CONVERSATION, tools=TOOLS, dialect=dialect)
    assert lay.text == render(CONVERSATION, tools=TOOLS, dialect=dialect)
    by_char = [(p.message_index, p.trainable) for p in lay.pieces() for _ in p.text]
    assert by_char == [(s.message_index, s.trainable) for s in segments for _ in s.text]
    texts = "".join(p.text for p in lay.pieces() if not p.literal)
    assert "Sunny, 21 C." in texts and "And tomorrow?" in texts


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_the_generation_prompt_is_appended_scaffolding(family: str, dialect: str) -> None:
    with_prompt = render(CONVERSATION, tools=TOOLS, dialect=dialect, add_generation_prompt=True)
    without = render(CONVERSATION, tools=TOOLS, dialect=dialect, add_generation_prompt=False)
    assert with_prompt.startswith(without) and len(with_prompt) > len(without)
    tail = render_segments(CONVERSATION, tools=TOOLS, dialect=dialect, add_generation_prompt=True)[-1]
    assert tail.message_index == -1 and not tail.trainable and with_prompt.endswith(tail.text)


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_strict_refuses_exactly_lints_errors(family: str, dialect: str) -> None:
    bad = [*CONVERSATION[:2], {"role": "assistant", "content": "x", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "nope", "arguments": "{"}}]}]
    for messages in (CONVERSATION, bad):
        errors = [w for w in lint(messages, tools=TOOLS, dialect=dialect) if w.severity == "error"]
        if errors:
            with pytest.raises(StrictModeError):
                render(messages, tools=TOOLS, dialect=dialect, strict=True)
        else:
            assert render(messages, tools=TOOLS, dialect=dialect, strict=True) == render(
                messages, tools=TOOLS, dialect=dialect)


def _soup(family: str) -> st.SearchStrategy[str]:
    spellings = [m.text for m in family_of(family).markers.all]
    partials = sorted({s[:k] for s in spellings for k in (1, 2, len(s) - 1) if 0 < k < len(s)})
    pieces = st.one_of(st.sampled_from(spellings), st.sampled_from(partials),
                       st.sampled_from(["{\"city\": \"Paris\"}", "get_weather", "functions.get_weather:0", " ", "\n",
                                        "<", "|", "=", "\"", "think", "é🌧️"]),
                       st.text(max_size=5))
    return st.lists(pieces, max_size=30).map("".join)


def _by_chunks(text: str, cuts: list[int], dialect: str) -> Any:
    p = StreamParser(dialect, tools=TOOLS)
    edges = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    for a, b in zip(edges, edges[1:]):
        p.feed(text[a:b])
    p.finish()
    return p.message


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_any_chunking_gives_the_whole_texts_message(family: str, dialect: str) -> None:
    @SETTINGS
    @given(text=_soup(family), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
    def check(text: str, cuts: list[int]) -> None:
        whole = parse(text, dialect=dialect, tools=TOOLS)
        assert _by_chunks(text, cuts, dialect) == whole
        assert _by_chunks(text, list(range(len(text))), dialect) == whole

    check()


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_no_marker_spelling_lands_in_a_text_field(family: str, dialect: str) -> None:
    """A marker spelling read from text is a marker; whatever the text, none is left in content or reasoning
    (nor in a call's name or id). The reasoning markers of the output format (``think_classes``) are text where a
    dialect does not reason, so they are left out here."""
    fmt = family_of(family).output_format
    literal_where_plain = {getattr(x, "text", x) for c in fmt.think_classes for x in fmt.token_classes[c]}
    spellings = [m.text for m in family_of(family).markers.all if m.text not in literal_where_plain]

    @SETTINGS
    @given(text=_soup(family))
    def check(text: str) -> None:
        msg = parse(text, dialect=dialect, tools=TOOLS)
        fields = [msg.content or "", msg.reasoning_content or ""]
        fields += [f"{c.name or ''} {c.id or ''}" for c in msg.tool_calls]
        leaked = [s for s in spellings for f in fields if s in f]
        # a dropped stray marker can glue two text pieces into a spelling (docs/format.md, choice 10):
        # '<|end_header_id|' [BOS] '>' is that text, never a marker
        glued = any(w.kind == "stray_marker" for w in msg.warnings)
        assert not leaked or glued, (leaked, msg)

    check()


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_an_empty_output_is_an_empty_message(family: str, dialect: str) -> None:
    msg = parse("", dialect=dialect)
    assert not msg.content and not msg.reasoning_content and not msg.tool_calls


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
@pytest.mark.parametrize("tool_choice", ["auto", "required", "none", {"type": "function",
                                                                        "function": {"name": "get_weather"}}])
def test_a_tool_call_grammar_builds(family: str, dialect: str, tool_choice: Any) -> None:
    grammar = tool_call_grammar(TOOLS, dialect=dialect, tool_choice=tool_choice)
    assert "root ::=" in grammar
