"""Conversation lints: warnings a server should log before rendering a conversation.

The rules belong to the dialect's format family (its record's ``lint``, :mod:`kimi_chat.families`): the
K2 rules in :mod:`kimi_chat.families.k2.lint`, the K3 rules in :mod:`kimi_chat.families.k3.lint` (K3 never
writes tool-call ids, drops roles it does not know, closes every turn); this module holds what they share.
``render(..., strict=True)`` runs :func:`lint` and refuses exactly its errors, in every family
(:func:`check_strict`). The runner and the shared rules are :mod:`kimi_chat.validation`'s (the one validator);
this module is its ``lint`` view and re-exports them.

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

from collections.abc import Sequence
from typing import Any

from .. import markers as M
from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect
from ..messages import normalize_messages
from ..validation import (
    CANONICAL_TOOL_CALL_ID,
    ERROR_CODES,
    OPTION_CODES,
    OPTION_WARNINGS,
    LintWarning,
    Validator,
    check_strict,
    declared_tools,
    no_generation_prompt,
    option_findings,
    tool_findings,
    typed_markers,
    unterminated_last_turn,
    warn_options,
)

__all__ = ["LintWarning", "lint", "check_strict", "warn_options", "OPTION_WARNINGS", "tool_findings", "normalize_tool_call_ids",
           "CANONICAL_TOOL_CALL_ID", "ERROR_CODES", "OPTION_CODES",
           "unterminated_last_turn", "option_findings", "declared_tools", "no_generation_prompt", "typed_markers"]


def lint(
    messages: Sequence[Any],
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Sequence[Any] | None = None,
    add_generation_prompt: bool = True,
    **options: Any,
) -> list[LintWarning]:
    """Findings about ``messages`` as ``dialect`` would render them (see the module doc for the
    codes; each has a ``severity``, and ``render(..., strict=True)`` refuses exactly the errors): the
    findings of :class:`kimi_chat.validation.Validator`. The rules are the dialect's family's
    (:attr:`Family.lint <kimi_chat.families.Family.lint>`) and those every family shares.
    ``options`` are template kwargs as given to :func:`~kimi_chat.render` (``thinking=False`` for K2.5
    silences ``missing-reasoning``; kwargs the template does not read are reported). Messages the official template cannot render
    raise :class:`~kimi_chat.messages.InvalidMessagesError` (its ``findings`` are the same kind of finding)."""
    return Validator(dialect).findings(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                       options=options)


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
