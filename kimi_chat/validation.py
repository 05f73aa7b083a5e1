"""One validator with modes: every check of a request's messages, tools and template options, producing one
kind of finding (:class:`~kimi_chat.findings.Finding`: code, path, message, severity).

:class:`Validator` holds a dialect and a :class:`Mode`:

* :attr:`Mode.PARITY` refuses only what the official machinery refuses (what :func:`kimi_chat.render` does by
  default): :class:`~kimi_chat.messages.InvalidMessagesError` / :class:`~kimi_chat.messages.InvalidToolsError`
  (whose :attr:`~kimi_chat.messages.InvalidMessagesError.findings` are findings) or a
  :class:`~kimi_chat.errors.RenderError` (its ``finding``: ``unrenderable``), naming the index and field;
* :attr:`Mode.STRICT` also refuses the findings of severity ``"error"`` (``render(..., strict=True)``):
  :class:`~kimi_chat.errors.StrictModeError` lists them;
* :attr:`Mode.API` is the Moonshot API contract as ``kimi-chat serve`` enforces it: the request's shape
  (:func:`api_message_findings`, :func:`api_tool_findings`), then the lint errors an OpenAI-shaped API refuses
  (:data:`LINT_REFUSED`); the first refusal is a :class:`~kimi_chat.errors.RequestError` (a 400) whose
  ``param`` is the finding's path in the body (:func:`body_param`) and whose message ends with the finding's
  code.

:meth:`Validator.findings` is what :func:`kimi_chat.lint` returns: the dialect's family's rules (passed in by
the dialect: :attr:`Family.lint <kimi_chat.families.Family.lint>`, which build on the shared rules here) and the
rules every family shares (:func:`tool_findings`). The same bad input gets the same finding (code and path) from
``render``, ``parse``, ``lint`` and ``serve``.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Final

from . import markers as M
from .caches import LRUCache
from .dialect_records import DialectRecord as Dialect, get_dialect
from .errors import KimiChatError, RenderError, RequestError, StrictModeError
from .findings import ERROR_CODES, OPTION_CODES, Finding, LintWarning
from .messages import InvalidMessagesError, normalize_tools

__all__ = [
    "Mode", "Validator", "Finding", "LintWarning", "ERROR_CODES", "OPTION_CODES", "OPTION_WARNINGS",
    "CANONICAL_TOOL_CALL_ID", "TOOL_NAME", "LINT_REFUSED", "UNREAD_OPTION_CODES",
    "option_findings", "warn_options", "tool_findings", "check_strict", "declared_tools", "no_generation_prompt",
    "typed_markers", "unterminated_last_turn", "api_message_findings", "api_tool_findings", "api_error",
    "body_param", "refuse", "check_schema", "findings_of",
]


class Mode(str, Enum):
    """What a :class:`Validator` refuses (the module doc)."""

    PARITY = "parity"
    STRICT = "strict"
    API = "api"


CANONICAL_TOOL_CALL_ID = re.compile(re.escape(M.TOOL_CALL_ID_PREFIX) + r"(?P<name>.+):(?P<index>\d+)")
"""The id form the models were trained on: ``functions.NAME:IDX``."""

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A function name under the API contract: a letter or ``_``, then letters, digits, ``_`` or ``-``; at most 64
characters (OpenAI's limit; Moonshot also refuses a leading digit, as KVV tests)."""

_BOOL_OPTIONS = frozenset({"thinking", "preserve_thinking"})
"""Template options whose templates test a bool (K3's ``thinking_effort`` etc. are strings/objects)."""

OPTION_WARNINGS: Final = "(?:" + "|".join(OPTION_CODES) + "): "
"""The start of :func:`warn_options`' messages (a ``warnings.filterwarnings`` pattern, for a caller that
reports the findings itself: the CLI)."""

UNREAD_OPTION_CODES: Final = ("unread-kwarg", "unread-thinking-kwarg", "unread-preserve-thinking")
"""Option errors the API contract drops with a warning (the template ignores the option) instead of refusing."""


def findings_of(error: BaseException) -> list[Finding]:
    """The findings an error of the validator carries (``[]`` for another error): a
    :class:`~kimi_chat.errors.StrictModeError`'s problems, an invalid input's findings, a 400's finding, a
    :class:`~kimi_chat.errors.RenderError` (the official renderer refuses the input) as ``unrenderable``."""
    if isinstance(error, StrictModeError):
        return list(error.problems)
    if isinstance(error, InvalidMessagesError):
        return error.findings
    if isinstance(error, RequestError) and error.finding is not None:
        return [error.finding]
    if isinstance(error, RenderError):
        return [error.finding]
    return []


# ----------------------------------------------------------------------------- the rules every family shares


def option_findings(d: Dialect, options: Mapping[str, Any]) -> list[Finding]:
    """Template options ``d``'s template does not read (with the closest it reads), and a non-bool switch."""
    out: list[Finding] = []
    for key, value in options.items():
        if key in d.options:
            if key in _BOOL_OPTIONS and type(value) is not bool:
                out.append(Finding("non-bool-option", None, f"{d.name} option {key!r} should be a bool, got {value!r}", key))
            continue
        reads = ", ".join(d.options) or "none"
        if key in ("enable_thinking", "reasoning_effort") and "thinking" in d.options:
            out.append(Finding(
                "unread-thinking-kwarg", None,
                f"{d.name}'s template reads 'thinking', not {key!r}: it is ignored and thinking stays "
                f"{'on' if options.get('thinking', True) is not False else 'off'} (pass thinking=...)", key,
            ))
        elif key == "preserve_thinking":
            out.append(Finding(
                "unread-preserve-thinking", None,
                f"{d.name} has no preserve_thinking: it is ignored and earlier reasoning is rendered as the "
                f"template always does (options it reads: {reads})", key,
            ))
        else:
            close = difflib.get_close_matches(key, d.options, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            out.append(Finding("unread-kwarg", None, f"{d.name}'s template does not read {key!r}: it is ignored "
                               f"(options it reads: {reads}){hint}", key))
    return out


def warn_options(d: Dialect, options: Mapping[str, Any]) -> None:
    """Give the option findings (:func:`option_findings`) as ``UserWarning``: what :func:`~kimi_chat.render`
    and the functions built on it do, the output unchanged (the template ignores the option, or reads the
    value as it is)."""
    findings = option_findings(d, options)
    if findings:
        level = _caller_level()
        for f in findings:
            warnings.warn(f"{f.code}: {f.text}", UserWarning, stacklevel=level)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside kimi_chat (the caller of the public function)."""
    frame = sys._getframe(2)  # warn_options' caller: stacklevel 2 of its warnings
    level = 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("kimi_chat."):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def tool_findings(tools: Sequence[Any] | None) -> list[Finding]:
    """``tool-without-function``: a function tool with no function (path ``tools[i].function``) or no function
    name (``tools[i].function.name``). The official templates render it as given (``render`` does too:
    parity), but no model can call it, and :func:`~kimi_chat.parse` refuses it with the same finding."""
    out = []
    for i, t in enumerate(normalize_tools(tools) or ()):
        if t.get("type") != "function":
            continue
        fn = t.get("function")
        if not isinstance(fn, Mapping) or not fn.get("name"):
            what = "no function" if fn is None else "a function without a name"
            out.append(Finding("tool-without-function", None,
                               f"tools[{i}] is a function tool with {what}: the template renders it as given, "
                               "but no model can call it (parse refuses it)",
                               f"tools[{i}].function" if fn is None else f"tools[{i}].function.name", "missing_field"))
    return out


def declared_tools(tool_list: Sequence[Any] | None) -> set[Any] | None:
    """The function names ``tools`` declares (``None`` without tools)."""
    if tool_list is None:
        return None
    out = set()
    for t in tool_list:
        fn = t.get("function") if isinstance(t, Mapping) else None
        if isinstance(fn, Mapping):
            out.add(fn.get("name"))
    return out


def no_generation_prompt(msgs: list[dict[str, Any]], add_generation_prompt: bool) -> list[Finding]:
    """``no-generation-prompt``: the conversation ends with a non-assistant turn and nothing asks for an answer."""
    if msgs and not add_generation_prompt and msgs[-1].get("role") != "assistant":
        return [Finding(
            "no-generation-prompt", len(msgs) - 1,
            f"the conversation ends with a {msgs[-1].get('role')} turn but is rendered without a generation "
            "prompt: nothing asks the model to answer (pass add_generation_prompt=True)",
        )]
    return []


_RESERVED = r"<\|reserved_token_\d+\|>"

_MARKER_TEXT_CACHE: dict[str, re.Pattern[str]] = {}
""":func:`_marker_text`'s patterns, by family name."""


def _marker_text(d: Dialect) -> re.Pattern[str]:
    """The special-token spellings of ``d``'s family's tokenizer (``typed-marker``): its markers, reserved names."""
    pattern = _MARKER_TEXT_CACHE.get(d.family)
    if pattern is None:
        markers = d.family_parts.markers.all
        pattern = re.compile("|".join([*(re.escape(m.text) for m in markers), _RESERVED]))
        _MARKER_TEXT_CACHE[d.family] = pattern
    return pattern


def typed_markers(d: Dialect, msgs: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """``typed-marker``: a special-token spelling typed in a message's text (at any depth), one finding
    per field. The prompt writes it as text; whether it stays text depends on how it is encoded."""
    find = _marker_text(d).search
    out: list[Finding] = []
    for i, m in enumerate(msgs):
        stack: list[tuple[str, Any]] = [(str(k), v) for k, v in reversed(m.items()) if k != "role"] if isinstance(m, Mapping) else []
        seen: set[int] = set()  # each container once: a value containing itself ends the walk too
        while stack:
            field, v = stack.pop()
            if not isinstance(v, str):
                if id(v) in seen:
                    continue
                seen.add(id(v))
            if isinstance(v, str):
                hit = find(v)
                if hit is not None:
                    out.append(Finding(
                        "typed-marker", i,
                        f"{hit.group()} typed in the text: the prompt writes it as text; render_tokens encodes it as "
                        "text (special_tokens='text'), but encoding the prompt text with special tokens allowed "
                        "(KimiTokenizer.encode and the official tokenizer.encode default to it) makes it the control "
                        "token, which can end the turn or fake a tool call (text joined around a dropped stray "
                        "marker can spell one too)", field))
            elif isinstance(v, Mapping):
                stack.extend((f"{field}.{k}", x) for k, x in reversed(list(v.items())))
            elif isinstance(v, (list, tuple)):
                stack.extend((f"{field}[{j}]", x) for j, x in reversed(list(enumerate(v))))
    return out


def unterminated_last_turn(d: Dialect, msgs: Sequence[Mapping[str, Any]], add_generation_prompt: bool) -> Finding | None:
    """The ``unterminated-last-turn`` finding (``None`` when it does not apply): ``d`` (0905) writes no
    ``<|im_end|>`` after the last message without a generation prompt (a prefill, as the official
    template does), so a training example ending with an assistant turn never labels its end of turn."""
    if add_generation_prompt or not d.spec.last_turn_open_without_generation_prompt or not msgs:
        return None
    if msgs[-1].get("role") != "assistant":
        return None  # no-generation-prompt says what matters there
    return Finding(
        "unterminated-last-turn", len(msgs) - 1,
        f"{d.name} writes no {M.IM_END.text} after the last message without a generation prompt (a prefill): "
        f"as training data, this assistant turn's end of turn ({M.IM_END.text}) is never labelled; "
        "with add_generation_prompt=True the template closes it (and appends the untrained generation prompt)",
    )


def check_strict(
    d: Dialect,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> None:
    """What ``strict=True`` does, in every family: :class:`Validator` in :attr:`Mode.STRICT`."""
    Validator(d, Mode.STRICT).check(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                    options=options)


# ----------------------------------------------------------------------------- the API contract (serve)


def body_param(f: Finding) -> str | None:
    """Where a finding is in a chat-completions body: its :attr:`~Finding.path`, a template option under
    ``chat_template_kwargs`` (``None``: the whole body)."""
    if f.message_index is None and f.field and f.code in OPTION_CODES:
        return f"chat_template_kwargs.{f.field}"
    return f.path or None


def api_error(f: Finding) -> RequestError:
    """The 400 of a finding: ``param`` its place in the body (:func:`body_param`), ``code`` its
    :attr:`~Finding.api_code`, the message its text followed by its code."""
    return RequestError(f"{f.text} ({f.code})", param=body_param(f), code=f.api_code or "invalid_value", finding=f)


def refuse(message: str, path: str | None, api_code: str = "invalid_value", code: str | None = None) -> RequestError:
    """A 400 for a body field no render sees (a sampling parameter...): the finding ``code`` (default
    ``invalid-parameter``) at ``path``."""
    f = Finding(code or "invalid-parameter", None, message, path, api_code)
    return RequestError(message, param=path, code=api_code, finding=f)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _empty(content: Any) -> bool:
    if content is None or content == "" or content == []:
        return True
    if isinstance(content, list):
        return all(isinstance(p, Mapping) and p.get("type") == "text" and not p.get("text") for p in content)
    return False


def _at(path: str) -> tuple[int | None, str | None]:
    """``(message_index, field)`` of a body path (``messages[2].role`` -> ``(2, "role")``)."""
    m = re.fullmatch(r"messages\[(\d+)\](?:\.(.*))?", path)
    return (int(m.group(1)), m.group(2)) if m else (None, path)


def _found(code: str, path: str, text: str, api_code: str = "invalid_value") -> Finding:
    index, field = _at(path)
    return Finding(code, index, text, field, api_code)


def api_message_findings(messages: Any) -> tuple[list[Finding], list[tuple[str, list[dict[str, Any]]]]]:
    """The messages' shape under the API contract (a non-empty list of objects with a string ``role``; a
    tool result with its ``tool_call_id``; ``tools`` only on a system message with empty ``content``): the
    first refusal (``[]``: none) and ``(where, tools)`` of every system message that declares tools."""
    if messages is None:
        return [_found("missing-field", "messages", "is required", "missing_field")], []
    if not isinstance(messages, list):
        return [_found("invalid-field", "messages", f"must be a list of messages, got {_kind(messages)}",
                       "invalid_type")], []
    if not messages:
        return [_found("invalid-field", "messages", "must hold at least one message")], []
    dynamic: list[tuple[str, list[dict[str, Any]]]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            return [_found("invalid-field", where, f"must be an object, got {_kind(m)}", "invalid_type")], dynamic
        role = m.get("role")
        if role is None:
            return [_found("missing-field", f"{where}.role", "is required", "missing_field")], dynamic
        if not isinstance(role, str):
            return [_found("invalid-field", f"{where}.role", f"must be a string, got {_kind(role)}",
                           "invalid_type")], dynamic
        if m.get("tools") is not None:
            if role != "system":
                return [_found("invalid-field", f"{where}.tools", "only a system message may declare tools "
                               f"(dynamically loaded tools), not a {role} message", "invalid_role")], dynamic
            problems = api_tool_findings(m["tools"], f"{where}.tools")
            if problems:
                return problems, dynamic
            if not _empty(m.get("content")):
                return [_found("invalid-field", f"{where}.content",
                               "a system message that declares tools must have empty content")], dynamic
            dynamic.append((f"{where}.tools", m["tools"]))
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid is None:
                return [_found("missing-tool-call-id", f"{where}.tool_call_id",
                               "a tool message needs the tool_call_id of the call it answers", "missing_field")], dynamic
            if not isinstance(tid, str) or tid == "":
                return [_found("invalid-field", f"{where}.tool_call_id", f"must be a non-empty string, got {tid!r}",
                               "invalid_type")], dynamic
    return [], dynamic


def api_tool_findings(tools: Any, where: str) -> list[Finding]:
    """A tools list under the API contract (``where``: ``tools`` or ``messages[i].tools``): each
    ``{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}`` with a
    :data:`TOOL_NAME` name and a valid JSON Schema; the first refusal (``[]``: none)."""
    if not isinstance(tools, list):
        return [_found("invalid-tool", where, f"must be a list of tools, got {_kind(tools)}", "invalid_type")]
    for j, tool in enumerate(tools):
        w = f"{where}[{j}]"
        if not isinstance(tool, dict):
            return [_found("invalid-tool", w, f"must be a tool object, got {_kind(tool)}", "invalid_type")]
        if "type" not in tool:
            return [_found("invalid-tool", f"{w}.type", "is required (\"function\")", "missing_field")]
        if tool["type"] != "function":
            return [_found("invalid-tool", f"{w}.type", f"unsupported tool type {tool['type']!r}: only \"function\" "
                           "tools are supported")]
        fn = tool.get("function")
        if fn is None:
            return [_found("tool-without-function", f"{w}.function", "is required", "missing_field")]
        if not isinstance(fn, dict):
            return [_found("invalid-tool", f"{w}.function", f"must be an object, got {_kind(fn)}", "invalid_type")]
        name = fn.get("name")
        if name is None or name == "":
            return [_found("tool-without-function", f"{w}.function.name", "is required",
                           "missing_field" if name is None else "invalid_value")]
        if not isinstance(name, str) or TOOL_NAME.fullmatch(name) is None:
            return [_found("invalid-tool", f"{w}.function.name", f"invalid function name {name!r}: it must start "
                           "with a letter or '_' and hold only letters, digits, '_' and '-', at most 64 characters")]
        desc = fn.get("description")
        if desc is not None and not isinstance(desc, str):
            return [_found("invalid-tool", f"{w}.function.description", f"must be a string, got {_kind(desc)}",
                           "invalid_type")]
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            return [_found("invalid-tool", f"{w}.function.parameters",
                           f"must be a JSON Schema object, got {_kind(params)}", "invalid_type")]
        if params is not None:
            check_schema(params, f"{w}.function.parameters")
        strict = fn.get("strict")
        if strict is not None and not isinstance(strict, bool):
            return [_found("invalid-tool", f"{w}.function.strict", f"must be true or false, got {strict!r}",
                           "invalid_type")]
    return []


def check_schema(schema: Mapping[str, Any], where: str) -> None:
    """Refuse a JSON Schema its own metaschema refuses (``{"type": "objekt"}``): a 400 naming the path in
    the schema (``tools[0].function.parameters.type``). The schema's ``$schema`` is honoured (default draft
    2020-12). Without ``jsonschema`` installed the schema is taken as given. The verdict is cached per
    schema text (a client sends the same tools with every request; a check costs about 1.5 ms)."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return
    problem = _SCHEMA_PROBLEMS.get(key)
    if problem is None:
        problem = _schema_problem(key)
        _SCHEMA_PROBLEMS.put(key, problem, weight=len(key))
    if problem:
        path, message = problem
        code = "invalid-tool" if where.startswith(("tools", "messages")) else "invalid-parameter"
        index, field = _at(where + path)
        raise api_error(Finding(code, index, f"is not a valid JSON Schema: {_printable(message, 200)}", field,
                                "invalid_schema"))


_SCHEMA_PROBLEMS: LRUCache[tuple[str, ...]] = LRUCache("servers.schema_problems", 1024, max_weight=16 << 20)
""":func:`_schema_problem` per schema text (``()``: valid)."""


def _schema_problem(text: str) -> tuple[str, ...]:
    """``(path in the schema, message)`` of the first metaschema error of the schema ``text`` (JSON);
    ``()`` when it has none."""
    try:
        import jsonschema
    except ImportError:
        return ()
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is None:
        return ()
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path), error.message


def _printable(text: str, limit: int = 80) -> str:
    """``text`` safe to echo (lone surrogates escaped, cut at ``limit`` characters)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "..."


LINT_REFUSED: dict[str, str] = {
    "unknown-role": "a role outside the OpenAI chat schema (system, user, assistant, tool, developer): an "
    "OpenAI-shaped API answers 400 for it, and the templates have no turn for it",
    "developer-role": "refused only where the template writes no turn for it (fixed role headers: Kimi-K2-Instruct "
    "rev1 and rev2 write the text with no header, run into the previous turn); the name-or-role templates "
    "(0905, Thinking, K2.5, K2.6) write it as a system turn headed 'developer', served as rendered",
    "missing-content": "the OpenAI schema requires content on system, user and tool messages",
    "missing-tool-call-id": "the OpenAI schema requires tool_calls[j].id (the template writes it empty)",
    "unknown-field": "not a field of the OpenAI message schema (the template ignores it: a typo such as tool_call "
    "would silently drop the calls)",
    "invalid-field": "a value outside the OpenAI message schema (a content part of an unknown type...)",
    "non-bool-option": "a template option the template tests as a bool, given another type",
    "tool-without-function": "a function tool without its function (or its name): the OpenAI schema requires "
    "tools[i].function.name; the template would declare it, but no model can call it",
}
"""The lint errors (:data:`~kimi_chat.findings.ERROR_CODES`) the API contract refuses, with the reason: each is
a request Moonshot's OpenAI-shaped API answers with a 400 (its schema), or one the official template cannot
render as what was asked. The other error codes (:data:`UNREAD_OPTION_CODES`: a template option the dialect
does not read) are dropped with a warning: the template ignores them, so the prompt is what the official
template renders."""


def _refused(d: Dialect, code: str) -> bool:
    if code == "developer-role":  # (the name-or-role templates head the turn with the role: a system turn)
        return getattr(d.spec, "role_names", "fixed") == "fixed"
    return code in LINT_REFUSED


# ----------------------------------------------------------------------------- the validator


class Validator:
    """The one validator: ``dialect``'s rules under ``mode`` (the module doc)."""

    def __init__(self, dialect: str | Dialect, mode: Mode | str = Mode.PARITY) -> None:
        self.dialect: Dialect = get_dialect(dialect)
        self.mode = Mode(mode)

    def findings(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                 add_generation_prompt: bool = True, options: Mapping[str, Any] | None = None) -> list[Finding]:
        """Every finding about the request (what :func:`kimi_chat.lint` returns): the dialect's family's rules,
        then the rules every family shares. Input the official machinery refuses raises (parity)."""
        d = self.dialect
        return d.family_parts.lint(d, messages, tools, add_generation_prompt, dict(options or {})) + tool_findings(tools)

    def check(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
              add_generation_prompt: bool = True, options: Mapping[str, Any] | None = None) -> list[Finding]:
        """Refuse what :attr:`mode` refuses; return the findings that are not refused.

        * parity: what the dialect's own rendering refuses (:class:`~kimi_chat.messages.InvalidMessagesError`,
          ``InvalidToolsError``, :class:`~kimi_chat.errors.RenderError`, each naming the index and field);
          returns ``[]`` (no rule beyond the official machinery's is run);
        * strict: also :class:`~kimi_chat.errors.StrictModeError` listing the findings of severity ``"error"``;
        * api: :class:`~kimi_chat.errors.RequestError` for the first refusal (see :meth:`api_options`).
        """
        options = dict(options or {})
        if self.mode is Mode.API:
            kept: list[Finding] = []
            self.api_options(messages, tools, options, kept)
            return kept
        if self.mode is Mode.PARITY:  # what the official machinery refuses is what the dialect's render refuses
            self.dialect.render(messages, tools=tools, add_generation_prompt=add_generation_prompt, **options)
            return []
        found = self.findings(messages, tools=tools, add_generation_prompt=add_generation_prompt, options=options)
        errors = [f for f in found if f.severity == "error"]
        if errors:
            raise StrictModeError(errors)
        return found

    def api_options(self, messages: Any, tools: Any, options: Mapping[str, Any], kept: list[Finding]) -> dict[str, Any]:
        """The API contract on a request's messages, tools and template options: the first of the shape
        refusals (:func:`api_message_findings`, :func:`api_tool_findings`), then :meth:`api_refusals`."""
        problems, _ = api_message_findings(messages)
        if problems:
            raise api_error(problems[0])
        if tools is not None:
            problems = api_tool_findings(tools, "tools")
            if problems:
                raise api_error(problems[0])
        return self.api_refusals(messages, tools, options, kept)

    def api_refusals(self, messages: Any, tools: Any, options: Mapping[str, Any], kept: list[Finding]) -> dict[str, Any]:
        """The findings of well-shaped messages under the API contract: the first lint error
        :data:`LINT_REFUSED` names (or input the official machinery refuses) is a
        :class:`~kimi_chat.errors.RequestError` (:func:`api_error`); a template option the dialect does not
        read is dropped, and a lint error served as rendered (a developer message on a template that writes it
        as a system turn) kept, each added to ``kept``. Returns the options without the dropped ones."""
        try:
            found = self.findings(messages, tools=tools, add_generation_prompt=True, options=options)
        except InvalidMessagesError as e:
            raise api_error(e.findings[0]) from None
        except (KimiChatError, TypeError, ValueError) as e:
            raise RequestError(str(e)) from None
        out = dict(options)
        for f in found:
            if f.severity != "error":
                continue
            if f.code in UNREAD_OPTION_CODES and f.field in out:
                del out[f.field]
                kept.append(f)
                continue
            if f.message_index is not None and not _refused(self.dialect, f.code):
                kept.append(f)
                continue
            raise api_error(f)
        return out
