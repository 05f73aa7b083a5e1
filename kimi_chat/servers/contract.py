"""The request contract of a Kimi chat-completions endpoint: an OpenAI ``/v1/chat/completions`` body ->
a validated :class:`ChatRequest`, or a :class:`RequestError` (an OpenAI-shaped 400 naming the field).

The contract is Moonshot's, as its Kimi Vendor Verifier (KVV, ``../shared/kvv``) tests it:

* ``messages``: a non-empty list of objects. The errors :func:`kimi_chat.lint` reports for the dialect that
  leave the OpenAI message schema (an unknown role, a missing ``content``, a field the template does not
  read...: :data:`~kimi_chat.servers._fields.LINT_REFUSED`, each with its reason) are refused, naming
  ``messages[i].FIELD``; so is a tool result without ``tool_call_id`` (in every family: K3's encoder would
  pair it by position, but the request is malformed). A ``developer`` message is served where the template
  writes it as a turn (the K2 name-or-role templates: a system turn headed ``developer``; Kimi-K3's encoder
  drops it) and refused where it writes no header (Kimi-K2-Instruct rev1 / rev2);
* tools: ``tools`` (request level) and a system message's ``tools`` (Kimi-K3's dynamically loaded
  tools; that message's ``content`` must be empty) and nowhere else: each a ``{"type": "function",
  "function": {"name", "description"?, "parameters"?, "strict"?}}`` with a name matching
  :data:`TOOL_NAME`, names unique across all of them;
* ``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` (needs at least one tool, request level or
  dynamic) or a named function ``{"type": "function", "function": {"name": ...}}`` that is declared;
* ``response_format``: ``{"type": "text" | "json_object" | "json_schema"}``; ``json_schema`` needs a
  ``json_schema`` object with a ``name`` (string) and a ``schema`` (object), ``strict`` a bool if given;
* ``thinking`` (``{"type": "enabled" | "disabled", "keep": "all", "effort": "low" | "high" | "max"}``),
  ``reasoning_effort`` (used where ``thinking.effort`` is absent: the object's effort wins) and
  ``chat_template_kwargs`` (the open-source form, e.g. ``{"thinking": false}``) become the dialect's
  render options (:func:`body_options`); a field the dialect's template does not read is a warning
  (:attr:`ChatRequest.warnings`), not an error;
* sampling: ``temperature``, ``top_p``, ``presence_penalty``, ``frequency_penalty``, ``n``, ``seed``,
  ``stop``, ``max_tokens`` / ``max_completion_tokens``, ``stream``, ``stream_options.include_usage``,
  ``parallel_tool_calls``, each type- and range-checked as OpenAI documents them. Under
  ``contract="moonshot"`` the parameters Moonshot fixes are enforced as KVV ``tests/params`` expects
  (:data:`MOONSHOT_FIXED`: ``temperature`` within [0, 1], ``top_p`` 0.95, both penalties 0, ``n`` 1; any
  other value is a 400); under ``contract="open"`` (the default) any valid value passes through.

:func:`prompt_tokens` is ``usage.prompt_tokens`` as Moonshot counts it. The CLI reads request bodies
with the same code (:func:`body_options`; ``kimi_chat/cli/_body.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import markers as M
from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import RequestError
from ..findings import Finding
from ._fields import (
    MOONSHOT_FIXED,
    MOONSHOT_TEMPERATURE,
    TOOL_NAME,
    check_json_values,
    check_messages,
    check_response_format,
    check_sampling,
    check_tool_choice,
    check_tools,
    lint_refusals,
)

__all__ = [
    "RequestError",
    "ChatRequest",
    "read_chat_request",
    "prompt_tokens",
    "body_options",
    "PROMPT_FIELDS",
    "CONTRACTS",
    "MOONSHOT_FIXED",
    "MOONSHOT_TEMPERATURE",
    "TOOL_NAME",
]

CONTRACTS = ("open", "moonshot")
"""The contracts :func:`read_chat_request` enforces (see the module doc)."""

PROMPT_FIELDS = ("thinking", "reasoning_effort", "tool_choice", "response_format")
"""The body fields :func:`body_options` reads."""

_THINKING_KEYS = ("type", "keep", "effort")
OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
"""The ``reasoning_effort`` values OpenAI documents (a dialect with thinking efforts reads its own)."""
_K3_TOOL_CHOICES = ("required", "none")
_K3_RESPONSE_FORMATS = ("json_object", "json_schema")


@dataclass(frozen=True)
class ChatRequest:
    """A validated chat-completions request: everything generation needs.

    ``tools`` are the request-level tools (what the prompt declares up front); a system message's
    ``tools`` stay in ``messages`` (the K3 encoder declares them there): :attr:`callable_tools` is every
    tool the model may call, for the constraint and the parser. ``render_options`` are the dialect's
    template options (``thinking``, ``thinking_effort``, ``preserve_thinking``, K3's ``tool_choice`` /
    ``response_format``...). ``max_tokens`` is ``max_completion_tokens`` or ``max_tokens`` (``None``:
    the server's default). ``warnings`` are request fields that do not change this dialect's prompt."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    parallel_tool_calls: bool
    response_format: dict[str, Any] | None
    render_options: dict[str, Any]
    stream: bool
    include_usage: bool
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    seed: int | None
    stop: list[str]
    n: int
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    logit_bias: dict[int, float] | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    max_tokens_param: str = "max_tokens"
    """The field the client gave ``max_tokens`` in (``max_completion_tokens`` or ``max_tokens``): an
    error about it names that one."""
    dynamic_tools: list[dict[str, Any]] = field(default_factory=list)
    warnings: tuple[str, ...] = ()

    @property
    def callable_tools(self) -> list[dict[str, Any]] | None:
        """Request-level tools, then the system messages' tools in message order (``None``: none)."""
        out = [*(self.tools or ()), *self.dynamic_tools]
        return out or None

    @property
    def thinking(self) -> bool:
        """Whether thinking is on for this request (the render option, default on)."""
        return self.render_options.get("thinking", True) is not False


# ----------------------------------------------------------------------------- body -> render options


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _thinking(body: Mapping[str, Any], d: Dialect, out: dict[str, tuple[Any, str]],
              warn: Callable[[str], None]) -> bool:
    """Read the ``thinking`` object into ``out``; return whether thinking is enabled."""
    obj = body.get("thinking")
    if obj is None:
        return True
    if not isinstance(obj, dict):
        raise RequestError('the request\'s thinking must be an object {"type": "enabled" | "disabled", '
                           f'"effort": ...}} (Moonshot\'s API), got {_dump(obj)}', param="thinking",
                           code="invalid_type")
    kind = obj.get("type", "enabled")
    if kind not in ("enabled", "disabled"):
        raise RequestError(f'the request\'s thinking.type must be "enabled" or "disabled", got {_dump(kind)}',
                           param="thinking.type")
    on = kind == "enabled"
    for key in obj:
        if key not in _THINKING_KEYS:
            warn(f"the request's thinking.{key} is not a field of Moonshot's thinking object "
                 f"({', '.join(_THINKING_KEYS)}); ignored")
    if "type" in obj and "thinking" in d.options:  # (no type: enabled, the templates' default too)
        out["thinking"] = (on, "thinking.type")
    elif "type" in obj and d.always_thinks:  # (Kimi-K2.7-Code: "enabled" is what it does anyway)
        if not on:
            warn(f"the request's thinking.type \"disabled\" cannot turn reasoning off for {d.name}: the model always "
                 "thinks and its template has no thinking switch; ignored")
    elif "type" in obj:
        warn(f"the request's thinking.type {_dump(kind)} does not change the prompt of {d.name}: its template "
             "has no thinking switch; ignored")
    keep = obj.get("keep")
    if on and keep is not None:
        if keep == "all" and "preserve_thinking" in d.options:
            out["preserve_thinking"] = (True, "thinking.keep")
        elif not (keep == "all" and d.keeps_every_reasoning):  # (K2.7-Code and K3's encoder keep every turn's)
            warn(f"the request's thinking.keep {_dump(keep)} does not change the prompt of {d.name}; ignored")
    return on


def _effort(body: Mapping[str, Any], d: Dialect, on: bool, out: dict[str, tuple[Any, str]],
            warn: Callable[[str], None]) -> None:
    obj = body.get("thinking")
    given = [(f, v) for f, v in (("thinking.effort", obj.get("effort") if isinstance(obj, dict) else None),
                                  ("reasoning_effort", body.get("reasoning_effort"))) if v is not None]
    if not given:
        return
    for f, v in given:
        if not isinstance(v, str):
            raise RequestError(f"must be a string (one of {', '.join(OPENAI_EFFORTS)}), got {_dump(v)}", param=f,
                               code="invalid_type")
        if v not in OPENAI_EFFORTS and v not in M.K3_THINKING_EFFORTS:
            raise RequestError(f"must be one of {', '.join(dict.fromkeys([*OPENAI_EFFORTS, *M.K3_THINKING_EFFORTS]))}"
                               f", got {_dump(v)}", param=f)
    field, effort = given[0]
    if "thinking_effort" not in d.options:
        warn(f"the request's {' and '.join(f for f, _ in given)} do{'es' if len(given) == 1 else ''} not change "
             f"the prompt of {d.name}: its template has no thinking effort; ignored")
        return
    if len(given) > 1:
        warn(f"the request's reasoning_effort {_dump(given[1][1])} is ignored: thinking.effort {_dump(effort)} "
             "is given (Moonshot's API reads thinking.effort first)")
    if not on:
        warn(f"the request's {field} is ignored: thinking is disabled")
    elif effort not in M.K3_THINKING_EFFORTS:
        raise RequestError(f"the request's {field} must be one of {', '.join(M.K3_THINKING_EFFORTS)} "
                           f"({d.name}'s thinking efforts), got {_dump(effort)}", param=field)
    else:
        out["thinking_effort"] = (effort, field)


def _body_field(value: Any, kind: Any, field: str, default: str, official: tuple[str, ...], d: Dialect,
                out: dict[str, tuple[Any, str]], warn: Callable[[str], None]) -> None:
    """Take the body's ``field`` (``value``; ``kind``: the part that says what it asks for) as the
    dialect's option of that name, or warn that it does not change the prompt."""
    if value is None or kind == default:
        return
    if field not in d.options:
        warn(f"the request's {field} {_dump(kind)} does not change the prompt of {d.name} (its template "
             "does not read it); the output constraint enforces it")
        return
    out[field] = (value, field)
    if kind not in official:
        warn(f"the request's {field} {_dump(kind)} does not change the prompt of {d.name}: its encoder "
             f"writes a message for {' and '.join(map(_dump, official))} only")


def _choice_and_format(body: Mapping[str, Any], d: Dialect, out: dict[str, tuple[Any, str]],
                       warn: Callable[[str], None]) -> None:
    tc = body.get("tool_choice")
    _body_field(tc, tc, "tool_choice", "auto", _K3_TOOL_CHOICES, d, out, warn)
    rf = body.get("response_format")
    _body_field(rf, rf.get("type") if isinstance(rf, dict) else rf, "response_format", "text", _K3_RESPONSE_FORMATS,
                d, out, warn)


def body_options(body: Mapping[str, Any], d: Dialect, given: Mapping[str, Any],
                 warn: Callable[[str], None]) -> dict[str, Any]:
    """The template options of ``d`` that the body's :data:`PROMPT_FIELDS` give:

    * Moonshot's ``thinking`` object: ``type`` is the ``thinking`` option (default enabled); ``effort`` is
      Kimi-K3's ``thinking_effort`` (read only with thinking enabled, as Moonshot's API and the K3 encoder
      do); ``keep: "all"`` is ``preserve_thinking`` where the template has it (Kimi-K2.6; Kimi-K3's
      encoder always keeps every turn's reasoning);
    * ``reasoning_effort``: ``thinking_effort`` when ``thinking.effort`` is absent;
    * ``tool_choice`` and ``response_format``: Kimi-K3's encoder writes a system message for
      ``tool_choice`` ``"required"`` / ``"none"`` and ``response_format`` ``json_object`` / ``json_schema``.

    ``warn`` gets each field that does not change ``d``'s prompt (``tool_choice: "auto"`` and
    ``response_format: {"type": "text"}`` are the defaults and say nothing). ``given`` are the request's
    ``chat_template_kwargs``: one that sets the same option to another value is a :class:`RequestError`
    naming both."""
    out: dict[str, tuple[Any, str]] = {}
    on = _thinking(body, d, out, warn)
    _effort(body, d, on, out, warn)
    _choice_and_format(body, d, out, warn)
    for key, (value, field) in out.items():
        if key in given and given[key] != value:
            raise RequestError(f"the request's {field} ({_dump(value)} for {d.name}'s {key!r}) and "
                               f"chat_template_kwargs.{key} ({_dump(given[key])}) disagree; give one of them",
                               param=f"chat_template_kwargs.{key}")
    return {key: value for key, (value, _) in out.items()}


def read_chat_request(body: Any, *, dialect: str | Dialect, contract: str = "open") -> ChatRequest:
    """Validate a decoded chat-completions body for ``dialect`` under ``contract`` (``"open"`` or
    ``"moonshot"``, see the module doc) and return the :class:`ChatRequest`; raise
    :class:`RequestError` (status 400, ``param`` naming the field, ``finding`` the validator's finding:
    :mod:`kimi_chat.validation`) for a bad one."""
    if contract not in CONTRACTS:
        raise ValueError(f"contract must be one of {', '.join(CONTRACTS)}, got {contract!r}")
    d = get_dialect(dialect)
    try:
        return _read(body, d, contract)
    except RequestError as e:
        if e.finding is None:  # a body parameter's refusal: the validator's finding at its param
            e.finding = Finding("invalid-parameter", None, e.message, e.param, e.code)
        raise


def _read(body: Any, d: Dialect, contract: str) -> ChatRequest:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_type")
    check_json_values(body)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("must be a non-empty string (the model's name)", param="model",
                           code="missing_field" if model is None else "invalid_type")
    for legacy, use in (("functions", "tools"), ("function_call", "tool_choice")):
        if legacy in body:
            raise RequestError(f"the legacy OpenAI function-calling field is not supported; use {use!r}",
                               param=legacy, code="unsupported_parameter")
    messages, dynamic = check_messages(body.get("messages"))
    tools = body.get("tools")
    if tools is not None:
        check_tools(tools, "tools")
    names: dict[str, str] = {}
    for where, tool_list in [("tools", tools or []), *dynamic]:
        for j, tool in enumerate(tool_list):
            name = tool["function"]["name"]
            if name in names:
                raise RequestError(f"the tool name {name!r} is declared twice (first at {names[name]})",
                                   param=f"{where}[{j}].function.name", code="duplicate_tool_name")
            names[name] = f"{where}[{j}]"
    tool_choice = check_tool_choice(body.get("tool_choice"), names)
    response_format = check_response_format(body.get("response_format"))
    sampling = check_sampling(body, contract)
    given = body.get("chat_template_kwargs")
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise RequestError("must be an object of template options", param="chat_template_kwargs",
                           code="invalid_type")
    warnings: list[str] = []
    options = {**body_options(body, d, given, warnings.append), **given}
    options = lint_refusals(d, messages, tools, options, warnings)
    if contract == "moonshot" and sampling["temperature"] is None:  # Moonshot's default
        thinks = (d.reasoning or "thinking" in d.options) and options.get("thinking", True) is not False
        sampling["temperature"] = 1.0 if thinks else 0.6
    return ChatRequest(
        model=model, messages=messages, tools=tools, tool_choice=tool_choice,
        response_format=response_format, render_options=options,
        dynamic_tools=[t for _, tool_list in dynamic for t in tool_list], warnings=tuple(warnings), **sampling,
    )


# ----------------------------------------------------------------------------- usage


def prompt_tokens(ids: Sequence[int], *, dialect: str | Dialect, request: ChatRequest | None = None) -> int:
    """``usage.prompt_tokens`` of a prompt of ``ids`` (the whole rendered prompt, generation prompt
    included) as Moonshot counts it: the tokens of the channel the generation prompt opens are pending,
    not prompt (Kimi-K3: ``<|open|>response<|sep|>`` with thinking off, measured against KVV's ground
    truths 36 / 119 where the release's tokenizer gives 39 / 122; ``<|open|>think<|sep|>`` with thinking
    on is counted the same way, not measured). The rule is the dialect's family's
    (its ``serving.pending_prompt_tokens``); K2 dialects count every id (no Moonshot ground truth)."""
    d = get_dialect(dialect)
    return len(ids) - d.family_parts.serving.pending_prompt_tokens(ids)

