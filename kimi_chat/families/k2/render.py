"""The K2-family renderer: normalised messages + tools + a K2 dialect -> the exact prompt text.

Python, no Jinja, no I/O; :mod:`kimi_chat.render` validates the input and dispatches here. Template literals are written with ``Writer.emit``, text from the input with
``Writer.emit_text``. For every dialect the output is byte-identical to what the official tokenizer's
``apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)`` returns with that
dialect's oracle template (checked by the property and golden tests).

The prompt is a sequence of turns::

    [<|im_system|>tool_declare<|im_middle|>TOOLS<|im_end|>]
    [<|im_system|>system<|im_middle|>DEFAULT SYSTEM PROMPT<|im_end|>]      (first message not system)
    (HEADER BODY <|im_end|>)*
    [<|im_assistant|>assistant<|im_middle|> [<think> | <think></think>]]   (generation prompt)

where HEADER is ``<|im_user|>``/``<|im_assistant|>``/``<|im_system|>`` + role (or ``name``) +
``<|im_middle|>``. Everything a revision does differently is a field of its
:class:`~kimi_chat.dialects.Dialect`; the quirks are reproduced on purpose (see README, "Quirks").
"""

from __future__ import annotations

import dataclasses
import json
from json.encoder import encode_basestring as _encode_json_string
from collections.abc import Mapping
from typing import Any, Final

from ... import markers as M
from ...dialect_records import DialectRecord as Dialect
from ...errors import RenderError
from ...messages import to_plain
from ...nesting import too_deep_error
from ...nesting import deep_sort_dict, sorted_json
from ...caches import LRUCache
from ...prompt.writer import Writer
from .tools_ts import typescript_fast, typescript_or_none

__all__ = ["render_k2"]

_IM_END: Final = M.IM_END.text
_IM_MIDDLE: Final = M.IM_MIDDLE.text
_HEADER_ROLE: Final = {"user": M.IM_USER.text, "assistant": M.IM_ASSISTANT.text}
_FIXED_HEADERS: Final = {
    "system": M.IM_SYSTEM.text + "system" + _IM_MIDDLE,
    "user": M.IM_USER.text + "user" + _IM_MIDDLE,
    "assistant": M.IM_ASSISTANT.text + "assistant" + _IM_MIDDLE,
    "tool": M.IM_SYSTEM.text + "tool" + _IM_MIDDLE,
}
_GENERATION_PROMPT: Final = _FIXED_HEADERS["assistant"]
_TOOL_DECLARE: Final = M.IM_SYSTEM.text + "tool_declare" + _IM_MIDDLE
_SECTION_BEGIN: Final = M.TOOL_CALLS_SECTION_BEGIN.text
_SECTION_END: Final = M.TOOL_CALLS_SECTION_END.text
_CALL_BEGIN: Final = M.TOOL_CALL_BEGIN.text
_ARG_BEGIN: Final = M.TOOL_CALL_ARGUMENT_BEGIN.text
_CALL_END: Final = M.TOOL_CALL_END.text
_THINK: Final = M.THINK_BEGIN.text
_UNTHINK: Final = M.THINK_END.text
_EMPTY_THINK: Final = _THINK + _UNTHINK
_IMAGE_K2: Final = M.MEDIA_START.text + "image" + M.MEDIA_CONTENT.text + M.MEDIA_PAD.text + M.MEDIA_END.text
_IMAGE_K25: Final = M.MEDIA_BEGIN.text + "image" + M.MEDIA_CONTENT.text + M.MEDIA_PAD.text + M.MEDIA_END.text
_VIDEO_K25: Final = M.K25_VIDEO_PLACEHOLDER.text
_REASONING_KEYS: Final = ("reasoning_content", "thinking", "reasoning")


_ENCODERS: dict[tuple[str, str] | None, Any] = {}
"""``JSONEncoder.encode`` of :func:`_json`, per separators (an encoder holds no state between calls)."""


def _json(value: Any, separators: tuple[str, str] | None, where: str, index: int | None = None) -> str:
    # transformers' tojson: json.dumps(ensure_ascii=False, separators=..., sort_keys=False)
    if type(value) is str:
        return _encode_json_string(value)  # what json.dumps does for a str, without its set-up cost
    encode = _ENCODERS.get(separators)
    if encode is None:  # json.dumps(value, ensure_ascii=False, separators=..., default=...) without its set-up
        encode = _ENCODERS[separators] = json.JSONEncoder(
            ensure_ascii=False, separators=separators, default=_json_default).encode
    try:
        return encode(value)
    except (TypeError, ValueError) as e:  # the official template's tojson fails too
        why = f"not JSON-serialisable: {e}"
        raise RenderError(why if index is not None else f"{where}: {why}", message_index=index, field=where) from e
    except RecursionError as e:  # json.dumps recurses: name the value nested too deeply, and where
        raise too_deep_error(value, where, index) from e


def _json_default(value: Any) -> Any:
    # transformers makes template data plain before rendering: numpy scalars become Python scalars
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    # objects nested in JSON values (e.g. a pydantic model as arguments): plain data, as transformers makes them
    if (dataclasses.is_dataclass(value) and not isinstance(value, type)) or callable(getattr(value, "model_dump", None)):
        return to_plain(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _jinja_str(value: Any) -> str:
    # what `{{ value }}` writes for a defined value (transformers' sandbox does not autoescape)
    return value if type(value) is str else str(value)


def _content(d: Dialect, content: Any, w: Writer) -> None:
    """A message body from its content (``render_content`` of the templates)."""
    if isinstance(content, str):
        w.emit_text(content)
        return
    if content is None:
        return
    emit = w.emit
    k25 = d.spec.media == "typed_media"
    image_k2 = _IMAGE_K2 if d.spec.bodies == "content_only" else _IMAGE_K2 + "\n"
    for part in content:
        if k25:
            kind = part.get("type")
            if kind == "image" or kind == "image_url":
                emit(_IMAGE_K25 + "\n")
                continue
            if kind == "video" or kind == "video_url":
                emit(_VIDEO_K25 + "\n")
                continue
        elif part.get("type") == "image" or "image" in part or "image_url" in part:
            emit(image_k2)
            continue
        text = part.get("text")
        if text is not None or "text" in part:
            w.emit_text(_jinja_str(text))


def _tool_calls(d: Dialect, msg: Mapping[str, Any], index: int, w: Writer) -> None:
    emit, emit_text = w.emit, w.emit_text
    emit(_SECTION_BEGIN)
    regenerate = d.spec.tool_call_ids == "regenerate"
    json_strings = d.spec.string_arguments == "json"
    for j, call in enumerate(msg["tool_calls"]):
        fn = call["function"]
        # a call without an id: the official template writes an empty one (strict mode refuses it);
        # regenerated: markers.tool_call_id, written out (no call per tool call)
        call_id = f"{M.TOOL_CALL_ID_PREFIX}{fn['name']}:{j}" if regenerate else call.get("id", "")
        args = fn["arguments"]
        if type(args) is str:
            if json_strings:
                args = _encode_json_string(args)  # what _json does for a str (the field name only on error)
        elif json_strings or not isinstance(args, str):
            args = _json(args, None, f"tool_calls[{j}].function.arguments", index)
        emit(_CALL_BEGIN)
        emit_text(call_id)
        emit(_ARG_BEGIN)
        emit_text(args)
        emit(_CALL_END)
    emit(_SECTION_END)


def _reasoning(msg: Mapping[str, Any]) -> Any:
    # transformers copies the first of these given to ``reasoning_content`` before rendering
    for key in _REASONING_KEYS:
        if key in msg:
            return msg[key]
    return ""


def _header(msg: Mapping[str, Any], w: Writer) -> None:
    # name-or-role headers: the role's header unless the message has a (non-empty) name
    # (any other role, e.g. ``developer``: a system header with the role as its name)
    name = msg.get("name")
    role = msg["role"]
    if not name:
        fixed = _FIXED_HEADERS.get(role)
        if fixed is not None:
            w.emit(fixed)
            return
        name = role
    w.emit(_HEADER_ROLE.get(role, M.IM_SYSTEM.text))
    w.emit_text(name)
    w.emit(_IM_MIDDLE)


def _tool_result_header(d: Dialect, msg: Mapping[str, Any], emit: Any, emit_text: Any) -> None:
    emit("## Return of ")
    emit_text(_jinja_str(msg.get("tool_call_id", "")))
    emit(d.spec.tool_result_header)


_DECLARATIONS: Final[LRUCache[tuple[bool, str]]] = LRUCache("k2.tool_declarations", 64)
"""The tools' declaration text, per dialect settings and exact tool content (:func:`_declaration`)."""


def _declaration(d: Dialect, tool_list: list[dict[str, Any]], key: bytes | None) -> tuple[bool, str]:
    """``(json, text)``: the tools' declaration of dialect ``d`` (``json``: the JSON declaration,
    written after ``d.spec.tools_prefix``; else the K2.5 / K2.6 TypeScript one). Servers declare the same
    tools on every request: cached by exact content (``key``: :func:`kimi_chat.caches.content_key` of
    ``tool_list``, ``None``: not cached), unless the TypeScript encoding warns (the warning is then given on
    every render, as without a cache)."""
    settings = (d.spec.sort_tool_keys, d.spec.tools_typescript, d.spec.tools_prefix, d.spec.tools_separators)
    if key is not None:
        hit = _DECLARATIONS.get((settings, key))
        if hit is not None:
            return hit
    cacheable = key is not None
    if d.spec.sort_tool_keys and not d.spec.tools_typescript:
        text = sorted_json(tool_list, d.spec.tools_separators)  # the sorted text without the sorted copy
        if text is not None:
            result = (True, text)
            if cacheable:
                _DECLARATIONS.put((settings, key), result)
            return result
    if d.spec.tools_typescript:
        # the one-pass encoder writes the same text for the tools as given and for their sorted copy
        declared = typescript_fast(tool_list)
        if declared is not None:
            if cacheable:
                _DECLARATIONS.put((settings, key), (False, declared))
            return False, declared
    sorted_list = deep_sort_dict(tool_list) if d.spec.sort_tool_keys else tool_list
    declared = None
    if d.spec.tools_typescript:

        # "" (no function tool) and a failed encoding both leave the template its JSON declaration
        warned: list[Any] = []
        declared = typescript_or_none(sorted_list, warned) or None
        cacheable = cacheable and not warned  # a warning is given on every render, as without a cache
    result = (True, _json(sorted_list, d.spec.tools_separators, "tools")) if declared is None else (False, declared)
    if cacheable:
        _DECLARATIONS.put((settings, key), result)
    return result


def render_k2(
    w: Writer,
    d: Dialect,
    msgs: list[dict[str, Any]],
    tool_list: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
    tools_key: bytes | None,
) -> None:
    """Write the prompt of K2-family dialect ``d`` into ``w``. ``msgs`` and ``tool_list`` are
    validated and normalised (:func:`~kimi_chat.messages.normalize_messages`), ``msgs`` not empty,
    ``options`` checked against ``d.options``; ``tools_key``: the exact content key of ``tool_list``
    (:func:`~kimi_chat.messages.normalize_tools_keyed`; ``None``: not cached)."""
    emit = w.emit
    emit_text = w.emit_text
    think = d.spec.think
    thinking = options.get("thinking", True)
    # a dialect that does not read preserve_thinking (K2.5) ignores it, as its template does; K2.7-Code keeps
    # every turn's reasoning, always
    preserve = d.spec.keeps_every_reasoning or (options.get("preserve_thinking", False) if d.reads_preserve_thinking
                                             else False)

    # -- tool declarations
    if tool_list:
        w.mark(-1, False)
        emit(_TOOL_DECLARE)
        json_prefix, declared = _declaration(d, tool_list, tools_key)
        if json_prefix:
            emit(d.spec.tools_prefix)
        emit_text(declared)
        emit(_IM_END)

    # -- default system prompt
    if d.spec.default_system is not None and msgs[0]["role"] != "system":
        w.mark(-1, False)
        emit(_FIXED_HEADERS["system"] + d.spec.default_system + _IM_END)

    # -- history split: reasoning is kept only after the last assistant turn without tool calls
    split = -1
    if think != "none" and not preserve:
        for i in range(len(msgs) - 1, -1, -1):
            m = msgs[i]
            if m["role"] == "assistant" and not m.get("tool_calls"):
                split = i
                break

    style = d.spec.bodies
    reasoning_first = d.spec.reasoning_key == "reasoning"
    last = len(msgs) - 1
    marks = w.marks
    track = marks is not None
    parts = w.parts
    fixed_headers = d.spec.role_names == "fixed"
    fixed_header = _FIXED_HEADERS.get
    omit_last_im_end = not add_generation_prompt and d.spec.last_turn_open_without_generation_prompt
    for i, msg in enumerate(msgs):
        role = msg["role"]
        if track:
            marks.append((len(parts), i, False))  # type: ignore[union-attr]
        if fixed_headers:
            header = fixed_header(role)
            if header is not None:  # the fixed-header templates write no header for any other role
                emit(header)
        elif "name" not in msg and role in _FIXED_HEADERS:
            emit(_FIXED_HEADERS[role])  # what _header writes for a message without a name, at once
        else:
            _header(msg, w)
        content = msg.get("content")
        is_assistant = role == "assistant"
        # history `<think></think>` scaffolding (think_content_calls bodies) stays with the header: trainable after it
        if is_assistant and track and not (i <= split and style == "think_content_calls"):
            marks.append((len(parts), i, True))  # type: ignore[union-attr]
        if style == "content_only":
            if type(content) is str:
                emit_text(content)
            else:
                _content(d, content, w)
        elif style == "content_then_calls":
            if is_assistant and msg.get("tool_calls"):
                if content:
                    emit_text(_jinja_str(content))
                _tool_calls(d, msg, i, w)
            elif role == "tool":
                _tool_result_header(d, msg, emit, emit_text)
                if content is not None:
                    emit_text(_jinja_str(content))
            elif type(content) is str:
                emit_text(content)
            else:
                _content(d, content, w)
        else:  # "think_content_calls": Thinking / K2.5
            if is_assistant:
                if i <= split:
                    emit(_EMPTY_THINK)
                    if track:
                        marks.append((len(parts), i, True))  # type: ignore[union-attr]
                elif think == "history_split_prefilled" and thinking is False and preserve is False:
                    emit(_EMPTY_THINK)
                else:
                    rc = msg["reasoning"] if reasoning_first and "reasoning" in msg else _reasoning(msg)
                    emit(_THINK)
                    emit_text(rc if type(rc) is str else _jinja_str(rc))
                    emit(_UNTHINK)
                if type(content) is str:
                    emit_text(content)  # what _content writes for a str
                else:
                    _content(d, content, w)
                if "tool_calls" in msg and msg["tool_calls"]:
                    _tool_calls(d, msg, i, w)
            else:
                if role == "tool":
                    _tool_result_header(d, msg, emit, emit_text)
                if type(content) is str:
                    emit_text(content)
                else:
                    _content(d, content, w)
        if i != last or not omit_last_im_end:
            emit(_IM_END)

    if add_generation_prompt:
        w.mark(-1, False)
        emit(_GENERATION_PROMPT)
        if think == "history_split_prefilled":
            emit(_EMPTY_THINK if thinking is False else _THINK)
