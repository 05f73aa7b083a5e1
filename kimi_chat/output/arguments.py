"""A call's arguments written as JSON text, read the same way by every family (K2's arguments, K3's
``json`` element): :func:`arguments_piece` streams a piece, :func:`arguments_end` decides the value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .buffers import joined
from .jsonvalue import INVALID, json_value
from .types import Warn

__all__ = ["arguments_piece", "arguments_end"]


def arguments_piece(c: Any, piece: str, emit: Callable[[str], None]) -> None:
    """A piece of a call's arguments text, streamed as written except leading whitespace (dropped),
    trailing whitespace (held: it may end the arguments) and a JSON string (held to the end: it may be
    double-encoded). ``c`` keeps the state (``mode``: 0 nothing but whitespace yet, 1 streaming, 2 a
    JSON string held; ``held``: the held text); ``emit`` streams a fragment."""
    mode = c.mode
    if mode == 0:
        piece = piece.lstrip()
        if not piece:
            return
        if piece[0] == '"':
            c.mode = 2
            c.held.append(piece)
            return
        c.mode = 1
    elif mode == 2:
        c.held.append(piece)
        return
    if piece[-1].isspace():  # trailing whitespace may end the arguments: hold it
        body = piece.rstrip()
        if body:
            tail = piece[len(body):]
            if c.held:
                body = "".join(c.held) + body
                c.held = []
            emit(body)
            c.held.append(tail)
        else:
            c.held.append(piece)
    else:
        if c.held:
            piece = "".join(c.held) + piece
            c.held = []
        emit(piece)


def arguments_end(c: Any, emit: Callable[[str], None], warn: Warn) -> Any:
    """The end of a call's arguments text (see :func:`arguments_piece`): nothing but whitespace is
    ``{}``; a held JSON string holding an object is unwrapped once (``double_encoded_arguments``);
    trailing whitespace is dropped. Returns the arguments' JSON value (``INVALID`` if not JSON)."""
    value: Any = INVALID
    if c.mode == 2:  # a JSON string, held: decided now
        s = "".join(c.held).rstrip()
        value = json_value(s)
        if isinstance(value, str):
            inner = json_value(value)
            if isinstance(inner, dict):
                s, value = value.strip(), inner
                warn("double_encoded_arguments", "double-encoded arguments unwrapped "
                     "(a JSON string holding an object)", c.offset)
        emit(s)
    else:
        if c.mode == 0:
            emit("{}")
        value = json_value(joined(c.args))
    c.held = []
    return value
