"""A record is enough: a dialect record defined here, registered through the public registration function and
nothing else, is a working dialect (render, render_tokens, parse, by its name and its model names), and
unregistering it leaves the registry as it was. A built-in K2 revision is the same kind of record, listed in
``kimi_chat/families/k2/dialects.py`` (the registry registers each family's records); with its template's source
(``templates/macros/sync.py``, the generated template and goldens following) and its line in
``docs/dialects-and-fidelity.md``, adding one touches three files."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kimi_chat import Dialect, Status, UnknownDialectError, get_dialect, parse, register_dialect, render, unregister_dialect
from kimi_chat import markers as M
from kimi_chat.dialects import ALIASES, DIALECTS, K2_DIALECTS, MODEL_NAMES, dialect_for_model
from kimi_chat.families.k2.spec import K2Spec

from conftest import needs_reference

RECORD = Dialect(
    name="kimi-k2-fixture@rev9",
    status=Status.RECONSTRUCTED,
    oracle="none/fixture.jinja",
    summary="a made-up K2 revision: name-or-role headers, its own default system prompt, a history split",
    spec=K2Spec(
        default_system="You are a fixture.",
        sort_tool_keys=True,
        role_names="name_or_role",
        bodies="think_content_calls",
        think="history_split",
    ),
    aliases=("kimi-k2-fixture",),
    model_names=("example-org/Kimi-K2-Fixture",),
)
"""A K2-family dialect no release has (``kimi-k2-thinking@rev1``'s choices with another default system prompt)."""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _registry() -> tuple[dict, ...]:
    return dict(DIALECTS), dict(K2_DIALECTS), dict(ALIASES), dict(MODEL_NAMES)


@pytest.fixture
def fixture_dialect() -> Iterator[Dialect]:
    before = _registry()
    d = register_dialect(RECORD)
    try:
        yield d
    finally:
        assert unregister_dialect(RECORD.name) is RECORD
        assert _registry() == before


def test_a_record_renders(fixture_dialect: Dialect) -> None:
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "reasoning_content": "r"},
            {"role": "user", "content": "Weather?"}]
    # what the record's choices say, marker by marker: its default system prompt first (no system message),
    # fixed-name headers for unnamed messages, the plain assistant turn before the last user turn is the last
    # one without tool calls (history split: an empty <think></think>), then the generation prompt
    s, u, a, mid, end = M.IM_SYSTEM.text, M.IM_USER.text, M.IM_ASSISTANT.text, M.IM_MIDDLE.text, M.IM_END.text
    expected = (f"{s}system{mid}You are a fixture.{end}{u}user{mid}Hi{end}"
                f"{a}assistant{mid}{M.THINK_BEGIN.text}{M.THINK_END.text}Hello{end}{u}user{mid}Weather?{end}"
                f"{a}assistant{mid}")
    for name in (RECORD.name, "kimi-k2-fixture", "example-org/Kimi-K2-Fixture", "Kimi-K2-Fixture-GGUF"):
        assert render(msgs, dialect=name) == expected, name
    assert fixture_dialect.render(msgs) == expected
    assert get_dialect("kimi-k2-fixture") is fixture_dialect and dialect_for_model("kimi_k2_fixture") == RECORD.name
    # the tools declared as the record says: keys sorted, JSON with the template's default separators
    declared = render(msgs, tools=TOOLS, dialect=RECORD.name)
    sorted_tools = [{"function": {"name": "get_weather", "parameters": {
        "properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}}, "type": "function"}]
    assert declared.startswith(f"{s}tool_declare{mid}{json.dumps(sorted_tools)}{end}")


def test_a_record_parses(fixture_dialect: Dialect) -> None:
    call = (f"{M.TOOL_CALLS_SECTION_BEGIN.text}{M.TOOL_CALL_BEGIN.text}functions.get_weather:0"
            f"{M.TOOL_CALL_ARGUMENT_BEGIN.text}{{\"city\": \"Paris\"}}{M.TOOL_CALL_END.text}"
            f"{M.TOOL_CALLS_SECTION_END.text}")
    out = f"{M.THINK_BEGIN.text}look it up{M.THINK_END.text}Checking.{call}"
    msg = parse(out, dialect="kimi-k2-fixture", tools=TOOLS)
    assert (msg.reasoning_content, msg.content) == ("look it up", "Checking.")
    assert [(c.id, c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [
        ("functions.get_weather:0", "get_weather", {"city": "Paris"})]
    assert fixture_dialect.parse(out, tools=TOOLS) == msg


@needs_reference
def test_a_record_tokenizes(fixture_dialect: Dialect) -> None:
    msgs = [{"role": "user", "content": "Hi"}]
    tok = fixture_dialect.tokenizer()
    rendered = fixture_dialect.render_tokens(msgs)
    assert rendered.ids == tok.encode(render(msgs, dialect=RECORD.name))
    assert rendered.ids[-3:] == [M.IM_ASSISTANT.id, *tok.encode("assistant"), M.IM_MIDDLE.id][-3:]


def test_unregistered_it_is_unknown_again() -> None:
    register_dialect(RECORD)
    unregister_dialect(RECORD.name)
    for name in (RECORD.name, "kimi-k2-fixture", "example-org/Kimi-K2-Fixture"):
        with pytest.raises(UnknownDialectError):
            get_dialect(name)
