"""The field checks of :func:`kimi_chat.servers.contract.read_chat_request`: messages, tools (request level
and a system message's), ``tool_choice``, ``response_format``, the sampling parameters, and the lint
findings a request is refused for. Each failure is a :class:`~kimi_chat.errors.RequestError` naming the
field (``param``) and carrying the validator's finding (``finding``). The messages, tools and template
options are checked by the one validator (:class:`kimi_chat.validation.Validator` in ``api`` mode); this
module holds the body's other fields (``tool_choice``, ``response_format``, sampling, nesting)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..errors import RequestError
from ..validation import (
    LINT_REFUSED,
    TOOL_NAME,
    Mode,
    Validator,
    api_error,
    api_message_findings,
    api_tool_findings,
    check_schema,
    refuse,
)
from ..validation import UNREAD_OPTION_CODES as _UNREAD_OPTION_CODES
from ..validation import _printable

__all__ = ["TOOL_NAME", "SCHEMA_NAME", "MOONSHOT_FIXED", "MOONSHOT_TEMPERATURE", "MAX_N", "MAX_DEPTH", "DECODE_DEPTH",
           "check_messages", "check_tools", "check_tool_choice", "check_response_format", "check_sampling",
           "check_schema", "check_json_values", "nests_deeper_than", "deep_json_error", "lint_refusals", "LINT_REFUSED", "OPENAI_FIELDS", "EXTENSION_FIELDS",
           "unknown_fields", "check_honoured"]

SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""``response_format.json_schema.name`` (OpenAI's rule)."""

MOONSHOT_FIXED: dict[str, float] = {"top_p": 0.95, "presence_penalty": 0.0, "frequency_penalty": 0.0, "n": 1}
"""The sampling parameters Moonshot fixes for Kimi models (KVV ``tests/params``): any other value is a 400
under ``contract="moonshot"``."""

MOONSHOT_TEMPERATURE = (0.0, 1.0)
"""The ``temperature`` range Moonshot accepts (KVV ``tests/params``: 0, 0.6 and 1 pass; -0.1, 1.1 and 2
are refused); without one, ``contract="moonshot"`` uses Moonshot's default, 1.0 with thinking on and
0.6 with it off (an instruct dialect, which does not think: 0.6)."""

MAX_N = 128
"""The most choices one request may ask for (``n``: OpenAI's limit)."""

_TOOL_CHOICES = ("auto", "none", "required")
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _need(cond: bool, message: str, param: str | None, code: str = "invalid_value") -> None:
    if not cond:
        raise refuse(message, param, code)


def check_messages(messages: Any) -> tuple[list[dict[str, Any]], list[tuple[str, list[dict[str, Any]]]]]:
    """The messages' shape under the API contract (:func:`kimi_chat.validation.api_message_findings`): the
    first refusal raised as its 400; returns the messages and ``(where, tools)`` of every system message that
    declares tools."""
    problems, dynamic = api_message_findings(messages)
    if problems:
        raise api_error(problems[0])
    return messages, dynamic


def check_tools(tools: Any, where: str) -> None:
    """A tools list under the API contract (:func:`kimi_chat.validation.api_tool_findings`): the first
    refusal raised as its 400."""
    problems = api_tool_findings(tools, where)
    if problems:
        raise api_error(problems[0])


def check_tool_choice(tool_choice: Any, names: Mapping[str, str]) -> Any:
    """``tool_choice`` against the declared tool names (request level and dynamic)."""
    if tool_choice is None:
        return None
    if isinstance(tool_choice, str):
        _need(tool_choice in _TOOL_CHOICES, f"must be one of {', '.join(map(repr, _TOOL_CHOICES))} or a named "
              f"function, got {tool_choice!r}", "tool_choice")
        _need(tool_choice != "required" or bool(names), "'required' needs at least one tool (in tools or in a "
              "system message's tools)", "tool_choice")
        return tool_choice
    _need(isinstance(tool_choice, dict), f"must be a string or a named function object, got {_kind(tool_choice)}",
          "tool_choice", "invalid_type")
    _need(tool_choice.get("type") == "function", f"type must be \"function\", got {tool_choice.get('type')!r}",
          "tool_choice.type")
    fn = tool_choice.get("function")
    _need(isinstance(fn, dict), "must be an object with the function's name", "tool_choice.function",
          "missing_field" if fn is None else "invalid_type")
    name = fn.get("name")
    _need(isinstance(name, str), "is required (a string)", "tool_choice.function.name", "missing_field")
    _need(name in names, f"names {name!r}, which is not a declared tool", "tool_choice.function.name")
    return tool_choice


def check_response_format(rf: Any) -> dict[str, Any] | None:
    """``response_format``: ``text``, ``json_object`` or ``json_schema`` with its ``json_schema`` object."""
    if rf is None:
        return None
    _need(isinstance(rf, dict), f"must be an object, got {_kind(rf)}", "response_format", "invalid_type")
    kind = rf.get("type")
    _need(kind is not None, "is required", "response_format.type", "missing_field")
    _need(kind in _RESPONSE_FORMATS, f"must be one of {', '.join(map(repr, _RESPONSE_FORMATS))}, got {kind!r}",
          "response_format.type")
    if kind != "json_schema":
        return rf
    js = rf.get("json_schema")
    _need(js is not None, "is required with type 'json_schema'", "response_format.json_schema", "missing_field")
    _need(isinstance(js, dict), f"must be an object, got {_kind(js)}", "response_format.json_schema", "invalid_type")
    name = js.get("name")
    _need(name is not None, "is required", "response_format.json_schema.name", "missing_field")
    _need(isinstance(name, str) and SCHEMA_NAME.fullmatch(name) is not None,
          f"must be 1-64 letters, digits, '_' or '-', got {name!r}", "response_format.json_schema.name")
    _need("schema" in js, "is required", "response_format.json_schema.schema", "missing_field")
    _need(isinstance(js["schema"], dict), f"must be a JSON Schema object, got {_kind(js['schema'])}",
          "response_format.json_schema.schema", "invalid_type")
    check_schema(js["schema"], "response_format.json_schema.schema")
    strict = js.get("strict")
    _need(strict is None or isinstance(strict, bool), f"must be true or false, got {strict!r}",
          "response_format.json_schema.strict", "invalid_type")
    return rf


def _logit_bias(value: Any) -> dict[int, float] | None:
    if value is None:
        return None
    _need(isinstance(value, dict), f"must be an object of token id -> bias, got {_kind(value)}", "logit_bias",
          "invalid_type")
    out: dict[int, float] = {}
    for key, bias in value.items():
        where = f"logit_bias.{key}"
        _need(isinstance(key, str) and key.isdigit(), f"the key must be a token id (digits), got {key!r}", where)
        _need(isinstance(bias, (int, float)) and not isinstance(bias, bool) and math.isfinite(bias)
              and -100 <= bias <= 100, f"must be a number between -100 and 100, got {bias!r}", where)
        out[int(key)] = float(bias)
    return out


def _number(body: Mapping[str, Any], key: str, lo: float, hi: float) -> float | None:
    v = body.get(key)
    if v is None:
        return None
    _need(isinstance(v, (int, float)) and not isinstance(v, bool), f"must be a number, got {_kind(v)}", key,
          "invalid_type")
    _need(math.isfinite(v) and lo <= v <= hi, f"must be between {lo:g} and {hi:g}, got {v!r}", key)
    return float(v)


def _integer(body: Mapping[str, Any], key: str, lo: int | None) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    _need(isinstance(v, int) and not isinstance(v, bool), f"must be an integer, got {_kind(v)}", key, "invalid_type")
    _need(lo is None or v >= lo, f"must be at least {lo}, got {v}", key)
    return int(v)


def _bool(body: Mapping[str, Any], key: str, default: bool, where: str | None = None) -> bool:
    v = body.get(key)
    if v is None:
        return default
    _need(isinstance(v, bool), f"must be true or false, got {v!r}", where or key, "invalid_type")
    return v


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    _need(isinstance(items, list), f"must be a string or a list of strings, got {_kind(value)}", "stop", "invalid_type")
    for j, s in enumerate(items):
        _need(isinstance(s, str) and s != "", f"must be a non-empty string, got {s!r}", f"stop[{j}]" if
              not isinstance(value, str) else "stop", "invalid_type")
    return list(items)


def check_sampling(body: Mapping[str, Any], contract: str) -> dict[str, Any]:
    """The sampling and streaming fields (OpenAI's types and ranges); under ``contract="moonshot"`` the
    values Moonshot fixes (:data:`MOONSHOT_FIXED`, :data:`MOONSHOT_TEMPERATURE`)."""
    out: dict[str, Any] = {
        "temperature": _number(body, "temperature", 0.0, 2.0),
        "top_p": _number(body, "top_p", 0.0, 1.0),
        "presence_penalty": _number(body, "presence_penalty", -2.0, 2.0),
        "frequency_penalty": _number(body, "frequency_penalty", -2.0, 2.0),
        "seed": _integer(body, "seed", None),
        "stop": _stop(body.get("stop")),
        "stream": _bool(body, "stream", False),
        "parallel_tool_calls": _bool(body, "parallel_tool_calls", True),
    }
    out["top_k"] = _integer(body, "top_k", 0)
    out["min_p"] = _number(body, "min_p", 0.0, 1.0)
    out["repetition_penalty"] = _number(body, "repetition_penalty", 0.0, 10.0)
    _need(out["repetition_penalty"] != 0.0, "must be more than 0 (1 is no penalty)", "repetition_penalty")
    out["logit_bias"] = _logit_bias(body.get("logit_bias"))
    out["logprobs"] = _bool(body, "logprobs", False)
    top = _integer(body, "top_logprobs", 0)
    _need(top is None or top <= 20, f"must be at most 20, got {top}", "top_logprobs")
    _need(top is None or out["logprobs"], "needs logprobs: true", "top_logprobs")
    out["top_logprobs"] = top or 0
    n = _integer(body, "n", 1)
    _need(n is None or n <= MAX_N, f"must be at most {MAX_N} (choices per request), got {n}", "n")
    out["n"] = 1 if n is None else n
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    out["max_tokens"] = _integer(body, key, 1)
    out["max_tokens_param"] = key
    so = body.get("stream_options")
    _need(so is None or isinstance(so, dict), f"must be an object, got {_kind(so)}", "stream_options", "invalid_type")
    out["include_usage"] = _bool(so or {}, "include_usage", False, "stream_options.include_usage")
    if contract == "moonshot":
        lo, hi = MOONSHOT_TEMPERATURE
        t = out["temperature"]
        _need(t is None or lo <= t <= hi, f"must be between {lo:g} and {hi:g} for Kimi models (Moonshot's "
              f"contract), got {t!r}", "temperature")
        for name, fixed in MOONSHOT_FIXED.items():
            v = out[name] if name != "n" else n
            _need(v is None or v == fixed, f"is fixed at {fixed:g} for Kimi models (Moonshot's contract), got {v!r}",
                  name)
    return out


def lint_refusals(d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None, options: dict[str, Any],
                  warnings: list[str]) -> dict[str, Any]:
    """Refuse the lint errors of :data:`LINT_REFUSED` (the validator in ``api`` mode:
    :meth:`kimi_chat.validation.Validator.api_refusals`), naming ``messages[i].FIELD`` or
    ``chat_template_kwargs.KEY``; a template option the dialect does not read is dropped with a warning
    (the template ignores it), and an error served as rendered (a developer message on a template that
    writes it as a system turn) is a warning. Returns the options."""
    from ..prompt import TOKENIZING_OPTIONS

    for key in TOKENIZING_OPTIONS:
        _need(not options.get(key), "asks for token ids; an endpoint answers with a completion",
              f"chat_template_kwargs.{key}", "unsupported_value")
    kept: list[Any] = []
    out = Validator(d, Mode.API).api_refusals(messages, tools, options, kept)
    for f in kept:
        if f.code in _UNREAD_OPTION_CODES:
            warnings.append(f"chat_template_kwargs.{f.field}: {f.text}")
        else:
            warnings.append(f"{f.path}: {f.text} ({f.code})")
    return out


# ----------------------------------------------------------------------------- the body as JSON values

MAX_DEPTH = 64
"""How deep a request body may nest objects and arrays (the body itself is level 1). Deeper bodies are
refused before any recursive code (``json``, ``jsonschema``, the grammar compiler) sees them; OpenAI's
strict function schemas allow 10 levels of nesting, so 64 leaves room for any real request."""

_PARAM_SEGMENTS = 4
"""The leading segments of a path that a too-deep body's ``param`` names (``tools[0].function.parameters``)."""


def _path(segments: Sequence[str | int]) -> str:
    out = ""
    for s in segments:
        out += f"[{s}]" if isinstance(s, int) else (f".{s}" if out else s)
    return out


def _surrogate_at(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def _too_deep(segments: Sequence[str | int], limit: int) -> RequestError:
    return RequestError(f"nests objects and arrays deeper than {limit} levels (at {_printable(_path(segments), 200)})",
                        param=_path(segments[:_PARAM_SEGMENTS]) or None, code="nesting_too_deep")


def check_json_values(body: Any, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a decoded body that nests deeper than ``max_depth`` levels or holds a string (a value or
    a key) with a lone surrogate (a ``\\ud800`` escape without its pair: not Unicode text, it cannot be
    tokenized or echoed), each a :class:`RequestError` naming the path. Iterative: any depth is safe."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, ())]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            at = _surrogate_at(value)
            if at is not None:
                raise RequestError(f"holds a lone surrogate (U+{ord(value[at]):04X} at character {at}), which is "
                                   "not Unicode text; send UTF-8 text (a \\uD800-\\uDBFF escape must be followed "
                                   "by its \\uDC00-\\uDFFF pair)", param=_path(where) or None, code="invalid_unicode")
            continue
        if not isinstance(value, (dict, list)):
            continue
        if len(where) >= max_depth:
            raise _too_deep(where, max_depth)
        if isinstance(value, dict):
            for key, item in value.items():
                if _surrogate_at(key) is not None:
                    raise RequestError(f"has a key with a lone surrogate ({_printable(key)!r}), which is not Unicode "
                                       "text", param=_path(where) or None, code="invalid_unicode")
                stack.append((item, (*where, key)))
        else:
            stack.extend((item, (*where, i)) for i, item in enumerate(value))


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]')

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}

DECODE_DEPTH = 256
"""The deepest nesting a body may reach before ``json.loads`` sees it. The decoder recurses once per level
on the interpreter's recursion budget; a body near that budget makes it raise ``RecursionError``, and
anything that runs inside it meanwhile (a garbage-collection finaliser of another request's objects) fails
with no one to report to. Bodies deeper than this are refused from the bytes (:func:`deep_json_error`);
those between :data:`MAX_DEPTH` and this are refused after decoding, by :func:`check_json_values`."""


def nests_deeper_than(raw: bytes, limit: int = DECODE_DEPTH) -> bool:
    """Whether the JSON text ``raw`` opens more than ``limit`` objects and arrays inside one another
    (brackets inside strings do not count), found without recursion. A body with no more than ``limit``
    brackets in all is answered from two byte counts."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = deepest = 0
    for b in _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        depth += _BRACKET_STEP[b]
        if depth > deepest:
            if depth > limit:
                return True
            deepest = depth
    return False



def deep_json_error(raw: bytes, max_depth: int = MAX_DEPTH) -> RequestError:
    """The error for a body too deep to decode (:func:`nests_deeper_than`, or ``json.loads`` raised
    ``RecursionError``): the path
    where it passes ``max_depth`` levels, found by a scan of the bytes that recurses nowhere."""
    import json

    segments: list[str | int] = []  # the path of the container being read (its own key or index last)
    kinds: list[bytes] = []
    key: str | int | None = None
    expect_key = False
    for m in _JSON_TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"{", b"["):
            if kinds:
                segments.append(key if key is not None else 0)
            kinds.append(tok)
            if len(kinds) > max_depth:
                return _too_deep(segments, max_depth)
            key, expect_key = (None, True) if tok == b"{" else (0, False)
        elif tok in (b"}", b"]"):
            kinds.pop()
            key = segments.pop() if segments and kinds else None
        elif tok == b",":
            if kinds and kinds[-1] == b"[":
                key = (key if isinstance(key, int) else 0) + 1
            else:
                expect_key = True
        elif tok == b":":
            expect_key = False
        elif expect_key:
            try:
                key = json.loads(tok)
            except ValueError:
                key = tok.decode("utf-8", "replace")
            expect_key = False
    return _too_deep(segments, max_depth)


# ----------------------------------------------------------------------------- fields nobody reads

OPENAI_FIELDS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "reasoning_effort", "response_format", "safety_identifier", "seed",
    "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
    "top_logprobs", "top_p", "user", "verbosity", "web_search_options"})
"""The request fields OpenAI documents for ``POST /v1/chat/completions``."""

EXTENSION_FIELDS = frozenset({"thinking", "chat_template_kwargs", "top_k", "min_p", "repetition_penalty"})
"""Fields beyond OpenAI's that the server reads: Moonshot's ``thinking``, the open-source
``chat_template_kwargs`` and llama.cpp's common sampling extensions."""

_TEXT_ONLY_PARTS = ("image_url", "input_audio", "file")


def unknown_fields(body: Mapping[str, Any]) -> list[str]:
    """The body's top-level fields neither OpenAI documents nor the server reads (a client's own, such as
    LiteLLM's): logged and ignored, or refused under ``--strict-fields``."""
    return [k for k in body if k not in OPENAI_FIELDS and k not in EXTENSION_FIELDS]


def check_honoured(body: Mapping[str, Any], messages: Sequence[Any]) -> None:
    """Refuse (400 naming the field) a documented OpenAI field a text-only llama.cpp model served here
    cannot honour: audio output, predicted outputs, web search, stored completions, ``verbosity``, and
    image, audio or file content parts."""
    modalities = body.get("modalities")
    _need(modalities is None or modalities == ["text"], "this server generates text only (modalities [\"text\"])",
          "modalities", "unsupported_value")
    for key, what in (("audio", "audio output"), ("prediction", "predicted outputs"),
                      ("web_search_options", "web search"), ("verbosity", "a verbosity setting")):
        _need(body.get(key) is None, f"{what} is not supported by this server", key, "unsupported_parameter")
    _need(not body.get("store"), "this server does not store completions (store: true)", "store",
          "unsupported_value")
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            _need(kind not in _TEXT_ONLY_PARTS, f"a {kind} content part: the model served here reads text only",
                  f"messages[{i}].content[{j}]", "unsupported_content")
