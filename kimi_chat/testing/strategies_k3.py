"""Hypothesis strategies for Kimi-K3 render requests (the K3 property tests use them, and so can you).

``k3_requests()`` draws ``{"messages", "tools", "kwargs"}`` where ``kwargs`` are the K3 tokenizer's
keyword arguments (``add_generation_prompt``, ``thinking``, ``thinking_effort``, ``tool_choice``,
``response_format``, ``response_schema``, ``image_prompts``; each present or absent). Conversations
cover user / system messages with names, ``developer`` and unknown roles (dropped by the encoder),
systems carrying ``tools`` (lazy-loaded tool declarations), list content with text and image parts,
assistants with reasoning (``reasoning_content`` / ``reasoning``), content and several tool calls
whose arguments are typed values of every JSON type (as a dict, as a JSON string, empty, or text that
is not JSON), tool results shuffled out of call order, named or not, and (rarely) inputs the official
encoder refuses (arguments that are JSON but not an object, an unresolvable tool result, an effort
of ``medium``, a wrong number of image prompts). Text mixes unicode with K3 and K2 marker spellings.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from .. import markers as M
from .strategies import _func_names, _keys, json_values, texts, tools

__all__ = ["k3_texts", "k3_messages", "k3_kwargs", "k3_requests"]

_K3_SPELLINGS = [
    M.K3_OPEN.text, M.K3_CLOSE.text, M.K3_SEP.text, M.K3_END_OF_MSG.text, M.K3_IMAGE_PLACEHOLDER.text,
    '<|open|>message role="assistant"<|sep|>', "&", '"', "&amp;", "&quot;", " ", "\n", "",
    "<|reserved_token_163700|>", "[EOS]",
]


@lru_cache(maxsize=None)
def k3_texts(max_size: int = 20) -> st.SearchStrategy[str]:
    """Text mixing arbitrary unicode, K2 marker spellings and K3 markers typed as text."""
    piece = st.one_of(texts(max_size), st.sampled_from(_K3_SPELLINGS))
    return st.lists(piece, max_size=3).map("".join)


_scalar_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False), k3_texts(8),
)
_values = st.recursive(
    _scalar_values,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=6,
)
_arg_dicts = st.dictionaries(st.one_of(_keys, k3_texts(4)), _values, max_size=4)
_arguments = st.one_of(
    _arg_dicts.map(lambda d: json.dumps(d, ensure_ascii=False)),  # the OpenAI shape
    _arg_dicts.map(lambda d: json.dumps(d, indent=1)),
    _arg_dicts,  # already decoded
    st.sampled_from(["", "  ", "{", "not json", '{"a": NaN}', '{"a": 1} x', "{'a': 1}"]),
    k3_texts(10),  # mostly not JSON
)
_refused_arguments = st.sampled_from(["[1, 2]", '"text"', "3", "null", "true"])  # JSON, not an object


def _content() -> st.SearchStrategy[Any]:
    part = st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, k3_texts()),
        st.just({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}),
        st.just({"type": "image", "image": "https://example.com/b.png"}),
    )
    return st.one_of(k3_texts(), k3_texts(), st.lists(part, max_size=3), st.none())


@st.composite
def _tool_call(draw: st.DrawFn, position: int, refusals: bool) -> dict[str, Any]:
    name = draw(st.one_of(_func_names, k3_texts(6)))
    args = draw(_refused_arguments if refusals and draw(st.integers(0, 30)) == 0 else _arguments)
    call: dict[str, Any] = {"id": draw(st.sampled_from([f"call_{position}", f"functions.{name}:{position}", "dup"])),
                            "type": "function"}
    shape = draw(st.integers(0, 9))
    if shape == 0:  # a flat call (name and arguments on the call itself), as the encoder accepts
        call.update(name=name, arguments=args)
    else:
        call["function"] = {"name": name} if shape == 1 else {"name": name, "arguments": args}
    if draw(st.integers(0, 9)) == 0:
        del call["id"]
    return call


@st.composite
def _assistant(draw: st.DrawFn, refusals: bool) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant"}
    if draw(st.integers(0, 3)):
        msg["content"] = draw(_content())
    n_calls = draw(st.integers(0, 3))
    if n_calls:
        msg["tool_calls"] = [draw(_tool_call(i, refusals)) for i in range(n_calls)]
    for key in ("reasoning_content", "reasoning"):
        if draw(st.integers(0, 2)) == 0:
            msg[key] = draw(st.one_of(k3_texts(), st.none()))
    if draw(st.integers(0, 5)) == 0:
        msg["name"] = draw(st.sampled_from(["kimi", "", 'a"b&c']))
    return msg


@st.composite
def k3_messages(draw: st.DrawFn, max_turns: int = 6, refusals: bool = True) -> list[dict[str, Any]]:
    """A K3 conversation; ``refusals`` lets rare inputs the official encoder refuses through."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "assistant", "system", "other"]))
        if kind in ("user", "system"):
            m: dict[str, Any] = {"role": kind, "content": draw(_content())}
            if draw(st.integers(0, 3)) == 0:
                m["name"] = draw(st.sampled_from(["alice", "", 'x"&y', "中文"]))
            if kind == "system" and draw(st.integers(0, 5)) == 0:
                m["tools"] = draw(tools())
            out.append(m)
        elif kind == "other":
            out.append({"role": draw(st.sampled_from(["developer", "function", "observation"])),
                        "content": draw(k3_texts())})
        else:
            a = draw(_assistant(refusals))
            out.append(a)
            results: list[dict[str, Any]] = []
            for position, call in enumerate(a.get("tool_calls", [])):
                if not draw(st.integers(0, 5)):
                    continue
                t: dict[str, Any] = {"role": "tool", "content": draw(_content())}
                how = draw(st.integers(0, 9))
                if how <= 6 and "id" in call:
                    t["tool_call_id"] = call["id"]
                elif how == 7:
                    t["tool_call_id"] = "no-such-call"
                if draw(st.integers(0, 4)) == 0:
                    t[draw(st.sampled_from(["name", "tool"]))] = draw(st.one_of(_func_names, st.none()))
                if not refusals and "tool_call_id" not in t and "name" not in t and "tool" not in t:
                    t["name"] = "f"
                results.append(t)
            out.extend(draw(st.permutations(results)) if draw(st.booleans()) else results)
            if draw(st.integers(0, 4)) == 0:
                out.append({"role": "user", "content": draw(k3_texts())})
    return out


_schemas = st.one_of(st.none(), st.dictionaries(_keys, json_values(4), max_size=3))
_response_formats = st.one_of(
    st.sampled_from(["json_object", "json_schema", "text", {"type": "json_object"}, {"type": "text"}]),
    st.builds(lambda name, schema: {"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
              st.sampled_from(["out", "x"]), _schemas),
    st.builds(lambda schema: {"type": "json_schema", "json_schema": schema}, _schemas),
)


def _count_images(messages: list[dict[str, Any]]) -> int:
    # an estimate of the images the encoder will consume (parts and placeholders); off by some on purpose
    n = 0
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            n += c.count(M.K3_IMAGE_PLACEHOLDER.text)
        elif isinstance(c, list):
            n += sum(1 for p in c if p.get("type") in ("image", "image_url"))
            n += sum(p.get("text", "").count(M.K3_IMAGE_PLACEHOLDER.text) for p in c)
    return n


@st.composite
def k3_kwargs(draw: st.DrawFn, messages: list[dict[str, Any]] | None = None, refusals: bool = True) -> dict[str, Any]:
    """Keyword arguments of the K3 tokenizer's ``apply_chat_template``, each present or absent."""
    kw: dict[str, Any] = {}
    if draw(st.booleans()):
        kw["add_generation_prompt"] = draw(st.booleans())
    if draw(st.booleans()):
        kw["thinking"] = draw(st.booleans())
    if draw(st.booleans()):
        efforts = ["low", "high", "max", None] + (["medium"] if refusals else [])
        kw["thinking_effort"] = draw(st.sampled_from(efforts))
    if draw(st.booleans()):
        kw["tool_choice"] = draw(st.sampled_from(["auto", "required", "none", None]))
    if draw(st.booleans()):
        kw["response_format"] = draw(_response_formats)
        if draw(st.integers(0, 3)) == 0:
            kw["response_schema"] = draw(_schemas)
    if messages is not None and draw(st.integers(0, 4)) == 0:
        n = _count_images(messages)
        if refusals and draw(st.integers(0, 3)) == 0:
            n = max(0, n + draw(st.sampled_from([-1, 1])))
        kw["image_prompts"] = [draw(st.sampled_from(["<|media_begin|>image 8x8<|media_content|><|media_pad|>"
                                                     "<|media_end|>", "[IMG]", ""])) for _ in range(n)]
    return kw


@st.composite
def k3_requests(draw: st.DrawFn, max_turns: int = 6, refusals: bool = True) -> dict[str, Any]:
    """A K3 render request: ``{"messages", "tools", "kwargs"}``."""
    messages = draw(k3_messages(max_turns, refusals))
    return {"messages": messages, "tools": draw(tools()), "kwargs": draw(k3_kwargs(messages, refusals))}
