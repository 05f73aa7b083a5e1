"""What the official Kimi-K3 encoder does to its inputs, for :mod:`kimi_chat.families.k3.render`.

``encoding_k3`` normalises a conversation before rendering it: tool-call arguments parsed
(``normalize_tool_arguments``: an object, or the raw text of a string that is not JSON), tool results
re-ordered by ``tool_call_id`` into the assistant's call order (``normalize_xtml_tool_result_messages``),
dict keys of tools and response schemas sorted (``deep_sort_dict``), the response schema read off
``response_format`` (``extract_response_schema``); and it writes values its own way (attribute
escaping, ``json.dumps`` of non-string arguments, the XTML type names). These helpers do the same,
without copying the conversation, and raise :class:`~kimi_chat.errors.RenderError` naming the message
index and field where the official encoder raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from kimi_chat.caches import MAX_KEY_BYTES, LRUCache, admitted_key
from kimi_chat.errors import RenderError
from kimi_chat.messages import plain_messages as messages_of
from kimi_chat.nesting import too_deep_error
from kimi_chat.nesting import deep_sort_dict, sorted_json

__all__ = [
    "esc", "dumps", "args_field", "TYPE_NAMES", "value_text", "xtml_type", "loads", "arguments", "function",
    "call_index", "tool_run", "messages_of", "response_schema", "sorted_keys", "tools_json",
]

def esc(value: Any) -> str:
    # _escape_attr_value: `&` then `"`
    s = value if type(value) is str else str(value)
    if "&" in s or '"' in s:
        s = s.replace("&", "&amp;").replace('"', "&quot;")
    return s


# what json.dumps(value, ensure_ascii=False[, separators=(",", ":")]) does, without building an encoder per call
_COMPACT_SEPARATORS: Final = (",", ":")
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=_COMPACT_SEPARATORS).encode
_SPACED: Final = json.JSONEncoder(ensure_ascii=False).encode


def dumps(value: Any, index: int | None, field: str, compact: bool = False) -> str:
    try:
        return _COMPACT(value) if compact else _SPACED(value)
    except (TypeError, ValueError) as e:
        where = f"{field}: " if index is None else ""  # RenderError names the field of a message only
        raise RenderError(f"{where}not JSON-serialisable: {e}", message_index=index, field=field) from e
    except RecursionError:  # json.dumps recurses (the official encoder fails too)
        err = too_deep_error(value, field, index)
        if index is None and type(err) is RenderError:
            err = RenderError(f"{field}: {err}", field=field)
        raise err from None


_FLOAT_SPECIAL: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def args_field(j: int, flat: bool) -> str:
    return f"tool_calls[{j}].arguments" if flat else f"tool_calls[{j}].function.arguments"


TYPE_NAMES: Final = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null",
               dict: "object", list: "array"}


def value_text(value: Any, index: int, j: int, flat: bool, key: Any) -> str:
    # _xtml_value for a non-string: json.dumps(value, ensure_ascii=False); scalars without its set-up
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    t = type(value)
    if t is int:
        try:
            return int.__repr__(value)
        except ValueError as e:  # more digits than int_max_str_digits: json.dumps raises too
            raise RenderError(f"not JSON-serialisable: {e}", message_index=index,
                              field=f"{args_field(j, flat)}.{key}") from None
    if t is float:
        r = float.__repr__(value)
        return _FLOAT_SPECIAL.get(r, r)
    return dumps(value, index, f"{args_field(j, flat)}.{key}")


def xtml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "array"


_scan: Final[Any] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # (not in the stubs)
_ws: Final[Any] = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]


_WS_CHARS: Final = frozenset(" \t\n\r")


def loads(s: str) -> Any:
    # json.loads(s) for a str, without its per-call set-up (same scanner, same errors); the whitespace
    # pattern only runs where there is whitespace to skip (arguments mostly start with "{" and end with "}")
    try:
        obj, end = _scan(s, _ws(s, 0).end() if s[:1] in _WS_CHARS else 0)
    except StopIteration as e:
        raise json.JSONDecodeError("Expecting value", s, e.value) from None
    if end != len(s):
        end = _ws(s, end).end()
        if end != len(s):
            raise json.JSONDecodeError("Extra data", s, end)
    return obj


def arguments(raw: Any, index: int, j: int, flat: bool) -> tuple[Any, str | None]:
    """normalize_tool_arguments: ``(mapping, None)`` or ``(None, raw text)`` for a non-JSON string
    (the arguments of ``tool_calls[j]``; ``flat``: a call without ``function``)."""
    if raw is None:
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        if not raw or raw.isspace():  # `not raw.strip()`
            return {}, None
        try:
            parsed = loads(raw)
        except json.JSONDecodeError:
            return None, raw
        except ValueError as e:  # an integer of too many digits: the official json.loads raises too
            raise RenderError(f"JSON the K3 encoder cannot read: {e}", message_index=index,
                              field=args_field(j, flat)) from None
        except RecursionError:
            raise RenderError("JSON nested too deeply to read (the K3 encoder's json.loads fails too)",
                              message_index=index, field=args_field(j, flat)) from None
        if not isinstance(parsed, dict):
            raise RenderError(
                f"arguments are JSON but not an object ({type(parsed).__name__}); the K3 encoder refuses them",
                message_index=index,
                field=args_field(j, flat),
            )
        return parsed, None
    raise RenderError(
        f"arguments must be an object or a JSON object string, not {type(raw).__name__}",
        message_index=index,
        field=args_field(j, flat),
    )


def function(call: Any, index: int, j: int) -> Mapping[str, Any]:
    """The mapping holding a tool call's ``name`` / ``arguments`` (``function``, or the call itself)."""
    if not isinstance(call, dict):
        raise RenderError(f"a tool call must be an object, not {type(call).__name__}", message_index=index, field=f"tool_calls[{j}]")
    if "function" not in call:
        fn = call
    else:
        fn = call["function"]
        if not isinstance(fn, dict):
            raise RenderError(
                f"must be an object, not {type(fn).__name__}", message_index=index, field=f"tool_calls[{j}].function"
            )
    if "name" not in fn:
        where = f"tool_calls[{j}].function.name" if fn is not call else f"tool_calls[{j}].name"
        raise RenderError("tool call has no name", message_index=index, field=where)
    return fn


def call_index(tool_calls: Any) -> dict[str, tuple[int, Any]]:
    # _tool_call_id_index: id -> (1-based position, function name); the first of duplicate ids wins
    out: dict[str, tuple[int, Any]] = {}
    if not isinstance(tool_calls, list):
        return out
    for position, call in enumerate(tool_calls, start=1):
        if not isinstance(call, dict):
            continue
        call_id = call.get("id")
        if call_id is None:
            continue
        key = str(call_id)
        if key in out:
            continue
        fn = call.get("function")
        out[key] = (position, fn.get("name") if isinstance(fn, dict) else call.get("name"))
    return out


def tool_run(msgs: list[dict[str, Any]], i: int, tool_calls: Any) -> tuple[int, list[tuple[int, Any]]]:
    """normalize_xtml_tool_result_messages for the run of tool results starting at ``msgs[i]``.

    When every result of the run matches a call of the latest assistant (``tool_calls``) by
    ``tool_call_id``, the run is sorted into call order and each result is named after its call;
    otherwise it stays as it is. Returns the end of the run and ``(index, tool name or None)`` in
    rendering order (``None``: keep the message's own ``tool`` / ``name``)."""
    n = len(msgs)
    j = i + 1
    while j < n and msgs[j]["role"] == "tool":
        j += 1
    if not tool_calls:
        return j, [(k, None) for k in range(i, j)]
    if j == i + 1:  # a single result: the first call with its id, without building the index
        t = msgs[i]
        call_id = t.get("tool_call_id", t.get("id"))
        if call_id is None or not isinstance(tool_calls, list):
            return j, [(i, None)]
        key = call_id if type(call_id) is str else str(call_id)
        for call in tool_calls:
            if isinstance(call, dict):
                cid = call.get("id")
                if cid is not None and (cid if type(cid) is str else str(cid)) == key:
                    fn = call.get("function")
                    return j, [(i, fn.get("name") if isinstance(fn, dict) else call.get("name"))]
        return j, [(i, None)]
    calls = call_index(tool_calls)
    run: list[tuple[int, int, Any]] = []
    for k in range(i, j):
        t = msgs[k]
        call_id = t.get("tool_call_id", t.get("id"))
        hit = calls.get(str(call_id)) if call_id is not None else None
        if hit is None:
            return j, [(k, None) for k in range(i, j)]
        run.append((hit[0], k, hit[1]))
    if len(run) > 1:
        run.sort(key=lambda item: (item[0], item[1]))
    return j, [(k, name) for _, k, name in run]


def response_schema(response_format: Any) -> Any:
    # extract_response_schema of the encoder (dicts and objects alike)
    if response_format is None:
        return None
    get = response_format.get if isinstance(response_format, dict) else None
    json_schema = get("json_schema") if get else getattr(response_format, "json_schema", None)
    if json_schema is None:
        return None
    if isinstance(json_schema, dict):
        return json_schema.get("schema", json_schema.get("json_schema", json_schema))
    for key in ("schema", "json_schema"):
        schema = getattr(json_schema, key, None)
        if schema is not None:
            return schema
    return json_schema


def sorted_keys(value: Any, index: int | None, field: str) -> Any:
    try:
        return deep_sort_dict(value)
    except TypeError as e:
        raise RenderError(f"keys cannot be sorted: {e}", message_index=index, field=field) from e


# -------------------------------------------------------------------------------------------- the pass


_TOOLS_JSON: Final[LRUCache[str]] = LRUCache("k3.tools_json", 64)
"""``tools_json``'s cache: (head, exact key (:func:`_tools_key`)) -> text, least recently used first."""
_TOOLS_JSON_MAX_KEY: Final = MAX_KEY_BYTES
"""Tools whose key is longer (bytes) are not cached: each entry's memory is bounded (key and text)."""


def _tools_key(tools: Any) -> bytes | None:
    """The cache key of ``tools``: :func:`kimi_chat.caches.admitted_key` (``marshal.dumps``: plain data
    of exact types in order, so equal keys are equal values of equal types and key order: the same
    text). ``None`` (not cached): read for the first time, not plain data, or too big."""
    try:
        return admitted_key(tools, _TOOLS_JSON_MAX_KEY)
    except (ValueError, RecursionError):
        return None


def tools_json(tools: Any, index: int | None, field: str, key: bytes | None = None, head: str = "",
               keyed: bool = False) -> str:
    """``head`` + the compact JSON of ``tools`` with every dict's keys sorted
    (``_json_compact(deep_sort_dict(tools))``) + ``"\\n```"`` when ``head`` is given (the body of a K3 tool
    declaration).

    Servers declare the same tools on every request: the result is cached (thread-safe, bounded LRU) by
    an exact content key (:func:`_tools_key`; it tells apart what JSON would not, tuples from lists, ``1``
    from ``"1"`` keys, and so what the encoder's sort treats differently) and ``head``. ``key``:
    ``_tools_key(tools)``, when the caller has it (``keyed``: it has, ``None`` then means not cached)."""
    if key is None and not keyed:
        key = _tools_key(tools)
    if key is None:
        return _declared(tools, index, field, head)
    return _TOOLS_JSON.get_or_compute((head, key), _declared, tools, index, field, head)


def _declared(tools: Any, index: int | None, field: str, head: str) -> str:
    text = sorted_json(tools, _COMPACT_SEPARATORS)
    if text is None:  # not a plain JSON tree: the encoder's sort, and its errors
        text = dumps(sorted_keys(tools, index, field), index, field, compact=True)
    return head + text + "\n```" if head else text
