"""Raw string terminals (kimi_chat.grammar.strings): a raw string is accepted exactly when llguidance's
``%json`` accepts the same string as a JSON string of the same schema (formats, patterns, lengths), and
the composition keywords (``oneOf`` exclusivity, ``not``, ``if``/``then``/``else``, ``enum`` against the
other keywords) are what JSON Schema says (``jsonschema``)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import require_in_ci

_HAVE = all(importlib.util.find_spec(m) is not None for m in ("llguidance", "jsonschema"))
require_in_ci(_HAVE, "the constraints extra (pip install -e '.[test]': llguidance, jsonschema)")
if not _HAVE:
    pytest.skip("llguidance and jsonschema are not installed", allow_module_level=True)

import jsonschema  # noqa: E402
import llguidance  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kimi_chat.dialects import get_dialect  # noqa: E402
from kimi_chat.grammar.request import byte_tokenizer  # noqa: E402
from kimi_chat.grammar.strings import FORMATS, string_terminal  # noqa: E402

_TOK = byte_tokenizer(get_dialect("kimi-k3"))[0]


def _accepts(lark: str, text: str) -> bool:
    m = llguidance.LLMatcher(_TOK, llguidance.grammar_from("lark", lark), log_level=0)
    return m.consume_tokens(list(text.encode())) and not m.is_error() and m.is_accepting()


def _raw(schema: dict, text: str) -> bool:
    notes: list = []
    term = string_terminal(schema, schema, ("<|open|>",), "#", notes,
                           lambda v, s: jsonschema.Draft202012Validator(s).is_valid(v))
    assert not notes, notes
    return term is not None and _accepts(f"start: a\na: A\nA: {term}\n", text)


def _json(schema: dict, text: str) -> bool:
    return _accepts("start: a\na: %json " + json.dumps(schema), json.dumps(text))


_NEAR = {  # strings near each format: valid ones and small mistakes
    "date": ["2024-02-29", "2023-13-01", "2024-04-31", "24-01-01", "2024-1-01"],
    "time": ["12:30:00Z", "23:59:60+01:00", "24:00:00Z", "12:30:00", "12:30:00.5z"],
    "date-time": ["2024-01-02T03:04:05Z", "2024-01-02t03:04:05.123+05:30", "2024-01-02 03:04:05Z"],
    "duration": ["P1Y2M3DT4H5M6S", "PT5M", "P3W", "P", "PT", "P1H"],
    "email": ["a.b@example.com", "x@[192.168.0.1]", "a..b@x.y", "@x", "a@-x.com"],
    "hostname": ["example.com", "a-b.c", "-a.com", "a_b.com", "x" * 64],
    "ipv4": ["1.2.3.4", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3"],
    "ipv6": ["::1", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "::ffff:1.2.3.4", ":::"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000", "g23e4567-e89b-12d3-a456-426614174000"],
    "uri": ["https://example.com/a?b=c#d", "mailto:a@b.c", "urn:isbn:0451450523", "http://[::1]:80/", "no scheme", "1http://x"],
}


_RFC_ONLY = {("ipv6", "::ffff:1.2.3.4")}
"""Valid by the RFC (4291: an IPv4 address in the low 32 bits) and jsonschema's checker, refused by
llguidance's ipv6 expression: the raw terminal follows the RFC."""


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_formats_are_as_strict_as_llguidance(fmt):
    schema = {"type": "string", "format": fmt}
    for text in _NEAR[fmt]:
        if (fmt, text) in _RFC_ONLY:
            assert _raw(schema, text) and not _json(schema, text)
            assert jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(text)
            continue
        assert _raw(schema, text) == _json(schema, text), (fmt, text)


@settings(max_examples=60, deadline=None)
@given(fmt=st.sampled_from(sorted(FORMATS)), text=st.text(alphabet="0123456789abcdefT:.-+Z@P/[]", max_size=14))
def test_formats_agree_with_llguidance_on_random_text(fmt, text):
    schema = {"type": "string", "format": fmt}
    assert _raw(schema, text) == _json(schema, text), (fmt, text)


@settings(max_examples=60, deadline=None)
@given(pattern=st.sampled_from(["^[a-z]+$", "[0-9]", "^ab", "x$|^y", "^(a|b)c*$", "\\d{2}"]),
       lo=st.integers(0, 3), text=st.text(alphabet="abcxy0129\n", max_size=6))
def test_patterns_and_lengths_agree_with_llguidance(pattern, lo, text):
    schema = {"type": "string", "pattern": pattern, "minLength": lo, "maxLength": lo + 3}
    assert _raw(schema, text) == _json(schema, text), (pattern, text)


@settings(max_examples=80, deadline=None)
@given(text=st.text(alphabet="abc1", max_size=4))
def test_composition_is_json_schema(text):
    for schema in (
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]},
        {"type": "string", "not": {"pattern": "^a"}},
        {"type": "string", "if": {"pattern": "1"}, "then": {"maxLength": 2}, "else": {"minLength": 3}},
        {"allOf": [{"type": "string", "minLength": 1}, {"anyOf": [{"const": "ab"}, {"pattern": "^c"}]}]},
        {"type": "string", "enum": ["a", "abc", "cc", 1], "maxLength": 2},
    ):
        assert _raw(schema, text) == jsonschema.Draft202012Validator(schema).is_valid(text), (schema, text)


def test_no_marker_spelling_in_a_raw_string():
    assert _raw({"type": "string"}, "a<|open|") and not _raw({"type": "string"}, "a<|open|>b")
