"""The lint rules of the Kimi-K2 family, for :func:`kimi_chat.lint` (the family record's ``lint``).

The codes and their severities are :mod:`kimi_chat.checks.lint`'s (its module doc lists them); what every
family shares (options, a missing generation prompt, typed markers) comes from the validator
(:mod:`kimi_chat.validation`), which runs these rules through the family record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ... import markers as M
from ...validation import (
    CANONICAL_TOOL_CALL_ID,
    LintWarning,
    declared_tools,
    no_generation_prompt,
    option_findings,
    typed_markers,
    unterminated_last_turn,
)
from ...dialect_records import DialectRecord as Dialect
from ...messages import normalize_messages, normalize_tools, schema_problems
from ...nesting import deep_sort_dict
from .tools_ts import typescript_failure

__all__ = ["lint_k2"]

_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


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


def _role_rendering(d: Dialect, role: str) -> str:
    """How ``d``'s template writes a message of a role it has no branch for."""
    if d.spec.role_names == "fixed":
        return "the template writes no header for it: its text runs into the previous turn"
    return (f"the template writes it as a system turn, {M.IM_SYSTEM.text}{role}{M.IM_MIDDLE.text}"
            + ("" if d.spec.default_system is None else ", and a first such message does not replace the default system prompt"))


def _schema_findings(d: Dialect, msgs: list[dict[str, Any]]) -> list[LintWarning]:
    out: list[LintWarning] = []
    for index, field, kind, problem in schema_problems(msgs):
        m = msgs[index] if index is not None else {}
        if kind == "unknown-role":
            role = m.get("role")
            code = "developer-role" if role == "developer" else "unknown-role"
            text = f"role {role!r} is not an OpenAI chat role the template has a branch for: {_role_rendering(d, str(role))}"
        elif kind == "missing-field" and field == "content":
            code, text = "missing-content", f"a {m.get('role')} message without content: the template renders an empty body"
        elif kind == "missing-field" and field == "tool_call_id":
            if d.spec.tool_result_header is None:
                continue  # the dialect does not write it
            code, text = "missing-tool-call-id", "a tool result without tool_call_id: the template writes '## Return of ' and no id"
        elif kind == "unknown-field":
            code, text = "unknown-field", "not a field of an OpenAI chat message of this role: the template ignores it"
        else:
            code, text = "invalid-field", problem
        out.append(LintWarning(code, index, text, field))
    return out


def lint_k2(
    d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None, add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> list[LintWarning]:
    """The K2 family's rules (:func:`kimi_chat.lint`'s codes) on the messages as its templates take them."""
    return _lint(d, normalize_messages(messages), normalize_tools(tools), add_generation_prompt, options)


def _lint(
    d: Dialect,
    msgs: list[dict[str, Any]],
    tool_list: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> list[LintWarning]:
    out = (option_findings(d, options) + _schema_findings(d, msgs) + no_generation_prompt(msgs, add_generation_prompt)
           + typed_markers(d, msgs))
    end = unterminated_last_turn(d, msgs, add_generation_prompt)
    if end is not None:
        out.append(end)
    if d.spec.tools_typescript and tool_list:
        failure = typescript_failure(deep_sort_dict(tool_list) if d.spec.sort_tool_keys else tool_list)
        if failure is not None:
            out.append(LintWarning(
                "tools-not-typescript", None,
                f"the official {d.name} tokenizer cannot write these tools as its TypeScript declaration "
                f"({failure}): it catches the failure and declares them as JSON, which the model sees as is",
                "tools",
            ))

    declared = declared_tools(tool_list)

    seen: dict[str, int] = {}  # call id -> index of the assistant message that made it
    pending: Counter[str] = Counter()  # call ids not answered yet
    regenerated: dict[str, str] = {}  # given id -> id the template writes (rev2)
    writes_ids = d.spec.tool_calls and d.spec.tool_call_ids == "given"
    for i, m in enumerate(msgs):
        role = m["role"]
        calls = (m.get("tool_calls") or []) if role == "assistant" else []
        if calls and not d.spec.tool_calls:
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
                if writes_ids:
                    out.append(LintWarning("missing-tool-call-id", i, f"{d.name} writes each tool call's id into "
                                           "the prompt; this call has none (rendered empty)", f"tool_calls[{j}].id"))
                continue
            if call_id in seen:
                out.append(LintWarning(
                    "duplicate-tool-call-id", i,
                    f"tool_calls[{j}].id {call_id!r} was already used by messages[{seen[call_id]}]: "
                    "tool results cannot tell the calls apart",
                ))
            seen[call_id] = i
            pending[call_id] += 1
            if d.spec.tool_call_ids == "regenerate":
                regenerated[call_id] = M.tool_call_id(name, j)
            elif d.spec.tool_calls and not _is_canonical(call_id, name):
                out.append(LintWarning(
                    "non-canonical-tool-call-id", i,
                    f"tool_calls[{j}].id {call_id!r} is not of the form functions.{name}:IDX; the model imitates "
                    "the ids in its history and may emit headers parsers cannot read "
                    "(kimi_chat.normalize_tool_call_ids rewrites calls and results consistently)",
                ))
        if role == "tool" and "tool_call_id" in m:
            tid = m["tool_call_id"]
            if pending[tid] <= 0:
                why = ("answers a call that already has its result" if tid in seen
                       else "matches no earlier tool call")
                out.append(LintWarning("unknown-tool-call-id", i, f"tool_call_id {tid!r} {why}", "tool_call_id"))
            else:
                pending[tid] -= 1
            if tid in regenerated and regenerated[tid] != tid:
                out.append(LintWarning(
                    "tool-result-id-rewritten", i,
                    f"{d.name} writes the call as {regenerated[tid]!r} but this result as {tid!r}: "
                    "the prompt pairs them wrongly",
                ))

    if d.reasoning:
        read = {k: v for k, v in options.items() if k in d.options}
        thinking = read.get("thinking", True)
        preserve = d.spec.keeps_every_reasoning or read.get("preserve_thinking", False)
        if d.spec.think == "history_split_prefilled" and thinking is False and not preserve:
            return out
        start = -1 if (d.spec.think == "history_split_prefilled" and preserve) else _history_split(msgs)
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
