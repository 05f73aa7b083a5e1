"""A real ``llama-server`` process for the end-to-end tests (tests/engines/test_llama_server.py).

The binary is ``$KIMI_CHAT_LLAMA_SERVER`` when set, else ``llama-server`` beside the running Python
(``.ci/install-native.sh VENV`` builds it from the llama.cpp source vendored in the
llama-cpp-python sdist and installs it as ``VENV/bin/llama-server``). :class:`LlamaServer` starts it
on 127.0.0.1 on a free port, waits for ``/health`` and always kills it; requests use only the
standard library (``urllib``), so the tests need nothing beyond the ``native`` extra.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

from kimi_chat.templates import LLAMA_SERVER_FLAGS

ENV_VAR = "KIMI_CHAT_LLAMA_SERVER"
START_TIMEOUT = 120.0
PORT_ATTEMPTS = 3
"""Seconds to wait for ``/health`` (the tiny model loads in about a second; a loaded CI box is slow)."""


def server_binary() -> Path:
    """Where the tests look for llama-server: ``$KIMI_CHAT_LLAMA_SERVER``, else beside ``sys.executable``."""
    given = os.environ.get(ENV_VAR)
    return Path(given) if given else Path(sys.executable).parent / "llama-server"


def missing_reason() -> str | None:
    """Why llama-server cannot be run here (``None`` when it can)."""
    b = server_binary()
    if not b.is_file() or not os.access(b, os.X_OK):
        return (f"llama-server not found at {b} (set ${ENV_VAR}, or build it with "
                "`bash .ci/install-native.sh .venv`)")
    return None


def free_port() -> int:
    """A TCP port nobody listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerDied(RuntimeError):
    """The server process exited (or never answered) while a test talked to it."""


class LlamaServer:
    """One llama-server process serving ``model`` with ``template`` (``--jinja --chat-template-file``).

    Use as a context manager (or call :meth:`close`): the process is killed on exit whatever happens.
    ``args`` are extra command-line arguments; the log (stdout + stderr) goes to ``log_path``."""

    def __init__(self, model: Path, template: Path | None, log_path: Path, *, args: tuple[str, ...] = (),
                 n_ctx: int = 4096) -> None:
        self.log_path = log_path
        for attempt in range(PORT_ATTEMPTS):
            # the port is free when looked up, not reserved: another process (a second test run beside this
            # one) may bind it before llama-server does, which then exits at start; a new port is tried
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            cmd = [str(server_binary()), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                   "-c", str(n_ctx), "-np", "1", "-t", "2", "--no-webui", "--jinja"]
            if template is not None:
                cmd += ["--chat-template-file", str(template)]
            self.cmd = cmd + list(args)
            self._log = open(log_path, "wb")
            self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            try:
                self._wait_healthy()
                return
            except ServerDied:
                port_taken = self.proc.poll() is not None and "couldn't bind" in self.log_tail()
                self.close()
                if attempt + 1 == PORT_ATTEMPTS or not port_taken:
                    raise
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ lifecycle

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerDied(f"llama-server exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise ServerDied(f"llama-server did not become healthy in {START_TIMEOUT:.0f}s:\n{self.log_tail()}")

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def close(self) -> None:
        """Kill the process (if running) and close the log."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        finally:
            self._log.close()

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the server's log."""
        self._log.flush()
        lines = self.log_path.read_bytes().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])

    # ------------------------------------------------------------------ requests

    def _request(self, path: str, body: dict[str, Any], timeout: float) -> Any:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        return urllib.request.urlopen(req, timeout=timeout)

    def post(self, path: str, body: dict[str, Any], *, timeout: float = 300.0) -> Any:
        """POST ``body`` as JSON to ``path``; the decoded JSON answer. An HTTP error status raises
        ``urllib.error.HTTPError`` (its body has the server's message)."""
        with self._request(path, body, timeout) as r:
            return json.loads(r.read().decode("utf-8"))

    def stream(self, path: str, body: dict[str, Any], *, timeout: float = 300.0) -> Iterator[dict[str, Any]]:
        """POST ``body`` with ``"stream": true``; yield each server-sent event's JSON (until ``[DONE]``)."""
        with self._request(path, dict(body, stream=True), timeout) as r:
            for raw in r:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[len("data:"):].strip()
                if payload == "[DONE]":
                    return
                yield json.loads(payload)

    def apply_template(self, messages: list[Any], tools: list[Any] | None = None, **extra: Any) -> str:
        """The prompt llama-server builds for a chat request (its ``/apply-template`` endpoint)."""
        body: dict[str, Any] = {"messages": messages, **extra}
        if tools:
            body["tools"] = tools
        return str(self.post("/apply-template", body)["prompt"])


# --------------------------------------------------------------------------------------------------
# what llama-server hands the template (read from the vendored common/chat.cpp, checked by the tests)

RECOMMENDED_FLAGS = LLAMA_SERVER_FLAGS
"""The flags the README tells users to serve our templates with (and that the tests use): one source,
:data:`kimi_chat.templates.LLAMA_SERVER_FLAGS`."""


def llama_jinja_numbers(value: Any) -> Any:
    """``value`` with its numbers as llama.cpp's Jinja writes them with ``tojson``: it streams a float
    with C++'s default ``<<`` (``%g``: six significant digits), so a float with an integral value below
    10**6 comes out as an integer (``0.0`` -> ``0``); see :func:`floats_written_alike` for the rest."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6 and str(value) != "-0.0":
        return int(value)  # (-0.0 is written "-0": left for floats_written_alike to flag)
    if isinstance(value, dict):
        return {k: llama_jinja_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [llama_jinja_numbers(v) for v in value]
    return value


def floats_written_alike(value: Any) -> bool:
    """Whether every float in ``value`` is written the same by Python's json and by llama.cpp's Jinja
    (``%g``): not so for ``3.14159265`` (``3.14159``) or ``1e6`` (``1e+06``)."""
    if isinstance(value, float):
        return "%g" % value == json.dumps(value)
    if isinstance(value, dict):
        return all(floats_written_alike(v) for v in value.values())
    if isinstance(value, list):
        return all(floats_written_alike(v) for v in value)
    return True


def llama_server_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as llama-server passes it to the template: rebuilt as ``{"type", "function": {"name",
    "description", "parameters"}}`` in that key order (``common_chat_tools_to_json_oaicompat``): other keys
    are dropped, a missing description becomes ``""``, missing parameters ``{}``."""
    f = tool["function"]
    return {"type": "function", "function": {"name": f["name"], "description": f.get("description", ""),
                                             "parameters": llama_jinja_numbers(f.get("parameters", {}))}}


def llama_server_message(msg: dict[str, Any], *, parse_arguments: bool = True) -> dict[str, Any]:
    """A message as llama-server passes it to the template (``common_chat_msgs_parse_oaicompat`` then
    ``to_json_oaicompat`` and its workarounds): a ``developer`` is a ``system`` message; only role, content, reasoning_content, name, tool_call_id
    and tool_calls survive (``reasoning``/``thinking`` aliases are dropped); a missing or null content is
    ``""``; string tool-call arguments are parsed into objects (``func_args_not_string``: the templates
    write them back with ``tojson``) when ``parse_arguments`` (llama.cpp does so for templates it finds
    to render tool calls, i.e. all but rev1; a string that is not JSON fails the request there); list content keeps only ``{"type", "text"}`` of each part, and an empty list is ``""``."""
    # workaround::map_developer_role_to_system (every template but GPT-OSS's)
    out: dict[str, Any] = {"role": "system" if msg["role"] == "developer" else msg["role"]}
    content = msg.get("content")
    if isinstance(content, list):
        content = [{"type": p["type"], "text": p.get("text", "")} for p in content]
    out["content"] = content if content else ""  # None and [] become "" 
    for key in ("reasoning_content", "name", "tool_call_id"):
        if msg.get(key):
            out[key] = msg[key]
    if msg.get("tool_calls"):
        calls = []
        for tc in msg["tool_calls"]:
            args = tc["function"].get("arguments")
            if isinstance(args, str) and parse_arguments:
                args = json.loads(args)
            args = llama_jinja_numbers(args)
            call: dict[str, Any] = {"type": "function", "function": {"name": tc["function"]["name"], "arguments": args}}
            if tc.get("id"):
                call["id"] = tc["id"]
            calls.append(call)
        out["tool_calls"] = calls
    return out


def has_non_json_arguments(messages: list[Any]) -> bool:
    """Whether an assistant message has a tool call whose string ``arguments`` are not JSON: llama-server
    parses them as JSON before the template runs (for templates that render tool calls) and refuses
    the request (HTTP 500). KNOWN, upstream; kimi_chat writes them verbatim, as the official templates."""
    for m in messages:
        for c in (m.get("tool_calls") or []) if isinstance(m, dict) else []:
            args = (c.get("function") or {}).get("arguments") if isinstance(c, dict) else None
            if isinstance(args, str):
                try:
                    json.loads(args)
                except ValueError:
                    return True
    return False
