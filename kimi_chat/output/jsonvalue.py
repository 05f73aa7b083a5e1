"""The one reading of tool-call arguments as JSON (RFC 8259), for both families' call assemblers.

:func:`json_value` says whether a text is JSON, and gives its value for the checks the parser makes
(is it an object, its keys, the type of a K3 argument); the arguments text itself is always kept
verbatim. It differs from a bare ``json.loads`` exactly where ``json.loads`` gives a wrong verdict:

* ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (a JavaScript client's ``JSON.parse`` fails
  on them): :data:`INVALID`.
* An integer of any length is JSON (``json.loads`` refuses more than ``sys.get_int_max_str_digits()``
  digits): its value here is ``0`` when Python will not convert it (the parser needs its type only).
* Nesting of any depth is JSON (``json.loads`` raises ``RecursionError`` past ~1,000 levels): such a
  text is read again without recursion (:func:`_iterative`), in time and memory linear in its size.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["INVALID", "json_value"]

INVALID: Final[Any] = object()
"""What :func:`json_value` returns for a text that is not JSON."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts: valid JSON, the value is not needed
        return 0


_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant, parse_int=_int)


def json_value(text: str) -> Any:
    """The JSON value of ``text`` (surrounding whitespace allowed), or :data:`INVALID` if it is not
    RFC 8259 JSON (see the module docstring). Never raises."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        return _iterative(text)
    except (ValueError, TypeError):
        return INVALID


_WS: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS: Final = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_scanstring: Final = json.decoder.scanstring  # type: ignore[attr-defined]


def _iterative(text: str) -> Any:
    """:func:`json_value` with an explicit stack instead of recursion (any nesting depth)."""
    ws = _WS.match
    try:
        stack: list[tuple[Any, str | None]] = []  # open containers, with the pending key of an object
        i = ws(text, 0).end()
        while True:
            # a value starts at i
            ch = text[i:i + 1]
            if ch == "{" or ch == "[":
                container: Any = {} if ch == "{" else []
                i = ws(text, i + 1).end()
                close = "}" if ch == "{" else "]"
                if text[i:i + 1] == close:
                    value, i = container, i + 1
                elif ch == "{":
                    key, i = _key(text, i)
                    stack.append((container, key))
                    continue
                else:
                    stack.append((container, None))
                    continue
            elif ch == '"':
                value, i = _scanstring(text, i + 1, True)
            elif ch in _LITERALS:
                word, value = _LITERALS[ch]
                if not text.startswith(word, i):
                    return INVALID
                i += len(word)
            else:
                m = _NUMBER.match(text, i)
                if m is None:
                    return INVALID
                value = float(m.group()) if m.group(1) or m.group(2) else _int(m.group())
                i = m.end()
            # the value ends at i: put it in its container, close what ends here
            while True:
                i = ws(text, i).end()
                if not stack:
                    return value if i == len(text) else INVALID
                container, key = stack[-1]
                if key is None:
                    container.append(value)
                else:
                    container[key] = value
                sep = text[i:i + 1]
                if sep == ",":
                    i = ws(text, i + 1).end()
                    if key is not None:
                        key, i = _key(text, i)
                        stack[-1] = (container, key)
                    break
                if sep != ("]" if key is None else "}"):
                    return INVALID
                stack.pop()
                value, i = container, i + 1
    except (ValueError, IndexError):
        return INVALID


def _key(text: str, i: int) -> tuple[str, int]:
    """An object key at ``i`` and the offset after its colon (and the whitespace after it)."""
    if text[i:i + 1] != '"':
        raise ValueError("expected a key")
    key, i = _scanstring(text, i + 1, True)
    i = _WS.match(text, i).end()
    if text[i:i + 1] != ":":
        raise ValueError("expected ':'")
    return key, _WS.match(text, i + 1).end()
