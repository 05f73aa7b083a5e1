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
The renderer writes exactly those pieces into a :class:`~kimi_chat.prompt.writer.Writer`: markers and image
prompts (encoded with special tokens allowed) as template literals, every other piece as text (tag names
and attribute syntax too: the encoder encodes them as ordinary text), so text, segments and ids come from
one pass. It writes by items (:meth:`~kimi_chat.prompt.writer.Writer.items`): the scaffolding of every
message is a constant :class:`~kimi_chat.prompt.writer.Run` of segments, so :mod:`kimi_chat.tokens.segments`
encodes each run once per tokenizer and the :class:`~kimi_chat.prompt.writer.Layout` is unfolded only when
it is read.

Roles the encoder does not know (``developer`` among them) are dropped, as it drops them. Where the
official encoder raises (``thinking_effort="medium"``, arguments that are JSON but not an object, a
tool result whose tool name cannot be resolved, a tool call without a name...), this raises
:class:`~kimi_chat.errors.RenderError` naming the message index and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from typing_extensions import TypedDict, Unpack

from kimi_chat import markers as M
from ...caches import content_key
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
from kimi_chat.dialects import Dialect
from kimi_chat.messages import check_bool, plain_items
from kimi_chat.prompt.writer import Layout, Literal, Run, Writer
from kimi_chat.surrogates import warn_lone_surrogates
from kimi_chat.tokens.segments import encode_items

__all__ = ["K3Segment", "K3Options", "render_k3", "render_k3_segments", "render_k3_ids", "write_k3"]

_OPEN = M.K3_OPEN.text
_CLOSE = M.K3_CLOSE.text
_SEP = M.K3_SEP.text
_EOM = M.K3_END_OF_MSG.text
_CONTROL_ORDER = (_OPEN, _CLOSE, _SEP, _EOM)
_CONTROL = frozenset(_CONTROL_ORDER)
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


def _run(pieces: tuple[str, ...]) -> Run:
    """A constant run of encoder segments: the markers template literals, every other segment text."""
    return Run(pieces, tuple(k for k, p in enumerate(pieces) if p not in _CONTROL))


class _Out(NamedTuple):
    """Where the pass writes single pieces: ``emit_text`` (text) and ``emit`` (a literal: an image prompt)."""

    emit_text: Any
    emit: Any


class _Pieces(NamedTuple):
    """The constant runs of segments the pass writes (each a :class:`~kimi_chat.prompt.writer.Run`)."""

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


_RAW = _Pieces(
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
_RUNS = _Pieces(*(_run(run) for run in _RAW))  # type: ignore[arg-type]
_GEN_THINK = (*_open("message", ("role", "assistant")), *_THINK_OPEN)
_GEN_RESPONSE = (*_open("message", ("role", "assistant")), *_RESPONSE_OPEN)
# runs that join a constant tag to what follows it where that is constant too (fewer items per message):
# an assistant's opening with its channel's, without a name (by `thinking`) and after one; the ` index`
# attribute of a call or tool result with its value, for the first _N_INDEX values; the ` type` attribute of
# an argument with each type name the encoder writes
_ASSISTANT_OPEN = (_run((*_RAW.assistant, *_RESPONSE_OPEN)), _run((*_RAW.assistant, *_THINK_OPEN)))
_NAMED_OPEN = (_run((*_ATTR_END, *_RESPONSE_OPEN)), _run((*_ATTR_END, *_THINK_OPEN)))
_N_INDEX = 64
_INDEX_RUNS = tuple(_run((*_RAW.index_attr, str(k), *_ATTR_END)) for k in range(_N_INDEX))
_TYPE_RUNS = {kind: _run((*_RAW.arg_type, kind, *_ATTR_END)) for kind in sorted(set(TYPE_NAMES.values()))}


def _system(kind: str, body: str) -> tuple[str, ...]:
    # _internal_system_message of the encoder
    return (*_open("message", ("role", "system"), ("type", kind)), body.strip(), *_MSG_END)


_TOOL_DECLARE_OPEN = _open("message", ("role", "system"), ("type", "tool-declare"))
_RF_OPEN = _open("message", ("role", "system"), ("type", "response-format"))
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
# the whole constant messages and tags the pass writes, as runs, each by name
_TOOL_DECLARE_RUN, _MSG_END_RUN, _RF_OPEN_RUN, _JSON_OBJECT_RUN, _GEN_THINK_RUN, _GEN_RESPONSE_RUN = (
    _run(run) for run in (_TOOL_DECLARE_OPEN, _MSG_END, _RF_OPEN, _JSON_OBJECT, _GEN_THINK, _GEN_RESPONSE))
_EFFORT_RUNS = {effort: _run(run) for effort, run in _EFFORT_MESSAGES.items()}
_TOOL_CHOICE_RUNS = {choice: _run(run) for choice, run in _TOOL_CHOICE.items()}


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


def _text(w: Writer, text: Any, images: _Images | None, index: int, field: str) -> None:
    # _append_text: ordinary text, split at image placeholders when image prompts are given
    if type(text) is not str:
        text = str(text)
    if not text:
        return
    if images is None or _IMAGE_PLACEHOLDER not in text:
        w.emit_text(text)
        return
    pieces = text.split(_IMAGE_PLACEHOLDER)
    for piece in pieces[:-1]:
        w.emit_text(piece)
        w.emit(images.take(index, field))
    w.emit_text(pieces[-1])


def _content(w: Writer, content: Any, images: _Images | None, index: int, field: str = "content") -> None:
    if type(content) is str and (images is None or _IMAGE_PLACEHOLDER not in content):
        w.emit_text(content)
        return
    if isinstance(content, str):
        _text(w, content, images, index, field)
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
                w.emit(prompt)
        elif "text" in part:
            _text(w, part["text"], images, index, where + ".text")
        else:
            raise RenderError(
                f"a content part of type {kind!r} has no text (the K3 encoder renders text and image parts only)",
                message_index=index,
                field=where + ".text",
            )


def _declare(w: Writer, put: Any, tools: Any, body_head: str, index: int | None,
             key: bytes | None = None) -> None:
    put(_TOOL_DECLARE_RUN)
    w.emit_text(tools_json(tools, index, "tools", key, body_head))
    put(_MSG_END_RUN)


def _build(
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    add_generation_prompt: bool,
    thinking: bool,
    thinking_effort: Any,
    tool_choice: Any,
    response_format: Any,
    response_schema: Any,
    image_prompts: Sequence[Any] | None,
    w: Writer,
) -> None:
    """Write the prompt into ``w`` by items (:meth:`~kimi_chat.prompt.writer.Writer.items`): constant runs
    of encoder segments (markers literal, the tag syntax text), input text, image prompts as literals; a
    marked writer also gets the attribution marks, the first at 0."""
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
    # (the assistant's opening, think / response openings and the ` type` attribute: in composite runs only)
    (user, user_named, system, system_named, _, assistant_named, attr_end, msg_end, _, think_to_response, _,
     response_end, response_to_tools, tools_end, call_head, index_attr, json_open, json_close, arg_head, _,
     arg_close, call_close, tool_head) = _RUNS
    # the pass appends items at C speed: a Run of constant segments, input text, and (marked) marks
    # `(item position, message_index, trainable)`
    items, marks = w.items()
    app = put = items.append
    track = marks is not None
    if marks is not None:
        mark = marks.append

        def literal(piece: str) -> None:
            items.append(Literal(piece))

        w = _Out(app, literal)  # type: ignore[assignment]
    # plain mode: the items are the writer's parts, which its emit and emit_text append to, as _Out(app, app) would

    if tools:
        # a list of plain data (marshal takes it: no object at any level) is what plain_items returns
        key = content_key(tools) if type(tools) is list else None
        if key is None and isinstance(tools, (list, tuple)):
            tools = plain_items(tools, "tools")
        _declare(w, put, tools, _TOOLS_BODY, None, key)
    if thinking and thinking_effort is not None:
        put(_EFFORT_RUNS[thinking_effort])

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
                    mark((len(items), k, False))
                put(tool_head)
                app(esc(name))
                if tool_index < _N_INDEX:
                    put(_INDEX_RUNS[tool_index])
                else:
                    put(index_attr)
                    app(str(tool_index))
                    put(attr_end)
                content = m.get("content")
                if type(content) is str and images is None:  # what _content does with it, at once
                    app(content)
                else:
                    _content(w, content, images, k)
                put(msg_end)
            continue
        mi = i
        i += 1
        if role == "user" or role == "system":
            if role == "system" and m.get("tools"):
                if track:
                    mark((len(items), mi, False))
                _declare(w, put, m["tools"], _NEW_TOOLS_BODY, mi)
                continue
            if track:
                mark((len(items), mi, False))
            name = m.get("name")
            if name:
                put(user_named if role == "user" else system_named)
                app(esc(name))
                put(attr_end)
            else:
                put(user if role == "user" else system)
            content = m.get("content")
            if type(content) is str and images is None:  # what _content does with it, at once
                app(content)
            else:
                _content(w, content, images, mi)
            put(msg_end)
        elif role == "assistant":
            tool_calls = m.get("tool_calls")
            tool_index = 0
            if tool_calls and not isinstance(tool_calls, (list, tuple)):
                raise RenderError(
                    f"must be a list, not {type(tool_calls).__name__}", message_index=mi, field="tool_calls"
                )
            if track:
                mark((len(items), mi, False))
            name = m.get("name")
            if name:
                put(assistant_named)
                app(esc(name))
                put(_NAMED_OPEN[thinking])
            else:
                put(_ASSISTANT_OPEN[thinking])  # the message's opening and its channel's (think or response)
            if thinking:
                if track:
                    mark((len(items), mi, True))
                rc = m.get("reasoning_content") or m.get("reasoning")
                if rc is not None:
                    if type(rc) is str and images is None:
                        if rc and not rc.isspace():  # `rc.strip()`
                            app(rc)
                    elif str(rc).strip():
                        _text(w, rc, images, mi, "reasoning_content")
                put(think_to_response)
            else:
                if track:
                    mark((len(items), mi, True))
            content = m.get("content")
            if type(content) is str and images is None:  # what _content does with it, at once
                app(content)
            else:
                _content(w, content, images, mi)
            if not tool_calls:
                put(response_end)
                continue
            put(response_to_tools)
            for j, call in enumerate(tool_calls):
                fn = function(call, mi, j)
                args, block = arguments(fn.get("arguments"), mi, j, fn is call)
                put(call_head)
                app(esc(fn["name"]))
                if j + 1 < _N_INDEX:
                    put(_INDEX_RUNS[j + 1])
                else:
                    put(index_attr)
                    app(str(j + 1))
                    put(attr_end)
                if block is not None:
                    put(json_open)
                    _text(w, block, images, mi, args_field(j, fn is call))
                    put(json_close)
                else:
                    for key, value in args.items():
                        put(arg_head)
                        app(esc(key))
                        kind = TYPE_NAMES.get(type(value)) or xtml_type(value)
                        put(_TYPE_RUNS[kind])
                        text = value if kind == "string" else value_text(value, mi, j, fn is call, key)
                        if images is None:
                            app(text)
                        else:
                            _text(w, text, images, mi, args_field(j, fn is call))
                        put(arg_close)
                put(call_close)
            put(tools_end)
        # any other role (developer included) is dropped, as the official encoder drops it

    if track:
        mark((len(items), -1, False))
    if tool_choice == "required" or tool_choice == "none":
        put(_TOOL_CHOICE_RUNS[tool_choice])
    rf_type = response_format.get("type", response_format) if isinstance(response_format, dict) else response_format
    if rf_type == "json_object":
        put(_JSON_OBJECT_RUN)
    elif rf_type == "json_schema":
        schema = schema_of(response_format) if response_schema is _UNSET else response_schema
        if schema is not None:
            schema = sorted_keys(schema, None, "response_schema")
        body = _JSON_SCHEMA_HEAD + dumps(schema, None, "response_schema", compact=True) + "\n```"
        put(_RF_OPEN_RUN)
        app(body.strip())
        put(_MSG_END_RUN)
    if add_generation_prompt:
        put(_GEN_THINK_RUN if thinking else _GEN_RESPONSE_RUN)
    if marks is not None and (not marks or marks[0][0] != 0):
        marks.insert(0, (0, -1, False))
    if images is not None and images.next != len(images.prompts):
        raise RenderError(
            f"{len(images.prompts)} image_prompts given but {images.next} images / placeholders rendered",
            field="image_prompts",
        )


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
    w = Writer(marked=False)
    _build(messages, tools, add_generation_prompt, thinking, thinking_effort, tool_choice, response_format,
           response_schema, image_prompts, w)
    return "".join(w.parts)


_OPTION_NAMES = frozenset(K3Options.__annotations__)
_DEFAULTS: dict[str, Any] = {"thinking": True, "thinking_effort": "max", "tool_choice": None, "response_format": None,
                             "response_schema": _UNSET, "image_prompts": None}
"""The encoder's defaults of the options :func:`_build` takes after ``add_generation_prompt`` (in its order)."""
_DEFAULT_ARGS = tuple(_DEFAULTS.values())


def _write(w: Writer, messages: Sequence[Any], tools: Sequence[Any] | None, options: Mapping[str, Any]) -> None:
    """Write the prompt of :func:`render_k3`'s ``options`` into ``w`` (a marked writer's first mark at 0)."""
    unknown = options.keys() - _OPTION_NAMES if options else None
    if unknown:
        raise TypeError(f"unknown Kimi-K3 option(s): {', '.join(sorted(unknown))}")
    add_generation_prompt = options.get("add_generation_prompt", True)
    check_bool("add_generation_prompt", add_generation_prompt)
    args = [options.get(k, v) for k, v in _DEFAULTS.items()]
    args[0] = bool(args[0])  # thinking: the official encoder reads it by truth value (lint: non-bool-option)
    _build(messages, tools, add_generation_prompt, *args, w)


def _layout(messages: Sequence[Any], tools: Sequence[Any] | None, options: Mapping[str, Any]) -> Layout:
    w = Writer(marked=True)
    _write(w, messages, tools, options)
    return w.layout()


def write_k3(
    w: Writer, d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None, add_generation_prompt: bool | None,
    continue_final_message: bool, options: Mapping[str, Any], strict: bool,
) -> bool:
    """The K3 family's prompt writer (:func:`kimi_chat.prompt.render` and its views, for a K3 dialect): the
    encoder's own input handling (``strict`` checked on the input as given; ``continue_final_message`` is
    refused: the official K3 tokenizer has no such option; ``add_generation_prompt`` defaults to True), the
    kwargs the encoder does not read ignored (as its ``apply_chat_template(**kwargs)`` ignores them).
    Returns the ``add_generation_prompt`` used."""
    if strict:
        # imported here: checks.lint imports family modules (whose package records hold this writer)
        from kimi_chat.checks.lint import check_strict

        check_strict(d, messages, tools, True if add_generation_prompt is None else add_generation_prompt, options)
    if continue_final_message:
        raise RenderError(f"continue_final_message is not supported by {d.name}: the official K3 tokenizer "
                          "has no such option")
    if add_generation_prompt is None:
        add_generation_prompt = True
    if not options:  # every option at the encoder's default: what _write does with none, at once
        if type(add_generation_prompt) is not bool:
            check_bool("add_generation_prompt", add_generation_prompt)
        _build(messages, tools, add_generation_prompt, *_DEFAULT_ARGS, w)
        return add_generation_prompt
    read = {k: v for k, v in options.items() if k in d.options}
    read["add_generation_prompt"] = add_generation_prompt
    _write(w, messages, tools, read)
    return add_generation_prompt


def render_k3_segments(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[K3Segment]:
    """:func:`render_k3` (same options) as the official encoder's segments (:class:`K3Segment`, empty
    ones dropped as the encoder drops them); ``"".join(s.text for s in segments) == render_k3(...)``."""
    return [K3Segment(p.text, p.literal, p.message_index, p.trainable) for p in _layout(messages, tools, options).pieces()]


def render_k3_ids(
    messages: Sequence[Any], tokenizer: Any, tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[int]:
    """The token ids of the K3 prompt, equal to the official ``apply_chat_template(..., tokenize=True)``
    (options as for :func:`render_k3`).

    ``tokenizer`` is a K3 :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`
    (``KimiTokenizer.from_reference("k3")``). Each segment is encoded on its own, as the official
    tokenizer does (:mod:`kimi_chat.tokens.segments`): markers as their special ids, text as ordinary text
    (special-token spellings typed by a user stay text), so BPE never merges across segments. A lone
    surrogate in the text is encoded as U+FFFD, as the official tokenizer does, with a
    :class:`~kimi_chat.errors.LoneSurrogateWarning`."""
    specials = tokenizer.special_tokens
    missing = [t for t in _CONTROL_ORDER if t not in specials]
    if missing:
        raise ValueError(
            f"{tokenizer!r} is not a Kimi-K3 tokenizer (no special token {missing[0]}); "
            "use KimiTokenizer.from_reference('k3')"
        )
    w = Writer(marked=True)
    _write(w, messages, tools, options)
    items, marks = w.written_items()
    warn_lone_surrogates(items, marks, messages, tools, options, stacklevel=2)
    return encode_items(items, tokenizer)[0]
