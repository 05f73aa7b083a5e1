"""The parser's result types: :class:`ParsedMessage` and its parts, and the streamed :class:`Delta`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable

__all__ = [
    "Warn",
    "StopReason",
    "ToolCallStatus",
    "ParseWarning",
    "ParsedToolCall",
    "ParsedMessage",
    "ToolCallDelta",
    "Delta",
]

Warn = Callable[..., None]
"""Where a parser's warnings go: ``warn(kind, message, offset, text="")``."""


class StopReason(str, Enum):
    """Why the assistant turn ended."""

    END_TURN = "end_turn"
    """An end-of-turn marker (``<|im_end|>``, ``[EOS]``) or another message's header was seen, and
    there are no tool calls."""
    TOOL_CALLS = "tool_calls"
    """The turn has tool calls, all of them closed (or the turn ended after them); each call's
    ``status`` says whether it is to be executed (only ``ok`` ones are)."""
    TRUNCATED = "truncated"
    """The text ended inside reasoning, inside a tool call or inside a tool-call section."""
    END_OF_TEXT = "end_of_text"
    """The text ended in content without an end-of-turn marker: what a server that strips its stop
    token sends for a complete answer (it cannot be told from an answer cut at a token limit)."""

    @property
    def finish_reason(self) -> str:
        """The OpenAI ``finish_reason`` (``stop``, ``tool_calls``, ``length``)."""
        return {"tool_calls": "tool_calls", "truncated": "length"}.get(self.value, "stop")


class ToolCallStatus(str, Enum):
    """How trustworthy a parsed tool call is. When several apply, the first listed wins. Only
    ``OK`` is a call to execute."""

    OK = "ok"
    UNCLOSED = "unclosed"
    """The text ended inside the call; its arguments are what was emitted (usually incomplete)."""
    INCOMPLETE = "incomplete"
    """The call never reached ``<|tool_call_argument_begin|>``: its header was closed (by
    ``<|tool_call_end|>``, the next call, the section end or the end of the turn) before any
    arguments began. The model wrote no arguments: do not execute it (``arguments`` is ``{}``)."""
    UNKNOWN_TOOL = "unknown_tool"
    """The name is not a declared tool, or could not be read from the header nor inferred."""
    INVALID_JSON = "invalid_json"
    """The arguments are not a JSON object (kept verbatim)."""
    SCHEMA_MISMATCH = "schema_mismatch"
    """The arguments are a JSON object that does not satisfy the tool's ``parameters`` schema (set by
    :meth:`kimi_chat.grammar.Constraint.validate`, never by the parser)."""


@dataclass(frozen=True, slots=True)
class ParseWarning:
    """Something the parser repaired, dropped or inferred. ``offset`` is the character offset in the
    input where it happened; ``text`` is the input text dropped or concerned (a stray marker, text
    after the end of the turn, text inside a tool-call section outside any call, ...).

    Repeats are merged, so that a long run of stray markers costs one warning, not one each
    (``docs/formats.md``, *Warnings*): ``count`` is how many warnings this one stands for (``1``:
    itself only) and ``last_offset`` the offset of the last of them (``None`` when ``count`` is 1).
    Two kinds of merge, both only for the kinds of :data:`kimi_chat.output.warnlog.MERGED_KINDS`
    (``stray_marker``): consecutive identical warnings (same kind, message and text, nothing else
    warned and no marker read as structure between) are one, with the first one's ``offset``; and past
    :data:`~kimi_chat.output.warnlog.MAX_ENTRIES` entries of a kind, the rest of that kind are one
    overflow entry (``text`` ``""``, the message says so; ``offset`` and ``last_offset``: the first
    and last merged).
    """

    kind: str
    message: str
    offset: int
    text: str = ""
    count: int = 1
    last_offset: int | None = None

    def __str__(self) -> str:
        if self.count > 1:
            return f"{self.message} ({self.count} times, at offsets {self.offset} to {self.last_offset})"
        return f"{self.message} (at offset {self.offset})"


@dataclass
class ParsedToolCall:
    """One tool call of the assistant turn."""

    index: int
    """Position among the turn's tool calls (0-based, across sections)."""
    id: str
    """The call header, trimmed, verbatim (normally ``functions.NAME:IDX``)."""
    name: str | None
    """The function name (``None`` when it could not be determined; see ``status``)."""
    arguments: str
    """The arguments as the model wrote them, trimmed (``{}`` if empty; a double-encoded JSON
    string holding an object is unwrapped once)."""
    status: ToolCallStatus
    raw: str
    """The exact input text of the call, from ``<|tool_call_begin|>`` to ``<|tool_call_end|>``."""

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChatCompletionMessageToolCall``-shaped dict (a missing name is ``""``)."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name or "", "arguments": self.arguments},
        }

    def to_openai_invalid(self) -> dict[str, Any]:
        """The ``invalid_tool_calls`` entry of a call not to execute: ``index`` (the parser's),
        :meth:`to_openai`'s keys, and ``status``."""
        return {"index": self.index, **self.to_openai(), "status": self.status.value}


@dataclass
class ParsedMessage:
    """A parsed assistant turn."""

    content: str | None
    """The text for the user (verbatim; ``None`` if empty or whitespace-only)."""
    reasoning_content: str | None
    """The reasoning (verbatim; ``None`` if there is none or it is whitespace-only)."""
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    stop_reason: StopReason | None = None
    """``None`` while a stream is still open and its turn has not ended."""
    warnings: list[ParseWarning] = field(default_factory=list)

    def to_openai(self, *, include_invalid: bool = False) -> dict[str, Any]:
        """An OpenAI ``ChatCompletionMessage``-shaped dict: ``role``, ``content``, then
        ``reasoning_content`` if any and ``tool_calls`` if any.

        ``tool_calls`` lists only the calls to execute (status ``ok``); the others (an undeclared
        tool, arguments that are not a JSON object, a call closed before its arguments or cut by the
        end of the text) are left out and reported under ``invalid_tool_calls``, each with its
        parser ``index`` and ``status`` (a key OpenAI clients ignore: they never execute such a call
        unknowingly). ``include_invalid=True``: every call in ``tool_calls``, as the model wrote it
        (the statuses are then only in :attr:`tool_calls`)."""
        out: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        calls = self.tool_calls if include_invalid else [c for c in self.tool_calls if c.status is ToolCallStatus.OK]
        if calls:
            out["tool_calls"] = [c.to_openai() for c in calls]
        invalid = [] if include_invalid else [c for c in self.tool_calls if c.status is not ToolCallStatus.OK]
        if invalid:
            out["invalid_tool_calls"] = [c.to_openai_invalid() for c in invalid]
        return out

    def finish_reason(self, *, include_invalid: bool = False) -> str | None:
        """The OpenAI ``finish_reason`` that goes with :meth:`to_openai` (same ``include_invalid``):
        the stop reason's, except that ``tool_calls`` becomes ``stop`` when no call is listed (every
        call was left out as invalid). ``None`` while the turn is open."""
        if self.stop_reason is None:
            return None
        reason = self.stop_reason.finish_reason
        if reason == "tool_calls" and not include_invalid and not any(
                c.status is ToolCallStatus.OK for c in self.tool_calls):
            return "stop"
        return reason


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of one tool call: ``id`` is sent once, in the call's first delta; ``name`` once, when
    known (with the id, or, for a name inferred from the arguments, when the call ends);
    ``arguments`` are fragments to concatenate."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChoiceDeltaToolCall``-shaped dict.

        The first delta of a call (the one with ``id``) always carries ``function`` with a ``name``:
        ``""`` while the name is unknown, as in :meth:`ParsedToolCall.to_openai` (clients such as the
        OpenAI SDK's stream accumulator require it). A name inferred later from the arguments comes
        in a later delta; concatenated to ``""`` or replacing it, it gives the same name.
        """
        out: dict[str, Any] = {"index": self.index}
        fn: dict[str, str] = {}
        if self.id is not None:
            out["id"] = self.id
            out["type"] = "function"
            fn["name"] = self.name or ""
        elif self.name is not None:
            fn["name"] = self.name
        if self.arguments is not None:
            fn["arguments"] = self.arguments
        if fn:
            out["function"] = fn
        return out


@dataclass(slots=True)
class Delta:
    """What one ``feed()`` decided, in order (a ``feed()`` returns a list of these)."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    """Without ``include_invalid`` (the default): each call to execute, whole, once decided ``ok``
    (index = its position among them); with it: the pieces of every call as written."""
    invalid_tool_calls: list[ParsedToolCall] = field(default_factory=list)
    """Without ``include_invalid``: a call decided not to execute (its status says why)."""

    def to_openai(self) -> dict[str, Any]:
        """An OpenAI ``ChoiceDelta``-shaped dict (only the fields that are set; a call not to execute
        under ``invalid_tool_calls``, as in :meth:`ParsedMessage.to_openai`)."""
        out: dict[str, Any] = {}
        if self.content is not None:
            out["content"] = self.content
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [t.to_openai() for t in self.tool_calls]
        if self.invalid_tool_calls:
            out["invalid_tool_calls"] = [c.to_openai_invalid() for c in self.invalid_tool_calls]
        return out
