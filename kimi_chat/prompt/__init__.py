"""The formatter: OpenAI-style messages + tools + dialect -> the exact prompt text.

One prompt writer per format family, the ``write_prompt`` of the dialect's family record
(:attr:`Dialect.family_parts <kimi_chat.dialects.Dialect.family_parts>`; a family whose official machinery is a chat template builds it
with :func:`kimi_chat.prompt.template.template_writer` around its renderer, :mod:`kimi_chat.families.k2.render`;
Kimi-K3's is :func:`kimi_chat.families.k3.render.write_k3`, the encoder's own input handling). This module
checks what every family shares (token-id options refused, the flags bools) and gives the three views of one
render, for every family. For every dialect the output is byte-identical to what the official tokenizer's
``apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)`` returns.

Three views of one render: :func:`render` (the text), :func:`render_segments` (the text cut by message
and trainability) and :func:`render_layout` (every part, flagged template literal or input text: what
:mod:`kimi_chat.tokens` builds token ids from).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, get_dialect
from ..errors import UnsupportedOptionError
from ..messages import check_bool
from ..validation import warn_options
from .writer import Layout, Piece, Segment, Writer

__all__ = ["render", "render_segments", "render_layout", "write_prompt", "Segment", "Piece", "Layout",
           "TOKENIZING_OPTIONS"]

TOKENIZING_OPTIONS = ("tokenize", "return_dict", "return_assistant_tokens_mask")
"""``apply_chat_template`` arguments that ask for token ids (or a dict of them) instead of the text:
set (truthy, as the official tokenizer reads them), they are refused by the functions of this module,
which return text; ``False`` is the text, as given."""


def check_tokenizing_options(options: Mapping[str, Any]) -> None:
    """Raise :class:`~kimi_chat.errors.UnsupportedOptionError` (a ``TypeError``) for the first of
    :data:`TOKENIZING_OPTIONS` set in ``options``: where ``apply_chat_template`` would return ids, the
    text would come back silently."""
    for key in TOKENIZING_OPTIONS:
        if options.get(key):
            raise UnsupportedOptionError(
                f"{key}={options[key]!r} asks for token ids, but the prompt functions of kimi_chat.render return "
                "text; use kimi_chat.render_tokens(messages, tokenizer=KimiTokenizer...) for the ids (.ids), the "
                "assistant mask (.assistant_mask) and per-message spans (.spans)", option=key)


def write_prompt(
    w: Writer,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    dialect: str | Dialect,
    add_generation_prompt: bool | None,
    continue_final_message: bool,
    options: Mapping[str, Any],
    strict: bool = False,
) -> bool:
    """Render into ``w`` (the arguments are :func:`render`'s) by the dialect's family's prompt writer;
    return the ``add_generation_prompt`` used."""
    d = get_dialect(dialect)
    if options:
        check_tokenizing_options(options)
        if not strict:  # strict refuses them (lint's errors); otherwise each is a UserWarning, the output unchanged
            # (apply_chat_template's own tokenize=False and the like are no template options: not warned)
            warn_options(d, {k: v for k, v in options.items() if k not in TOKENIZING_OPTIONS})
    if strict is not False:  # check_bool, only where it can fail (every render passes here)
        check_bool("strict", strict)
    if continue_final_message is not False:
        check_bool("continue_final_message", continue_final_message)
    return d.family_parts.write_prompt(w, d, messages, tools, add_generation_prompt, continue_final_message,
                                     options, strict)


def render(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool | None = None,
    continue_final_message: bool = False,
    strict: bool = False,
    **options: Any,
) -> str:
    """The prompt the official template of ``dialect`` renders for ``messages`` and ``tools``.

    ``messages`` are OpenAI chat-completions messages (dicts, the OpenAI SDK's typed dicts or pydantic
    objects, at any level); ``tools`` the OpenAI tools list. ``add_generation_prompt`` defaults to True
    (as the official Kimi tokenizer does; False with ``continue_final_message``): without it the model
    is not asked to answer. ``continue_final_message=True`` does what transformers'
    ``apply_chat_template(continue_final_message=True)`` does: the prompt ends right after the final
    message's text (no ``<|im_end|>``), so the model continues it (a prefill such as
    ``{"role": "assistant", "content": "Sure, "}``). ``options`` are template kwargs (e.g.
    ``thinking=False`` for ``kimi-k2.5``); those the dialect's template does not read are ignored,
    as the template ignores them (``enable_thinking`` does nothing: :func:`~kimi_chat.lint` says so).

    Official parity (the default): every input the official template renders gives its bytes, odd
    ones too (a ``developer`` role, a tool call without ``id``, a message without ``content``, extra
    fields, unknown content parts). ``strict=True`` refuses, with
    :class:`~kimi_chat.errors.StrictModeError` (a ``ValueError``) naming message index and field,
    everything :func:`~kimi_chat.lint` reports as an error (unknown roles, missing ids or content,
    unknown fields, unread or non-bool kwargs).

    Raises :class:`~kimi_chat.messages.InvalidMessagesError` for input the official template
    cannot take (naming the message index and field), :class:`~kimi_chat.errors.RenderError` where
    it cannot render the input (or both ``continue_final_message`` and ``add_generation_prompt``
    are set), :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect,
    :class:`~kimi_chat.errors.UnsupportedOptionError` (a ``TypeError``) for ``tokenize=True``,
    ``return_dict=True`` or ``return_assistant_tokens_mask=True`` (this returns text: token ids come from
    :func:`~kimi_chat.render_tokens`) and ``TypeError`` for a non-bool flag.
    """
    w = Writer(marked=False)
    write_prompt(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
    return "".join(w.parts)


def render_segments(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool | None = None,
    continue_final_message: bool = False,
    strict: bool = False,
    **options: Any,
) -> list[Segment]:
    """:func:`render`, cut into :class:`Segment` pieces that say which message each piece belongs
    to and whether a model produced it; ``"".join(s.text for s in segments) == render(...)``.
    Neighbours differ in attribution, except for a family whose official tokenizer encodes the prompt
    segment by segment (its record's ``segment_wise``: Kimi-K3), which gets one :class:`Segment` per
    encoder segment. ``strict`` and the other arguments are :func:`render`'s."""
    w = Writer(marked=True)
    write_prompt(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
    if get_dialect(dialect).family_parts.tokens.segment_wise:
        return [Segment(p.text, p.message_index, p.trainable) for p in w.layout().pieces()]
    return w.segments()


def render_layout(
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool | None = None,
    continue_final_message: bool = False,
    strict: bool = False,
    **options: Any,
) -> Layout:
    """:func:`render` as the renderer wrote it: a :class:`Layout` of parts, attribution marks and
    the parts that are input text (all others are template literals); ``layout.text == render(...)``
    and ``layout.pieces()`` yields :class:`Piece` records. One render: what token ids are built from.
    ``strict`` and the other arguments are :func:`render`'s."""
    w = Writer(marked=True)
    write_prompt(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
    return w.layout()
