"""Conversation lints: warnings a server should log before rendering a conversation.

The prompt still renders; these are requests the model will likely answer badly:

* ``no-generation-prompt``: the conversation ends with a user (or tool / system) turn but is rendered
  without a generation prompt: nothing asks the model to answer;
* ``unknown-tool-call-id``: a tool result whose ``tool_call_id`` matches no earlier tool call;
* ``duplicate-tool-call-id``: two tool calls with the same id (their results cannot be told apart);
* ``non-canonical-tool-call-id``: a tool-call id not of the ``functions.NAME:IDX`` form the models were
  trained on: the model imitates the ids in its history, and ``call_abc``-style ids make K2 emit
  tool-call headers parsers cannot read. :func:`normalize_tool_call_ids` rewrites them;
* ``tool-result-id-rewritten``: (dialects that regenerate ids, rev2) the template rewrites the call's id
  but writes the result's ``tool_call_id`` as given, so the two disagree in the prompt;
* ``tool-calls-dropped``: (rev1) the template has no tool-call support and drops the calls;
* ``undeclared-tool``: a call to a function that is not in ``tools`` (when tools are given);
* ``missing-reasoning``: a Thinking dialect given a tool loop (assistant turns with tool calls after
  the last plain assistant turn, whose reasoning the template keeps) without ``reasoning_content``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import markers as M
from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .messages import normalize_messages, normalize_tools

__all__ = ["LintWarning", "lint", "normalize_tool_call_ids", "CANONICAL_TOOL_CALL_ID"]

CANONICAL_TOOL_CALL_ID = re.compile(re.escape(M.TOOL_CALL_ID_PREFIX) + r"(?P<name>.+):(?P<index>\d+)")
"""The id form the models were trained on: ``functions.NAME:IDX``."""

_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


@dataclass(frozen=True)
class LintWarning:
    """One warning. ``message_index`` is the message it is about (``None``: the whole request)."""

    code: str
    message_index: int | None
    text: str

    def __str__(self) -> str:
        where = f"messages[{self.message_index}]: " if self.message_index is not None else ""
        return f"{self.code}: {where}{self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message_index": self.message_index, "text": self.text}


def _is_canonical(call_id: Any, name: Any) -> bool:
    if not isinstance(call_id, str):
        return False
    m = CANONICAL_TOOL_CALL_ID.fullmatch(call_id)
    return m is not None and m.group("name") == name


def _history_split(msgs: Sequence[Mapping[str, Any]]) -> int:
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i]["role"] == "assistant" and not msgs[i].get("tool_calls"):
            return i
    return -1


def lint(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Sequence[Any] | None = None,
    add_generation_prompt: bool = True,
    **options: Any,
) -> list[LintWarning]:
    """Warnings about ``messages`` as ``dialect`` would render them (see the module doc for the
    codes). ``options`` are the dialect's template options (``thinking=False`` for K2.5 silences
    ``missing-reasoning``). Invalid messages raise :class:`~kimi_chat.messages.InvalidMessagesError`."""
    d = get_dialect(dialect)
    msgs = normalize_messages(messages)
    tool_list = normalize_tools(tools)
    out: list[LintWarning] = []

    if msgs and not add_generation_prompt and msgs[-1]["role"] != "assistant":
        out.append(LintWarning(
            "no-generation-prompt", len(msgs) - 1,
            f"the conversation ends with a {msgs[-1]['role']} turn but is rendered without a generation "
            "prompt: nothing asks the model to answer (pass add_generation_prompt=True)",
        ))

    declared = None
    if tool_list is not None:
        declared = {t.get("function", {}).get("name") for t in tool_list if isinstance(t.get("function"), Mapping)}

    seen: dict[str, int] = {}  # call id -> index of the assistant message that made it
    regenerated: dict[str, str] = {}  # given id -> id the template writes (rev2)
    non_canonical = 0
    for i, m in enumerate(msgs):
        role = m["role"]
        calls = (m.get("tool_calls") or []) if role == "assistant" else []
        if calls and not d.tool_calls:
            out.append(LintWarning(
                "tool-calls-dropped", i,
                f"{d.name} has no tool-call support: these {len(calls)} tool call(s) are not rendered "
                "and the model sees results of calls it never made",
            ))
        for j, call in enumerate(calls):
            fn = call.get("function") or {}
            name = fn.get("name")
            call_id = call.get("id")
            if declared is not None and name not in declared:
                out.append(LintWarning("undeclared-tool", i, f"tool_calls[{j}] calls {name!r}, which is not in tools"))
            if call_id is None:
                continue
            if call_id in seen:
                out.append(LintWarning(
                    "duplicate-tool-call-id", i,
                    f"tool_calls[{j}].id {call_id!r} was already used by messages[{seen[call_id]}]: "
                    "tool results cannot tell the calls apart",
                ))
            seen[call_id] = i
            if d.tool_call_ids == "regenerate":
                regenerated[call_id] = M.tool_call_id(name, j)
            elif d.tool_calls and not _is_canonical(call_id, name):
                non_canonical += 1
                out.append(LintWarning(
                    "non-canonical-tool-call-id", i,
                    f"tool_calls[{j}].id {call_id!r} is not of the form functions.{name}:IDX; the model imitates "
                    "the ids in its history and may emit headers parsers cannot read "
                    "(kimi_chat.normalize_tool_call_ids rewrites calls and results consistently)",
                ))
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in seen:
                out.append(LintWarning(
                    "unknown-tool-call-id", i,
                    f"tool_call_id {tid!r} matches no earlier tool call",
                ))
            elif tid in regenerated and regenerated[tid] != tid:
                out.append(LintWarning(
                    "tool-result-id-rewritten", i,
                    f"{d.name} writes the call as {regenerated[tid]!r} but this result as {tid!r}: "
                    "the prompt pairs them wrongly",
                ))

    if d.reasoning:
        thinking = options.get("thinking", True)
        preserve = options.get("preserve_thinking", False) if d.reads_preserve_thinking else False
        if d.think == "k25" and thinking is False and not preserve:
            return out
        start = -1 if (d.think == "k25" and preserve) else _history_split(msgs)
        for i in range(start + 1, len(msgs)):
            m = msgs[i]
            if m["role"] == "assistant" and m.get("tool_calls") and not any(m.get(k) for k in _REASONING_KEYS):
                out.append(LintWarning(
                    "missing-reasoning", i,
                    f"{d.name} keeps the reasoning of this tool-loop turn but it has no reasoning_content: "
                    "the prompt shows an empty <think></think> where the model's reasoning was "
                    "(send the reasoning back with the assistant turn)",
                ))
    return out


def normalize_tool_call_ids(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """``messages`` with every tool-call id rewritten as ``functions.NAME:IDX`` (IDX a running
    counter across the conversation, as the models were trained) and each tool result's
    ``tool_call_id`` rewritten to match its call.

    A result is matched with the latest call that had its id (results of a turn that reused one id
    for several calls are matched in order). Results whose id matches no call keep it. Returns new
    dicts; the input is never modified. Invalid messages raise
    :class:`~kimi_chat.messages.InvalidMessagesError`.
    """
    out = [dict(m) for m in normalize_messages(messages)]  # validated (InvalidMessagesError), copied
    counter = 0
    pending: dict[Any, deque[str]] = {}
    for k, m in enumerate(out):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        calls = m.get("tool_calls")
        if role == "assistant" and calls:
            fresh: dict[Any, deque[str]] = {}
            new_calls = []
            for call in calls:
                call = dict(call)
                fn = call.get("function") or {}
                new_id = M.tool_call_id(fn.get("name"), counter)
                counter += 1
                if call.get("id") is not None:
                    fresh.setdefault(call["id"], deque()).append(new_id)
                call["id"] = new_id
                new_calls.append(call)
            m["tool_calls"] = new_calls
            pending.update(fresh)
        elif role == "tool" and m.get("tool_call_id") in pending:
            ids = pending[m["tool_call_id"]]
            m["tool_call_id"] = ids.popleft() if len(ids) > 1 else ids[0]
        out[k] = m
    return out
