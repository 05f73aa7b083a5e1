"""The one reading of a request's ``tools``, shared by every family's parser and by :mod:`kimi_chat.grammar`.

* :func:`normalise_tools`: OpenAI ``{"type": "function", "function": {...}}`` entries or bare functions,
  pydantic models and dataclasses accepted; two functions of the same name are an error naming both positions;
* :func:`schema_keys`: a function's ``parameters`` read defensively (properties, required names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..messages import InvalidToolsError, normalize_tools, to_plain

__all__ = ["normalise_tools", "schema_keys", "ToolsTypeError"]


class ToolsTypeError(InvalidToolsError, TypeError):
    """``tools`` that are not a list of mappings: a ``TypeError`` (as a parse has always raised) and an
    :class:`~kimi_chat.messages.InvalidToolsError`, whose finding (``invalid-tool`` at ``tools`` /
    ``tools[i]``) is the one ``render`` and ``lint`` give the same value."""


def _plain(value: Any, index: int) -> Any:
    # tools[index] as plain data (messages.to_plain: any depth; a value containing itself raises
    # InvalidToolsError naming where)
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_plain(value, index=index, what="tools")
    return value


def _shape(tool: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    """``tools[index]`` as the tool check reads it: a bare function as its ``{"type": "function",
    "function": ...}`` entry, and without ``parameters``, which a parse reads defensively (a schema of
    another shape is unknown typing, never an error: :func:`schema_keys`)."""
    wrapped = "type" in tool
    fn = tool.get("function") if wrapped else _plain(tool.get("function", tool), index)
    if isinstance(fn, Mapping) and "parameters" in fn:
        fn = {k: v for k, v in fn.items() if k != "parameters"}
    if not wrapped:
        return {"type": "function", "function": fn}
    return {**tool, "function": fn} if "function" in tool else tool


def normalise_tools(
    tools: Iterable[Any] | None, *, error: type[Exception] | None = None
) -> dict[str, Mapping[str, Any]]:
    """The declared functions of ``tools``, by name, in order: name -> the function mapping
    (``name``, ``parameters``, ...). Entries whose ``type`` is not ``function`` are skipped.

    Raises ``TypeError`` if ``tools`` is not a list of mappings (a single tool mapping included: wrap it in a
    list); without ``error`` it is a :class:`ToolsTypeError`, which carries the validator's finding. Without ``error`` (a parse): the entries are checked by the one tool check
    :func:`kimi_chat.render` and :func:`kimi_chat.lint` run (:func:`kimi_chat.messages.normalize_tools`; a bare
    function is read as its ``{"type": "function", "function": ...}`` entry), and a function tool without a
    function name, or with a name declared before, is an :class:`~kimi_chat.messages.InvalidToolsError`
    naming the index and the field, as a bad tool is for ``render``. With ``error`` (the grammar's), only
    those two are checked, and raise ``error("tools[i]: ...")``.
    """
    if tools is None:
        return {}
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        hint = " (one tool: wrap it in a list)" if isinstance(tools, Mapping) else ""
        problem = f"expected a list of tool declarations, got {type(tools).__name__}{hint}"
        raise TypeError(f"tools: {problem}") if error is not None else ToolsTypeError([(None, "", problem)])
    entries = []
    for i, t in enumerate(tools):
        t = _plain(t, i)
        if not isinstance(t, Mapping):
            problem = f"expected a mapping, got {type(t).__name__}"
            raise TypeError(f"tools[{i}]: {problem}") if error is not None else ToolsTypeError([(i, "", problem)])
        entries.append(t)
    if error is None:  # the shape render and lint refuse, refused here alike (one check, one error class)
        normalize_tools([_shape(t, i) for i, t in enumerate(entries)])

    def fail(i: int, problem: str, field: str = "function.name", code: str = "tool-without-function") -> Exception:
        if error is None:  # the validator's finding (kimi_chat.validation): the code lint and serve give it
            return InvalidToolsError([(i, field, problem)], codes=[code])
        return error(f"tools[{i}]: {problem}")

    out: dict[str, Mapping[str, Any]] = {}
    where: dict[str, int] = {}
    for i, t in enumerate(entries):
        if t.get("type", "function") != "function":
            continue
        fn = _plain(t.get("function", t), i)
        if "function" not in t and "type" in t:
            raise fail(i, "missing: a function tool needs its function (name, parameters)", "function")
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise fail(i, "no function name")
        name = fn["name"]
        if name in out:
            raise fail(i, f"duplicate function name {name!r} (also tools[{where[name]}])", code="duplicate-tool-name")
        out[name] = fn
        where[name] = i
    return out


def schema_keys(params: Any) -> tuple[Mapping[str, Any], list[str]]:
    """``(properties, required names)`` of a function's ``parameters``, read defensively: a part of
    another shape than JSON Schema's (``"properties": 5``, ``"required": 5``, a non-string key or
    name) is unknown typing, left out (the parser never raises on a tool schema)."""
    if not isinstance(params, Mapping):
        return {}, []
    props = params.get("properties")
    props = {k: v for k, v in props.items() if isinstance(k, str)} if isinstance(props, Mapping) else {}
    req = params.get("required")
    return props, [r for r in req if isinstance(r, str)] if isinstance(req, (list, tuple)) else []
