"""Conversation lints: warnings a server should log before rendering a conversation.

The rules belong to the dialect's format family (its record's ``lint``, :mod:`kimi_chat.families`): the
K2 rules in :mod:`kimi_chat.families.k2.lint`, the K3 rules in :mod:`kimi_chat.families.k3.lint` (K3 never
writes tool-call ids, drops roles it does not know, closes every turn); this module holds what they share.
``render(..., strict=True)`` runs :func:`lint` and refuses exactly its errors, in every family
(:func:`check_strict`).

The prompt still renders; these are requests the model will likely answer badly:

* ``unterminated-last-turn``: (0905, the default) rendered without a generation prompt, the last
  message gets no ``<|im_end|>``, as the official template does (a prefill): as training data the last
  assistant turn's end of turn is never labelled (``render_tokens`` warns too);
* ``tools-not-typescript``: (K2.5, K2.6) the official TypeScript tool encoder fails on these tools (a
  ``$ref`` it cannot resolve...): the tokenizer catches it and declares them as JSON, as rendered;
* ``typed-marker``: a special-token spelling of the family's tokenizer (``<|im_end|>``...) typed in a
  message's text: written as text, encoded as text by ``render_tokens``, but made the control token by
  an encode with special tokens allowed (``KimiTokenizer.encode``'s default, as the official one);
* ``typed-image-placeholder``: (K3, with ``image_prompts``) ``<|kimi_image_placeholder|>`` typed in a
  message's text takes an image slot: the image's tokens land where it was typed;

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

Requests the official template renders but that are not what the caller likely meant (severity
``"error"``: ``render(..., strict=True)`` refuses exactly these; the default renders them as the
official template does):

* ``unknown-role``: a role the templates have no branch for (``function``, ``moderator``...); the text
  says how the dialect's template writes it; ``developer-role``: the same for ``developer`` (what
  newer OpenAI clients send in place of ``system``); K3's encoder drops such a message entirely;
* ``missing-content``: a system / user / tool message without ``content`` (rendered empty);
* ``missing-tool-call-id``: a tool call without ``id`` where the dialect writes ids (rendered empty),
  or a tool result without ``tool_call_id`` (``## Return of `` followed by nothing);
* ``unknown-field``: a message field the OpenAI schema has not (the template ignores it: a typo such
  as ``tool_call`` silently drops the calls);
* ``invalid-field``: any other departure from the OpenAI schema (a content part of an unknown type...);
* ``unread-kwarg``: a template kwarg the dialect's template does not read (ignored);
  ``unread-thinking-kwarg``: ``enable_thinking`` / ``reasoning_effort`` given to a dialect that reads
  ``thinking`` (thinking stays on); ``unread-preserve-thinking``: ``preserve_thinking`` given to a
  dialect without it; ``non-bool-option``: a read option that is not a bool (``render`` gives these
  four as ``UserWarning`` too, the output unchanged: :func:`warn_options`);
* ``tool-without-function``: a function tool with no ``function`` (or no name): the template declares
  it as given, no model can call it, and ``parse`` refuses it.
"""

from __future__ import annotations

import difflib
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import markers as M
from ..dialects import DEFAULT_DIALECT, Dialect, get_dialect
from ..errors import StrictModeError
from ..findings import ERROR_CODES, LintWarning
from ..messages import normalize_messages, normalize_tools

__all__ = ["LintWarning", "lint", "check_strict", "warn_options", "OPTION_WARNINGS", "tool_findings", "normalize_tool_call_ids",
           "CANONICAL_TOOL_CALL_ID", "ERROR_CODES",
           "unterminated_last_turn", "option_findings", "declared_tools", "no_generation_prompt", "typed_markers"]

CANONICAL_TOOL_CALL_ID = re.compile(re.escape(M.TOOL_CALL_ID_PREFIX) + r"(?P<name>.+):(?P<index>\d+)")
"""The id form the models were trained on: ``functions.NAME:IDX``."""

_BOOL_OPTIONS = frozenset({"thinking", "preserve_thinking"})
"""Template options whose templates test a bool (K3's ``thinking_effort`` etc. are strings/objects)."""

def option_findings(d: Dialect, options: Mapping[str, Any]) -> list[LintWarning]:
    out: list[LintWarning] = []
    for key, value in options.items():
        if key in d.options:
            if key in _BOOL_OPTIONS and type(value) is not bool:
                out.append(LintWarning("non-bool-option", None, f"{d.name} option {key!r} should be a bool, got {value!r}", key))
            continue
        reads = ", ".join(d.options) or "none"
        if key in ("enable_thinking", "reasoning_effort") and "thinking" in d.options:
            out.append(LintWarning(
                "unread-thinking-kwarg", None,
                f"{d.name}'s template reads 'thinking', not {key!r}: it is ignored and thinking stays "
                f"{'on' if options.get('thinking', True) is not False else 'off'} (pass thinking=...)", key,
            ))
        elif key == "preserve_thinking":
            out.append(LintWarning(
                "unread-preserve-thinking", None,
                f"{d.name} has no preserve_thinking: it is ignored and earlier reasoning is rendered as the "
                f"template always does (options it reads: {reads})", key,
            ))
        else:
            close = difflib.get_close_matches(key, d.options, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            out.append(LintWarning("unread-kwarg", None, f"{d.name}'s template does not read {key!r}: it is ignored "
                                   f"(options it reads: {reads}){hint}", key))
    return out


OPTION_CODES: Final = ("unread-kwarg", "unread-thinking-kwarg", "unread-preserve-thinking", "non-bool-option")
"""The codes of :func:`option_findings`: what :func:`warn_options` warns, as ``CODE: text``."""
OPTION_WARNINGS: Final = "(?:" + "|".join(OPTION_CODES) + "): "
"""The start of those warnings' messages (a ``warnings.filterwarnings`` pattern, for a caller that reports
the lint findings itself: the CLI)."""


def warn_options(d: Dialect, options: Mapping[str, Any]) -> None:
    """Give lint's option findings (:func:`option_findings`: an option the dialect's template does not
    read, with the closest it reads; a non-bool switch) as ``UserWarning``: what :func:`~kimi_chat.render`
    and the functions built on it do, the output unchanged (the template ignores the option, or reads
    the value as it is)."""
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


def lint(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Sequence[Any] | None = None,
    add_generation_prompt: bool = True,
    **options: Any,
) -> list[LintWarning]:
    """Findings about ``messages`` as ``dialect`` would render them (see the module doc for the
    codes; each has a ``severity``, and ``render(..., strict=True)`` refuses exactly the errors).
    The rules are the dialect's family's (:attr:`Family.lint <kimi_chat.families.Family.lint>`).
    ``options`` are template kwargs as given to :func:`~kimi_chat.render` (``thinking=False`` for K2.5
    silences ``missing-reasoning``; kwargs the template does not read are reported). Messages the official template cannot render
    raise :class:`~kimi_chat.messages.InvalidMessagesError`."""
    d = get_dialect(dialect)
    return d.family_parts.lint(d, messages, tools, add_generation_prompt, options) + tool_findings(tools)


def tool_findings(tools: Sequence[Any] | None) -> list[LintWarning]:
    """``tool-without-function``: a function tool with no function (or no function name). The official
    templates render it as given (``render`` does too: parity), but no model can call it, and
    :func:`~kimi_chat.parse` refuses it (:class:`~kimi_chat.messages.InvalidToolsError`, as
    ``render(strict=True)`` does)."""
    out = []
    for i, t in enumerate(normalize_tools(tools) or ()):
        if t.get("type") != "function":
            continue
        fn = t.get("function")
        if not isinstance(fn, Mapping) or not fn.get("name"):
            what = "no function" if fn is None else "a function without a name"
            out.append(LintWarning("tool-without-function", None,
                                   f"tools[{i}] is a function tool with {what}: the template renders it as given, "
                                   "but no model can call it (parse refuses it)", f"tools[{i}].function"))
    return out


def check_strict(
    d: Dialect,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> None:
    """What ``strict=True`` does, in every family: run :func:`lint` and raise
    :class:`~kimi_chat.errors.StrictModeError` listing its findings of severity ``"error"``, if any."""
    errors = [w for w in lint(messages, dialect=d, tools=tools, add_generation_prompt=add_generation_prompt,
                              **options) if w.severity == "error"]
    if errors:
        raise StrictModeError(errors)


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


def no_generation_prompt(msgs: list[dict[str, Any]], add_generation_prompt: bool) -> list[LintWarning]:
    if msgs and not add_generation_prompt and msgs[-1].get("role") != "assistant":
        return [LintWarning(
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


def typed_markers(d: Dialect, msgs: Sequence[Mapping[str, Any]]) -> list[LintWarning]:
    """``typed-marker``: a special-token spelling typed in a message's text (at any depth), one finding
    per field. The prompt writes it as text; whether it stays text depends on how it is encoded."""
    find = _marker_text(d).search
    out: list[LintWarning] = []
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
                    out.append(LintWarning(
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


def unterminated_last_turn(d: Dialect, msgs: Sequence[Mapping[str, Any]], add_generation_prompt: bool) -> LintWarning | None:
    """The ``unterminated-last-turn`` finding (``None`` when it does not apply): ``d`` (0905) writes no
    ``<|im_end|>`` after the last message without a generation prompt (a prefill, as the official
    template does), so a training example ending with an assistant turn never labels its end of turn."""
    if add_generation_prompt or not d.spec.last_turn_open_without_generation_prompt or not msgs:
        return None
    if msgs[-1].get("role") != "assistant":
        return None  # no-generation-prompt says what matters there
    return LintWarning(
        "unterminated-last-turn", len(msgs) - 1,
        f"{d.name} writes no {M.IM_END.text} after the last message without a generation prompt (a prefill): "
        f"as training data, this assistant turn's end of turn ({M.IM_END.text}) is never labelled; "
        "with add_generation_prompt=True the template closes it (and appends the untrained generation prompt)",
    )


def normalize_tool_call_ids(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """``messages`` with every tool-call id rewritten as ``functions.NAME:IDX`` (IDX a running
    counter across the conversation, as the models were trained) and each tool result's
    ``tool_call_id`` rewritten to match its call.

    A result is matched with the latest call that had its id. When a turn reused one id for several
    calls, a result that names its function (``name``) is matched with the first unanswered call of
    that function, and results without one with the calls in order. Results whose id matches no call
    keep it. Returns new
    dicts; the input is never modified. Invalid messages raise
    :class:`~kimi_chat.messages.InvalidMessagesError`.
    """
    out = [dict(m) for m in normalize_messages(messages)]  # validated (InvalidMessagesError), copied
    counter = 0
    pending: dict[Any, list[tuple[Any, str]]] = {}  # old id -> unanswered (function name, new id)
    for k, m in enumerate(out):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        calls = m.get("tool_calls")
        if role == "assistant" and calls:
            fresh: dict[Any, list[tuple[Any, str]]] = {}
            new_calls = []
            for call in calls:
                call = dict(call)
                fn = call.get("function") or {}
                new_id = M.tool_call_id(fn.get("name"), counter)
                counter += 1
                if call.get("id") is not None:
                    fresh.setdefault(call["id"], []).append((fn.get("name"), new_id))
                call["id"] = new_id
                new_calls.append(call)
            m["tool_calls"] = new_calls
            pending.update(fresh)
        elif role == "tool" and m.get("tool_call_id") in pending:
            m["tool_call_id"] = _answered_call(pending[m["tool_call_id"]], m.get("name"))
        out[k] = m
    return out


def _answered_call(candidates: list[tuple[Any, str]], name: Any) -> str:
    """The new id of the call a tool result answers, among the unanswered ``(function name, new id)``
    calls that shared its old id: the first of the function the result names, else the first. It is
    taken off the list unless it is the last one (later results with that id still name it)."""
    j = next((j for j, (fn, _) in enumerate(candidates) if name is not None and fn == name), 0)
    return candidates.pop(j)[1] if len(candidates) > 1 else candidates[j][1]
