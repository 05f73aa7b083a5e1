"""The request-body fields besides ``messages`` / ``tools`` that can change the prompt, as template
options of the dialect the request is rendered with:

* Moonshot's ``thinking`` object, ``{"type": "enabled" | "disabled", "keep": "all", "effort": ...}``:
  ``type`` is the ``thinking`` option (default enabled); ``effort`` is Kimi-K3's ``thinking_effort``
  (read only with thinking enabled, as Moonshot's API and the K3 encoder do); ``keep: "all"`` is
  ``preserve_thinking`` where the template has it (Kimi-K2.6; Kimi-K3's encoder always keeps every
  turn's reasoning);
* ``reasoning_effort``: ``thinking_effort`` when ``thinking.effort`` is absent (Moonshot's rule: the
  object's effort wins);
* ``tool_choice`` and ``response_format``: Kimi-K3's encoder writes a system message for
  ``tool_choice`` ``"required"`` / ``"none"`` and ``response_format`` ``json_object`` / ``json_schema``.

A field the dialect's template does not read is reported (a warning on stderr) instead of dropped
silently; ``tool_choice: "auto"`` and ``response_format: {"type": "text"}`` are the defaults and say
nothing. The same option given by the body field and by ``chat_template_kwargs`` with different values
is refused (exit 2), naming both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .. import markers as M
from ..dialects import Dialect
from ..families import family_of
from ._io import InputError

__all__ = ["PROMPT_FIELDS", "body_options"]

PROMPT_FIELDS = ("thinking", "reasoning_effort", "tool_choice", "response_format")
"""The body fields :func:`body_options` reads."""

_THINKING_KEYS = ("type", "keep", "effort")
_K3_TOOL_CHOICES = ("required", "none")
_K3_RESPONSE_FORMATS = ("json_object", "json_schema")


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _thinking(body: Mapping[str, Any], d: Dialect, out: dict[str, tuple[Any, str]],
              warn: Callable[[str], None]) -> bool:
    """Read the ``thinking`` object into ``out``; return whether thinking is enabled."""
    obj = body.get("thinking")
    if obj is None:
        return True
    if not isinstance(obj, dict):
        raise InputError('the request\'s thinking must be an object {"type": "enabled" | "disabled", '
                         f'"effort": ...}} (Moonshot\'s API), got {_dump(obj)}')
    kind = obj.get("type", "enabled")
    if kind not in ("enabled", "disabled"):
        raise InputError(f'the request\'s thinking.type must be "enabled" or "disabled", got {_dump(kind)}')
    on = kind == "enabled"
    for key in obj:
        if key not in _THINKING_KEYS:
            warn(f"the request's thinking.{key} is not a field of Moonshot's thinking object "
                 f"({', '.join(_THINKING_KEYS)}); ignored")
    if "type" in obj and "thinking" in d.options:  # (no type: enabled, the templates' default too)
        out["thinking"] = (on, "thinking.type")
    elif "type" in obj:
        warn(f"the request's thinking.type {_dump(kind)} does not change the prompt of {d.name}: its template "
             "has no thinking switch; ignored")
    keep = obj.get("keep")
    if on and keep is not None:
        if keep == "all" and "preserve_thinking" in d.options:
            out["preserve_thinking"] = (True, "thinking.keep")
        elif not (keep == "all" and family_of(d).keeps_all_reasoning):  # (K3's encoder keeps every turn's)
            warn(f"the request's thinking.keep {_dump(keep)} does not change the prompt of {d.name}; ignored")
    return on


def _effort(body: Mapping[str, Any], d: Dialect, on: bool, out: dict[str, tuple[Any, str]],
            warn: Callable[[str], None]) -> None:
    obj = body.get("thinking")
    given = [(f, v) for f, v in (("thinking.effort", obj.get("effort") if isinstance(obj, dict) else None),
                                  ("reasoning_effort", body.get("reasoning_effort"))) if v is not None]
    if not given:
        return
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
        raise InputError(f"the request's {field} must be one of {', '.join(M.K3_THINKING_EFFORTS)} "
                         f"({d.name}'s thinking efforts), got {_dump(effort)}")
    else:
        out["thinking_effort"] = (effort, field)


def _body_field(value: Any, kind: Any, field: str, default: str, official: tuple[str, ...], d: Dialect,
                out: dict[str, tuple[Any, str]], warn: Callable[[str], None]) -> None:
    """Take the body's ``field`` (``value``; ``kind``: the part that says what it asks for) as the
    dialect's option of that name, or warn that it does not change the prompt."""
    if value is None or kind == default:
        return
    if field not in d.options:
        warn(f"the request's {field} {_dump(kind)} does not change the prompt of {d.name}: its template "
             "does not read it; ignored")
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
    """The template options of ``d`` that the body's :data:`PROMPT_FIELDS` give (see the module doc);
    ``warn`` gets each field that does not change ``d``'s prompt. ``given`` are the request's
    ``chat_template_kwargs``: one that sets the same option to another value is an
    :class:`~kimi_chat.cli._io.InputError`."""
    out: dict[str, tuple[Any, str]] = {}
    on = _thinking(body, d, out, warn)
    _effort(body, d, on, out, warn)
    _choice_and_format(body, d, out, warn)
    for key, (value, field) in out.items():
        if key in given and given[key] != value:
            raise InputError(f"the request's {field} ({_dump(value)} for {d.name}'s {key!r}) and "
                             f"chat_template_kwargs.{key} ({_dump(given[key])}) disagree; give one of them")
    return {key: value for key, (value, _) in out.items()}
