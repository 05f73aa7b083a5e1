"""Deeply nested JSON-like data (tool schemas, tool-call arguments), without recursion.

* :func:`deep_sort_dict`: the key sort the later ``tokenization_kimi.py`` applies to ``tools``
  (re-exported by :mod:`kimi_chat.reference.oracle`);
* :func:`sorted_json`: ``json.dumps(deep_sort_dict(value), ...)`` at C speed where the JSON encoder's own
  key sort gives the same text (a tree of plain JSON values: every fresh tool list a server decodes);
* :func:`too_deep_error`: the error to raise when serialising such data hits Python's recursion
  limit (``json.dumps`` recurses, in transformers' ``tojson`` too), naming the deepest path.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Mapping
from typing import Any

from .errors import RenderError
from .messages import InvalidToolsError

__all__ = ["deep_sort_dict", "sorted_json", "plain_json_tree", "deepest_path", "too_deep_error"]

_PLAIN = frozenset({str, int, float, bool, type(None)})
"""Exact types that are never containers (checked first: most values in a schema are these)."""


def deep_sort_dict(obj: Any) -> Any:
    """Sort the keys of every dict, at every depth (as the later ``tokenization_kimi.py`` does to tools).

    Mappings become dicts with their keys in sorted order, lists new lists, anything else (tuples
    included) is kept as it is. The same result as the tokenizer's recursive function, but iterative:
    a schema nested thousands of levels deep is sorted, not a ``RecursionError``. A dict or list that
    contains itself raises :class:`~kimi_chat.errors.RenderError`.
    """
    if plain_json_tree(obj) and type(obj) is not str:  # no cycle, no tuple, <= 64 levels: recursion is safe
        return _sorted_tree(obj) if type(obj) in _CONTAINERS else obj
    if isinstance(obj, Mapping):
        root: Any = {}
    elif isinstance(obj, list):
        root = []
    else:
        return obj
    # (source, its new container, depth, id of the ancestor at the last power-of-two depth): a cycle
    # shows as a node equal to that ancestor (Brent's cycle detection along the path)
    stack: list[tuple[Any, Any, int, int]] = [(obj, root, 1, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        src, dst, depth, anchor = pop()
        if id(src) == anchor:
            raise RenderError(f"circular reference: a {type(src).__name__} contains itself")
        if not depth & (depth - 1):
            anchor = id(src)
        depth += 1
        if type(dst) is dict:
            for k, v in sorted(src.items()):
                if type(v) in _PLAIN:
                    dst[k] = v
                elif isinstance(v, Mapping):
                    dst[k] = child = {}
                    push((v, child, depth, anchor))
                elif isinstance(v, list):
                    dst[k] = child = []
                    push((v, child, depth, anchor))
                else:
                    dst[k] = v
        else:
            append = dst.append
            for v in src:
                if type(v) in _PLAIN:
                    append(v)
                elif isinstance(v, Mapping):
                    append(child := {})
                    push((v, child, depth, anchor))
                elif isinstance(v, list):
                    append(child := [])
                    push((v, child, depth, anchor))
                else:
                    append(v)
    return root


_JSON_TYPES = frozenset({dict, list, str, int, float, bool, type(None)})
"""The exact types of a plain JSON tree (:func:`plain_json_tree`)."""
_TREE_LEVELS = 64
"""Deeper trees take the sorting walk (which names a value nested too deeply, or a cycle)."""
_TREE_NODES = 1 << 16
"""A level of more nodes (a structure sharing its parts many times over) takes the sorting walk too."""
_referents = gc.get_referents


def plain_json_tree(value: Any) -> bool:
    """Whether ``value`` holds nothing but exact ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and
    ``None`` (no tuple, no subclass, no other object), at most 64 levels deep. Checked a level at a time
    at C speed (``gc.get_referents`` gives a level's dict values and list items at once): a few
    microseconds for a tool list, where a Python walk costs tens. A cycle is never a plain tree."""
    level = [value]
    for _ in range(_TREE_LEVELS):
        if not _JSON_TYPES.issuperset(map(type, level)):
            return False
        level = _referents(*level)  # str, int, float... have none: a level of leaves ends the walk
        if not level:
            return True
        if len(level) > _TREE_NODES:
            return False
    return False


_CONTAINERS = frozenset({dict, list})


def _sorted_tree(value: Any) -> Any:
    """:func:`deep_sort_dict` of a plain JSON tree (:func:`plain_json_tree`): about twice as fast as the
    general walk (no ``Mapping`` checks, no cycle watch: a plain tree has neither)."""
    if type(value) is dict:
        out: Any = {}
        for k, x in sorted(value.items()):
            t = type(x)
            out[k] = _sorted_tree(x) if (t is dict or t is list) else x
        return out
    out = []
    append = out.append
    for x in value:
        t = type(x)
        append(_sorted_tree(x) if (t is dict or t is list) else x)
    return out


_SORTED_ENCODERS: dict[Any, Callable[[Any], str]] = {}


def sorted_json(value: Any, separators: tuple[str, str] | None = None) -> str | None:
    """``json.dumps(deep_sort_dict(value), ensure_ascii=False, separators=separators)``, or ``None``.

    Where ``value`` is a plain JSON tree (:func:`plain_json_tree`), the JSON encoder's own key sort
    (``sort_keys=True``: every dict's items sorted, keys compared before they are made strings, as
    :func:`deep_sort_dict` sorts them) writes that very text, without building the sorted copy. Not
    so for a tuple (the tokenizer's sort leaves the dicts inside a tuple as they are, the encoder's
    sorts them) or another object: ``None`` then, and for keys that do not sort (``1`` beside
    ``"a"``): the caller sorts and serialises as before, with its own errors."""
    if not plain_json_tree(value):
        return None
    encode = _SORTED_ENCODERS.get(separators)
    if encode is None:
        encode = _SORTED_ENCODERS[separators] = json.JSONEncoder(
            ensure_ascii=False, separators=separators, sort_keys=True, check_circular=False).encode
    try:
        return encode(value)
    except (TypeError, ValueError):  # keys of types that do not compare
        return None


def deepest_path(value: Any, limit: int = 1_000_000) -> tuple[int, list[Any]]:
    """``(depth, keys)`` of the most deeply nested dict or list in ``value`` (depth 0: ``value`` is
    not a container; 1: a container of scalars). Keys are dict keys and list indices from the top;
    on ties the first in document order. Walks at most ``limit`` containers (a structure that
    contains itself has no deepest path: the walk stops there)."""
    best: tuple[int, tuple[Any, ...] | None] = (0, None)
    # (node, depth, link): link is (parent link, key), a chain shared by siblings
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 1, None)]
    seen = 0
    while stack and seen < limit:
        node, depth, link = stack.pop()
        if isinstance(node, Mapping):
            items = list(node.items())
        elif isinstance(node, (list, tuple)):
            items = list(enumerate(node))
        else:
            continue
        seen += 1
        if depth > best[0]:
            best = (depth, link)
        stack.extend((v, depth + 1, (link, k)) for k, v in reversed(items))
    keys: list[Any] = []
    link = best[1]
    while link is not None:
        link, key = link
        keys.append(key)
    return best[0], keys[::-1]


def _path_text(keys: list[Any], shown: int = 6) -> str:
    """``.function.parameters[0]…`` for the first ``shown`` keys, then how many levels are left."""
    out = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys[:shown])
    if len(keys) > shown:
        out += f"… ({len(keys) - shown} more levels)"
    return out


def too_deep_error(value: Any, where: str, message_index: int | None = None) -> InvalidToolsError | RenderError:
    """The error for ``value`` (at ``where``: ``"tools"``, or a field of ``messages[message_index]``)
    nested too deeply to serialise as JSON. For ``tools`` an
    :class:`~kimi_chat.messages.InvalidToolsError` naming ``tools[i]`` and the path; else a
    :class:`~kimi_chat.errors.RenderError` naming the message and the field."""
    depth, keys = deepest_path(value)
    if where == "tools" and message_index is None and keys and isinstance(keys[0], int):
        # counted from the tool entry tools[i]
        return InvalidToolsError([(keys[0], _path_text(keys[1:]).removeprefix("."), _too_deep(depth - 1))])
    return RenderError(_too_deep(depth) + (f" (deepest at {_path_text(keys)})" if keys else ""),
                       message_index=message_index, field=where)


def _too_deep(depth: int) -> str:
    return f"nested {depth} levels deep, too deep to serialise as JSON (the official tokenizer fails too)"
