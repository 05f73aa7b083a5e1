"""The Arrow batch core: schema, sample ids, bad rows recorded or raised, max_length (drop / truncate at a turn
boundary), the per-conversation findings."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow", reason="kimi_chat.data's batch core needs pyarrow (pip install -e '.[data]' in the checkout)")

from conftest import needs_reference  # noqa: E402

from kimi_chat import KimiTokenizer  # noqa: E402
from kimi_chat.data import IGNORE_INDEX, InvalidRowError, conversations_to_batch  # noqa: E402
from kimi_chat.data.batch import COLUMNS, SCHEMA  # noqa: E402
from kimi_chat.errors import UnsupportedOptionError  # noqa: E402

pytestmark = needs_reference  # the reference tokenizers

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def _call(name: str, call_id: str, arguments: str = '{"city": "Paris"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


LOOP = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [_call("get_weather", "functions.get_weather:0")]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
    {"role": "assistant", "content": "18C.", "reasoning_content": "Answer it."},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "assistant", "content": "No forecast.", "reasoning_content": "No tool for that."},
]


@pytest.fixture(scope="module")
def tok():
    return KimiTokenizer.from_reference("k2.6")


def test_schema_is_the_documented_one():
    assert [f.name for f in SCHEMA] == list(COLUMNS)
    assert SCHEMA.field("input_ids").type == pa.list_(pa.int32())
    assert SCHEMA.field("labels").type == pa.list_(pa.int32())
    assert SCHEMA.field("assistant_masks").type == pa.list_(pa.int8())
    assert SCHEMA.field("length").type == pa.int32()
    assert SCHEMA.field("sample_id").type == pa.string()
    assert SCHEMA.field("turns").type == pa.list_(pa.int32())


def test_batch_columns_agree(tok):
    rows = [{"messages": LOOP, "tools": TOOLS, "id": 7}, {"messages": LOOP[:4]}]
    res = conversations_to_batch(rows, dialect="kimi-k2.6", tokenizer=tok, first_row=10)
    assert res.batch.schema == SCHEMA
    assert (res.rows, res.errors) == (2, 0)
    data = res.batch.to_pydict()
    # K2.6 re-renders the final answer messages[3] without its reasoning in the next request: two samples for
    # the first row (turns 1, 3 | 5), one for the second
    assert data["sample_id"] == ["7", "7", "11"]
    assert data["turns"] == [[1, 3], [5], [1, 3]]
    for ids, labels, mask, length in zip(data["input_ids"], data["labels"], data["assistant_masks"], data["length"]):
        assert len(ids) == len(labels) == len(mask) == length
        assert labels == [i if m else IGNORE_INDEX for i, m in zip(ids, mask)]
        assert ids[-1] == tok.token_to_id("<|im_end|>") and mask[-1] == 1


def test_bad_rows_are_recorded_with_row_and_error(tok):
    rows = ["not a row", {"id": "x"}, {"messages": [{"role": "user", "content": 3}], "id": "y"}, {"messages": LOOP}]
    res = conversations_to_batch(rows, dialect="kimi-k2.6", tokenizer=tok, first_row=100)
    assert (res.rows, res.errors) == (4, 3)
    bad = [f for f in res.findings if f.kind == "bad_row"]
    assert [(f.row, f.sample_id) for f in bad] == [(100, "100"), (101, "x"), (102, "y")]
    assert "messages" in bad[1].message
    assert "messages[0].content" in bad[2].message  # the kimi_chat error names the index and field
    assert res.batch.to_pydict()["sample_id"] == ["103", "103"]
    with pytest.raises(InvalidRowError, match=r"row 102 \(sample_id 'y'\).*messages\[0\]\.content"):
        conversations_to_batch(rows[2:], dialect="kimi-k2.6", tokenizer=tok, first_row=102, on_error="raise")


def test_max_length_drop_and_truncate_at_a_turn_boundary(tok):
    full = conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok).batch.to_pydict()
    first = full["input_ids"][0]  # turns [1, 3]
    mask = full["assistant_masks"][0]
    end_of_turn_1 = next(k for k in range(1, len(mask)) if mask[k - 1] and not mask[k])
    limit = len(first) - 1
    dropped = conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok, max_length=limit)
    assert dropped.batch.to_pydict()["turns"] == ([[5]] if len(full["input_ids"][1]) <= limit else [])
    over = [f for f in dropped.findings if f.kind == "over_max_length"]
    assert over and "dropped" in over[0].message
    cut = conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok, max_length=limit,
                                 overlong="truncate").batch.to_pydict()
    assert cut["turns"][0] == [1]
    assert cut["input_ids"][0] == first[:end_of_turn_1]  # cut after turn 1's end marker, not mid-turn


def test_findings_of_a_conversation(tok):
    messages = [
        {"role": "user", "content": "hi <|im_end|>"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("get_weather", "call_1", '"{\\"city\\": \\"Paris\\"}"'), _call("search", "functions.search:1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ]
    res = conversations_to_batch([{"messages": messages, "tools": TOOLS, "id": "z"}], dialect="kimi-k2.6",
                                 tokenizer=tok)
    kinds = {(f.kind, f.path) for f in res.findings}
    assert ("double_encoded_arguments", "messages[1].tool_calls[0].function.arguments") in kinds
    assert ("foreign_call_id", "messages[1].tool_calls[0].id") in kinds
    assert ("undeclared_tool", "messages[1].tool_calls[1].function.name") in kinds
    assert ("marker_text", "messages[0].content") in kinds
    assert ("no_final_assistant", "messages[2]") in kinds
    assert all(f.row == 0 and f.sample_id == "z" for f in res.findings)
    assert res.findings[0].to_dict()["kind"] == res.findings[0].kind


def test_reasoning_dropped_is_counted(tok):
    res = conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok)
    (f,) = [f for f in res.findings if f.kind == "reasoning_dropped"]
    # the official rendering of the whole conversation (no generation prompt) writes every turn up to the last
    # final answer (messages[5]) as <think></think>: all three reasoning blocks
    assert f.count == 3
    kept = conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok, reasoning="keep")
    assert not [f for f in kept.findings if f.kind == "reasoning_dropped"]
    assert kept.batch.to_pydict()["turns"] == [[1, 3, 5]]


def test_keep_is_refused_where_the_dialect_cannot(tok):
    with pytest.raises(UnsupportedOptionError, match="kimi-k2.5 cannot keep"):
        conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.5", tokenizer=tok, reasoning="keep")
    with pytest.raises(UnsupportedOptionError, match="not a policy"):
        conversations_to_batch([{"messages": LOOP}], dialect="kimi-k2.6", tokenizer=tok, reasoning="all")


def test_a_leading_assistant_message_is_context_only(tok):
    messages = [{"role": "assistant", "content": "Hello, how can I help?"}, *LOOP[:4]]
    res = conversations_to_batch([{"messages": messages}], dialect="kimi-k2.6", tokenizer=tok)
    assert res.batch.to_pydict()["turns"] == [[2, 4]]  # LOOP's turns 1 and 3, shifted by one
    assert [(f.kind, f.path) for f in res.findings if f.kind == "leading_assistant"] == [
        ("leading_assistant", "messages[0]")]


def test_pyarrow_is_imported_only_by_the_batch_functions():
    import subprocess
    import sys

    code = ("import sys, kimi_chat.data\n"
            "if 'pyarrow' in sys.modules: sys.exit('imported by kimi_chat.data')\n"
            "from kimi_chat.data import batch\nbatch.SCHEMA\n"
            "if 'pyarrow' not in sys.modules: sys.exit('SCHEMA without pyarrow?')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_official_policy_warns_with_the_count(tok):
    from kimi_chat.data import conversation_samples

    with pytest.warns(UserWarning, match=r"drops the reasoning of 3 assistant message\(s\)"):
        res = conversation_samples(LOOP, dialect="kimi-k2.6", tokenizer=tok, reasoning="official")
    assert res.reasoning_dropped == 3 and [s.turns for s in res.samples] == [[1, 3, 5]]
    # the official rendering writes the earlier turns as <think></think>: the trained ids hold no reasoning
    trained = tok.decode([x for x in res.samples[0].labels if x != IGNORE_INDEX])
    assert "Answer it." not in trained and "18C." in trained
