"""Property: for every dialect, render() == the official template rendered by transformers (for
ordinary requests and for the odd-but-real ones real clients send: official parity), and where the
official template refuses an input, render refuses it too, with its own error."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import event, given, note, settings, strategies as st

from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # the K2 family (K3: tests/test_k3_*.py)
from kimi_chat import render
from kimi_chat.errors import KimiChatError
from kimi_chat.reference.oracle import render_official
from kimi_chat.testing.strategies import DEFECTS, defective_requests, odd_requests, requests

from conftest import needs_reference

pytestmark = [pytest.mark.oracle, needs_reference, pytest.mark.usefixtures("cache_state")]


def _official_or_error(req, dialect):
    try:
        return render_official(req["messages"], tools=req["tools"], dialect=dialect,
                               add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except Exception as e:  # the official template crashed on this input
        return e


def _ours_or_refusal(req, dialect):
    try:
        return render(req["messages"], tools=req["tools"], dialect=dialect,
                      add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except ValueError as e:  # a refusal; anything else is a crash and fails the test
        return e


RENDERED = "render == official"
BOTH_REFUSE = "both refuse"
WE_REFUSE = "official renders (mangled), render refuses"


def _names(error: Exception, where: str) -> bool:
    text = str(error)
    return f"{where}:" in text if where.startswith("messages[") else where in text


def check_parity(req, dialect) -> str:
    """The oracle property for one request; returns (and records as a hypothesis event) the branch
    taken. ``render`` equals the official rendering; where the official template crashes, render
    refuses with its own clear error; render refuses what the official renders only for a
    deliberately defective input (``req["defect"]``), naming the defect's location."""
    official = _official_or_error(req, dialect)
    ours = _ours_or_refusal(req, dialect)
    where = req.get("defect")
    if isinstance(ours, Exception):
        assert isinstance(ours, KimiChatError), f"not our error: {ours!r}"
        if where is not None:
            assert _names(ours, where), f"the error does not name {where}: {ours}"
    if isinstance(official, Exception):
        # where the official template crashes, render must refuse too (never a silently different prompt)
        assert isinstance(ours, Exception), f"the official template refuses this input ({official!r}); render did not"
        branch = BOTH_REFUSE
    elif isinstance(ours, Exception):
        assert where is not None, f"render refused what the official template renders: {ours}"
        branch = WE_REFUSE
    else:
        assert ours == official
        branch = RENDERED
    event(branch)
    return branch


def _requests_and_odd(dialect):
    """Ordinary requests and odd-but-real ones (official parity covers both)."""
    return st.one_of(requests(dialect), odd_requests(dialect))


@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_render_equals_official(dialect, data):
    req = data.draw(_requests_and_odd(dialect))
    note(repr(req))
    assert check_parity(req, dialect) == RENDERED


@pytest.mark.parametrize("dialect", list(DIALECTS))
@given(data=st.data())
def test_odd_requests_render_as_official(dialect, data):
    """Every odd-but-real input (developer / other roles, missing ids and content, extra fields,
    unknown content parts, unread kwargs) renders the official bytes, never a refusal."""
    req = data.draw(odd_requests(dialect))
    note(repr(req))
    assert check_parity(req, dialect) == RENDERED


# A fixed-seed run (derandomized): the same examples every time, so the branch check is deterministic.
REFUSAL_EXAMPLES = 100


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_refusal_parity_takes_every_branch(dialect):
    """The property on inputs the official template refuses or mangles (defective_requests) mixed
    with ordinary and odd-but-real ones, and a check that every branch of it ran: a change that makes the refusal
    branch (or the equality branch) unreachable fails here instead of passing unseen."""
    seen: Counter[str] = Counter()

    @settings(derandomize=True, database=None, max_examples=REFUSAL_EXAMPLES)
    @given(req=st.one_of(requests(dialect), odd_requests(dialect), defective_requests(dialect), defective_requests(dialect)))
    def parity(req):
        note(repr(req))
        seen[check_parity(req, dialect)] += 1

    parity()
    assert set(seen) == {RENDERED, BOTH_REFUSE, WE_REFUSE}, f"{dialect}: branches taken {dict(seen)}"


@pytest.mark.parametrize("kind", DEFECTS)
def test_every_defect_is_refused_naming_it(kind):
    """Each kind of defect defective_requests documents is drawn, and render refuses it (in
    kimi-k2.5, which writes every field the defects touch) with an error naming its location."""
    @settings(derandomize=True, database=None, max_examples=5)
    @given(req=defective_requests("kimi-k2.5", kinds=(kind,)))
    def refused(req):
        note(repr(req))
        err = _ours_or_refusal(req, "kimi-k2.5")
        assert isinstance(err, KimiChatError) and _names(err, req["defect"]), err

    refused()


def test_openai_sdk_style_inputs_match_official():
    """Values the OpenAI SDK / numpy pipelines produce: None-valued tool fields, numpy scalars."""
    np = pytest.importorskip("numpy", reason="numpy comes with the test dependencies")
    msgs = [{"role": "user", "content": np.str_("hi")},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "functions.f:0", "type": "function",
             "function": {"name": "f", "arguments": {"n": np.int64(3)}}}]},
            {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"}]
    tools = [{"type": "function", "function": {"name": "f", "description": None,
              "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    for dialect in DIALECTS:
        assert render(msgs, tools=tools, dialect=dialect) == render_official(msgs, tools=tools, dialect=dialect), dialect


ISSUE_12_EXAMPLES = [
    # (what a real client sends, options): each refused before official parity, each rendered officially
    ([{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "hi"}], {}),
    ([{"role": "user", "content": "hi"}], {"enable_thinking": False}),
    ([{"role": "user", "content": "go"},
      {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "r"}], {}),
    ([{"role": "system", "content": "s"}, {"role": "user"}], {}),
    ([{"role": "user", "content": "hi", "metadata": {"trace": 1}, "id": "msg_1"}], {}),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA"}}, {"type": "text", "text": "t"}]}],
     {"reasoning_effort": "low"}),
    ([{"role": "function", "name": "f", "content": "42"}, {"role": "user", "content": "and?"}], {"preserve_thinking": True}),
]


@pytest.mark.parametrize("dialect", list(DIALECTS))
@pytest.mark.parametrize("messages, options", ISSUE_12_EXAMPLES)
def test_issue_12_examples_render_as_official(dialect, messages, options):
    assert render(messages, dialect=dialect, **options) == render_official(messages, dialect=dialect, **options)


@pytest.mark.parametrize("dialect", [*DIALECTS, "kimi-k3"])
def test_a_function_tool_without_function_renders_as_the_official_tokenizer_does(dialect):
    """The official templates (and encoding_k3) declare a {"type": "function"} entry as given (the K2.5/K2.6
    TypeScript encoder skips it, and the template falls back to the JSON list): render does the same
    (parity), lint reports it (tool-without-function), parse refuses it."""
    msgs, tools = [{"role": "user", "content": "hi"}], [{"type": "function"}]
    if dialect == "kimi-k3":
        from kimi_chat.families.k3.oracle import official_k3_encoding

        segments = official_k3_encoding().build_chat_segments(msgs, tools=tools, thinking_effort="max")
        official = "".join(s.text for s in segments)
    else:
        official = render_official(msgs, tools=tools, dialect=dialect)
    ours = render(msgs, tools=tools, dialect=dialect)
    assert ours == official and '"type":' in ours
