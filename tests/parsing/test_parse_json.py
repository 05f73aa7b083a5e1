"""Tool-call arguments as JSON at the edges, both families: the verdict is RFC 8259's.

``NaN``/``Infinity`` are not JSON (not ``ok``); an integer of any length and nesting of any depth
are JSON (``ok``, where ``json.loads`` alone said ``invalid_json``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parse_helpers import END, call, feed_chunks, section

from kimi_chat.output import ToolCallStatus, parse
from kimi_chat.output.jsonvalue import INVALID, _iterative, json_value

OK, BAD = ToolCallStatus.OK, ToolCallStatus.INVALID_JSON
K3_HEAD = ('<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>')
K3_TAIL = "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"

BIG = "9" * 5000
DEEP_LIST = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"x":' * 3000 + "1" + "}" * 3000


def statuses(arguments: str, value: str, typ: str) -> list[ToolCallStatus]:
    """The status of one call of ``f``: K2 with ``arguments``; K3 with them as a json element, and
    with ``value`` as the argument ``a`` of type ``typ``; whole and streamed one character at a time."""
    texts = [("kimi-k2-instruct-0905", section(call("functions.f:0", arguments)) + END),
             ("kimi-k3", K3_HEAD + '<|open|>json type="object"<|sep|>' + arguments + "<|close|>json<|sep|>" + K3_TAIL),
             ("kimi-k3", K3_HEAD + f'<|open|>argument key="a" type="{typ}"<|sep|>' + value
              + "<|close|>argument<|sep|>" + K3_TAIL)]
    out = []
    for dialect, text in texts:
        whole = parse(text, dialect=dialect)
        _, sp = feed_chunks([text[i:i + 97] for i in range(0, len(text), 97)], dialect=dialect)
        assert sp.message == whole
        out.append(whole.tool_calls[0].status)
    return out


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "[1, NaN]"])
def test_nan_and_infinity_are_not_json(value):
    typ = "array" if value.startswith("[") else "number"
    assert statuses('{"a": %s}' % value, value, typ) == [BAD, BAD, BAD]


@pytest.mark.parametrize("value, typ", [(BIG, "number"), ("-" + BIG, "integer"), (DEEP_LIST, "array"),
                                        (DEEP_OBJECT, "object"), ("1e400", "number")])
def test_long_integers_and_deep_nesting_are_json(value, typ):
    assert statuses('{"a": %s}' % value, value, typ) == [OK, OK, OK]


@pytest.mark.parametrize("value, typ", [(DEEP_LIST[:-1], "array"), ("[" * 3000 + "1,]" + "]" * 2999, "array"),
                                        ('{"x":' * 3000 + "}" * 3000, "object")])
def test_deep_but_broken_is_invalid(value, typ):
    assert statuses('{"a": %s}' % value, value, typ) == [BAD, BAD, BAD]


def test_the_value_of_a_deep_text_is_its_structure():
    v = json_value('{"k": ' + DEEP_LIST + ', "n": ' + BIG + "}")
    assert isinstance(v, dict) and list(v) == ["k", "n"] and v["n"] == 0  # too long for int(): type kept
    depth, x = 0, v["k"]
    while x:
        depth, x = depth + 1, x[0]
    assert depth == 2999 and x == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.data())
def test_the_iterative_reader_agrees_with_json_loads(value, data):
    """Where ``json.loads`` has a verdict (no recursion limit, no constant), the reader without
    recursion has the same one, with the same value, on JSON and on texts one edit away from it."""
    text = json.dumps(value, indent=data.draw(st.sampled_from([None, 1])))
    if data.draw(st.booleans()) and text:
        i = data.draw(st.integers(0, len(text) - 1))
        text = text[:i] + data.draw(st.sampled_from(["", ",", "]", "}", "[", "{", '"', ":", " ", "x", "0", "\\"])) \
            + text[i + data.draw(st.integers(0, 1)):]
    try:
        want = json.loads(text)
    except ValueError:
        want = INVALID
    got = _iterative(text)
    if want is INVALID or got is INVALID:
        assert got is want
    else:
        assert json.dumps(got) == json.dumps(want) and json_value(text) == want
