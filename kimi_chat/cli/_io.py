"""Shared input helpers of the CLI: reading JSON with line/column errors, writing bytes exactly."""

from __future__ import annotations

import json
import sys
from typing import Any


class InputError(Exception):
    """Bad CLI input; the message is printed and the exit status is 2."""


def read_text(path: str) -> str:
    """The text of ``path`` (``-`` for stdin), UTF-8."""
    try:
        if path == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e})") from e


def read_json(path: str) -> Any:
    """JSON from ``path`` (``-`` for stdin); errors name the file, line and column."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        name = "<stdin>" if path == "-" else path
        raise InputError(f"{name}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from e


def parse_json_arg(value: str, option: str) -> Any:
    """JSON given on the command line (e.g. ``--kwargs``)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise InputError(f"{option}: invalid JSON at column {e.colno}: {e.msg}") from e


def read_tools(path: str) -> list[Any]:
    """A tools list from ``path``: a JSON list, or an object with a ``tools`` list (a request body)."""
    value = read_json(path)
    if isinstance(value, dict) and isinstance(value.get("tools"), list):
        value = value["tools"]
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a JSON list of tools (or an object with a 'tools' list)")
    return value


def template_options(body: dict[str, Any], kwargs_json: str | None) -> dict[str, Any]:
    """Dialect template options of a request: its ``chat_template_kwargs`` with ``--kwargs JSON``
    merged over them."""
    given = body.get("chat_template_kwargs") or {}
    if not isinstance(given, dict):
        raise InputError("chat_template_kwargs must be a JSON object")
    options: dict[str, Any] = dict(given)
    if kwargs_json:
        extra = parse_json_arg(kwargs_json, "--kwargs")
        if not isinstance(extra, dict):
            raise InputError("--kwargs must be a JSON object")
        options.update(extra)
    return options


def write_exact(text: str) -> None:
    """Write ``text`` to stdout as UTF-8 bytes, with no newline translation and nothing added."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def fail(message: str) -> int:
    """Print ``kimi-chat: error: message`` to stderr; return exit status 2."""
    print(f"kimi-chat: error: {message}", file=sys.stderr)
    return 2
