"""The formatter: OpenAI-style messages + tools + dialect -> the exact prompt text.

Pure Python, no Jinja, no I/O. For every dialect the output is byte-identical to what the official
tokenizer's ``apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)``
returns with that dialect's oracle template (checked by the property and golden tests).

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

import json
from json.encoder import encode_basestring as _encode_json_string
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from . import markers as M
from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .errors import RenderError
from .messages import normalize_messages, normalize_tools
from .nesting import too_deep_error
from .oracle import deep_sort_dict

__all__ = ["render", "render_segments", "Segment"]

_IM_END = M.IM_END.text
_IM_MIDDLE = M.IM_MIDDLE.text
_HEADER_ROLE = {"user": M.IM_USER.text, "assistant": M.IM_ASSISTANT.text}
_FIXED_HEADERS = {
    "system": M.IM_SYSTEM.text + "system" + _IM_MIDDLE,
    "user": M.IM_USER.text + "user" + _IM_MIDDLE,
    "assistant": M.IM_ASSISTANT.text + "assistant" + _IM_MIDDLE,
    "tool": M.IM_SYSTEM.text + "tool" + _IM_MIDDLE,
}
_GENERATION_PROMPT = _FIXED_HEADERS["assistant"]
_TOOL_DECLARE = M.IM_SYSTEM.text + "tool_declare" + _IM_MIDDLE
_SECTION_BEGIN = M.TOOL_CALLS_SECTION_BEGIN.text
_SECTION_END = M.TOOL_CALLS_SECTION_END.text
_CALL_BEGIN = M.TOOL_CALL_BEGIN.text
_ARG_BEGIN = M.TOOL_CALL_ARGUMENT_BEGIN.text
_CALL_END = M.TOOL_CALL_END.text
_THINK = M.THINK_BEGIN.text
_UNTHINK = M.THINK_END.text
_EMPTY_THINK = _THINK + _UNTHINK
_IMAGE_K2 = M.MEDIA_START.text + "image" + M.MEDIA_CONTENT.text + M.MEDIA_PAD.text + M.MEDIA_END.text
_IMAGE_K25 = M.MEDIA_BEGIN.text + "image" + M.MEDIA_CONTENT.text + M.MEDIA_PAD.text + M.MEDIA_END.text
_VIDEO_K25 = M.K25_VIDEO_PLACEHOLDER.text
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")


class Segment(NamedTuple):
    """A piece of the prompt. ``message_index`` is -1 for scaffolding that belongs to no message
    (tool declarations, default system prompt, generation prompt); ``trainable`` marks text a model
    produced in an assistant turn (content, kept reasoning, tool-call section, closing ``<|im_end|>``),
    not role headers nor history ``<think></think>`` scaffolding."""

    text: str
    message_index: int
    trainable: bool


def _json(value: Any, separators: tuple[str, str] | None, where: str, index: int | None = None) -> str:
    # transformers' tojson: json.dumps(ensure_ascii=False, separators=..., sort_keys=False)
    if type(value) is str:
        return _encode_json_string(value)  # what json.dumps does for a str, without its set-up cost
    try:
        return json.dumps(value, ensure_ascii=False, separators=separators, default=_json_default)
    except (TypeError, ValueError) as e:
        raise RenderError(f"not JSON-serialisable: {e}", message_index=index, field=where) from e
    except RecursionError as e:  # json.dumps recurses: name the value nested too deeply
        raise too_deep_error(value, where, index) from e


def _json_default(value: Any) -> Any:
    # transformers makes template data plain before rendering: numpy scalars become Python scalars
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _jinja_str(value: Any) -> str:
    # what `{{ value }}` writes for a defined value (transformers' sandbox does not autoescape)
    return value if type(value) is str else str(value)


class _Writer:
    """Collects prompt text; in segment mode also records (start, message_index, trainable) marks."""

    __slots__ = ("parts", "marks", "emit")

    def __init__(self, segments: bool) -> None:
        self.parts: list[str] = []
        self.emit = self.parts.append
        self.marks: list[tuple[int, int, bool]] | None = [] if segments else None

    def mark(self, message_index: int, trainable: bool) -> None:
        if self.marks is not None:
            self.marks.append((len(self.parts), message_index, trainable))

    def segments(self) -> list[Segment]:
        assert self.marks is not None
        parts = self.parts
        out: list[Segment] = []
        bounds = self.marks + [(len(parts), -1, False)]
        for (start, idx, train), (end, _, _) in zip(bounds, bounds[1:]):
            text = "".join(parts[start:end])
            if not text:
                continue
            if out and out[-1][1] == idx and out[-1][2] == train:
                out[-1] = Segment(out[-1][0] + text, idx, train)
            else:
                out.append(Segment(text, idx, train))
        return out


def _content(d: Dialect, content: Any, emit: Any) -> None:
    """A message body from its content (``render_content`` of the templates)."""
    if isinstance(content, str):
        emit(content)
        return
    if content is None:
        return
    k25 = d.media == "k25"
    image_k2 = _IMAGE_K2 if d.content_style == "rev1" else _IMAGE_K2 + "\n"
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
            emit(_jinja_str(text))


def _tool_calls(d: Dialect, msg: Mapping[str, Any], index: int, emit: Any) -> None:
    emit(_SECTION_BEGIN)
    regenerate = d.tool_call_ids == "regenerate"
    json_strings = d.string_arguments == "json"
    for j, call in enumerate(msg["tool_calls"]):
        fn = call["function"]
        if regenerate:
            call_id = M.tool_call_id(fn["name"], j)
        else:
            call_id = call.get("id")
            if call_id is None:
                raise RenderError(
                    f"{d.name} writes each tool call's id into the prompt; this call has none",
                    message_index=index,
                    field=f"tool_calls[{j}].id",
                )
        args = fn["arguments"]
        if json_strings or not isinstance(args, str):
            args = _json(args, None, f"tool_calls[{j}].function.arguments", index)
        emit(_CALL_BEGIN + call_id + _ARG_BEGIN + args + _CALL_END)
    emit(_SECTION_END)


def _reasoning(msg: Mapping[str, Any]) -> Any:
    # transformers copies the first of these given to ``reasoning_content`` before rendering
    for key in _REASONING_KEYS:
        if key in msg:
            return msg[key]
    return ""


def _header(d: Dialect, msg: Mapping[str, Any]) -> str:
    role = msg["role"]
    return _HEADER_ROLE.get(role, M.IM_SYSTEM.text) + (msg.get("name") or role) + _IM_MIDDLE


def _check_options(d: Dialect, options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if key not in d.options:
            takes = ", ".join(d.options) if d.options else "none"
            raise TypeError(f"dialect {d.name} takes no option {key!r} (its options: {takes})")
        if type(value) is not bool:
            raise TypeError(f"option {key!r} of dialect {d.name} must be a bool, got {value!r}")


def _render(
    w: _Writer,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    dialect: str | Dialect,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> None:
    d = get_dialect(dialect)
    _check_options(d, options)
    msgs = normalize_messages(messages)
    if not msgs:
        raise RenderError("cannot render an empty conversation (the official tokenizer refuses it too)")
    tool_list = normalize_tools(tools)
    emit = w.emit
    think = d.think
    thinking = options.get("thinking", True)
    preserve = options.get("preserve_thinking", False)

    # -- tool declarations
    if tool_list:
        if d.sort_tool_keys:
            tool_list = deep_sort_dict(tool_list)
        w.mark(-1, False)
        declared = None
        if d.tools_typescript:
            from .tools_ts import tools_to_typescript

            declared = tools_to_typescript(tool_list) or None
        if declared is None:
            declared = d.tools_prefix + _json(tool_list, d.tools_separators, "tools")
        emit(_TOOL_DECLARE + declared + _IM_END)

    # -- default system prompt
    if d.default_system is not None and msgs[0]["role"] != "system":
        w.mark(-1, False)
        emit(_FIXED_HEADERS["system"] + d.default_system + _IM_END)

    # -- history split: reasoning is kept only after the last assistant turn without tool calls
    split = -1
    if think != "none" and not (think == "k25" and preserve):
        for i in range(len(msgs) - 1, -1, -1):
            m = msgs[i]
            if m["role"] == "assistant" and not m.get("tool_calls"):
                split = i
                break

    style = d.content_style
    last = len(msgs) - 1
    marks = w.marks
    track = marks is not None
    parts = w.parts
    fixed_headers = d.role_names == "fixed"
    omit_last_im_end = not add_generation_prompt and d.omit_last_im_end_without_generation_prompt
    for i, msg in enumerate(msgs):
        role = msg["role"]
        if track:
            marks.append((len(parts), i, False))
        emit(_FIXED_HEADERS[role] if fixed_headers else _header(d, msg))
        content = msg.get("content")
        is_assistant = role == "assistant"
        # history `<think></think>` scaffolding (macro style) stays with the header: trainable after it
        if is_assistant and track and not (i <= split and style == "macro"):
            marks.append((len(parts), i, True))
        if style == "rev1":
            _content(d, content, emit)
        elif style == "k2":
            if is_assistant and msg.get("tool_calls"):
                if content:
                    emit(_jinja_str(content))
                _tool_calls(d, msg, i, emit)
            elif role == "tool":
                emit("## Return of " + _jinja_str(msg.get("tool_call_id", "")) + d.tool_result_header)
                if content is not None:
                    emit(_jinja_str(content))
            else:
                _content(d, content, emit)
        else:  # "macro": Thinking / K2.5
            if is_assistant:
                if i <= split:
                    emit(_EMPTY_THINK)
                    if track:
                        marks.append((len(parts), i, True))
                elif think == "k25":
                    if thinking is False and preserve is False:
                        emit(_EMPTY_THINK)
                    else:
                        rc = msg["reasoning"] if "reasoning" in msg else _reasoning(msg)
                        emit(_THINK + _jinja_str(rc) + _UNTHINK)
                else:
                    emit(_THINK + _jinja_str(_reasoning(msg)) + _UNTHINK)
                _content(d, content, emit)
                if msg.get("tool_calls"):
                    _tool_calls(d, msg, i, emit)
            else:
                if role == "tool":
                    emit("## Return of " + _jinja_str(msg.get("tool_call_id", "")) + d.tool_result_header)
                _content(d, content, emit)
        if i != last or not omit_last_im_end:
            emit(_IM_END)

    if add_generation_prompt:
        w.mark(-1, False)
        emit(_GENERATION_PROMPT)
        if think == "k25":
            emit(_EMPTY_THINK if thinking is False else _THINK)


def render(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool = True,
    **options: Any,
) -> str:
    """The prompt the official template of ``dialect`` renders for ``messages`` and ``tools``.

    ``messages`` are OpenAI chat-completions messages (dicts, the OpenAI SDK's typed dicts or pydantic
    objects); ``tools`` the OpenAI tools list. ``add_generation_prompt`` defaults to True (as the
    official Kimi tokenizer does): without it the model is not asked to answer. ``options`` are the
    dialect's template options (e.g. ``thinking=False`` for ``kimi-k2.5``); others are refused.

    Raises :class:`~kimi_chat.messages.InvalidMessagesError` for invalid input (naming the message
    index and field), :class:`~kimi_chat.errors.RenderError` where the official template cannot
    render the input, :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect and
    ``TypeError`` for an unknown option.
    """
    w = _Writer(segments=False)
    _render(w, messages, tools, dialect, add_generation_prompt, options)
    return "".join(w.parts)


def render_segments(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool = True,
    **options: Any,
) -> list[Segment]:
    """:func:`render`, cut into :class:`Segment` pieces that say which message each piece belongs
    to and whether a model produced it; ``"".join(s.text for s in segments) == render(...)``."""
    w = _Writer(segments=True)
    _render(w, messages, tools, dialect, add_generation_prompt, options)
    return w.segments()


def _render_marked(
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    dialect: str | Dialect,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> tuple[list[str], list[tuple[int, int, bool]]]:
    """Internal: what :func:`render_segments` is built from, without building the segments.
    ``(parts, marks)``: the prompt is ``"".join(parts)``; each mark ``(start, message_index, trainable)``
    says that ``parts[start:next mark's start]`` (to the end for the last mark) has that attribution.
    The first mark starts at 0; pieces may be empty and neighbours may share their attribution
    (:meth:`_Writer.segments` drops / merges those)."""
    w = _Writer(segments=True)
    _render(w, messages, tools, dialect, add_generation_prompt, options)
    return w.parts, w.marks  # type: ignore[return-value]
