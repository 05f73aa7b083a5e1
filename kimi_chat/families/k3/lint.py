"""The lint rules of the Kimi-K3 family (XTML), for :func:`kimi_chat.lint` (the family record's ``lint``:
:func:`lint_k3`).

What the official K3 encoder does differently from the K2 templates decides the rules: it never writes
tool-call ids (they only pair results with calls, so no id rule applies), it drops messages of a role it
does not know (``developer`` among them: what the OpenAI SDK sends for system instructions), it reads
``tool`` on tool results and ``tools`` on system messages (not unknown fields here), it closes every
message (no unterminated last turn), and with ``image_prompts`` a ``<|kimi_image_placeholder|>`` typed
in text takes an image's slot. Findings are ``(code, message_index, text, field)`` tuples; the codes
and their severities are those of :mod:`kimi_chat.lint`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import markers as M
from ...validation import LintWarning, declared_tools, no_generation_prompt, option_findings, typed_markers
from ...dialect_records import DialectRecord as Dialect
from ...messages import InvalidMessagesError, normalize_messages, plain_items, plain_messages, schema_problems

__all__ = ["lint_k3", "k3_findings", "K3_ROLES", "K3_FIELDS"]

Finding = tuple[str, "int | None", str, "str | None"]

K3_ROLES = frozenset({"system", "user", "assistant", "tool"})
"""The roles the official K3 encoder renders; it drops messages of any other role."""

K3_FIELDS = frozenset({("system", "tools"), ("tool", "tool"), ("tool", "id")})
"""``(role, field)`` outside the OpenAI schema that the K3 encoder reads: a system message's ``tools``
("## New Tools Available"), a tool result's ``tool`` (its tool name) and ``id`` (its call id)."""

_PLACEHOLDER = M.K3_IMAGE_PLACEHOLDER.text


def _texts(m: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, text)`` of the text the encoder splits at image placeholders in a message."""
    out: list[tuple[str, str]] = []
    content = m.get("content")
    if isinstance(content, str):
        out.append(("content", content))
    elif isinstance(content, list):
        for j, part in enumerate(content):
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append((f"content[{j}].text", part["text"]))
    for key in ("reasoning_content", "reasoning"):
        if isinstance(m.get(key), str):
            out.append((key, m[key]))
            break
    for j, call in enumerate(m.get("tool_calls") or () if m.get("role") == "assistant" else ()):
        fn = call.get("function", call) if isinstance(call, Mapping) else None
        args = fn.get("arguments") if isinstance(fn, Mapping) else None
        if isinstance(args, str):
            out.append((f"tool_calls[{j}].function.arguments", args))
        elif isinstance(args, Mapping):
            out.extend((f"tool_calls[{j}].function.arguments.{k}", v) for k, v in args.items() if isinstance(v, str))
    return out


def _schema(msgs: list[dict[str, Any]]) -> list[Finding]:
    """OpenAI-schema departures the K3 encoder does not read as features (K3_FIELDS, roles: below)."""
    out: list[Finding] = []
    known = [m for m in msgs if m.get("role") in K3_ROLES]
    where = [i for i, m in enumerate(msgs) if m.get("role") in K3_ROLES]
    try:
        plain = normalize_messages(known)
    except InvalidMessagesError as e:
        return [("invalid-field", None if i is None else where[i], problem, field) for i, field, problem in e.errors]
    for index, field, kind, problem in schema_problems(plain):
        i = None if index is None else where[index]
        role = msgs[i].get("role") if i is not None else None
        if kind == "unknown-field" and (role, field) in K3_FIELDS:
            continue
        if kind == "missing-field" and field == "tool_call_id":
            continue  # K3 pairs a result without it by position (or its `tool` / `name`)
        if kind == "missing-field" and field == "content":
            out.append(("missing-content", i, f"a {role} message without content: the encoder renders an empty body",
                        field))
        elif kind == "unknown-field":
            out.append(("unknown-field", i, "not a field of an OpenAI chat message of this role: the K3 encoder "
                        "ignores it", field))
        else:
            out.append(("invalid-field", i, problem, field))
    return out


def k3_findings(
    d: Dialect, msgs: list[dict[str, Any]], declared: set[Any] | None, add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> list[Finding]:
    """The K3 findings of plain messages (``declared``: the declared function names, ``None``
    without tools); the option and shared conversation rules are :mod:`kimi_chat.lint`'s."""
    out: list[Finding] = []
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role not in K3_ROLES:
            # a developer message is what the OpenAI SDK sends for system instructions: dropping it is
            # official behaviour a user should hear of (a warning); any other role is an error
            code = "developer-dropped" if role == "developer" else "unknown-role"
            hint = " (the OpenAI SDK's system instructions: send them as role 'system')" if role == "developer" else ""
            out.append((code, i, f"{d.name}'s official encoder drops {role!r} messages: this one is not in the "
                        f"prompt{hint}", "role"))
    out += _schema(msgs)
    if options.get("image_prompts") is not None:
        for i, m in enumerate(msgs):
            if m.get("role") not in K3_ROLES:
                continue
            for field, text in _texts(m):
                if _PLACEHOLDER in text:
                    out.append(("typed-image-placeholder", i,
                                f"{_PLACEHOLDER} typed in the text takes one of the image_prompts slots: an image's "
                                "tokens are placed where it was typed (the official encoder does so; strip it from "
                                "user text)", field))
    calls: dict[str, Any] = {}
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role == "assistant":
            calls = {}
            for j, call in enumerate(m.get("tool_calls") or ()):
                fn = call.get("function", call) if isinstance(call, Mapping) else None
                name = fn.get("name") if isinstance(fn, Mapping) else None
                if declared is not None and name not in declared:
                    out.append(("undeclared-tool", i, f"tool_calls[{j}] calls {name!r}, which is not in tools", None))
                if isinstance(call, Mapping) and call.get("id") is not None:
                    calls[str(call["id"])] = name
        elif role == "tool":
            tid = m.get("tool_call_id", m.get("id"))
            if tid is not None and str(tid) not in calls:
                out.append(("unknown-tool-call-id", i, f"tool_call_id {tid!r} matches no call of the preceding "
                            "assistant turn: the encoder keeps the results in their order and names them by "
                            "position", "tool_call_id"))
    return out


def lint_k3(
    d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None, add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> list[LintWarning]:
    """The K3 family's rules (this module's) on the messages as its encoder takes them, with the rules
    every family shares (:mod:`kimi_chat.validation`)."""
    msgs = plain_messages(messages)
    tool_list = plain_items(tools, "tools") if isinstance(tools, (list, tuple)) else None
    found = k3_findings(d, msgs, declared_tools(tool_list), add_generation_prompt, options)
    return (option_findings(d, options) + [LintWarning(c, i, t, f) for c, i, t, f in found]
            + no_generation_prompt(msgs, add_generation_prompt) + typed_markers(d, msgs))
