"""The request of the ``render``-like commands (``render``, ``count``, ``lint``), in one place: the
arguments that give it (:func:`add_request_arguments`), how it is read (:func:`load_request`), and its lint
findings, which ``render`` and ``count`` print on stderr (:func:`print_findings`, ``-q`` silences them; the
same findings' warnings from the render itself are silenced by :func:`findings_printed`, so each prints once)."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..dialect_records import DEFAULT_DIALECT, dialect_for_model, get_dialect
from ..errors import KimiChatError
from ..prompt import TOKENIZING_OPTIONS
from ._body import body_options
from ._io import InputError, read_json, read_tools, request_body, template_options

__all__ = ["add_request_arguments", "load_request", "findings", "print_findings", "findings_printed"]


def add_request_arguments(p: argparse.ArgumentParser, *, strict: bool = True) -> None:
    """The request arguments that :func:`load_request` reads: FILE, ``--dialect``, ``--tools``,
    ``--no-generation-prompt``, ``--continue-final-message``, ``--kwargs`` and (``strict``) ``--strict``
    (shared by ``render``, ``count`` and ``lint``)."""
    p.add_argument("file", nargs="?", default="-", help="request JSON file, or - for stdin (default)")
    p.add_argument("--dialect", "-d", default=None,
                   help=f"dialect or alias (default: the request's \"dialect\" key, else the dialect its \"model\" "
                   f"names, else {DEFAULT_DIALECT}); see `kimi-chat dialects`")
    p.add_argument("--tools", metavar="FILE",
                   help="JSON file with the tools list, or an object with a 'tools' list (overrides the request's tools)")
    p.add_argument("--no-generation-prompt", action="store_true",
                   help="do not end with the assistant header (for training / prefill; the model would not answer); "
                   "overrides the request's add_generation_prompt")
    p.add_argument("--continue-final-message", action="store_true",
                   help="end the prompt inside the final message, for the model to continue it (a prefill such as "
                   "{\"role\": \"assistant\", \"content\": \"Sure, \"}), as transformers' continue_final_message; "
                   "the request's continue_final_message does the same")
    p.add_argument("--kwargs", metavar="JSON", default=None,
                   help="dialect template options as a JSON object, e.g. '{\"thinking\": false}' "
                   "(merged over the request's chat_template_kwargs); kwargs the template does not read are "
                   "ignored, as the official template ignores them")
    if not strict:
        return
    p.add_argument("--strict", action="store_true",
                   help="refuse what `kimi-chat lint` reports as an error (unknown roles, missing ids or content, "
                   "unknown message fields, unread template kwargs), naming message and field; default: render "
                   "every input the official template renders, as it renders it")


# request-body fields that would change the prompt but that no Kimi template reads
_REFUSED_FIELDS = {
    "functions": "the legacy OpenAI function-calling list; Kimi templates declare 'tools' "
    "(each function F as {\"type\": \"function\", \"function\": F})",
    "function_call": "the legacy OpenAI function-calling choice; use 'tool_choice' with 'tools'",
}


def _note(args: argparse.Namespace, kind: str, message: str) -> None:
    if kind == "warning" or not getattr(args, "quiet", False):
        print(f"kimi-chat: {kind}: {message}", file=sys.stderr)


def _body_flag(body: dict[str, Any], key: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if type(value) is not bool:
        raise InputError(f"the request's {key} must be true or false, got {json.dumps(value)}")
    return value


def _request_dialect(args: argparse.Namespace, body: dict[str, Any]) -> str:
    """``--dialect``, else the body's ``dialect``, else the dialect its ``model`` names, else the default;
    a ``model`` that is not used is reported on stderr."""
    model = body.get("model")
    implied = dialect_for_model(model) if isinstance(model, str) else None
    chosen = args.dialect or body.get("dialect")
    if chosen is not None:
        get_dialect(chosen)
        if model is not None and implied != get_dialect(chosen).name:
            what = f"implies dialect {implied}" if implied else "is not a Kimi model this tool knows"
            _note(args, "warning", f"the request's model {model!r} {what}; ignored (rendering with dialect {chosen})")
        return chosen
    if implied is not None:
        _note(args, "note", f"the request's model {model!r} -> dialect {implied} (--dialect chooses another)")
        return implied
    if model is not None:
        _note(args, "warning", f"the request's model {model!r} does not tell which Kimi template it uses; "
              f"ignored (rendering with dialect {DEFAULT_DIALECT}; --dialect chooses another)")
    return DEFAULT_DIALECT


def load_request(args: argparse.Namespace) -> dict[str, Any]:
    """The request of ``render``-like commands: messages, tools, dialect, add_generation_prompt,
    continue_final_message, options. Every body field that changes the prompt is read or reported:
    ``model`` picks the dialect (or a warning says it is ignored), ``add_generation_prompt`` and
    ``continue_final_message`` are read, ``chat_template`` is ignored with a warning, ``thinking``,
    ``reasoning_effort``, ``tool_choice`` and ``response_format`` become the dialect's options (or a
    warning says they do not change its prompt: :mod:`kimi_chat.cli._body`), and the legacy
    ``functions`` / ``function_call`` are refused (exit 2) naming the field. ``--kwargs`` is merged over
    all of them."""
    body = request_body(read_json(args.file), args.file)
    for key, why in _REFUSED_FIELDS.items():
        if key in body:
            raise InputError(f"the request's {key!r} field is not supported: it is {why}")
    if body.get("chat_template") is not None:
        _note(args, "warning", "the request's 'chat_template' is ignored: kimi-chat renders the dialect's official template")
    tools = read_tools(args.tools) if args.tools else body.get("tools")
    given = template_options(body, None)
    dialect = _request_dialect(args, body)
    options = {**body_options(body, get_dialect(dialect), given, lambda m: _note(args, "warning", m)),
               **template_options(body, args.kwargs)}
    for key in TOKENIZING_OPTIONS:
        if options.get(key):
            raise InputError(f"the template option {key!r} asks for token ids: use `kimi-chat render --tokens` "
                             "(ids, spans and the assistant mask) or `kimi-chat count`")
    agp = _body_flag(body, "add_generation_prompt")
    cfm = args.continue_final_message or bool(_body_flag(body, "continue_final_message"))
    if args.no_generation_prompt:
        agp = False
    elif agp is None:
        agp = not cfm
    return {
        "messages": body["messages"],
        "tools": tools,
        "dialect": dialect,
        "add_generation_prompt": agp,
        "continue_final_message": cfm,
        "options": options,
        "strict": bool(getattr(args, "strict", False)),
    }


def findings(req: dict[str, Any]) -> list[Any]:
    """The :func:`kimi_chat.lint` findings of a request loaded by :func:`load_request`."""
    from ..checks.lint import lint

    return lint(req["messages"], dialect=req["dialect"], tools=req["tools"],
                add_generation_prompt=req["add_generation_prompt"], **req["options"])


@contextmanager
def findings_printed() -> Iterator[None]:
    """Render a request inside this block when :func:`print_findings` reports it: the ``UserWarning`` a render
    gives for an option finding (an unread or non-bool option, what Python callers get) is not shown, as the
    command prints that finding with the other lint findings (else it would show twice)."""
    from ..checks.lint import OPTION_WARNINGS

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=OPTION_WARNINGS, category=UserWarning)
        yield


def print_findings(args: argparse.Namespace, req: dict[str, Any]) -> None:
    """Print each lint finding of ``req`` on stderr (``kimi-chat: lint error: ...``), unless ``-q``.
    Called once the request rendered: input that lint cannot take does not fail the command (its
    output is the official prompt); a note says lint did not check it."""
    if getattr(args, "quiet", False):
        return
    try:
        found = findings(req)
    except KimiChatError as e:
        print(f"kimi-chat: note: lint could not check this request: {e}", file=sys.stderr)
        return
    for w in found:
        print(f"kimi-chat: lint {w.severity}: {w}", file=sys.stderr)
