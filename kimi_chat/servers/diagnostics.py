"""What the server adapters tell the operator, and which tool calls they hand the client.

Both adapters (:mod:`kimi_chat.servers.vllm`, :mod:`kimi_chat.servers.sglang`) go through
the stages of :mod:`kimi_chat.servers`, which use this module for two things:

* **Which calls are executable** (:func:`is_executable`, :class:`CallGate`): a parsed call whose
  status is in :data:`NOT_EXECUTABLE` is not returned to the client as a tool call; it is logged
  instead, and the calls after it are renumbered so that the client sees indices ``0, 1, ...``
  without gaps (the OpenAI SDK's stream accumulator inserts by index and breaks on a gap).
* **Logging** (:func:`log_warnings`, :func:`log_passed_calls`): every :class:`ParseWarning` and every
  non-``ok`` call status goes to the adapter's module logger, at a level chosen by whether it changes
  what the client gets (see :func:`warning_level`).

Levels (what an operator turns on):

* ``WARNING``: the client gets less or other than what the model wrote: a tool call withheld (not
  executable), model text dropped (``text_in_section``, ``text_after_tool_calls``,
  ``text_after_end``), a name or arguments the model did not write literally (``name_inferred``,
  ``double_encoded_arguments``).
* ``INFO``: a call handed on with a non-``ok`` status (``unclosed``, ``invalid_json``,
  ``unknown_tool``): the client gets what the model wrote, and it may not execute.
* ``DEBUG``: every other recovery (a stray marker dropped, reasoning / a section / a call closed by
  what followed, an implicit section, ...): markers never reach the client, and the reading is the
  documented one (``docs/formats.md``).

Which statuses are executable: ``incomplete`` (a call cut before ``<|tool_call_argument_begin|>``:
the model never wrote its arguments) is not. The others keep what the adapters did before:
``unclosed`` (the output was cut inside the arguments) is still returned: in a stream its pieces
have already gone out, the turn's ``finish_reason`` is ``length`` (SGLang is told through
``incomplete_tool_call_indices``), and withholding it only from whole responses would make streamed
and whole answers differ. ``invalid_json`` and ``unknown_tool`` are returned as written, as vLLM's and
SGLang's own Kimi parsers do: ``arguments`` is a string the client must parse anyway, and without
declared tools every opaque-id call is ``unknown_tool``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from ..output import ParsedToolCall, ParseWarning, ToolCallStatus

__all__ = [
    "NOT_EXECUTABLE",
    "is_executable",
    "CallGate",
    "warning_level",
    "log_warnings",
    "log_passed_calls",
    "LOGGER",
]

LOGGER = logging.getLogger("kimi_chat.integrations")
"""The stages' logger when an adapter passes none (the adapters use their own module loggers)."""

NOT_EXECUTABLE: frozenset[ToolCallStatus] = frozenset(
    s for s in (getattr(ToolCallStatus, "INCOMPLETE", None),) if s is not None
)
"""Statuses of calls that are never returned to the client as tool calls."""

_CLIENT_VISIBLE = frozenset(
    {"text_in_section", "text_after_tool_calls", "text_after_end", "name_inferred", "double_encoded_arguments"}
)
"""Warning kinds where the client gets less or other than the model wrote (logged at WARNING)."""


def is_executable(call: ParsedToolCall) -> bool:
    """Whether ``call`` may be returned to the client as a tool call (its status is not in
    :data:`NOT_EXECUTABLE`)."""
    return call.status not in NOT_EXECUTABLE


def warning_level(w: ParseWarning) -> int:
    """The logging level of a parse warning: ``WARNING`` when it changes what the client gets,
    ``DEBUG`` otherwise (see the module docstring)."""
    return logging.WARNING if w.kind in _CLIENT_VISIBLE else logging.DEBUG


def log_warnings(logger: logging.Logger, warnings: Iterable[ParseWarning], where: str, shift: int = 0) -> None:
    """Log each warning (``where``: which text the offsets are in; ``shift`` is subtracted from them).
    A merged warning (``count`` > 1) says how many it stands for and the offset of the last."""
    for w in warnings:
        level = warning_level(w)
        if not logger.isEnabledFor(level):
            continue
        if w.count > 1:
            logger.log(level, "parse warning %s: %s (%d times, at offsets %d to %d of the %s)", w.kind, w.message,
                       w.count, w.offset - shift, (w.last_offset or w.offset) - shift, where)
        else:
            logger.log(level, "parse warning %s: %s (at offset %d of the %s)", w.kind, w.message, w.offset - shift,
                       where)


def _describe(call: ParsedToolCall) -> str:
    return f"tool call {call.index} (id {call.id!r}, name {call.name!r})"


def log_passed_calls(logger: logging.Logger, calls: Iterable[ParsedToolCall]) -> None:
    """Log, at INFO, each call handed to the client whose status is not ``ok``."""
    for c in calls:
        if c.status is not ToolCallStatus.OK and is_executable(c):
            logger.info("%s returned with status %s", _describe(c), c.status.value)


class CallGate:
    """Decides, call by call, which parsed calls reach the client and under which index.

    :meth:`admit` is asked when a call first shows up (in a stream: its first delta, which for a call
    cut before its arguments comes in the same chunk as its end, so its status is known then). A call
    that is not executable is withheld and logged at WARNING; the others get the next client index.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._client: dict[int, int | None] = {}
        self._next = 0

    def seen(self, index: int) -> bool:
        """Whether the call with parser index ``index`` was already decided."""
        return index in self._client

    def admit(self, call: ParsedToolCall) -> int | None:
        """The client index of ``call`` (``None``: withheld). Decided once per call."""
        if call.index in self._client:
            return self._client[call.index]
        if is_executable(call):
            out: int | None = self._next
            self._next += 1
        else:
            out = None
            self._logger.warning("%s not returned to the client: status %s (raw %r)", _describe(call),
                                 call.status.value, call.raw)
        self._client[call.index] = out
        return out

    def withhold(self, index: int) -> None:
        """Hand nothing of parser index ``index`` on (a piece of something the parser does not list
        as a call), without a log line of its own."""
        self._client.setdefault(index, None)

    def client_index(self, index: int) -> int | None:
        """The client index already given to parser index ``index`` (``None``: withheld or unseen)."""
        return self._client.get(index)

    def check_final(self, calls: Sequence[ParsedToolCall]) -> list[ParsedToolCall]:
        """At the end of the turn: admit the calls not seen yet, warn about a call already handed on
        whose final status is not executable (too late to withhold it), and return the calls handed
        to the client, in client order."""
        out = []
        for c in calls:
            was_seen = c.index in self._client
            k = self.admit(c)
            if k is None:
                continue
            if was_seen and not is_executable(c):
                self._logger.warning("%s already streamed to the client before its status %s was known",
                                     _describe(c), c.status.value)
            out.append(c)
        return out
