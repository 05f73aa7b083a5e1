"""The Kimi-K2 family's dialect records: one :class:`~kimi_chat.dialect_records.DialectRecord` per official revision.

Each record is a shared header (name, status, oracle, options, aliases, model names, known problems) and a
:class:`~.spec.K2Spec`, the switches read off that revision's oracle template. :data:`RECORDS` lists them oldest
first; the registry (:mod:`kimi_chat.dialect_records`) registers them, asking each registered family for its
records (:func:`kimi_chat.families.family_dialects`), so this module is not imported by name anywhere else.

Adding a K2 revision is a record here (a revision that differs from another in little is ``dataclasses.replace``
of that one, as Kimi-K2.7-Code is of Kimi-K2.6), its template's source in ``templates/macros/sync.py`` (the
generated ``templates/<name>.jinja`` and goldens follow) and its line in ``docs/dialects-and-fidelity.md``.

This module imports the record class and the spec only (no stage, not the family's record), so the registry
can load it while :mod:`kimi_chat.dialect_records` is still being imported.
"""

from __future__ import annotations

from dataclasses import replace

from ...dialect_records import DialectRecord, Status
from .spec import K2Spec

__all__ = ["RECORDS"]

_K2_SYSTEM_V1 = "You are a helpful assistant"
_K2_SYSTEM_V2 = "You are Kimi, an AI assistant created by Moonshot AI."

_K2_5 = DialectRecord(
    name="kimi-k2.5",
    status=Status.RECONSTRUCTED,
    oracle="unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja",
    summary="Kimi-K2.5: generation prompt pre-fills <think> (thinking=True) or <think></think>; "
    "TypeScript tool declarations; <|media_begin|> images, video placeholder; no default system; "
    "reasoning from reasoning_content; no preserve_thinking",
    spec=K2Spec(
        tools_separators=(",", ":"),
        tools_typescript=True,
        sort_tool_keys=True,
        role_names="name_or_role",
        bodies="think_content_calls",
        media="typed_media",
        think="history_split_prefilled",
    ),
    options=("thinking",),
    model_names=("moonshotai/Kimi-K2.5",),
    known_problems=("needs-tools-ts-str", "llama-server-continuation"),
)
"""Kimi-K2.5 (Kimi-K2.6 overrides what differs)."""

_K2_6 = replace(
    _K2_5,
    name="kimi-k2.6",
    oracle="unverified/Kimi-K2.6.chat_template.reconstructed.jinja",
    summary="Kimi-K2.6: Kimi-K2.5's format plus preserve_thinking (reasoning kept on every "
    "assistant turn); reasoning read from `reasoning` first; eos <|im_end|>",
    spec=replace(_K2_5.spec, reasoning_key="reasoning"),
    options=("thinking", "preserve_thinking"),
    model_names=("moonshotai/Kimi-K2.6",),
    known_problems=("needs-tools-ts-str", "llama-server-continuation", "llama-server-preserves-reasoning"),
)
"""Kimi-K2.6: Kimi-K2.5's record with what differs (Kimi-K2.7-Code overrides what differs from it)."""

_K2_7_CODE = replace(
    _K2_6,
    name="kimi-k2.7-code",
    summary="Kimi-K2.7-Code: Kimi-K2.6's format and tokenizer with reasoning always on and every "
    "assistant turn's reasoning kept (K2.6's template with thinking and preserve_thinking forced; "
    "no template of its own is public); no options",
    spec=replace(_K2_6.spec, keeps_every_reasoning=True),
    options=(),
    oracle_options=(("thinking", True), ("preserve_thinking", True)),
    model_names=("moonshotai/Kimi-K2.7-Code",),
    known_problems=("needs-tools-ts-str", "llama-server-continuation"),
)
"""Kimi-K2.7-Code: Kimi-K2.6's record with what differs (no verbatim template is public)."""

RECORDS: tuple[DialectRecord, ...] = (
    DialectRecord(
        name="kimi-k2-instruct@rev1",
        status=Status.VERIFIED,
        oracle="Kimi-K2-Instruct/chat_template.rev1.jinja",
        summary="Kimi-K2-Instruct, July 2025 original: no tool-call support (tool calls are dropped)",
        spec=K2Spec(
            default_system=_K2_SYSTEM_V1,
            role_names="fixed",
            tool_calls=False,
            tool_result_header=None,
            bodies="content_only",
        ),
        known_problems=("no-tool-calls",),
    ),
    DialectRecord(
        name="kimi-k2-instruct@rev2",
        status=Status.SINGLE_SOURCE,
        oracle="Kimi-K2-Instruct/chat_template.rev2.jinja",
        summary="Kimi-K2-Instruct, Jul-Aug 2025: first with tool calls; ids regenerated, "
        "string arguments JSON-encoded twice, literal backslash-n after '## Return of'",
        spec=K2Spec(
            default_system=_K2_SYSTEM_V1,
            role_names="fixed",
            tool_call_ids="regenerate",
            string_arguments="json",
            tool_result_header="\\n",
            bodies="content_then_calls",
        ),
        known_problems=("string-arguments-double-encoded", "tool-call-ids-regenerated", "literal-backslash-n",
                        "llama-server-continuation"),
    ),
    DialectRecord(
        name="kimi-k2-instruct-0905",
        status=Status.UNVERIFIED,
        oracle="unverified/Kimi-K2-Instruct-0905.chat_template.candidate-A.jinja",
        summary="Kimi-K2-Instruct-0905: ids kept, '# Tools' header, name-or-role headers",
        spec=K2Spec(
            default_system=_K2_SYSTEM_V2,
            tools_prefix="\n  # Tools\n  ",
            sort_tool_keys=True,
            role_names="name_or_role",
            tool_result_header="\n    ",
            bodies="content_then_calls",
            last_turn_open_without_generation_prompt=True,
        ),
        aliases=("kimi-k2-instruct",),
        model_names=("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2-0905-preview"),
        known_problems=("missing-final-im-end", "llama-server-chat-fails", "llama-server-continuation"),
    ),
    DialectRecord(
        name="kimi-k2-thinking@rev1",
        status=Status.SINGLE_SOURCE,
        oracle="Kimi-K2-Thinking/chat_template.rev1.jinja",
        summary="Kimi-K2-Thinking, Nov 2025 initial: <think> kept after the last plain assistant turn",
        spec=K2Spec(
            default_system=_K2_SYSTEM_V2,
            sort_tool_keys=True,
            role_names="name_or_role",
            bodies="think_content_calls",
            think="history_split",
        ),
        aliases=("kimi-k2-thinking",),
        model_names=("moonshotai/Kimi-K2-Thinking",),
        known_problems=("superseded-revision", "llama-server-continuation"),
    ),
    _K2_5,
    _K2_6,
    _K2_7_CODE,
)
"""The K2-family records, oldest first: the order :data:`kimi_chat.dialect_records.DIALECTS` lists them in
(and ``kimi-chat dialects`` prints them in)."""
