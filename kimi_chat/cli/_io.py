"""Shared input/output helpers of the CLI: reading JSON with line/column errors, refusing text that is
not Unicode, writing bytes exactly, and the one error style of every subcommand
(``kimi-chat COMMAND: error: MESSAGE``, exit status 2)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

STDIN = "-"
"""The file argument that means standard input, in every subcommand."""

STDIN_NAME = "<stdin>"
"""How messages name standard input."""

_prog = "kimi-chat"


class InputError(Exception):
    """Bad CLI input; the message is printed and the exit status is 2."""


def set_prog(prog: str) -> None:
    """Name the running subcommand in error messages (``kimi-chat render``); called by ``main``."""
    global _prog
    _prog = prog


def source_name(path: str) -> str:
    """How messages name an input: the path, or ``<stdin>`` for ``-``."""
    return STDIN_NAME if path == STDIN else path


def read_text(path: str) -> str:
    """The text of ``path`` (``-`` for stdin), UTF-8."""
    name = source_name(path)
    try:
        if path == STDIN:
            if sys.stdin.isatty():  # a terminal: say what it waits for, rather than hang silently
                print(f"{_prog}: reading the input from standard input (a terminal): type or paste it, then "
                      f"Ctrl-D (Ctrl-Z Enter on Windows); or pass a file (see {_prog} --help)",
                      file=sys.stderr, flush=True)
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise InputError(f"{name}: cannot read: {e.strerror or e}") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: not valid UTF-8 at byte {e.start}") from e


def _json_path(parts: tuple[str | int, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            key = p.encode("utf-8", "backslashreplace").decode("utf-8")  # printable, even a bad key
            out += f".{key}" if out else key
    return out or "the top-level value"


def _lone_surrogates(value: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """``(path, surrogate)`` of every string (key or value) of a JSON value that holds a lone surrogate
    (iterative: the nesting depth is not limited by Python's recursion limit)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            bad = _first_surrogate(v)
            if bad is not None:
                yield path, bad
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                bad = _first_surrogate(k)
                if bad is not None:
                    yield path + (k,), bad
                stack.append((path + (k,), item))
        elif isinstance(v, list):
            stack.extend((path + (i,), item) for i, item in reversed(list(enumerate(v))))


def _first_surrogate(s: str) -> str | None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return s[e.start]
    return None


def surrogate_message(char: str) -> str:
    """The explanation of a lone surrogate, shared by the input check and ``main``'s safety net."""
    return (f"lone surrogate U+{ord(char):04X} (a JSON \\u{ord(char):04x} escape without its pair) "
            "is not Unicode text")


def check_unicode(value: Any, where: str) -> Any:
    """``value`` (decoded JSON) unchanged; :class:`InputError` naming ``where`` and the JSON path of the
    first string that is not Unicode text (a lone surrogate such as ``"\\ud800"``)."""
    for path, char in _lone_surrogates(value):
        raise InputError(f"{where}: {_json_path(path)}: {surrogate_message(char)}")
    return value


def _loads(text: str, where: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read "
                         f"(more than about {sys.getrecursionlimit()} levels)") from None
    return check_unicode(value, where)


def read_json(path: str) -> Any:
    """JSON from ``path`` (``-`` for stdin); errors name the file, line and column."""
    text = read_text(path)
    name = source_name(path)
    try:
        return _loads(text, name)
    except json.JSONDecodeError as e:
        raise InputError(f"{name}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from e


def parse_json_arg(value: str, option: str) -> Any:
    """JSON given on the command line (e.g. ``--kwargs``)."""
    try:
        return _loads(value, option)
    except json.JSONDecodeError as e:
        raise InputError(f"{option}: invalid JSON at column {e.colno}: {e.msg}") from e


def request_body(value: Any, path: str) -> dict[str, Any]:
    """A request read from ``path``: a chat.completions body (an object with ``messages``), or a bare
    list of messages made into one."""
    if isinstance(value, list):
        value = {"messages": value}
    if not isinstance(value, dict) or "messages" not in value:
        raise InputError(f"{source_name(path)}: expected a chat.completions request ({{\"messages\": [...]}}) "
                         "or a list of messages")
    return value


def read_tools(path: str) -> list[Any]:
    """A tools list from ``path``: a JSON list, or an object with a ``tools`` list (a request body)."""
    value = read_json(path)
    if isinstance(value, dict) and isinstance(value.get("tools"), list):
        value = value["tools"]
    if not isinstance(value, list):
        raise InputError(f"{source_name(path)}: expected a JSON list of tools (or an object with a 'tools' list)")
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
    """Print ``kimi-chat COMMAND: error: message`` to stderr (one line); return exit status 2."""
    print(f"{_prog}: error: {message}", file=sys.stderr)
    return 2
