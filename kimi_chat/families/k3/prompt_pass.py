"""The Kimi-K3 prompt pass: the encoder's constant runs of segments and :func:`build`, which writes a
prompt into a :class:`~kimi_chat.prompt.writer.Writer` by items (:mod:`kimi_chat.families.k3.render` is
the public API around it, and its module docstring the format).

The entry point takes what :mod:`.render` has checked (its public functions keep Python's own handling of
what a caller passes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple, Union

from kimi_chat import markers as M
from kimi_chat.caches import admitted_key
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
from kimi_chat.messages import plain_items
from kimi_chat.prompt.writer import Literal, Run, Writer

__all__ = ["CONTROL_ORDER", "UNSET", "build", "turns_position_free"]

_OPEN = M.K3_OPEN.text
_CLOSE = M.K3_CLOSE.text
_SEP = M.K3_SEP.text
_EOM = M.K3_END_OF_MSG.text
CONTROL_ORDER = (_OPEN, _CLOSE, _SEP, _EOM)
"""The four markers of the K3 format, in the order a K3 tokenizer must have them."""
_CONTROL: Final = frozenset(CONTROL_ORDER)
_IMAGE_PLACEHOLDER: Final = M.K3_IMAGE_PLACEHOLDER.text
_EFFORTS: Final = frozenset(M.K3_THINKING_EFFORTS)
UNSET: Final[Any] = object()
"""``response_schema`` not given (read from ``response_format``)."""


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


_Sink = Union["Writer", _Out]
"""What the helpers of the pass write single pieces into: the writer (plain mode) or an :class:`_Out`."""


def _literals_to(items: list[str]) -> Any:
    """``emit`` of an :class:`_Out` appending to ``items``: a one-off literal (an image prompt)."""

    def literal(piece: str) -> None:
        items.append(Literal(piece))

    return literal


class _Pieces(NamedTuple):
    """The constant runs of segments the pass writes: each a tuple of segments in :data:`_RAW`, made a
    :class:`~kimi_chat.prompt.writer.Run` in :data:`_RUNS` (hence ``Any``)."""

    user: Any
    user_named: Any
    system: Any
    system_named: Any
    assistant: Any
    assistant_named: Any
    attr_end: Any
    msg_end: Any
    think_open: Any
    think_to_response: Any
    response_open: Any
    response_end: Any
    response_to_tools: Any
    tools_end: Any
    call_head: Any
    index_attr: Any
    json_open: Any
    json_close: Any
    arg_head: Any
    arg_type: Any
    arg_close: Any
    call_close: Any
    tool_head: Any


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
_RUNS: Final = _Pieces(*(_run(run) for run in _RAW))
_GEN_THINK = (*_open("message", ("role", "assistant")), *_THINK_OPEN)
_GEN_RESPONSE = (*_open("message", ("role", "assistant")), *_RESPONSE_OPEN)
# runs that join a constant tag to what follows it where that is constant too (fewer items per message):
# an assistant's opening with its channel's, without a name (by `thinking`) and after one; the ` index`
# attribute of a call or tool result with its value, for the first _N_INDEX values; the ` type` attribute of
# an argument with each type name the encoder writes
_ASSISTANT_OPEN: Final = (_run((*_RAW.assistant, *_RESPONSE_OPEN)), _run((*_RAW.assistant, *_THINK_OPEN)))
_NAMED_OPEN: Final = (_run((*_ATTR_END, *_RESPONSE_OPEN)), _run((*_ATTR_END, *_THINK_OPEN)))
_N_INDEX: Final = 64
_INDEX_RUNS: Final = tuple(_run((*_RAW.index_attr, str(k), *_ATTR_END)) for k in range(_N_INDEX))
_TYPE_RUNS: Final = {kind: _run((*_RAW.arg_type, kind, *_ATTR_END)) for kind in sorted(set(TYPE_NAMES.values()))}


def _system(kind: str, body: str) -> tuple[str, ...]:
    # _internal_system_message of the encoder
    return (*_open("message", ("role", "system"), ("type", kind)), body.strip(), *_MSG_END)


_TOOL_DECLARE_OPEN = _open("message", ("role", "system"), ("type", "tool-declare"))
_RF_OPEN = _open("message", ("role", "system"), ("type", "response-format"))
_TOOLS_BODY: Final = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
_NEW_TOOLS_BODY: Final = (
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
_JSON_SCHEMA_HEAD: Final = (
    "The system is invoked with `response_format=json_schema`.\n"
    + _RAW_JSON
    + "\nThe JSON data must match the following schema:\n```json\n"
)
# the whole constant messages and tags the pass writes, as runs, each by name
_TOOL_DECLARE_RUN: Final = _run(_TOOL_DECLARE_OPEN)
_MSG_END_RUN: Final = _run(_MSG_END)
_RF_OPEN_RUN: Final = _run(_RF_OPEN)
_JSON_OBJECT_RUN: Final = _run(_JSON_OBJECT)
_GEN_THINK_RUN: Final = _run(_GEN_THINK)
_GEN_RESPONSE_RUN: Final = _run(_GEN_RESPONSE)
_EFFORT_RUNS: Final = {effort: _run(run) for effort, run in _EFFORT_MESSAGES.items()}
_TOOL_CHOICE_RUNS: Final = {choice: _run(run) for choice, run in _TOOL_CHOICE.items()}


# -------------------------------------------------------------------------------------------- the pass


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


def _text(w: _Sink, text: Any, images: _Images | None, index: int, field: str) -> None:
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


def _content(w: _Sink, items: list[str], content: Any, images: _Images | None, index: int,
             field: str = "content") -> None:
    # (`items`: the pass's items, which `w.emit_text` appends to: a plain string straight in)
    if type(content) is str and (images is None or _IMAGE_PLACEHOLDER not in content):
        items.append(content)
        return
    if isinstance(content, str):
        _text(w, content, images, index, field)
        return
    if content is None:
        return
    try:
        parts = iter(content)
    except TypeError:
        raise RenderError(
            f"must be a string or a list of content parts, not {type(content).__name__}",
            message_index=index,
            field=field,
        ) from None
    for j, part in enumerate(parts):
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


def _declare(items: list[str], tools: Any, body_head: str, index: int | None, key: bytes | None = None,
             keyed: bool = False) -> None:
    items.append(_TOOL_DECLARE_RUN)
    items.append(tools_json(tools, index, "tools", key, body_head, keyed))  # text: what `emit_text` appends
    items.append(_MSG_END_RUN)


def _index(items: list[str], n: int) -> None:
    """The `` index="N"`` attribute of a call or tool result: one composite run up to :data:`_N_INDEX`."""
    if n < _N_INDEX:
        items.append(_INDEX_RUNS[n])
    else:
        items.append(_RUNS.index_attr)
        items.append(str(n))
        items.append(_RUNS.attr_end)


def build(
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
    msgs: list[dict[str, Any]] = messages_of(messages)
    images = None if image_prompts is None else _Images(list(image_prompts))
    # (the assistant's opening, think / response openings and the ` type` attribute: in composite runs only)
    (user, user_named, system, system_named, _, assistant_named, attr_end, msg_end, _, think_to_response, _,
     response_end, response_to_tools, tools_end, call_head, _, json_open, json_close, arg_head, _,
     arg_close, call_close, tool_head) = _RUNS
    # the pass appends items (a Run of constant segments, input text) and, marked, marks `(item position,
    # message_index, trainable)`
    items: list[str]
    marks: list[tuple[int, int, bool]] | None
    items, marks = w.items()
    track = marks is not None
    if marks is not None:
        mark = marks.append
    # plain mode: the items are the writer's parts, which its emit and emit_text append to, as an _Out would
    out: _Sink = _Out(items.append, _literals_to(items)) if marks is not None else w

    if tools:
        # a list of plain data (marshal takes it: no object at any level) is what plain_items returns
        tools_key = None
        if type(tools) is list:
            try:
                tools_key = admitted_key(tools)  # a key once these tools come again (None the first time)
            except (ValueError, RecursionError):  # objects in it (or too deep for marshal)
                tools = plain_items(tools, "tools")
        elif isinstance(tools, (list, tuple)):
            tools = plain_items(tools, "tools")
        _declare(items, tools, _TOOLS_BODY, None, tools_key, True)
    if thinking and thinking_effort is not None:
        items.append(_EFFORT_RUNS[thinking_effort])

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
                items.append(tool_head)
                items.append(esc(name))
                _index(items, tool_index)
                _content(out, items, m.get("content"), images, k)
                items.append(msg_end)
            continue
        mi = i
        i += 1
        if role == "user" or role == "system":
            if role == "system" and m.get("tools"):
                if track:
                    mark((len(items), mi, False))
                _declare(items, m["tools"], _NEW_TOOLS_BODY, mi)
                continue
            if track:
                mark((len(items), mi, False))
            name = m.get("name")
            if name:
                items.append(user_named if role == "user" else system_named)
                items.append(esc(name))
                items.append(attr_end)
            else:
                items.append(user if role == "user" else system)
            _content(out, items, m.get("content"), images, mi)
            items.append(msg_end)
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
                items.append(assistant_named)
                items.append(esc(name))
                items.append(_NAMED_OPEN[thinking])
            else:
                items.append(_ASSISTANT_OPEN[thinking])  # the message's opening and its channel's (think or response)
            if thinking:
                if track:
                    mark((len(items), mi, True))
                rc = m.get("reasoning_content") or m.get("reasoning")
                if rc is not None:
                    if type(rc) is str and images is None:
                        if rc and not rc.isspace():  # `rc.strip()`
                            items.append(rc)
                    elif str(rc).strip():
                        _text(out, rc, images, mi, "reasoning_content")
                items.append(think_to_response)
            else:
                if track:
                    mark((len(items), mi, True))
            _content(out, items, m.get("content"), images, mi)
            if not tool_calls:
                items.append(response_end)
                continue
            items.append(response_to_tools)
            for j, call in enumerate(tool_calls):
                fn = function(call, mi, j)
                args, block = arguments(fn.get("arguments"), mi, j, fn is call)
                items.append(call_head)
                items.append(esc(fn["name"]))
                _index(items, j + 1)
                if block is not None:
                    items.append(json_open)
                    _text(out, block, images, mi, args_field(j, fn is call))
                    items.append(json_close)
                else:
                    for key, value in args.items():
                        items.append(arg_head)
                        items.append(esc(key))
                        kind = TYPE_NAMES.get(type(value)) or xtml_type(value)
                        items.append(_TYPE_RUNS[kind])
                        text = value if kind == "string" else value_text(value, mi, j, fn is call, key)
                        if images is None:
                            items.append(text)
                        else:
                            _text(out, text, images, mi, args_field(j, fn is call))
                        items.append(arg_close)
                items.append(call_close)
            items.append(tools_end)
        # any other role (developer included) is dropped, as the official encoder drops it

    if track:
        mark((len(items), -1, False))
    if tool_choice == "required" or tool_choice == "none":
        items.append(_TOOL_CHOICE_RUNS[tool_choice])
    rf_type = response_format.get("type", response_format) if isinstance(response_format, dict) else response_format
    if rf_type == "json_object":
        items.append(_JSON_OBJECT_RUN)
    elif rf_type == "json_schema":
        schema = schema_of(response_format) if response_schema is UNSET else response_schema
        if schema is not None:
            schema = sorted_keys(schema, None, "response_schema")
        body = _JSON_SCHEMA_HEAD + dumps(schema, None, "response_schema", compact=True) + "\n```"
        items.append(_RF_OPEN_RUN)
        items.append(body.strip())
        items.append(_MSG_END_RUN)
    if add_generation_prompt:
        items.append(_GEN_THINK_RUN if thinking else _GEN_RESPONSE_RUN)
    if marks is not None and (not marks or marks[0][0] != 0):
        marks.insert(0, (0, -1, False))
    if images is not None and images.next != len(images.prompts):
        raise RenderError(
            f"{len(images.prompts)} image_prompts given but {images.next} images / placeholders rendered",
            field="image_prompts",
        )


def turns_position_free(dialect: Any, options: Mapping[str, Any]) -> bool:
    """Whether :func:`build` writes every assistant turn from the message alone wherever it stands (the family's
    :attr:`~kimi_chat.families.TokenPolicy.turns_position_free`): without image prompts.

    :func:`build` writes the blocks before the messages (tool declarations, thinking effort) from the tools and
    options; each message from the message, the options and what came before it: a tool result its name from
    the preceding assistant's calls, an image the next image prompt; no assistant turn reads either (its header,
    reasoning, content and calls are written from the message and ``thinking`` alone, its reasoning never
    dropped); then, after the last message, the request-level blocks (tool choice, response format) and the
    generation prompt. The ids are encoded segment by segment, so a turn's ids are its own segments'. Every
    request is then the rendering up to the turn's header plus what follows the last message (request-level
    blocks and generation prompt: the samples core compares each turn's header with it, and declines where a
    block stands there). With image prompts a prefix of the conversation cannot take them all (the encoder
    refuses it): not position free."""
    return options.get("image_prompts") is None
