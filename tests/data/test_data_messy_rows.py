"""Messy rows as real data has them: a bad field is named where it is in its conversation, and ``null`` values a
JSON line holds in tool-call arguments and tool schemas reach the samples as written (not dropped as if Arrow had
added them).

Expected values: the error of rendering the whole conversation (:func:`kimi_chat.render`, which validates every
message where it stands) and the samples :func:`kimi_chat.data.conversation_samples` makes of the row as written
(checked against the official machinery in test_data_samples_oracle.py)."""

from __future__ import annotations

import json

import pytest

from conftest import needs_reference

from kimi_chat import KimiTokenizer, render
from kimi_chat.data import conversation_samples
from kimi_chat.dialects import get_dialect
from kimi_chat.errors import KimiChatError

pytestmark = needs_reference

pa = pytest.importorskip("pyarrow")

from data_pipeline_support import read_samples, write_jsonl  # noqa: E402

_TOKENIZERS: dict[str, KimiTokenizer] = {}


def _tok(dialect: str) -> KimiTokenizer:
    """The dialect's reference tokenizer (what ``kimi-chat prepare`` uses without ``--tokenizer``)."""
    if dialect not in _TOKENIZERS:
        _TOKENIZERS[dialect] = get_dialect(dialect).tokenizer()
    return _TOKENIZERS[dialect]


def _call(arguments) -> dict:
    return {"id": "functions.get_weather:0", "type": "function",
            "function": {"name": "get_weather", "arguments": arguments}}


BAD_FIELDS = {
    "content": ({"role": "assistant", "content": 5}, "content"),
    "reasoning": ({"role": "assistant", "content": "b", "reasoning_content": 7}, "reasoning_content"),
    "arguments": ({"role": "assistant", "content": "", "tool_calls": [_call(5)]}, "arguments"),
}


# (dialect, bad field) pairs the dialect refuses (K2 templates write non-string arguments with tojson, K3 reads
# no reasoning_content: those are rendered as given, as the official machinery does)
REFUSED = [(d, b) for d in ("kimi-k2.6", "kimi-k2-thinking", "kimi-k2-instruct-0905") for b in ("content", "reasoning")]
REFUSED += [("kimi-k3", "content"), ("kimi-k3", "arguments")]


@pytest.mark.parametrize("dialect, bad", REFUSED)
def test_a_bad_assistant_field_is_named_at_its_index_in_the_conversation(dialect, bad):
    message, field = BAD_FIELDS[bad]
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "again"}, message]
    with pytest.raises(KimiChatError) as whole:  # the whole conversation rendered: the message where it stands
        render(messages, dialect=dialect)
    assert "messages[3]" in str(whole.value) and field in str(whole.value)
    with pytest.raises(KimiChatError) as caught:
        conversation_samples(messages, dialect=dialect, tokenizer=_tok(dialect))
    got = str(caught.value)
    assert "messages[3]" in got and "messages[0]" not in got, got
    assert field in got


NULL_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": ["string", "null"], "default": None}}}}}]


@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k2-instruct-0905", "kimi-k3"])
@pytest.mark.parametrize("arguments", [{"city": None}, {"city": "Oslo", "units": None}], ids=["null", "one-null"])
def test_jsonl_nulls_in_arguments_and_schemas_reach_the_samples(tmp_path, dialect, arguments):
    from kimi_chat.cli import main

    messages = [{"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": "", "tool_calls": [_call(arguments)]},
                {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
                {"role": "assistant", "content": "18C."}]
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": "r0", "messages": messages, "tools": NULL_TOOLS}])
    out = tmp_path / "out"
    code = main(["prepare", str(path), "-d", dialect, "-o", str(out), "--workers", "1", "-q"])
    assert code == 0
    got = read_samples(out)
    want = conversation_samples(json.loads(json.dumps(messages)), dialect=dialect, tokenizer=_tok(dialect),
                                tools=NULL_TOOLS).samples
    assert [r["input_ids"] for r in got] == [s.input_ids for s in want]
    assert [r["labels"] for r in got] == [s.labels for s in want]


@pytest.mark.parametrize("field, value", [("train", "no"), ("train", 0), ("weight", "0"), ("weight", True)])
def test_a_train_or_weight_that_is_not_a_yes_or_no_is_a_bad_row_naming_it(field, value):
    from kimi_chat.data import InvalidRowError, conversations_to_batch

    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", field: value},
                {"role": "user", "content": "again"}, {"role": "assistant", "content": "b"}]
    res = conversations_to_batch([{"id": "r0", "messages": messages}], dialect="kimi-k2.6", tokenizer=_tok("kimi-k2.6"))
    bad = [(f.kind, f.sample_id, f.path) for f in res.findings if f.kind == "bad_row"]
    assert bad == [("bad_row", "r0", f"messages[1].{field}")]
    assert res.batch.num_rows == 0 and res.errors == 1
    with pytest.raises(InvalidRowError, match=rf"row 0 \(sample_id 'r0'\): .*messages\[1\]\.{field}"):
        conversations_to_batch([{"id": "r0", "messages": messages}], dialect="kimi-k2.6", tokenizer=_tok("kimi-k2.6"),
                               on_error="raise")


@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k3"])
def test_a_refused_field_is_the_bad_row_finding_path(dialect):
    from kimi_chat.data import conversations_to_batch

    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                {"role": "user", "content": "again"}, {"role": "assistant", "content": 5}]
    res = conversations_to_batch([{"messages": messages}], dialect=dialect, tokenizer=_tok(dialect))
    assert [(f.kind, f.path) for f in res.findings] == [("bad_row", "messages[3].content")]


@pytest.mark.filterwarnings("ignore::kimi_chat.errors.LoneSurrogateWarning")  # the renderer's: a run does not see it
@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k3"])
def test_lone_surrogates_are_reported_where_they_are(dialect):
    from kimi_chat.data import conversations_to_batch

    # as json.loads gives a "\ud800" escape without its pair
    messages = json.loads('[{"role": "user", "content": "a\\ud800b"}, {"role": "assistant", "content": "ok \\udc00"}]')
    tools = [{"type": "function", "function": {"name": "f", "description": "d\ud801",
                                               "parameters": {"type": "object"}}}]
    res = conversations_to_batch([{"messages": messages, "tools": tools}], dialect=dialect, tokenizer=_tok(dialect))
    got = sorted(f.path for f in res.findings if f.kind == "lone_surrogate")
    assert got == ["messages[0].content", "messages[1].content", "tools[0].function.description"]
    assert res.batch.num_rows == 1  # trained as the official tokenizer encodes it (U+FFFD), and said so
    clean = conversations_to_batch([{"messages": [{"role": "user", "content": "héllo 😀"},
                                                  {"role": "assistant", "content": "ok"}]}],
                                   dialect=dialect, tokenizer=_tok(dialect))
    assert [f for f in clean.findings if f.kind == "lone_surrogate"] == []


def test_preference_rows_with_json_string_columns_are_the_rows_as_lists():
    from kimi_chat.data import preference_batch

    prompt = [{"role": "user", "content": "Weather?"}]
    chosen = [{"role": "assistant", "content": "", "reasoning_content": "look it up",
               "tool_calls": [_call('{"city": "Oslo"}')]}]
    rejected = [{"role": "assistant", "content": "No idea.", "reasoning_content": "guess"}]
    row = {"id": "p0", "prompt": prompt, "chosen": chosen, "rejected": rejected, "tools": NULL_TOOLS}
    stored = {k: v if k == "id" else json.dumps(v) for k, v in row.items()}  # as a Parquet JSON-string column
    tok = _tok("kimi-k2.6")
    want = preference_batch([row], dialect="kimi-k2.6", tokenizer=tok)
    got = preference_batch([stored], dialect="kimi-k2.6", tokenizer=tok)
    assert want.errors == 0 and want.batch.num_rows == 1
    assert got.errors == 0, [f.message for f in got.findings]
    assert got.batch.to_pylist() == want.batch.to_pylist()
    bad = preference_batch([{**stored, "rejected": json.dumps([{"role": "assistant", "content": 5}])}],
                           dialect="kimi-k2.6", tokenizer=tok)
    assert [(f.kind, f.path) for f in bad.findings] == [("bad_row", "messages[1].content")]


def test_a_jsonl_file_with_a_byte_order_mark_and_crlf_lines_reads_every_row(tmp_path):
    from kimi_chat.data.sources import open_source

    rows = [{"id": f"r{k}", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
            for k in range(3)]
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\r\n" for r in rows))
    src = open_source(path, chunk_rows=2)
    chunks = list(src.chunks())
    assert [c.bad for c in chunks] == [[], []]
    assert [r for c in chunks for r in c.rows] == rows
    assert [src.read_chunk(e).rows for e in src.plan()] == [c.rows for c in chunks]


def test_render_dataset_of_rows_without_any_finding(tmp_path):
    datasets = pytest.importorskip("datasets")
    from kimi_chat.data import conversations_to_batch, render_dataset, render_dataset_with_findings

    rows = [{"id": f"r{k}", "messages": json.dumps([{"role": "user", "content": f"q{k}"},
                                                    {"role": "assistant", "content": f"a{k}"}])} for k in range(3)]
    ds = datasets.Dataset.from_list(rows)
    tok = _tok("kimi-k2.6")
    out = render_dataset_with_findings(ds, dialect="kimi-k2.6", tokenizer=tok)
    assert out.totals() == {} and out.findings.num_rows == 0 and out.bad_rows().num_rows == 0
    samples = render_dataset(ds, dialect="kimi-k2.6", tokenizer=tok)
    want = conversations_to_batch([{**r, "messages": json.loads(r["messages"])} for r in rows], dialect="kimi-k2.6",
                                  tokenizer=tok)
    assert want.findings == []
    assert samples["input_ids"] == want.batch.to_pydict()["input_ids"]


def _weather_call(k: int) -> dict:
    return {"id": f"functions.get_weather:{k}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": ["Oslo", "Lima"][k % 2]})}}


@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k2-instruct-0905", "kimi-k3"])
def test_tool_results_for_unknown_calls_and_unanswered_calls_are_reported(dialect):
    from kimi_chat import lint
    from kimi_chat.data.findings import conversation_findings

    tools = NULL_TOOLS
    calls = [_weather_call(0), _weather_call(1)]
    base = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    answered = base + [{"role": "tool", "tool_call_id": c["id"], "content": "18C"} for c in reversed(calls)] + [
        {"role": "assistant", "content": "Both 18C."}]
    unknown = base + [{"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
                      {"role": "tool", "tool_call_id": "call_abc123", "content": "20C"},
                      {"role": "assistant", "content": "Done."}]

    def kinds(messages):
        return sorted((f.kind, f.path) for f in conversation_findings(messages, dialect=dialect, tools=tools)
                      if f.kind in ("unknown_tool_result", "unanswered_tool_call"))

    assert kinds(answered) == []  # results in another order than the calls: each call answered
    # lint's own unknown-tool-call-id finding, at the result; the call it did not answer, at the call
    linted = [w.message_index for w in lint(unknown, dialect=dialect, tools=tools) if w.code == "unknown-tool-call-id"]
    assert linted == [3]
    assert kinds(unknown) == [("unanswered_tool_call", "messages[1].tool_calls[1]"),
                              ("unknown_tool_result", "messages[3].tool_call_id")]


@pytest.mark.parametrize("dialect", ["kimi-k2.6", "kimi-k2-thinking", "kimi-k3"])
def test_reasoning_under_two_keys_with_different_text_is_reported(dialect):
    from kimi_chat.data import conversations_to_batch

    def row(**reasoning):
        return {"messages": [{"role": "user", "content": "q"},
                             {"role": "assistant", "content": "a", **reasoning}]}

    rows = [row(reasoning_content="first thought", reasoning="another thought"),
            row(reasoning_content="same", reasoning="same"),  # one text: nothing lost
            row(reasoning_content="only one"),
            row(reasoning_content="kept", thinking="   ")]  # blank: no text to lose
    res = conversations_to_batch(rows, dialect=dialect, tokenizer=_tok(dialect))
    got = [(f.row, f.path) for f in res.findings if f.kind == "reasoning_conflict"]
    assert got == [(0, "messages[1]")]
    assert res.batch.num_rows == 4  # reported, still trained as the dialect renders it


def test_a_weight_other_than_zero_or_one_is_reported_and_trained_whole():
    from kimi_chat.data import conversations_to_batch

    def row(weight):
        return {"messages": [{"role": "user", "content": "q"},
                             {"role": "assistant", "content": "a", "weight": weight}]}

    rows = [row(0.5), row(1), row(1.0), row(0), row(2)]
    res = conversations_to_batch(rows, dialect="kimi-k2.6", tokenizer=_tok("kimi-k2.6"))
    got = [(f.row, f.path) for f in res.findings if f.kind == "partial_weight"]
    assert got == [(0, "messages[1].weight"), (4, "messages[1].weight")]
    trained_rows = sorted(set(res.batch.column("sample_id").to_pylist()))
    assert trained_rows == ["0", "1", "2", "4"]  # weight 0: no sample; 0.5 and 2: trained whole, and said so
