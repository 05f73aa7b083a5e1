"""Hypothesis strategies for Kimi chat requests (public: the property tests and ``kimi-chat verify``
use them, and so can you).

``requests()`` draws a whole render request: ``{"messages", "tools", "add_generation_prompt",
"options"}``. The conversations cover every role, ``name`` fields, unicode (CJK, emoji, combining
marks, ``\\r\\n``, NUL), text that looks like markers, list content mixing text, images and video,
empty strings, assistants with and without content, several tool calls with dict and string
arguments, tool results, reasoning under its three names, and tools with nested schemas and unsorted
keys.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from .. import markers as M
from ..dialects import get_dialect

__all__ = ["texts", "json_values", "tools", "messages", "requests"]

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
