"""Input models: what an OpenAI chat-completions request carries, validated.

The models are pydantic v2 ``TypedDict`` schemas, so the public shapes are plain dicts (as in the
OpenAI SDK's typed params) and validation is fast. :func:`normalize_messages` is the one entry point
the renderer uses: it converts message objects (pydantic models such as the OpenAI SDK's
``ChatCompletionMessage``, dataclasses, at any level: an SDK tool-call object inside a dict message
too) to dicts, drops ``None``-valued keys (as transformers does
before rendering), validates, and returns the normalised plain dicts the templates would see.

Two schemas:

* the **render schema** (what :func:`normalize_messages` checks): only what the official template
  cannot render. Any role (``developer``, ``function``...), missing ``content`` / ``tool_call_id`` /
  tool-call ``id``, extra fields and content parts of any type pass, as the official template takes
  them (official parity);
* the **OpenAI schema** (:data:`Message` and the typed dicts): roles ``system`` / ``user`` /
  ``assistant`` / ``tool`` with their fields, nothing else. :func:`schema_problems` lists where
  messages leave it; :func:`kimi_chat.lint` reports those and ``render(..., strict=True)`` refuses them.

Bad input raises :class:`InvalidMessagesError` (a ``ValueError``) naming the message index and field.
"""

from __future__ import annotations

import dataclasses
import marshal
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from .caches import QUICK_VERSION, LRUCache, admitted_key, content_key
from .errors import KimiChatError
from .findings import Finding
from .message_shapes import holds_objects, plain_dicts, renderable_fast, tools_fast

__all__ = [
    "TextPart",
    "ImageURLPart",
    "ImagePart",
    "VideoURLPart",
    "VideoPart",
    "ContentPart",
    "Content",
    "FunctionCall",
    "ToolCall",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "Message",
    "FunctionDefinition",
    "Tool",
    "InvalidMessagesError",
    "InvalidToolsError",
    "normalize_messages",
    "normalize_tools",
    "normalize_tools_keyed",
    "schema_problems",
    "to_plain",
    "string_paths",
    "plain_items",
    "plain_items_keyed",
    "plain_messages",
    "check_bool",
]


_PART = ConfigDict(extra="allow")
_MSG = ConfigDict(extra="forbid")


class TextPart(TypedDict):
    """``{"type": "text", "text": ...}``"""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: Literal["text"]
    text: str


class ImageURLPart(TypedDict):
    """``{"type": "image_url", "image_url": {"url": ...}}`` (OpenAI)."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: Literal["image_url"]
    image_url: Any


class ImagePart(TypedDict):
    """``{"type": "image", ...}`` (Hugging Face style: ``image``, ``url``, ``path`` or ``base64``)."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: Literal["image"]


class VideoURLPart(TypedDict):
    """``{"type": "video_url", "video_url": {"url": ...}}``."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: Literal["video_url"]
    video_url: Any


class VideoPart(TypedDict):
    """``{"type": "video", ...}`` (Hugging Face style)."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: Literal["video"]


ContentPart = Annotated[
    Union[TextPart, ImageURLPart, ImagePart, VideoURLPart, VideoPart], Field(discriminator="type")
]
Content = Union[str, list[ContentPart]]
JSONValue = Any


class FunctionCall(TypedDict):
    """The ``function`` of a tool call. ``arguments`` is a JSON string (as the OpenAI API sends it)
    or an already-decoded JSON value."""

    __pydantic_config__ = _MSG  # type: ignore[misc]
    name: str
    arguments: JSONValue


class ToolCall(TypedDict):
    """One entry of ``assistant.tool_calls``."""

    __pydantic_config__ = _MSG  # type: ignore[misc]
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: FunctionCall
    index: NotRequired[int]


class SystemMessage(TypedDict):
    """``{"role": "system", "content": ...}``"""

    __pydantic_config__ = _MSG  # type: ignore[misc]
    role: Literal["system"]
    content: Content
    name: NotRequired[str]


class UserMessage(TypedDict):
    """``{"role": "user", "content": ...}``"""

    __pydantic_config__ = _MSG  # type: ignore[misc]
    role: Literal["user"]
    content: Content
    name: NotRequired[str]


class AssistantMessage(TypedDict):
    """``{"role": "assistant", ...}``: content and/or tool calls, optional reasoning.

    ``reasoning`` and ``thinking`` are accepted as other names of ``reasoning_content`` (transformers
    copies the first one given, in the order ``reasoning_content``, ``thinking``, ``reasoning``).
    ``refusal``, ``annotations``, ``audio`` (OpenAI response fields) and ``partial`` / ``prefix``
    (prefill flags) are accepted and not rendered by any Kimi template.
    """

    __pydantic_config__ = _MSG  # type: ignore[misc]
    role: Literal["assistant"]
    content: NotRequired[Content]
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    reasoning_content: NotRequired[str]
    reasoning: NotRequired[str]
    thinking: NotRequired[str]
    refusal: NotRequired[str]
    annotations: NotRequired[list[Any]]
    audio: NotRequired[Any]
    partial: NotRequired[bool]
    prefix: NotRequired[bool]


class ToolMessage(TypedDict):
    """``{"role": "tool", "tool_call_id": ..., "content": ...}``"""

    __pydantic_config__ = _MSG  # type: ignore[misc]
    role: Literal["tool"]
    tool_call_id: str
    content: Content
    name: NotRequired[str]


Message = Annotated[
    Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage], Field(discriminator="role")
]


class FunctionDefinition(TypedDict):
    """``tools[i].function``: name, description, JSON-schema parameters (other keys are kept)."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]


class Tool(TypedDict):
    """``{"type": "function", "function": {...}}``. Tools are rendered as given (key order and
    extra keys kept), so only their shape is checked."""

    __pydantic_config__ = _PART  # type: ignore[misc]
    type: str
    function: NotRequired[FunctionDefinition]


_MESSAGES = TypeAdapter(list[Message])

# -- the render schema: only what the official templates cannot take (see the module doc)
_LENIENT = ConfigDict(extra="allow")
_LContent = Union[str, list[dict[str, Any]]]


class _LFunctionCall(TypedDict):
    __pydantic_config__ = _LENIENT  # type: ignore[misc]
    name: str
    arguments: JSONValue


class _LToolCall(TypedDict):
    __pydantic_config__ = _LENIENT  # type: ignore[misc]
    id: NotRequired[str]
    type: NotRequired[str]
    function: _LFunctionCall


class _LMessage(TypedDict):
    """Any role but assistant: the templates read ``role``, ``name``, ``content``, ``tool_call_id``."""

    __pydantic_config__ = _LENIENT  # type: ignore[misc]
    role: str
    content: NotRequired[_LContent]
    name: NotRequired[str]


class _LAssistant(TypedDict):
    __pydantic_config__ = _LENIENT  # type: ignore[misc]
    role: Literal["assistant"]
    content: NotRequired[_LContent]
    name: NotRequired[str]
    tool_calls: NotRequired[list[_LToolCall]]
    reasoning_content: NotRequired[str]
    reasoning: NotRequired[str]
    thinking: NotRequired[str]


def _lenient_tag(message: Any) -> str:
    return "assistant" if isinstance(message, dict) and message.get("role") == "assistant" else _ANY_ROLE


_ANY_ROLE = "any role"
_RENDERABLE = TypeAdapter(
    list[Annotated[
        Union[Annotated[_LAssistant, Tag("assistant")], Annotated[_LMessage, Tag(_ANY_ROLE)]],
        Discriminator(_lenient_tag),
    ]]
)
_TOOLS = TypeAdapter(list[Tool])


class InvalidMessagesError(KimiChatError, ValueError):
    """Messages that do not validate. ``errors`` lists ``(message_index, field, problem)``; the text
    names each, e.g. ``messages[2].content: Input should be a valid string``. :attr:`findings` are the
    same errors as :class:`~kimi_chat.findings.Finding` objects (the validator's one kind of finding)."""

    def __init__(self, errors: list[tuple[int | None, str, str]], what: str = "messages",
                 codes: Sequence[str | None] | None = None):
        self.errors = errors
        self.what = what
        self.codes: list[str | None] = list(codes) if codes is not None else [None] * len(errors)
        lines = []
        for index, field, problem in errors:
            where = what if index is None else f"{what}[{index}]"
            if field:
                where += field if field.startswith("[") else "." + field
            lines.append(f"{where}: {problem}")
        super().__init__(f"invalid {what}: " + "; ".join(lines))

    @property
    def findings(self) -> list[Finding]:
        """One :class:`~kimi_chat.findings.Finding` per error: ``missing-field`` / ``invalid-field`` at
        ``messages[i].FIELD``; for tools ``tool-without-function`` (a function tool without its function or
        its name), ``duplicate-tool-name`` or ``invalid-tool`` at ``tools[i].FIELD``."""
        out = []
        for (index, field, problem), code in zip(self.errors, self.codes):
            if self.what == "messages":
                out.append(Finding(code or "invalid-field", index, problem, field or None,
                                   "missing_field" if code == "missing-field" else None))
                continue
            where = self.what if index is None else f"{self.what}[{index}]"
            if field:
                where += field if field.startswith("[") else "." + field
            code = code or "invalid-tool"
            out.append(Finding(code, None, problem, where, _TOOL_API_CODES.get(code)))
        return out


class InvalidToolsError(InvalidMessagesError):
    """``tools`` that do not validate (same shape as :class:`InvalidMessagesError`)."""

    def __init__(self, errors: list[tuple[int | None, str, str]], codes: Sequence[str | None] | None = None):
        super().__init__(errors, "tools", codes)


_MESSAGE_CODES = {"missing": "missing-field"}
_TOOL_API_CODES = {"tool-without-function": "missing_field", "duplicate-tool-name": "duplicate_tool_name"}


def _message_codes(typed: list[tuple[int | None, str, str, str]]) -> list[str | None]:
    return [_MESSAGE_CODES.get(t, "invalid-field") for _, _, _, t in typed]


def _tool_codes(typed: list[tuple[int | None, str, str, str]]) -> list[str | None]:
    """``tool-without-function`` for a function tool without its function or its function's name, else
    ``invalid-tool``."""
    return ["tool-without-function" if t == "missing" and f in ("function", "function.name") else "invalid-tool"
            for _, f, _, t in typed]


def _invalid_messages(e: ValidationError, data: list[Any]) -> InvalidMessagesError:
    typed = _typed_errors_of(e, data)
    return InvalidMessagesError([t[:3] for t in typed], codes=_message_codes(typed))


def _invalid_tools(e: ValidationError, data: list[Any]) -> InvalidToolsError:
    typed = _typed_errors_of(e, data)
    return InvalidToolsError([t[:3] for t in typed], codes=_tool_codes(typed))


def _branch_matches(label: str, data: Any) -> bool | None:
    """For a union-branch label pydantic puts into a location (``str``, ``list[...]``): whether the
    input took that branch (``None``: not a branch label)."""
    if label == "str":
        return isinstance(data, str) or not isinstance(data, list)
    if label.startswith("list["):
        return isinstance(data, list)
    return None


def _field_path(loc: tuple[Any, ...], data: Any) -> str | None:
    """``tool_calls[0].function.name`` from a pydantic location (after the message index), dropping
    the union tags and branch labels pydantic inserts, found by walking the input alongside the
    location. ``None`` when the error belongs to a union branch the input did not take."""
    out = ""
    # discriminated unions: messages (tag = role) and content parts (tag = type, under "content")
    expect_tag: str | None = "role"
    parent = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            data = data[part] if isinstance(data, list) and -len(data) <= part < len(data) else None
            expect_tag = "type" if parent == "content" else None
            continue
        if expect_tag is not None and isinstance(data, dict) and (part == data.get(expect_tag) or part == _ANY_ROLE):
            expect_tag = None
            continue  # the union tag
        expect_tag = None
        branch = _branch_matches(part, data)
        if branch is not None:
            if not branch:
                return None
            continue
        out += ("." if out else "") + str(part)
        parent = str(part)
        data = data.get(part) if isinstance(data, dict) else None
    return out


def _typed_errors_of(e: ValidationError, data: list[Any]) -> list[tuple[int | None, str, str, str]]:
    """``(message_index, field, problem, pydantic error type)`` of each error in a branch the input took."""
    out: list[tuple[int | None, str, str, str]] = []
    for err in e.errors(include_url=False):
        loc = tuple(err["loc"])
        index = loc[0] if loc and isinstance(loc[0], int) else None
        item = data[index] if index is not None else data
        field = _field_path(loc[1:] if index is not None else loc, item)
        if field is None:
            continue
        problem = err["msg"]
        if err["type"] == "extra_forbidden":
            problem = "unexpected field (not part of an OpenAI chat message of this role)"
        elif err["type"] in ("union_tag_invalid", "union_tag_not_found") and not field:
            field = "role" if _is_message(item) else "type"
        out.append((index, field, problem, err["type"]))
    if not out:  # every error was in a branch not taken: report them all rather than nothing
        out = [(None, ".".join(map(str, err["loc"])), err["msg"], err["type"]) for err in e.errors(include_url=False)]
    return out


def _is_message(item: Any) -> bool:
    """Whether a failing union member is a message (tag ``role``) rather than a part (tag ``type``)."""
    return not isinstance(item, dict) or "role" in item or "type" not in item


def _children(value: Any, exclude_none: bool = False) -> tuple[type, list[tuple[Any, Any]]] | None:
    """``(container type, [(key, child)])`` of a value :func:`to_plain` descends into; None for a leaf."""
    while True:
        if isinstance(value, Mapping):
            return dict, list(value.items())
        if isinstance(value, list):
            return list, list(enumerate(value))
        if isinstance(value, tuple):
            return tuple, list(enumerate(value))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dict, [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
        if callable(getattr(value, "model_dump", None)):
            value = value.model_dump(exclude_none=True) if exclude_none else value.model_dump()
            continue
        return None


_LEAVE: Any = object()
"""A stack entry of :func:`to_plain`: the walk leaves the container whose id is next to it."""


def _path_text(link: tuple[Any, ...] | None) -> str:
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in reversed(keys))


def to_plain(value: Any, *, index: int | None = None, what: str = "messages", exclude_none: bool = False) -> Any:
    """Objects to plain data, as transformers does before rendering: pydantic models through
    ``model_dump()``, dataclasses field by field; dicts, lists and tuples recursively (iteratively:
    any depth). ``exclude_none``: pydantic models through ``model_dump(exclude_none=True)`` (how a
    server's request models are read: an unset optional field is absent, not ``None``).

    A value that contains itself (a dict holding itself, a list appended to itself, a
    self-referencing dataclass) raises :class:`InvalidMessagesError` (``what="tools"``:
    :class:`InvalidToolsError`) naming ``what[index]`` and the path where it refers back (an
    object shared by several branches, without a loop, is fine)."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, Any]] = [(value, root, 0, None)]
    tuples: list[tuple[Any, Any, list[Any]]] = []
    # the containers from the root to the node being walked: id -> (object, link); holding the object
    # keeps its id from being reused by another one while it is on the path
    path: dict[int, tuple[Any, Any]] = {}
    while stack:
        v, parent, key, link = stack.pop()
        if v is _LEAVE:
            del path[parent]
            continue
        node = _children(v, exclude_none)
        if node is None:
            parent[key] = v
            continue
        if id(v) in path:
            raise _cycle_error(v, link, path[id(v)][1], index, what)
        kind, items = node
        out: Any = {} if kind is dict else [None] * len(items)
        parent[key] = out
        if kind is tuple:
            tuples.append((parent, key, out))
        if kind is dict:
            out.update(dict.fromkeys(k for k, _ in items))  # the key order, filled in below
        path[id(v)] = (v, link)
        stack.append((_LEAVE, id(v), None, None))
        stack.extend((child, out, k, (link, k)) for k, child in reversed(items))
    for parent, key, out in reversed(tuples):  # innermost first
        parent[key] = tuple(out)
    return root[0]


def _cycle_error(v: Any, link: Any, first: Any, index: int | None, what: str) -> InvalidMessagesError:
    top = what if index is None else f"{what}[{index}]"
    problem = (f"circular reference: this {type(v).__name__} is {top}{_path_text(first)} again "
               "(a value that contains itself cannot be rendered)")
    errors: list[tuple[int | None, str, str]] = [(index, _path_text(link).removeprefix("."), problem)]
    return InvalidToolsError(errors) if what == "tools" else InvalidMessagesError(errors, what)


def plain_items(items: Sequence[Any], what: str = "messages") -> list[Any]:
    """``items`` (messages or tools) with every object made plain data (:func:`to_plain`), at any
    level; entries already plain are kept as they are (not copied). Cyclic values raise
    :class:`InvalidMessagesError` / :class:`InvalidToolsError` naming ``what[i]`` and the path."""
    out = list(items)
    try:
        marshal.dumps(out, QUICK_VERSION)  # C speed: fails on any object that is not plain data, at any level
    except (ValueError, RecursionError):
        return [to_plain(t, index=i, what=what) for i, t in enumerate(out)]
    return out


def plain_items_keyed(items: Sequence[Any], what: str = "messages") -> tuple[list[Any], bytes | None]:
    """:func:`plain_items` and the exact content key of the list returned, once it is worth one
    (:func:`kimi_chat.caches.admitted_key`: from its second reading on; ``None``: not cached), computed
    once for every cache of a request."""
    out = list(items)
    try:
        key = admitted_key(out)  # C speed: fails on any object that is not plain data, at any level (or a cycle)
    except (ValueError, RecursionError):
        out = [to_plain(t, index=i, what=what) for i, t in enumerate(out)]
        return out, content_key(out)
    return out, key


def plain_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """``messages`` as plain dicts, with no validation but a ``role`` in each (what the Kimi-K3 encoder
    takes): message objects made dicts without their ``None``-valued keys, objects nested at any level
    made plain (:func:`plain_items`). Raises :class:`InvalidMessagesError` naming the index."""
    if type(messages) is list:
        if plain_dicts(messages):  # dicts with a role and no object in them: taken as they are
            return messages[:]
    elif isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidMessagesError([(None, "", f"expected a list of messages, got {type(messages).__name__}")])
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if type(m) is not dict:
            if not isinstance(m, dict):
                m = to_plain(m, index=i)
                if not isinstance(m, dict):
                    raise InvalidMessagesError([(i, "", f"expected a message object, got {type(m).__name__}")])
                m = {k: v for k, v in m.items() if v is not None}
        elif holds_objects(m):
            # objects nested in a dict message (the OpenAI SDK's tool-call objects, a pydantic Function in
            # a dict call...) made plain as K2 makes them (to_plain: one conversion for both families)
            m = to_plain(m, index=i)
        if "role" not in m:
            raise InvalidMessagesError([(i, "role", "Field required")], codes=["missing-field"])
        out.append(m)
    return out


def normalize_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Validate ``messages`` against the render schema (what the official templates can render: any
    role, missing content or ids, extra fields, any content part) and return them as the templates
    see them: plain dicts without ``None``-valued keys (nested values are kept as given, in their
    order). :func:`schema_problems` says where they leave the OpenAI schema.

    Raises :class:`InvalidMessagesError` naming each offending message index and field.
    """
    if type(messages) is list:
        if renderable_fast(messages):  # plain dicts without None values, well-formed: taken as they are
            return messages[:]
    elif isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidMessagesError([(None, "", f"expected a list of messages, got {type(messages).__name__}")])
    out: list[dict[str, Any]] = []
    append = out.append
    for m in messages:
        if type(m) is not dict:
            i = len(out)
            m = to_plain(m, index=i)
            if not isinstance(m, dict):
                raise InvalidMessagesError([(i, "", f"expected a message object, got {type(m).__name__}")])
        append(m if None not in m.values() else {k: v for k, v in m.items() if v is not None})
    if renderable_fast(out):  # well-formed plain dicts: what the validation below accepts, without it
        return out
    try:
        _RENDERABLE.validate_python(out, strict=True)
    except ValidationError as e:
        # objects nested at any level (the OpenAI SDK's tool-call objects inside a dict message,
        # dataclass content parts...): made plain, as transformers does, then validated again
        plain = [to_plain(m, index=i) for i, m in enumerate(out)]
        try:
            _RENDERABLE.validate_python(plain, strict=True)
        except ValidationError as e2:
            raise _invalid_messages(e2, plain) from e
        return plain
    return out


def schema_problems(msgs: list[dict[str, Any]]) -> list[tuple[int | None, str, str, str]]:
    """Where normalised messages (:func:`normalize_messages`) leave the OpenAI schema:
    ``(message_index, field, kind, problem)`` with ``kind`` one of ``"unknown-role"``,
    ``"unknown-field"``, ``"missing-field"``, ``"invalid-field"``. Empty when they conform."""
    try:
        _MESSAGES.validate_python(msgs, strict=True)
    except ValidationError as e:
        kinds = {"extra_forbidden": "unknown-field", "missing": "missing-field",
                 "union_tag_invalid": "unknown-role", "union_tag_not_found": "unknown-role"}
        out = []
        for index, field, problem, err_type in _typed_errors_of(e, msgs):
            kind = kinds.get(err_type, "invalid-field")
            if kind == "unknown-role" and field != "role":
                kind = "invalid-field"  # a content part of an unknown type
            out.append((index, field, kind, problem))
            if kind == "unknown-role" and index is not None:
                # the rest of the message, checked as the system message the name-or-role templates make of it
                as_system = [{**msgs[index], "role": "system"}]
                try:
                    _MESSAGES.validate_python(as_system, strict=True)
                except ValidationError as e2:
                    out.extend((index, f, kinds.get(t, "invalid-field"), p) for _, f, p, t in _typed_errors_of(e2, as_system))
        return out
    return []


def normalize_tools(tools: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    """Validate ``tools`` and return them as plain dicts (order and extra keys kept); ``None`` stays."""
    return normalize_tools_keyed(tools)[0]


def normalize_tools_keyed(tools: Sequence[Any] | None) -> tuple[list[dict[str, Any]] | None, bytes | None]:
    """:func:`normalize_tools` and the exact content key of the list returned (:func:`plain_items_keyed`;
    ``None`` for no tools or a list not cached): what the renderer's tool caches key on."""
    if tools is None:
        return None, None
    if type(tools) is not list and (isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence)):
        raise InvalidToolsError([(None, "", f"expected a list of tools, got {type(tools).__name__}")])
    plain, key = plain_items_keyed(tools, "tools")
    if key is not None and _VALID_TOOLS.get(key):  # these very tools validated before: the same result
        return plain, key
    if not tools_fast(plain):  # well-formed plain dicts: what the validation accepts, without it
        try:
            _TOOLS.validate_python(plain, strict=True)
        except ValidationError as e:
            raise _invalid_tools(e, plain) from e
    if key is not None:
        _VALID_TOOLS.put(key, True)
    return plain, key


_VALID_TOOLS: LRUCache[bool] = LRUCache("messages.valid_tools", 64)
"""Exact content keys of tool lists that validated (servers send the same tools on every request)."""


def string_paths(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(field path, string) for every string in a message / tool (plain data, :func:`to_plain`), dict keys
    included; consecutive text parts of a content list also joined (the renderer writes them back to
    back). What names the field of a finding in the rendered prompt (typed special-token text, a lone
    surrogate)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                yield f"{path}.<key>" if path else "<key>", k
            yield from string_paths(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for j, v in enumerate(value):
            yield from string_paths(v, f"{path}[{j}]")
        texts = [p["text"] for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        if len(texts) > 1:
            yield path, "".join(texts)
    elif value is not None and not isinstance(value, (bool, int, float)):
        yield path, str(value)


def check_bool(name: str, value: Any) -> None:
    """``TypeError`` naming ``name`` unless ``value`` is a bool (a rendering flag: ``add_generation_prompt``...)."""
    if type(value) is not bool:
        raise TypeError(f"{name} must be a bool (True or False), got {value!r}")
