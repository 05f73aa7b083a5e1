"""The Kimi-K3 formatter: OpenAI-style messages + tools -> the exact K3 (XTML) prompt, text and token ids.

Pure Python, one pass. The output is byte-identical to the official K3 tokenizer's
``apply_chat_template(messages, tools=tools, tokenize=False, ...)`` (``encoding_k3.build_chat_segments``
joined), and :func:`render_k3_ids` is token-identical to its ``tokenize=True`` (checked by the golden and
property tests against :mod:`kimi_chat.oracle_k3`).

The prompt is a sequence of messages made of four special tokens::

    <|open|>TAG k="v" ...<|sep|> BODY <|close|>TAG<|sep|>          (every message ends <|end_of_msg|>)

    [tool declaration]         message role="system" type="tool-declare"   (tools given)
    [thinking effort]          message role="system" type="thinking-effort" (thinking on, effort set)
    messages                   user / system (name=...), system with tools -> "## New Tools Available",
                               assistant: think (thinking on) + response + tools/call/argument|json,
                               tool results: role="tool" tool="NAME" index="N", re-ordered by tool_call_id
    [tool-choice]              required / none
    [response-format]          json_object / json_schema
    [generation prompt]        <|open|>message role="assistant"<|sep|><|open|>think|response<|sep|>

The official tokenizer encodes the prompt **segment by segment**: each marker as its special id, each
other piece (a tag name, `` role``, ``="``, an attribute value, ``"``, a message body...) as ordinary
text on its own, so BPE never merges across pieces and text typed by a user never becomes a marker.
The renderer produces exactly those pieces (markers are a private ``str`` subclass), so text, segments
and ids come from one pass.

Roles the encoder does not know (``developer`` among them) are dropped, as it drops them. Where the
official encoder raises (``thinking_effort="medium"``, arguments that are JSON but not an object, a
tool result whose tool name cannot be resolved, a tool call without a name...), this raises
:class:`~kimi_chat.errors.RenderError` naming the message index and field.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from typing_extensions import TypedDict, Unpack

from kimi_chat import markers as M
from kimi_chat.errors import RenderError
from kimi_chat.families.k3.inputs import (
    TYPE_NAMES,
    args_field,
    arguments,
    dumps,
    esc,
    function,
    messages_of,
    sorted_keys,
    tool_run,
    tools_json,
    value_text,
    xtml_type,
)
from kimi_chat.families.k3.inputs import response_schema as schema_of
from kimi_chat.messages import check_bool, plain_items
from kimi_chat.surrogates import warn_lone_surrogates
from kimi_chat.tokens.tokenizer import MAX_NO_WHITESPACES_CHARS

__all__ = ["K3Segment", "K3Options", "render_k3", "render_k3_segments", "render_k3_ids"]


class _Marker(str):
    """A piece the official encoder encodes with special tokens allowed (a marker, an image prompt)."""

    __slots__ = ()


_OPEN = _Marker(M.K3_OPEN.text)
_CLOSE = _Marker(M.K3_CLOSE.text)
_SEP = _Marker(M.K3_SEP.text)
_EOM = _Marker(M.K3_END_OF_MSG.text)
_IMAGE_PLACEHOLDER = M.K3_IMAGE_PLACEHOLDER.text
_EFFORTS = frozenset(M.K3_THINKING_EFFORTS)
_UNSET: Any = object()


def _open(tag: str, *attrs: tuple[str, str]) -> tuple[str, ...]:
    # _open_tag of the encoder: each attribute is ` key`, `="`, value, `"` (four segments)
    out: list[str] = [_OPEN, tag]
    for key, value in attrs:
        out += (" " + key, '="', value, '"')
    return (*out, _SEP)


def _close(tag: str) -> tuple[str, ...]:
    return (_CLOSE, tag, _SEP)


_MSG_END = (*_close("message"), _EOM)
_THINK_OPEN, _RESPONSE_OPEN = _open("think"), _open("response")
_ROLE_OPEN = {role: _open("message", ("role", role))[:-1] for role in ("user", "system", "assistant")}
_NAME_ATTR = (" name", '="')
_ATTR_END = ('"', _SEP)


class _Pieces(NamedTuple):
    """The constant runs of segments the pass writes (split: one piece per encoder segment)."""

    user: tuple[str, ...]
    user_named: tuple[str, ...]
    system: tuple[str, ...]
    system_named: tuple[str, ...]
    assistant: tuple[str, ...]
    assistant_named: tuple[str, ...]
    attr_end: tuple[str, ...]
    msg_end: tuple[str, ...]
    think_open: tuple[str, ...]
    think_to_response: tuple[str, ...]
    response_open: tuple[str, ...]
    response_end: tuple[str, ...]
    response_to_tools: tuple[str, ...]
    tools_end: tuple[str, ...]
    call_head: tuple[str, ...]
    index_attr: tuple[str, ...]
    json_open: tuple[str, ...]
    json_close: tuple[str, ...]
    arg_head: tuple[str, ...]
    arg_type: tuple[str, ...]
    arg_close: tuple[str, ...]
    call_close: tuple[str, ...]
    tool_head: tuple[str, ...]


_SPLIT = _Pieces(
    user=(*_ROLE_OPEN["user"], _SEP),
    user_named=(*_ROLE_OPEN["user"], *_NAME_ATTR),
    system=(*_ROLE_OPEN["system"], _SEP),
    system_named=(*_ROLE_OPEN["system"], *_NAME_ATTR),
    assistant=(*_ROLE_OPEN["assistant"], _SEP),
    assistant_named=(*_ROLE_OPEN["assistant"], *_NAME_ATTR),
    attr_end=_ATTR_END,
    msg_end=_MSG_END,
    think_open=_THINK_OPEN,
    think_to_response=(*_close("think"), *_RESPONSE_OPEN),
    response_open=_RESPONSE_OPEN,
    response_end=(*_close("response"), *_MSG_END),
    response_to_tools=(*_close("response"), *_open("tools")),
    tools_end=(*_close("tools"), *_MSG_END),
    call_head=(_OPEN, "call", " tool", '="'),
    index_attr=('"', " index", '="'),
    json_open=_open("json", ("type", "object")),
    json_close=_close("json"),
    arg_head=(_OPEN, "argument", " key", '="'),
    arg_type=('"', " type", '="'),
    arg_close=_close("argument"),
    call_close=_close("call"),
    tool_head=(*_open("message", ("role", "tool"))[:-1], " tool", '="'),
)
# for the text alone: each run joined into one string (fewer appends, same text)
_JOINED = _Pieces(*(("".join(run),) for run in _SPLIT))
_GEN_THINK = (*_open("message", ("role", "assistant")), *_THINK_OPEN)
_GEN_RESPONSE = (*_open("message", ("role", "assistant")), *_RESPONSE_OPEN)
_INDEX = tuple(str(k) for k in range(64))


def _system(kind: str, body: str) -> tuple[str, ...]:
    # _internal_system_message of the encoder
    return (*_open("message", ("role", "system"), ("type", kind)), body.strip(), *_MSG_END)


_TOOL_DECLARE_OPEN = _open("message", ("role", "system"), ("type", "tool-declare"))
_TOOLS_BODY = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
_NEW_TOOLS_BODY = (
    "## New Tools Available\n"
    "The system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\n"
    "Here are the specs for the extended tools.\n\n"
    "```json\n"
)
_EFFORT_MESSAGES = {
    effort: _system(
        "thinking-effort",
        "`thinking_effort` guides on how much to think in your thinking channel (not including the "
        "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
        f"Now the system is invoked with `thinking_effort={effort}`.",
    )
    for effort in M.K3_THINKING_EFFORTS
}
_TOOL_CHOICE = {
    "required": _system(
        "tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message."
    ),
    "none": _system(
        "tool-choice",
        "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.",
    ),
}
_RAW_JSON = (
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting."
)
_JSON_OBJECT = _system("response-format", "The system is invoked with `response_format=json_object`.\n" + _RAW_JSON)
_JSON_SCHEMA_HEAD = (
    "The system is invoked with `response_format=json_schema`.\n"
    + _RAW_JSON
    + "\nThe JSON data must match the following schema:\n```json\n"
)


class K3Segment(NamedTuple):
    """One segment of the official K3 encoding. ``special``: a marker (or image prompt), encoded with
    special tokens allowed; otherwise ordinary text (never a special id). ``message_index`` is the
    index in the caller's ``messages`` (-1 for scaffolding: tool declaration, thinking effort,
    tool-choice / response-format messages, generation prompt); ``trainable`` marks what the model
    produced in an assistant message (after its opening ``think``, or ``response`` with thinking off,
    up to and including the closing ``<|close|>message<|sep|><|end_of_msg|>``)."""

    text: str
    special: bool
    message_index: int
    trainable: bool


# -------------------------------------------------------------------------------------------- helpers


class _Images:
    """The encoder's image-prompt state: each placeholder / image part takes the next prompt."""

    __slots__ = ("prompts", "next")

    def __init__(self, prompts: Sequence[Any]):
        self.prompts = prompts
        self.next = 0

    def take(self, index: int, field: str) -> str:
        if self.next >= len(self.prompts):
            raise RenderError(
                f"more images than image_prompts ({len(self.prompts)} given)", message_index=index, field=field
            )
        prompt = self.prompts[self.next]
        self.next += 1
        return prompt if type(prompt) is str else str(prompt)


def _text(parts: list[str], text: Any, images: _Images | None, index: int, field: str) -> None:
    # _append_text: ordinary text, split at image placeholders when image prompts are given
    if type(text) is not str:
        text = str(text)
    if not text:
        return
    if images is None or _IMAGE_PLACEHOLDER not in text:
        parts.append(text)
        return
    pieces = text.split(_IMAGE_PLACEHOLDER)
    for piece in pieces[:-1]:
        parts.append(piece)
        parts.append(_Marker(images.take(index, field)))
    parts.append(pieces[-1])


def _content(parts: list[str], content: Any, images: _Images | None, index: int, field: str = "content") -> None:
    if type(content) is str and (images is None or _IMAGE_PLACEHOLDER not in content):
        parts.append(content)
        return
    if isinstance(content, str):
        _text(parts, content, images, index, field)
        return
    if content is None:
        return
    try:
        items = iter(content)
    except TypeError:
        raise RenderError(
            f"must be a string or a list of content parts, not {type(content).__name__}",
            message_index=index,
            field=field,
        ) from None
    for j, part in enumerate(items):
        where = f"{field}[{j}]"
        if not isinstance(part, Mapping):
            raise RenderError(f"a content part must be an object, not {type(part).__name__}", message_index=index, field=where)
        if "type" not in part:
            raise RenderError("content part has no type", message_index=index, field=where + ".type")
        kind = part["type"]
        if kind == "image" or kind == "image_url":
            prompt = _IMAGE_PLACEHOLDER if images is None else images.take(index, where)
            if prompt:
                parts.append(_Marker(prompt))
        elif "text" in part:
            _text(parts, part["text"], images, index, where + ".text")
        else:
            raise RenderError(
                f"a content part of type {kind!r} has no text (the K3 encoder renders text and image parts only)",
                message_index=index,
                field=where + ".text",
            )


def _declare(parts: list[str], tools: Any, body_head: str, index: int | None) -> None:
    parts += _TOOL_DECLARE_OPEN
    parts.append(body_head + tools_json(tools, index, "tools") + "\n```")
    parts += _MSG_END


def _build(
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    add_generation_prompt: bool,
    thinking: Any,
    thinking_effort: Any,
    tool_choice: Any,
    response_format: Any,
    response_schema: Any,
    image_prompts: Sequence[Any] | None,
    split: bool,
    marks: list[tuple[int, int, bool]] | None = None,
) -> list[str]:
    """The prompt as pieces to join. ``split``: one piece per encoder segment (``_Marker`` pieces are
    special), else constant runs come joined. ``marks`` (if given, with ``split``) receives
    ``(start, message_index, trainable)`` attributions of ``parts[start:]``."""
    if thinking and thinking_effort is not None:
        try:
            valid = thinking_effort in _EFFORTS
        except TypeError:
            valid = False
        if not valid:
            raise RenderError(
                f"unsupported thinking_effort={thinking_effort!r}; the K3 encoder accepts "
                f"{', '.join(M.K3_THINKING_EFFORTS)} (its text mentions `medium`, which it refuses)",
                field="thinking_effort",
            )
    msgs = messages_of(messages)
    images = None if image_prompts is None else _Images(list(image_prompts))
    (user, user_named, system, system_named, assistant, assistant_named, attr_end, msg_end, think_open,
     think_to_response, response_open, response_end, response_to_tools, tools_end, call_head, index_attr,
     json_open, json_close, arg_head, arg_type, arg_close, call_close, tool_head) = _SPLIT if split else _JOINED
    parts: list[str] = []
    app = parts.append
    track = marks is not None

    if tools:
        if isinstance(tools, (list, tuple)):
            tools = plain_items(tools, "tools")
        _declare(parts, tools, _TOOLS_BODY, None)
    if thinking and thinking_effort is not None:
        parts += _EFFORT_MESSAGES[thinking_effort]

    tool_calls: Any = None
    tool_index = 0
    i, n = 0, len(msgs)
    while i < n:
        m = msgs[i]
        role = m["role"]
        if role == "tool":
            i, run = tool_run(msgs, i, tool_calls)
            for k, call_name in run:
                m = msgs[k]
                tool_index += 1
                name = call_name if call_name is not None else m.get("tool", m.get("name"))
                if name is None and tool_calls is not None and tool_index <= len(tool_calls):
                    name = function(tool_calls[tool_index - 1], k, tool_index - 1)["name"]
                if name is None:
                    raise RenderError(
                        "the K3 encoder needs a resolvable tool name for a tool result: give `tool` or `name`, "
                        "a `tool_call_id` matching a call of the preceding assistant, or follow its calls in order",
                        message_index=k,
                        field="tool_call_id",
                    )
                if track:
                    marks.append((len(parts), k, False))
                parts += tool_head
                app(esc(name))
                parts += index_attr
                app(_INDEX[tool_index] if tool_index < 64 else str(tool_index))
                parts += attr_end
                _content(parts, m.get("content"), images, k)
                parts += msg_end
            continue
        mi = i
        i += 1
        if role == "user" or role == "system":
            if role == "system" and m.get("tools"):
                if track:
                    marks.append((len(parts), mi, False))
                _declare(parts, m["tools"], _NEW_TOOLS_BODY, mi)
                continue
            if track:
                marks.append((len(parts), mi, False))
            name = m.get("name")
            if name:
                parts += user_named if role == "user" else system_named
                app(esc(name))
                parts += attr_end
            else:
                parts += user if role == "user" else system
            _content(parts, m.get("content"), images, mi)
            parts += msg_end
        elif role == "assistant":
            tool_calls = m.get("tool_calls")
            tool_index = 0
            if tool_calls and not isinstance(tool_calls, (list, tuple)):
                raise RenderError(
                    f"must be a list, not {type(tool_calls).__name__}", message_index=mi, field="tool_calls"
                )
            if track:
                marks.append((len(parts), mi, False))
            name = m.get("name")
            if name:
                parts += assistant_named
                app(esc(name))
                parts += attr_end
            else:
                parts += assistant
            if thinking:
                parts += think_open
                if track:
                    marks.append((len(parts), mi, True))
                rc = m.get("reasoning_content") or m.get("reasoning")
                if rc is not None:
                    if type(rc) is str and images is None:
                        if rc and not rc.isspace():  # `rc.strip()`
                            app(rc)
                    elif str(rc).strip():
                        _text(parts, rc, images, mi, "reasoning_content")
                parts += think_to_response
            else:
                parts += response_open
                if track:
                    marks.append((len(parts), mi, True))
            _content(parts, m.get("content"), images, mi)
            if not tool_calls:
                parts += response_end
                continue
            parts += response_to_tools
            for j, call in enumerate(tool_calls):
                fn = function(call, mi, j)
                args, block = arguments(fn.get("arguments"), mi, j, fn is call)
                parts += call_head
                app(esc(fn["name"]))
                parts += index_attr
                app(_INDEX[j + 1] if j < 63 else str(j + 1))
                parts += attr_end
                if block is not None:
                    parts += json_open
                    _text(parts, block, images, mi, args_field(j, fn is call))
                    parts += json_close
                else:
                    for key, value in args.items():
                        parts += arg_head
                        app(esc(key))
                        parts += arg_type
                        kind = TYPE_NAMES.get(type(value)) or xtml_type(value)
                        app(kind)
                        parts += attr_end
                        text = value if kind == "string" else value_text(value, mi, j, fn is call, key)
                        if images is None:
                            app(text)
                        else:
                            _text(parts, text, images, mi, args_field(j, fn is call))
                        parts += arg_close
                parts += call_close
            parts += tools_end
        # any other role (developer included) is dropped, as the official encoder drops it

    if track:
        marks.append((len(parts), -1, False))
    if tool_choice == "required" or tool_choice == "none":
        parts += _TOOL_CHOICE[tool_choice]
    rf_type = response_format.get("type", response_format) if isinstance(response_format, dict) else response_format
    if rf_type == "json_object":
        parts += _JSON_OBJECT
    elif rf_type == "json_schema":
        schema = schema_of(response_format) if response_schema is _UNSET else response_schema
        if schema is not None:
            schema = sorted_keys(schema, None, "response_schema")
        body = _JSON_SCHEMA_HEAD + dumps(schema, None, "response_schema", compact=True) + "\n```"
        parts += _system("response-format", body)
    if add_generation_prompt:
        parts += _GEN_THINK if thinking else _GEN_RESPONSE
    if images is not None and images.next != len(images.prompts):
        raise RenderError(
            f"{len(images.prompts)} image_prompts given but {images.next} images / placeholders rendered",
            field="image_prompts",
        )
    return parts


class K3Options(TypedDict, total=False):
    """The keyword options of :func:`render_k3_segments` / :func:`render_k3_ids` (those of
    :func:`render_k3`, with the same defaults)."""

    add_generation_prompt: bool
    thinking: bool
    thinking_effort: str | None
    tool_choice: Any
    response_format: Any
    response_schema: Any
    image_prompts: Sequence[str] | None


def render_k3(
    messages: Sequence[Any],
    tools: Sequence[Any] | None = None,
    *,
    add_generation_prompt: bool = True,
    thinking: bool = True,
    thinking_effort: str | None = "max",
    tool_choice: Any = None,
    response_format: Any = None,
    response_schema: Any = _UNSET,
    image_prompts: Sequence[str] | None = None,
) -> str:
    """The Kimi-K3 prompt the official tokenizer renders for ``messages`` and ``tools``.

    Defaults are the official tokenizer's: ``add_generation_prompt=True``, ``thinking=True`` and
    ``thinking_effort="max"`` (``None``: no thinking-effort message). ``tool_choice`` ``"required"`` /
    ``"none"`` and ``response_format`` ``"json_object"`` / ``"json_schema"`` (a string or an OpenAI
    ``{"type": ...}`` object) add their system messages; ``response_schema`` overrides the schema read
    from ``response_format.json_schema``. ``image_prompts`` replace image parts and
    ``<|kimi_image_placeholder|>`` text in order (as the vision processor passes them).

    Raises :class:`~kimi_chat.messages.InvalidMessagesError` for messages that are not message objects
    (or have no ``role``) and :class:`~kimi_chat.errors.RenderError` where the official encoder raises.
    """
    check_bool("add_generation_prompt", add_generation_prompt)
    thinking = bool(thinking)  # the official encoder reads it by truth value (lint: non-bool-option)
    return "".join(
        _build(messages, tools, add_generation_prompt, thinking, thinking_effort, tool_choice,
               response_format, response_schema, image_prompts, False)
    )


def _build_split(
    messages: Sequence[Any], tools: Sequence[Any] | None, options: K3Options, marks: list[tuple[int, int, bool]] | None
) -> list[str]:
    unknown = set(options) - set(K3Options.__annotations__)
    if unknown:
        raise TypeError(f"unknown Kimi-K3 option(s): {', '.join(sorted(unknown))}")
    add_generation_prompt = options.get("add_generation_prompt", True)
    thinking = options.get("thinking", True)
    check_bool("add_generation_prompt", add_generation_prompt)
    thinking = bool(thinking)  # the official encoder reads it by truth value (lint: non-bool-option)
    return _build(messages, tools, add_generation_prompt, thinking, options.get("thinking_effort", "max"),
                  options.get("tool_choice"), options.get("response_format"), options.get("response_schema", _UNSET),
                  options.get("image_prompts"), True, marks)


def _segments(parts: list[str], marks: list[tuple[int, int, bool]]) -> list[K3Segment]:
    out: list[K3Segment] = []
    bounds = marks + [(len(parts), -1, False)]
    if not marks or marks[0][0] != 0:
        bounds.insert(0, (0, -1, False))
    for (start, idx, train), (end, _, _) in zip(bounds, bounds[1:]):
        for p in parts[start:end]:
            if p:
                special = type(p) is _Marker
                out.append(K3Segment(str.__str__(p) if special else p, special, idx, train))
    return out


def render_k3_segments(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[K3Segment]:
    """:func:`render_k3` (same options) as the official encoder's segments (:class:`K3Segment`, empty
    ones dropped as the encoder drops them); ``"".join(s.text for s in segments) == render_k3(...)``."""
    marks: list[tuple[int, int, bool]] = []
    return _segments(_build_split(messages, tools, options, marks), marks)


_CACHE_MAX_LEN = 48
_CACHE_MAX_ENTRIES = 1 << 16
_TEXT_CACHES: "weakref.WeakKeyDictionary[Any, tuple[dict[str, int], dict[str, list[int]]]]" = weakref.WeakKeyDictionary()


def _caches(tokenizer: Any) -> tuple[dict[str, int], dict[str, list[int]]]:
    cached = _TEXT_CACHES.get(tokenizer)
    if cached is None:
        specials = tokenizer.special_tokens
        missing = [m.text for m in (M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG) if m.text not in specials]
        if missing:
            raise ValueError(
                f"{tokenizer!r} is not a Kimi-K3 tokenizer (no special token {missing[0]}); "
                "use KimiTokenizer.from_reference('k3')"
            )
        ids = {m.text: specials[m.text] for m in (M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG)}
        cached = (ids, {})
        _TEXT_CACHES[tokenizer] = cached
    return cached


def _ids(
    parts: list[str], tokenizer: Any, cuts: Sequence[int] | None = None, special_text: bool = False
) -> tuple[list[int], list[int]]:
    """``(ids, ends)``: the segment-wise ids of ``parts`` and, for each part index in ``cuts`` (in
    order, the last ``len(parts)``), the number of ids of ``parts[:cut]`` (``[len(ids)]`` without
    ``cuts``). ``special_text``: text segments too are encoded with special tokens allowed."""
    marker_ids, cache = _caches(tokenizer)
    encode_ordinary = tokenizer.encoding.encode_ordinary
    encode = tokenizer.encode
    short = _CACHE_MAX_LEN
    long_text = MAX_NO_WHITESPACES_CHARS  # above this, KimiTokenizer.encode applies the official long-run cuts
    ids: list[int] = []
    ends: list[int] = []
    extend = ids.extend
    append = ids.append
    get = cache.get
    ranges = zip([0, *cuts], cuts) if cuts is not None else ((0, len(parts)),)
    for a, b in ranges:
        for p in parts[a:b] if cuts is not None else parts:
            if type(p) is _Marker:
                mid = marker_ids.get(p)
                if mid is not None:
                    append(mid)
                else:
                    extend(encode(str.__str__(p), allow_special=True))
                continue
            if special_text:
                extend(encode(p, allow_special=True))
                continue
            toks = get(p)
            if toks is None:
                toks = encode_ordinary(p) if len(p) <= long_text else encode(p, allow_special=False)
                if len(p) <= short:
                    if len(cache) >= _CACHE_MAX_ENTRIES:
                        cache.clear()
                    cache[p] = toks
            extend(toks)
        ends.append(len(ids))
    return ids, ends


def render_k3_ids(
    messages: Sequence[Any], tokenizer: Any, tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[int]:
    """The token ids of the K3 prompt, equal to the official ``apply_chat_template(..., tokenize=True)``
    (options as for :func:`render_k3`).

    ``tokenizer`` is a K3 :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`
    (``KimiTokenizer.from_reference("k3")``). Each segment is encoded on its own, as the official
    tokenizer does: markers as their special ids, text as ordinary text (special-token spellings typed
    by a user stay text), so BPE never merges across segments. A lone surrogate in the text is encoded
    as U+FFFD, as the official tokenizer does, with a :class:`~kimi_chat.errors.LoneSurrogateWarning`."""
    marks: list[tuple[int, int, bool]] = []
    parts = _build_split(messages, tools, options, marks)
    warn_lone_surrogates(parts, marks, messages, tools, options, stacklevel=2)
    return _ids(parts, tokenizer)[0]
