"""Shape checks of plain messages, run on every request: whether plain dicts are what the render schema
accepts as they are (:func:`renderable_fast`; :func:`tools_fast` for a tool list), whether a dict
message holds objects the K3 encoder reads (:func:`holds_objects`) and whether messages are what the
K3 encoder takes as they are (:func:`plain_dicts`).

Pure Python, predicates only (no error path: ``False`` sends the input through the full validation,
which names the errors). It imports nothing from the package (``msgs`` is a ``list``: callers check
``type(...) is list``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_STR_FIELDS = frozenset({"role", "name"})
"""The fields the render schema wants a ``str`` in, in a message of any role but assistant (``_LMessage``)."""
_ASSISTANT_STR_FIELDS = frozenset({"role", "name", "reasoning_content", "reasoning", "thinking"})
"""... in an assistant message (``_LAssistant``)."""
_CALL_STR_FIELDS = frozenset({"id", "type"})
"""... in a tool call (``_LToolCall``)."""


def renderable_fast(msgs: list[Any]) -> bool:
    """Whether the render schema (:data:`kimi_chat.messages._RENDERABLE`, strict) certainly accepts ``msgs``
    and they are what :func:`kimi_chat.messages.normalize_messages` returns for them, checked in plain
    Python: exact ``dict`` / ``list`` / ``str`` where the schema wants them, ``str`` keys, no
    ``None``-valued key in a message. ``True`` only where the validation passes (a ``False`` sends the
    input through the validation, which accepts it or names the errors): the same result and the same
    errors, without the pydantic round trip for the well-formed plain dicts of every request. (The key
    checks are written out: one loop per dict, no call, as this runs on every message of every request.)"""
    for m in msgs:
        if type(m) is not dict:
            return False
        role = m.get("role")
        if type(role) is not str:
            return False
        # one loop over the fields: str keys, no None value, str where the schema wants one (role, name and,
        # in an assistant message, the three reasoning keys; any other field of any role is taken as it is)
        strs = _ASSISTANT_STR_FIELDS if role == "assistant" else _STR_FIELDS
        for k, v in m.items():
            if type(k) is not str or (type(v) is not str and (v is None or k in strs)):
                return False
        content = m.get("content")
        if type(content) is not str and "content" in m:
            if type(content) is not list:
                return False
            for part in content:
                if type(part) is not dict:
                    return False
                for k in part:
                    if type(k) is not str:
                        return False
        if role != "assistant":
            continue
        calls = m.get("tool_calls")
        if calls is None:  # absent (a None value returned above)
            continue
        if type(calls) is not list:
            return False
        for call in calls:
            if type(call) is not dict:
                return False
            for k, v in call.items():
                if type(k) is not str or (type(v) is not str and k in _CALL_STR_FIELDS):
                    return False
            fn = call.get("function")
            if type(fn) is not dict or type(fn.get("name")) is not str or "arguments" not in fn:
                return False
            for k in fn:
                if type(k) is not str:
                    return False
    return True


def holds_objects(m: dict[str, Any]) -> bool:
    """Whether a dict message holds an object (not plain data) where the K3 encoder reads one: a tool
    call, its ``function`` or ``arguments``, a content part. A few lookups (``False`` at once without
    ``tool_calls`` or a content list): the check of every render."""
    content = m.get("content")
    if type(content) is list and any(type(p) is not dict for p in content):
        return any(not isinstance(p, str) for p in content)
    calls = m.get("tool_calls")
    if not calls or type(calls) is not list:
        return calls is not None and not isinstance(calls, (list, tuple, str, bytes, Mapping))
    for call in calls:
        if type(call) is not dict:
            return True
        fn = call.get("function", call)
        if type(fn) is not dict:
            return fn is not None
        args = fn.get("arguments")
        if args is not None and type(args) not in (str, dict):
            return True
    return False


def plain_dicts(msgs: list[Any]) -> bool:
    """Whether every message is a dict with a ``role`` holding no object where the K3 encoder reads one
    (:func:`holds_objects`): what :func:`kimi_chat.messages.plain_messages` returns as they are."""
    for m in msgs:
        if type(m) is not dict or "role" not in m or holds_objects(m):
            return False
    return True


def tools_fast(tools: list[Any]) -> bool:
    """Whether the tools schema (:data:`kimi_chat.messages._TOOLS`, strict) certainly accepts ``tools``,
    checked in plain Python: exact ``dict`` entries with ``str`` keys and a ``str`` ``type``; a ``function``,
    where there is one, an exact ``dict`` with ``str`` keys, a ``str`` ``name``, a ``str`` (or ``None``)
    ``description`` and an exact ``dict`` with ``str`` keys (or ``None``) as ``parameters``. ``True`` only where
    the validation passes (``False`` sends the list through it, which accepts it or names the errors): a
    tool list never seen before (no cache has its validation) is checked without the pydantic round trip."""
    for t in tools:
        if type(t) is not dict or type(t.get("type")) is not str:
            return False
        for k in t:
            if type(k) is not str:
                return False
        if "function" not in t:
            continue
        fn = t["function"]
        if type(fn) is not dict or type(fn.get("name")) is not str:
            return False
        for k, v in fn.items():
            if type(k) is not str:
                return False
            if k == "description":
                if v is not None and type(v) is not str:
                    return False
            elif k == "parameters" and v is not None:
                if type(v) is not dict:
                    return False
                for pk in v:
                    if type(pk) is not str:
                        return False
    return True
