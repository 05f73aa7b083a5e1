"""Rendering a template the transformers way for a dialect, in transformers' sandbox or in a lenient
one (what llama.cpp-like engines accept), and where kimi_chat's own templates and the official ones are.

Runtimes such as llama.cpp run their own Jinja engines, which allow what transformers' sandbox
refuses (``list.append``); their adapted templates fail in transformers with a ``SecurityError``.
The lenient sandbox renders them as such a runtime would (still a sandbox: no attribute escapes).

Every rendering of a template runs within the time, memory and output bounds of
:data:`kimi_chat.checks.verification.bounded.LIMITS` (in a forked child): a template exceeding one raises
:class:`~kimi_chat.checks.verification.bounded.TemplateLimitError`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ...dialect_records import DialectRecord as Dialect, get_dialect
from ...errors import KimiChatError, ReferenceDataError
from ...reference.oracle import (
    _chat_template_utils,
    official_tools_ts,
    official_tools_ts_encoder,
    oracle_template,
    render_as_tokenizer,
)
from ...families.k2.tools_ts import typescript_or_none
from ...templates import template_path
from .bounded import TemplateLimitError, run_bounded

__all__ = [
    "VERIFY_EXTRA",
    "TemplateCompileError",
    "TemplateLimitError",
    "render_with_dialect",
    "host_parsed_arguments",
    "own_template_path",
    "own_template_text",
]

VERIFY_EXTRA = "pip install -e '.[verify]' (run in the kimi_chat checkout)"


class TemplateCompileError(KimiChatError, ValueError):
    """The template text is not valid Jinja (it does not compile)."""


def _compile_error(template: str) -> str | None:
    """The syntax error of ``template`` under transformers' Jinja environment, if any."""
    ctu = _chat_template_utils()
    from jinja2.exceptions import TemplateSyntaxError

    try:
        ctu._compile_jinja_template(template)
    except TemplateSyntaxError as e:
        return f"line {e.lineno}: {e.message}"
    except RecursionError:  # Jinja's parser recurses per nested block
        return "blocks nested too deeply to compile"
    return None


# ---------------------------------------------------------------------------------------------------
# our own templates, the official ones


def own_template_path(dialect: str | Dialect) -> Path | None:
    """``templates/<dialect>.jinja`` (kimi_chat's own template for the dialect), ``None`` when the file
    is missing. Raises :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect."""
    try:
        return template_path(dialect)
    except FileNotFoundError:
        return None


def own_template_text(dialect: str | Dialect) -> str | None:
    """The text of kimi_chat's own template for the dialect, ``None`` when the file is missing.
    Raises :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect."""
    path = own_template_path(dialect)
    return path.read_text(encoding="utf-8") if path is not None else None


def _oracle_text(d: Dialect) -> str | None:
    """The dialect's official template text, ``None`` without the reference data."""
    try:
        return oracle_template(d)
    except KimiChatError:
        return None


# ---------------------------------------------------------------------------------------------------
# rendering a template the transformers way, for a dialect


_LENIENT_LOCK = threading.Lock()
_LENIENT_CACHE: dict[str, Any] = {}


def _new_lenient_lock() -> None:
    global _LENIENT_LOCK
    _LENIENT_LOCK = threading.Lock()  # a thread of the parent may hold it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lenient_lock)


def _lenient_compiled(ctu: Any, template: str) -> Any:
    """``template`` compiled like transformers does, but in jinja2's mutable SandboxedEnvironment
    (lists may be appended to, as llama.cpp's engine allows; attribute escapes are still refused)."""
    compiled = _LENIENT_CACHE.get(template)
    if compiled is None:
        from jinja2.sandbox import SandboxedEnvironment

        strict_env = ctu._compile_jinja_template(template).environment
        env = SandboxedEnvironment(
            trim_blocks=strict_env.trim_blocks,
            lstrip_blocks=strict_env.lstrip_blocks,
            extensions=[type(e) for e in strict_env.extensions.values()],
        )
        env.filters.update(strict_env.filters)
        env.globals.update(strict_env.globals)
        compiled = _LENIENT_CACHE[template] = env.from_string(template)
    return compiled


@contextmanager
def _lenient(template: str) -> Iterator[None]:
    """While inside: transformers compiles ``template`` in the lenient sandbox (other texts as usual)."""
    ctu = _chat_template_utils()
    with _LENIENT_LOCK:
        compiled = _lenient_compiled(ctu, template)
        original = ctu._compile_jinja_template
        ctu._compile_jinja_template = lambda text: compiled if text == template else original(text)
        try:
            yield
        finally:
            ctu._compile_jinja_template = original


def _nlohmann_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def host_parsed_arguments(messages: Sequence[Any]) -> list[Any]:
    """``messages`` with every tool call's ``arguments`` JSON string parsed into its value, as llama.cpp
    does before rendering a template that wants objects (its JSON parser refuses ``NaN`` and
    ``Infinity``); a string that is not JSON is left as it is. The input is not mutated."""
    out: list[Any] = []
    for m in messages:
        calls = m.get("tool_calls") if isinstance(m, Mapping) else None
        if not isinstance(calls, list) or not calls:
            out.append(m)
            continue
        new_calls = []
        for call in calls:
            if not isinstance(call, Mapping):
                new_calls.append(call)
                continue
            call = dict(call)
            holder = call
            if isinstance(call.get("function"), Mapping):
                holder = call["function"] = dict(call["function"])
            args = holder.get("arguments")
            if isinstance(args, str):
                try:
                    holder["arguments"] = json.loads(args, parse_constant=_nlohmann_constant)
                except ValueError:
                    pass  # not JSON: the template gets the text
            new_calls.append(call)
        out.append({**m, "tool_calls": new_calls})
    return out


def _render_as_host(
    template: str,
    messages: Sequence[Any],
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    add_generation_prompt: bool,
    parse_arguments: bool,
    **options: Any,
) -> str:
    """How a host runs a port of a family that ships no template (Kimi-K3, in llama.cpp): no tokenizer
    pre-processing (without a template there is none), arguments JSON strings parsed first
    (``parse_arguments``), the template given ``messages``, ``tools``, ``add_generation_prompt`` and the
    options as template variables."""
    compiled = _chat_template_utils()._compile_jinja_template(template)
    msgs = host_parsed_arguments(messages) if parse_arguments else list(messages)
    return str(compiled.render(messages=msgs, tools=list(tools) if tools is not None else None,
                               add_generation_prompt=add_generation_prompt, **options))


def render_with_dialect(
    template: str,
    messages: Sequence[Any],
    dialect: str | Dialect,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    lenient: bool = False,
    parse_arguments: bool = True,
    **options: Any,
) -> str:
    """Render ``template`` as the host of ``dialect`` would.

    K2 family: as the official tokenizer does (transformers' machinery, tool keys sorted when the
    dialect's tokenizer sorts them, ``tools_ts_str`` for K2.5 and K2.6). K3 family (no official
    template): as llama.cpp runs its port, tool-call ``arguments`` JSON strings parsed into objects
    first (:func:`host_parsed_arguments`; ``parse_arguments=False`` passes them as given, as a host
    that does not parse them would). ``lenient=True`` renders in a sandbox that allows mutating lists
    (what llama.cpp-like engines accept). Template errors propagate; the rendering runs within
    :data:`~kimi_chat.checks.verification.bounded.LIMITS` (:class:`~kimi_chat.checks.verification.bounded.TemplateLimitError`
    when the template exceeds them).
    """
    d = get_dialect(dialect)
    _chat_template_utils()  # OracleUnavailable here, without transformers
    return run_bounded(_render_unbounded, template, list(messages), d.name, tools, add_generation_prompt, lenient,
                       parse_arguments, options)


def _render_unbounded(template: str, messages: list[Any], dialect: str, tools: Sequence[Mapping[str, Any]] | None,
                      add_generation_prompt: bool, lenient: bool, parse_arguments: bool,
                      options: dict[str, Any]) -> str:
    """:func:`render_with_dialect`'s rendering itself (run by :func:`~kimi_chat.checks.verification.bounded.run_bounded`)."""
    d = get_dialect(dialect)
    with _lenient(template) if lenient else nullcontext():
        if not d.family_parts.official.jinja_templates:  # a port of a family without templates: run as a host runs it
            return _render_as_host(template, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                   parse_arguments=parse_arguments, **options)
        return render_as_tokenizer(template, messages, d, tools=tools, add_generation_prompt=add_generation_prompt,
                                   tools_ts=tools_ts_str, **options)


def tools_ts_str(tools: list[Any]) -> str | None:
    """The ``tools_ts_str`` a K2.5 / K2.6 tokenizer hands its template: the official encoder's where the
    reference data holds it, else kimi_chat's port (byte-equal to it: ``tests/families/test_tools_ts.py``), so
    ``verify`` / ``identify`` / ``inspect`` need no reference data."""
    try:
        official_tools_ts_encoder()
    except ReferenceDataError:
        return typescript_or_none(tools)
    return official_tools_ts(tools)


def _is_security_error(e: BaseException) -> bool:
    """Whether ``e`` is the sandbox refusing an operation (jinja2's ``SecurityError``)."""
    try:
        from jinja2.exceptions import SecurityError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, SecurityError)


def _describe_error(e: BaseException) -> str:
    """``SecurityError: ...``: how a template's error is reported."""
    return f"{type(e).__name__}: {e}"
