"""Findings: what the data report says about one conversation (a row of the input).

A :class:`Finding` names its ``kind``, the ``row`` (0-based index in the input) and ``sample_id`` it is about,
a ``message`` that states the problem and, where it helps, the ``path`` of the field (``messages[3].content``)
and a ``count``. :func:`conversation_findings` gathers what one conversation shows; the rules that
:func:`kimi_chat.lint` already has (undeclared tools, non-canonical call ids, typed markers) are lint's, seen
through :data:`LINT_KINDS`.

Running :func:`kimi_chat.lint` costs more than the rest of a row's findings (its whole rule set: the tools'
TypeScript declaration, the schema validation), while almost every row of a dataset has none of the three codes
the report takes. :func:`lint_may_report` is a cheap test that is true whenever lint could report one of them
(a call with an id not canonical for its name or to a name the tools do not declare, marker text anywhere in the
messages, a row of any other shape): lint runs only then, so the findings are lint's own, row for row.
"""

from __future__ import annotations

import json
import marshal
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..checks.lint import CANONICAL_TOOL_CALL_ID, declared_tools, lint, typed_markers
from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..message_shapes import renderable_fast
from ..messages import normalize_tools, string_paths, to_plain

__all__ = ["Finding", "KINDS", "LINT_KINDS", "conversation_findings", "double_encoded_arguments", "lint_may_report"]

KINDS: dict[str, str] = {
    "bad_row": "a row that is not a conversation the dialect renders (not trained; the error names the field)",
    "reasoning_dropped": "reasoning blocks the official rendering of the whole conversation drops",
    "double_encoded_arguments": "tool-call arguments JSON-encoded twice (a JSON string holding a JSON object)",
    "foreign_call_id": "tool-call ids not of the form the models were trained on (functions.NAME:N)",
    "undeclared_tool": "calls to a function that is not in the row's tools",
    "marker_text": "special-token text typed in a message (encoded as text)",
    "over_max_length": "samples longer than max_length (dropped, or truncated at a turn boundary)",
    "no_final_assistant": "conversations that do not end with an assistant message (the end is not trained)",
    "no_trained_turn": "conversations with no assistant message to train (no sample)",
    "leading_assistant": "an assistant message first in the conversation: no request before it, not trained",
    "unknown_tool_result": "tool results whose tool_call_id matches no call before them",
    "unanswered_tool_call": "tool calls no tool result answers before the next assistant or user message",
    "reasoning_conflict": "an assistant message carrying reasoning under several keys (reasoning_content, "
                          "thinking, reasoning) with different text: one is rendered, the others are not trained",
    "partial_weight": "a weight other than 0 or 1: samples carry no per-token weight, so the message is trained at "
                      "full weight",
    "lone_surrogate": "lone surrogates (a JSON \\ud800 escape without its pair): encoded as U+FFFD, as the "
                      "official tokenizer does, so the text trained is not the text given",
}
"""Every finding kind, with what it counts."""

# a surrogate code point (U+D800..U+DFFF) in marshal's bytes of a string (UTF-8 with surrogates passed through):
# never in the UTF-8 of Unicode text
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")

_LINT_FIELDS = {"undeclared-tool": ".function.name", "non-canonical-tool-call-id": ".id"}
_CALL = re.compile(r"tool_calls\[\d+\]")

LINT_KINDS: dict[str, str] = {
    "undeclared-tool": "undeclared_tool",
    "non-canonical-tool-call-id": "foreign_call_id",
    "typed-marker": "marker_text",
    "unknown-tool-call-id": "unknown_tool_result",
}
"""The :func:`kimi_chat.lint` codes a finding reports, and their kinds."""


@dataclass(frozen=True)
class Finding:
    """One thing the data report says about a row: ``kind`` (a key of :data:`KINDS`), ``row`` (its 0-based
    index in the input, ``None``: not about one row), ``sample_id``, ``message``, ``path`` (the field, e.g.
    ``messages[2].tool_calls[0].function.arguments``) and ``count`` (how many, for counted kinds)."""

    kind: str
    row: int | None
    sample_id: str | None
    message: str
    path: str | None = None
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field."""
        return asdict(self)

    def __str__(self) -> str:
        where = f"row {self.row}" if self.row is not None else "dataset"
        if self.sample_id is not None and self.sample_id != str(self.row):
            where += f" (id {self.sample_id})"
        if self.path:
            where += f" {self.path}"
        return f"{self.kind}: {where}: {self.message}"


def double_encoded_arguments(arguments: Any) -> bool:
    """Whether tool-call ``arguments`` are JSON-encoded twice: a JSON string whose value is itself the JSON
    encoding of an object or array (``'"{\\"city\\": \\"Paris\\"}"'``)."""
    if not isinstance(arguments, str):
        return False
    try:
        inner = json.loads(arguments)
    except ValueError:
        return False
    if not isinstance(inner, str):
        return False
    try:
        value = json.loads(inner)
    except ValueError:
        return False
    return isinstance(value, (dict, list))


def _clean_calls(messages: Sequence[Any], declared: set[Any] | None) -> bool:
    """Whether every assistant message is a dict whose tool calls (if any) are dicts with a ``function`` dict
    naming a ``str`` function that ``declared`` holds (``None``: no tools given) and an ``id`` of the canonical
    form ``functions.NAME:IDX`` for that name: then no family's lint reports ``undeclared-tool`` or
    ``non-canonical-tool-call-id``."""
    ids: set[Any] = set()  # the ids of the last assistant turn's calls: what a tool result may answer
    for m in messages:
        if type(m) is not dict:
            return False
        role = m.get("role")
        if role == "tool" and m.get("tool_call_id") not in ids:  # lint names it (unknown-tool-call-id)
            return False
        if role != "assistant":
            continue
        calls = m.get("tool_calls")
        ids = set()
        if calls is None:
            continue
        if type(calls) is not list:
            return False
        for call in calls:
            fn = call.get("function") if type(call) is dict else None
            name = fn.get("name") if type(fn) is dict else None
            if type(name) is not str or (declared is not None and name not in declared):
                return False
            call_id = call.get("id")
            match = CANONICAL_TOOL_CALL_ID.fullmatch(call_id) if type(call_id) is str else None
            if match is None or match.group("name") != name:
                return False
            ids.add(call_id)
    return True


def lint_may_report(messages: Sequence[Any], *, dialect: str | Dialect, tools: Sequence[Any] | None = None) -> bool:
    """Whether :func:`kimi_chat.lint` may report one of the codes of :data:`LINT_KINDS` for ``messages``:
    ``False`` only when it certainly reports none and refuses nothing: messages of the render schema's
    well-formed plain shape (:func:`~kimi_chat.message_shapes.renderable_fast`) and tools it validates, every
    tool call canonical and declared (:func:`_clean_calls`), no special-token spelling of ``dialect``'s family
    anywhere in the messages, keys and roles included, searched with lint's own pattern. Anything else is
    ``True``: lint decides (and raises what it raises)."""
    d = get_dialect(dialect)
    # lint refuses what the render schema refuses (messages, tools): such rows go to lint, which raises as before
    if type(messages) is not list or not renderable_fast(messages):
        return True
    if tools is not None:
        if type(tools) is not list:
            return True
        try:
            tools = normalize_tools(tools)  # validated once per tool list (cached by its exact key)
        except Exception:
            return True
    if not _clean_calls(messages, declared_tools(tools)):
        return True
    try:
        data = marshal.dumps(messages)
    except (ValueError, RecursionError):  # not plain data
        return True
    # every string of the messages is in marshal's bytes as its UTF-8 bytes (a string seen twice may be a
    # reference to the first); read as Latin-1 those bytes are one character each, so an ASCII marker spelling
    # (every one is: tested) typed in any string is found in the text as typed
    return bool(typed_markers(d, [{"text": data.decode("latin-1")}]))


def conversation_findings(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect,
    tools: Sequence[Any] | None = None,
    row: int | None = None,
    sample_id: str | None = None,
    **options: Any,
) -> list[Finding]:
    """What one (renderable) conversation shows, apart from its samples: double-encoded tool arguments, the
    lint findings of :data:`LINT_KINDS`, and a conversation that does not end with an assistant message."""
    d = get_dialect(dialect)
    out: list[Finding] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") != "assistant":
            continue
        for j, call in enumerate(m.get("tool_calls") or ()):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping) and double_encoded_arguments(fn.get("arguments")):
                out.append(Finding(
                    "double_encoded_arguments", row, sample_id,
                    "the arguments are a JSON string holding JSON-encoded arguments: the model is trained to "
                    "write them escaped; decode them once (json.loads) before training",
                    f"messages[{i}].tool_calls[{j}].function.arguments"))
    maybe = lint_may_report(messages, dialect=d, tools=tools)
    for w in (lint(messages, dialect=d, tools=tools, add_generation_prompt=False, **options) if maybe else ()):
        kind = LINT_KINDS.get(w.code)
        if kind is not None:
            where = w.field
            call = _CALL.match(w.text) if where is None and w.code in _LINT_FIELDS else None
            if call is not None:  # lint names the call in its text: the path goes down to the field
                where = call.group() + _LINT_FIELDS[w.code]
            path = None if w.message_index is None else f"messages[{w.message_index}]" + (
                f".{where}" if where else "")
            out.append(Finding(kind, row, sample_id, w.text, path))
    out += _message_fields(messages, row, sample_id)
    out += _unanswered_calls(messages, row, sample_id)
    out += _lone_surrogates(messages, tools, row, sample_id)
    first = messages[0] if messages else None
    if isinstance(first, Mapping) and first.get("role") == "assistant":
        out.append(Finding(
            "leading_assistant", row, sample_id,
            "the conversation starts with an assistant message: no request comes before it (the official "
            "tokenizer refuses an empty prompt), so it is context only, not trained", "messages[0]"))
    last = messages[-1] if messages else None
    if not (isinstance(last, Mapping) and last.get("role") == "assistant"):
        role = last.get("role") if isinstance(last, Mapping) else None
        out.append(Finding(
            "no_final_assistant", row, sample_id,
            f"the conversation ends with a {role!r} message, not an assistant answer: what follows the last "
            "assistant message is in no sample", f"messages[{len(messages) - 1}]" if messages else "messages"))
    return out


_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
"""The keys a message's reasoning is read from (which one a dialect renders when several are given is the
renderer's business: the finding only says that texts differ)."""


def _message_fields(messages: Sequence[Any], row: int | None, sample_id: str | None) -> list[Finding]:
    """``reasoning_conflict`` for an assistant message whose reasoning keys hold different texts, and
    ``partial_weight`` for a message whose ``weight`` is a number other than 0 and 1 (not trained as weighted)."""
    out: list[Finding] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            continue
        if m.get("role") == "assistant":
            given = [(k, m[k]) for k in _REASONING_KEYS if isinstance(m.get(k), str) and m[k].strip()]
            if len({v for _, v in given}) > 1:
                keys = ", ".join(k for k, _ in given)
                out.append(Finding(
                    "reasoning_conflict", row, sample_id,
                    f"the message carries reasoning under {keys} with different text: the dialect renders one of "
                    "them and the other text is in no sample; keep the reasoning under one key",
                    f"messages[{i}]"))
        weight = m.get("weight")
        if isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight not in (0, 1):
            out.append(Finding(
                "partial_weight", row, sample_id,
                f"weight {weight!r}: the samples carry no per-token weight, so this message is trained at full "
                "weight (0 leaves it out); scale the loss per sample in the trainer if it matters",
                f"messages[{i}].weight"))
    return out


def _lone_surrogates(messages: Sequence[Any], tools: Sequence[Any] | None, row: int | None,
                     sample_id: str | None) -> list[Finding]:
    """A ``lone_surrogate`` finding per string of the messages and tools holding one (the renderer's warning
    is not seen by a dataset run: the report is where it is said)."""
    try:
        data = marshal.dumps([messages, tools])
    except (ValueError, RecursionError):  # not plain data: the renderer warns as usual
        return []
    if _SURROGATE.search(data) is None:
        return []
    out = []
    roots = [(f"messages[{i}]", m) for i, m in enumerate(messages)] + [("tools", tools)]
    for root, value in roots:
        for path, text in string_paths(to_plain(value), root):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                out.append(Finding(
                    "lone_surrogate", row, sample_id,
                    f"lone surrogate U+{ord(text[e.start]):04X} (not Unicode text): encoded as U+FFFD, as the official "
                    "tokenizer does, so the ids do not decode back to the text given; fix the source's escapes",
                    path))
    return out


def _unanswered_calls(messages: Sequence[Any], row: int | None, sample_id: str | None) -> list[Finding]:
    """An ``unanswered_tool_call`` finding per tool call (with an id) that no tool result answers before the next
    assistant or user message: the next turn is trained as if the call had no result. A conversation that ends
    while its calls wait for results is not one (``no_final_assistant`` says it ends there)."""
    out: list[Finding] = []
    pending: dict[Any, str] = {}

    def flush() -> None:
        for path in pending.values():
            out.append(Finding("unanswered_tool_call", row, sample_id,
                               "no tool result answers this call before the conversation goes on: the next turn "
                               "is trained as if the tool had not answered", path))
        pending.clear()

    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            continue
        role = m.get("role")
        if role == "tool":
            pending.pop(m.get("tool_call_id"), None)
            continue
        if role in ("assistant", "user"):
            flush()
        if role == "assistant":
            for j, call in enumerate(m.get("tool_calls") or ()):
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if isinstance(call_id, str):
                    pending[call_id] = f"messages[{i}].tool_calls[{j}]"
    return out
