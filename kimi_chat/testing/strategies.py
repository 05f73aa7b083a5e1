"""Hypothesis strategies for Kimi chat requests (public: the property tests and ``kimi-chat verify``
use them, and so can you).

``requests()`` draws a whole render request: ``{"messages", "tools", "add_generation_prompt",
"options"}``. The conversations cover every role, ``name`` fields, unicode (CJK, emoji, combining
marks, ``\\r\\n``, NUL), text that looks like markers, list content mixing text, images and video,
empty strings, assistants with and without content, several tool calls with dict and string
arguments, tool results, reasoning under its three names, and tools with nested schemas and unsorted
keys. Every request it draws is one the official templates render.

``odd_requests()`` draws what real clients send that is not the OpenAI schema but that the official
templates render (official parity: ``render`` gives the same bytes): a ``developer`` or other role
(``function``, ``moderator``, ``""``...), a tool result without ``tool_call_id``, a tool call without
``id``, a system / user / tool message without ``content``, extra message fields, content parts of
unknown types, template kwargs the template does not read (``enable_thinking``,
``reasoning_effort``...), a read option that is not a bool (``thinking="false"``). ``"odd"`` lists ``(kind, location)`` of each (see :data:`ODD_KINDS`).

``defective_requests()`` (opt-in) draws the inputs the official templates refuse (an empty
conversation, a message that is not an object, content that is neither text nor a list, a tool call
without ``function``...) or mangle (a bare string or number as a content part, a missing role, a
function name that is not a string, arguments that are not JSON data): a request as above with one
such defect put in, plus ``"defect"``, the location an error about it names
(``"messages[2].tool_calls[0].function"``; ``"empty conversation"`` for no message at all).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from .. import markers as M
from ..dialect_records import get_dialect

__all__ = [
    "texts", "json_values", "tools", "messages", "requests", "odd_requests", "ODD_KINDS", "defective_requests",
    "DEFECTS",
]

_SPECIAL_TEXT = [
    M.IM_END.text, M.IM_USER.text, M.IM_ASSISTANT.text, M.IM_MIDDLE.text, M.IM_SYSTEM.text,
    M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text,
    M.TOOL_CALL_END.text, M.TOOL_CALLS_SECTION_END.text, M.THINK_BEGIN.text, M.THINK_END.text,
    "\r\n", "\n", "  ", "\t", "\x00", "é", "e\u0301", "中文", "🦄", "👩‍💻", "{", "}", '"', "\\", "## Return of ",
    "{{ x }}", "{% if %}", "None", "functions.f:0",
]


@lru_cache(maxsize=None)
def texts(max_size: int = 20) -> st.SearchStrategy[str]:
    """Text mixing arbitrary unicode with marker spellings and awkward pieces."""
    piece = st.one_of(
        st.text(max_size=max_size),
        st.sampled_from(_SPECIAL_TEXT),
        st.text(alphabet="ab \n{}\":,", max_size=max_size),
    )
    return st.lists(piece, max_size=4).map("".join)


_keys = st.one_of(st.sampled_from(["type", "a", "b", "Z", "name", "properties", "é", "中", "_x"]), st.text(max_size=5))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    texts(8),
)


@lru_cache(maxsize=None)
def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Arbitrary JSON values (dict key order as drawn, so often unsorted)."""
    return st.recursive(
        _scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
        max_leaves=max_leaves,
    )


_func_names = st.one_of(
    st.sampled_from(["get_weather", "search", "mcp.github:list-issues", "a-b.c", "f"]),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,12}", fullmatch=True),
)


@st.composite
def _schema(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "object"]))
    s: dict[str, Any] = {}
    if draw(st.booleans()):
        s["description"] = draw(texts(10))
    s["type"] = kind
    if kind == "array" and depth < 2:
        s["items"] = draw(_schema(depth + 1))
    if kind == "object" and depth < 2:
        s["properties"] = draw(st.dictionaries(_keys, _schema(depth + 1), max_size=3))
        if s["properties"] and draw(st.booleans()):
            s["required"] = sorted(s["properties"])[:1]
    if kind == "string" and draw(st.booleans()):
        s["enum"] = draw(st.lists(texts(5), min_size=1, max_size=3))
    if draw(st.booleans()):
        # unsorted keys on purpose: later tokenizers sort them before rendering
        s = dict(reversed(list(s.items())))
    return s


@st.composite
def _tool(draw: st.DrawFn) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": draw(_func_names)}
    if draw(st.booleans()):
        fn["description"] = draw(texts(15))
    if draw(st.integers(0, 3)):
        params: dict[str, Any] = {"type": "object", "properties": draw(st.dictionaries(_keys, _schema(), max_size=3))}
        if params["properties"] and draw(st.booleans()):
            params["required"] = list(params["properties"])[:1]
        fn["parameters"] = params
    tool = {"type": "function", "function": fn}
    if draw(st.booleans()):
        tool = {"function": fn, "type": "function"}
    return tool


def tools() -> st.SearchStrategy[list[dict[str, Any]] | None]:
    """``None``, an empty list or a few function tools with nested schemas."""
    return st.one_of(st.none(), st.just([]), st.lists(_tool(), min_size=1, max_size=3))


def _content(allow_list: bool = True) -> st.SearchStrategy[Any]:
    part = st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, texts()),
        st.just({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}),
        st.just({"type": "image", "image": "https://example.com/b.png"}),
        st.just({"type": "video_url", "video_url": {"url": "https://example.com/v.mp4"}}),
        st.just({"type": "video", "video": "https://example.com/w.mp4"}),
    )
    if not allow_list:
        return texts()
    return st.one_of(texts(), texts(), st.lists(part, max_size=4))


_ARGUMENT_DICTS = st.dictionaries(_keys, json_values(4), max_size=3)
_ARGUMENTS = st.one_of(
    _ARGUMENT_DICTS.map(lambda d: json.dumps(d, ensure_ascii=False)),  # the OpenAI shape: a JSON string
    _ARGUMENT_DICTS,  # already decoded
    st.just(""),
    texts(10),  # not JSON at all
)


@st.composite
def _tool_call(draw: st.DrawFn, index: int) -> dict[str, Any]:
    name = draw(_func_names)
    call_id = draw(st.one_of(st.just(f"functions.{name}:{index}"), st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True)))
    args = draw(_ARGUMENTS)
    call: dict[str, Any] = {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
    return call


@st.composite
def _assistant(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant"}
    n_calls = draw(st.integers(0, 3))
    if n_calls == 0 or draw(st.booleans()):
        msg["content"] = draw(st.one_of(_content(), st.none()) if n_calls else _content())
    if n_calls:
        msg["tool_calls"] = [draw(_tool_call(i)) for i in range(n_calls)]
    for key in ("reasoning_content", "reasoning", "thinking"):
        if draw(st.integers(0, 3)) == 0:
            msg[key] = draw(texts())
    if draw(st.integers(0, 5)) == 0:
        msg["name"] = draw(st.sampled_from(["kimi", "bot", ""]))
    return msg


@st.composite
def messages(draw: st.DrawFn, max_turns: int = 6) -> list[dict[str, Any]]:
    """A conversation: optional system message, then user / assistant / tool turns, with the tool
    results answering the assistant's calls (ids reused)."""
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        sys_msg: dict[str, Any] = {"role": "system", "content": draw(_content())}
        if draw(st.integers(0, 4)) == 0:
            sys_msg["name"] = "sys"
        out.append(sys_msg)
    for _ in range(draw(st.integers(1, max_turns))):
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "user"]))
        if kind == "user":
            m: dict[str, Any] = {"role": "user", "content": draw(_content())}
            if draw(st.integers(0, 4)) == 0:
                m["name"] = draw(st.sampled_from(["alice", "bob", ""]))
            out.append(m)
        else:
            a = draw(_assistant())
            out.append(a)
            for call in a.get("tool_calls", []):
                if draw(st.integers(0, 4)):
                    t: dict[str, Any] = {"role": "tool", "tool_call_id": call["id"], "content": draw(_content())}
                    if draw(st.integers(0, 5)) == 0:
                        t["name"] = call["function"]["name"]
                    out.append(t)
    return out


@st.composite
def requests(draw: st.DrawFn, dialect: str | None = None, max_turns: int = 6) -> dict[str, Any]:
    """A render request for ``dialect``: messages, tools, add_generation_prompt and the dialect's
    template options (each option drawn as absent, True or False)."""
    options: dict[str, Any] = {}
    if dialect is not None:
        for opt in get_dialect(dialect).options:
            v = draw(st.sampled_from([None, True, False]))
            if v is not None:
                options[opt] = v
    return {
        "messages": draw(messages(max_turns)),
        "tools": draw(tools()),
        "add_generation_prompt": draw(st.booleans()),
        "options": options,
    }


# --------------------------------------------------------------------------------------------------
# Odd-but-real inputs: not the OpenAI schema, rendered by the official templates

ODD_KINDS = (
    "developer role",
    "other role",
    "tool result without tool_call_id",
    "tool call without id",
    "content missing",
    "extra message field",
    "unknown content part",
    "unread kwarg",
    "non-bool option",
)
"""The kinds of odd input :func:`odd_requests` puts in a request."""

_UNKNOWN_PARTS = [
    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    {"type": "file", "file": {"file_id": "file-1"}},
    {"type": "refusal", "refusal": "no"},
    {"type": "input_image", "image_url": "https://example.com/c.png"},
    {"type": "audio"},
    {"type": "input_text", "text": "typed as input_text"},
]
_EXTRA_FIELDS = ["metadata", "id", "created_at", "cache_control", "weight"]
_UNREAD_KWARGS = {
    "enable_thinking": st.booleans(),
    "reasoning_effort": st.sampled_from(["low", "medium", "high"]),
    "thinking": st.booleans(),
    "preserve_thinking": st.booleans(),
    "add_vision_id": st.booleans(),
}


def _odd_kind(draw: st.DrawFn, kind: str, req: dict[str, Any], dialect: str | None) -> tuple[Any, str] | None:
    """Put one odd input of ``kind`` into ``req``; return ``(message or None, field)`` of its
    location (``None`` when the request has nothing to put it in)."""
    msgs = req["messages"]
    if kind in ("developer role", "other role"):
        role = "developer" if kind == "developer role" else draw(st.sampled_from(["function", "moderator", "ipython", "USER", ""]))
        m: dict[str, Any] = {"role": role, "content": draw(_content())}
        if draw(st.integers(0, 3)) == 0:
            m["name"] = draw(st.sampled_from(["f", "ops", ""]))
        msgs.insert(draw(st.integers(0, len(msgs))), m)
        return m, "role"
    if kind == "tool result without tool_call_id":
        m = {"role": "tool", "content": draw(_content())}
        msgs.insert(draw(st.integers(0, len(msgs))), m)
        return m, "tool_call_id"
    if kind == "tool call without id":
        name = draw(_func_names)
        call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": draw(_ARGUMENTS)}}
        if draw(st.booleans()):
            del call["type"]
        m = {"role": "assistant", "tool_calls": [call]}
        if draw(st.booleans()):
            m["content"] = draw(texts(5))
        msgs.insert(draw(st.integers(0, len(msgs))), m)
        return m, "tool_calls[0].id"
    if kind == "content missing":
        role = draw(st.sampled_from(["system", "user", "tool"]))
        m = {"role": role, "tool_call_id": "functions.f:0"} if role == "tool" else {"role": role}
        msgs.insert(draw(st.integers(0, len(msgs))), m)
        return m, "content"
    if kind == "extra message field":
        m = msgs[draw(st.integers(0, len(msgs) - 1))]
        key = draw(st.sampled_from(_EXTRA_FIELDS))
        if key in m:
            return None
        m[key] = draw(json_values(3).filter(lambda v: v is not None))
        return m, key
    if kind == "unknown content part":
        parts = draw(st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts(5)), max_size=2))
        k = draw(st.integers(0, len(parts)))
        parts.insert(k, dict(draw(st.sampled_from(_UNKNOWN_PARTS))))
        m = {"role": draw(st.sampled_from(["user", "system", "assistant"])), "content": parts}
        msgs.insert(draw(st.integers(0, len(msgs))), m)
        return m, f"content[{k}]"
    if kind == "unread kwarg":
        read = get_dialect(dialect).options if dialect is not None else ()
        unread = [k for k in _UNREAD_KWARGS if k not in read and k not in req["options"]]
        if not unread:
            return None
        key = draw(st.sampled_from(unread))
        req["options"][key] = draw(_UNREAD_KWARGS[key])
        return None, key
    if kind == "non-bool option":
        read = get_dialect(dialect).options if dialect is not None else ()
        if not read:
            return None
        key = draw(st.sampled_from(read))
        # what a JSON client may send: the template tests `is false` / truthiness, as the renderer does
        req["options"][key] = draw(st.sampled_from(["false", "true", 0, 1, "", None]))
        return None, key
    raise ValueError(f"unknown odd kind {kind!r}")


@st.composite
def odd_requests(draw: st.DrawFn, dialect: str | None = None, max_turns: int = 4,
                 kinds: tuple[str, ...] = ODD_KINDS) -> dict[str, Any]:
    """A :func:`requests` request with one to three odd-but-real inputs (of ``kinds``, see
    :data:`ODD_KINDS`) put in: inputs the official template renders although they are not the
    OpenAI schema. ``"odd"`` lists ``(kind, location)``: ``"messages[I].FIELD"`` for a message,
    the kwarg name for a template kwarg."""
    req = draw(requests(dialect, max_turns))
    placed: list[tuple[str, Any, str]] = []
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3, unique=True)):
        where = _odd_kind(draw, kind, req, dialect)
        if where is not None:
            placed.append((kind, *where))
    msgs = req["messages"]
    req["odd"] = [
        (kind, field if m is None else f"messages[{next(i for i, x in enumerate(msgs) if x is m)}].{field}")
        for kind, m, field in placed
    ]
    return req


# --------------------------------------------------------------------------------------------------
# Inputs the official templates refuse or mangle (opt-in)

DEFECTS = (
    "empty conversation",
    "message not an object",
    "content not text or a list",
    "content part not an object",
    "role missing",
    "tool_calls not a list",
    "tool call without function",
    "function name not a string",
    "arguments not JSON data",
)
"""The kinds of defect :func:`defective_requests` puts in a request."""


def _call(draw: st.DrawFn, **function: Any) -> dict[str, Any]:
    name = draw(_func_names)
    fn: dict[str, Any] = {"name": name, "arguments": draw(_ARGUMENTS)}
    fn.update(function)
    return {"id": f"functions.{name}:0", "type": "function", "function": fn}


def _defective_message(draw: st.DrawFn, kind: str) -> tuple[Any, str]:
    """A message with one defect of ``kind`` and the location (after ``messages[i]``) an error names."""
    role = draw(st.sampled_from(["system", "user", "tool"]))
    if kind == "message not an object":
        return draw(st.sampled_from(["hi", 5, None])), ""
    if kind == "content not text or a list":
        return {"role": role, "content": draw(st.sampled_from([5, 1.5, True]))}, ".content"
    if kind == "content part not an object":
        parts: list[Any] = [{"type": "text", "text": t} for t in draw(st.lists(texts(5), max_size=2))]
        k = draw(st.integers(0, len(parts)))
        parts.insert(k, draw(st.sampled_from(["text", 5, None])))
        return {"role": "user", "content": parts}, f".content[{k}]"
    if kind == "role missing":
        return {"content": draw(texts(5))}, ".role"
    if kind == "tool_calls not a list":
        return {"role": "assistant", "content": "x", "tool_calls": _call(draw)}, ".tool_calls"
    # a defect in one call of an assistant message
    calls = [_call(draw) for _ in range(draw(st.integers(1, 2)))]
    j = draw(st.integers(0, len(calls) - 1))
    if kind == "tool call without function":
        del calls[j]["function"]
        where = f".tool_calls[{j}].function"
    elif kind == "function name not a string":
        calls[j]["function"]["name"] = draw(st.sampled_from([7, None, ["f"]]))
        where = f".tool_calls[{j}].function.name"
    elif kind == "arguments not JSON data":
        calls[j]["function"]["arguments"] = {"a": draw(st.sampled_from([b"x", {1, 2}, object()]))}
        where = f".tool_calls[{j}].function.arguments"
    else:
        raise ValueError(f"unknown defect {kind!r}")
    return {"role": "assistant", "content": draw(st.one_of(st.none(), texts(5))), "tool_calls": calls}, where


@st.composite
def defective_requests(draw: st.DrawFn, dialect: str | None = None, max_turns: int = 4,
                       kinds: tuple[str, ...] = DEFECTS) -> dict[str, Any]:
    """A :func:`requests` request with one defect (one of ``kinds``, see :data:`DEFECTS`) put in: the
    official template refuses it or renders it mangled (where the defect touches what the dialect
    writes; elsewhere it may render normally). ``"defect"`` is the location an error about it names:
    ``"messages[I]"`` plus the field path, or ``"empty conversation"``."""
    req = draw(requests(dialect, max_turns))
    kind = draw(st.sampled_from(kinds))
    if kind == "empty conversation":
        req["messages"] = []
        req["defect"] = "empty conversation"
        return req
    msg, where = _defective_message(draw, kind)
    i = draw(st.integers(0, len(req["messages"])))
    req["messages"].insert(i, msg)
    req["defect"] = f"messages[{i}]{where}"
    return req
