"""Call arguments and tool schemas stored as Arrow structs: one key order for the whole column and a missing key
read back as ``null``, so what a row wrote is gone before kimi_chat reads it. Reading such an input warns, naming
the field and the fix (JSON strings); an input holding them as JSON strings reads without a word."""

from __future__ import annotations

import json
import warnings

import pytest

from conftest import needs_reference

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from kimi_chat.data.sources import open_source, struct_json_fields  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}}]


def _row(arguments: object) -> dict:
    return {"messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": "", "tool_calls": [
                             {"id": "functions.f:0", "type": "function",
                              "function": {"name": "f", "arguments": arguments}}]}],
            "tools": TOOLS}


def test_a_struct_column_has_one_key_order_for_every_row():
    # the premise: the second row's {"b", "a"} comes back in the first row's order
    table = pa.Table.from_pylist([_row({"a": 1, "b": "x"}), _row({"b": "y", "a": 2})])
    back = table.to_pylist()[1]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert list(back) == ["a", "b"]


def test_struct_arguments_and_parameters_are_named():
    schema = pa.Table.from_pylist([_row({"a": 1, "b": "x"})]).schema
    assert struct_json_fields(schema) == ["messages[].tool_calls[].function.arguments",
                                          "tools[].function.parameters"]


def test_reading_struct_columns_from_parquet_warns_naming_them(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist([_row({"a": 1, "b": "x"})]), path)
    with pytest.warns(UserWarning, match=r"messages\[\]\.tool_calls\[\]\.function\.arguments, "
                                         r"tools\[\]\.function\.parameters stored as an Arrow struct.*JSON strings"):
        open_source(path)


def test_json_string_columns_read_without_a_warning(tmp_path):
    path = tmp_path / "rows.parquet"
    row = _row(json.dumps({"b": "y", "a": 2}))
    table = pa.Table.from_pylist([{"messages": json.dumps(row["messages"]), "tools": json.dumps(row["tools"])}])
    pq.write_table(table, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = open_source(path)
    assert source.kind == "parquet"


def test_arguments_already_json_strings_inside_struct_messages_are_not_named():
    # messages as structs is fine when the JSON-valued fields are strings (the OpenAI form)
    schema = pa.Table.from_pylist([{"messages": _row(json.dumps({"a": 1}))["messages"]}]).schema
    assert struct_json_fields(schema) == []


@needs_reference
def test_render_dataset_warns_for_a_dataset_of_struct_arguments():
    datasets = pytest.importorskip("datasets")
    from kimi_chat.data.dataset import render_dataset_with_findings

    ds = datasets.Dataset.from_list([_row({"a": 1, "b": "x"})])
    with pytest.warns(UserWarning, match=r"render_dataset: messages\[\]\.tool_calls\[\]\.function\.arguments"):
        out = render_dataset_with_findings(ds, dialect="kimi-k2-instruct-0905", load_from_cache_file=False)
    assert out.samples.num_rows == 1  # warned, and rendered
