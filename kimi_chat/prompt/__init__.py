"""The formatter: OpenAI-style messages + tools + dialect -> the exact prompt text.

One renderer per format family, picked by the dialect's ``family`` (:data:`RENDERERS`; the K2 family:
:mod:`kimi_chat.families.k2.render`). This module does what every family shares: it validates and normalises
the input (:mod:`kimi_chat.messages`), keeps the template kwargs the dialect reads (the others are
ignored, as the template ignores them), applies ``strict=True`` (:func:`kimi_chat.checks.lint.check_strict`:
lint errors raise), and implements ``continue_final_message``
the way transformers does. For every dialect the output is byte-identical to what the official
tokenizer's ``apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=...)``
returns with that dialect's oracle template.

Three views of one render: :func:`render` (the text), :func:`render_segments` (the text cut by message
and trainability) and :func:`render_layout` (every part, flagged template literal or input text: what
:mod:`kimi_chat.tokens` builds token ids from).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..dialects import DEFAULT_DIALECT, Dialect, get_dialect
from ..errors import RenderError, UnsupportedOptionError
from ..checks.lint import check_strict
from ..messages import check_bool as _check_bool, normalize_messages, normalize_tools
from ..families.k2.render import render_k2
from ..families.k3.render import render_k3, render_k3_segments
from .writer import Layout, Piece, Segment, Writer

__all__ = ["render", "render_segments", "render_layout", "Segment", "Piece", "Layout", "RENDERERS", "TOKENIZING_OPTIONS"]

FamilyRenderer = Callable[
    [Writer, Dialect, "list[dict[str, Any]]", "list[dict[str, Any]] | None", bool, Mapping[str, Any]], None
]

RENDERERS: dict[str, FamilyRenderer] = {"k2": render_k2}
"""Format family (``Dialect.family``) -> its renderer ``(writer, dialect, messages, tools,
add_generation_prompt, options)``; adding a family is adding an entry. The K3 family is not here yet:
its renderer (:mod:`kimi_chat.families.k3.render`) builds the official encoder's own segments, with the
encoder's own input handling, and :func:`render` / :func:`render_segments` call it directly."""

# what transformers appends to the message it continues, then cuts the prompt at
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


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


def _tag_final_message(msgs: list[dict[str, Any]]) -> str:
    """Append the continuation tag to the final message's text, as transformers does; return the
    text that was tagged (which must appear in the prompt)."""
    index = len(msgs) - 1
    last = msgs[index]
    content = last.get("content")
    if content is None:
        raise RenderError('continue_final_message is set but the final message has no "content" to continue',
                          message_index=index, field="content")
    if isinstance(content, str):
        msgs[index] = {**last, "content": content + _CONTINUE_TAG}
        return content
    for j in range(len(content) - 1, -1, -1):
        part = content[j]
        if "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise RenderError("continue_final_message: the last text part's text is not a string",
                                  message_index=index, field=f"content[{j}].text")
            content = [*content[:j], {**part, "text": text + _CONTINUE_TAG}, *content[j + 1 :]]
            msgs[index] = {**last, "content": content}
            return text
    raise RenderError("continue_final_message is set but the final message has no text part to continue",
                      message_index=index, field="content")


def _cut_at_tag(w: Writer, final: str, index: int) -> None:
    """Cut the prompt where the continuation tag starts (transformers' ``continue_final_message``)."""
    text = "".join(w.parts)
    tag = _CONTINUE_TAG.strip()
    if final.strip() not in text or tag not in text:
        raise RenderError("continue_final_message is set but the dialect's template does not write the final "
                          "message's text, so there is nothing to continue", message_index=index, field="content")
    at = text.rindex(tag)
    w.cut(at if text.startswith(_CONTINUE_TAG, at) else len(text[:at].rstrip()))


def _render(
    w: Writer,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    dialect: str | Dialect,
    add_generation_prompt: bool | None,
    continue_final_message: bool,
    options: Mapping[str, Any],
    strict: bool = False,
) -> bool:
    """Render into ``w``; return the ``add_generation_prompt`` used."""
    d = get_dialect(dialect)
    if options:
        check_tokenizing_options(options)
    _check_bool("strict", strict)
    _check_bool("continue_final_message", continue_final_message)
    if add_generation_prompt is None:
        add_generation_prompt = not continue_final_message
    _check_bool("add_generation_prompt", add_generation_prompt)
    if continue_final_message and add_generation_prompt:
        raise RenderError("continue_final_message and add_generation_prompt are not compatible (as in "
                          "transformers): continue the final message, or open a new assistant turn")
    msgs = normalize_messages(messages)
    if not msgs:
        raise RenderError("cannot render an empty conversation (the official tokenizer refuses it too)")
    tool_list = normalize_tools(tools)
    if strict:
        check_strict(d, msgs, tool_list, add_generation_prompt, options)
    final = _tag_final_message(msgs) if continue_final_message else None
    # template kwargs the dialect's template does not read are ignored, as the template ignores them
    read = options if options.keys() <= set(d.options) else {k: v for k, v in options.items() if k in d.options}
    RENDERERS[d.family](w, d, msgs, tool_list, add_generation_prompt, read)
    if final is not None:
        _cut_at_tag(w, final, len(msgs) - 1)
    return add_generation_prompt


def _k3_call(
    dialect: str | Dialect,
    add_generation_prompt: bool | None,
    continue_final_message: bool,
    options: Mapping[str, Any],
    messages: Sequence[Any] = (),
    strict: bool = False,
    tools: Sequence[Any] | None = None,
) -> dict[str, Any] | None:
    """For a K3-family dialect, the keyword arguments of :mod:`kimi_chat.families.k3.render`'s functions
    (the XTML renderer builds its own segments, not through a :class:`Writer`); ``None`` for K2."""
    d = get_dialect(dialect)
    if d.family != "k3":
        return None
    if options:
        check_tokenizing_options(options)
    _check_bool("strict", strict)
    _check_bool("continue_final_message", continue_final_message)
    if strict:
        check_strict(d, messages, tools, True if add_generation_prompt is None else add_generation_prompt, options)
    if continue_final_message:
        raise RenderError(f"continue_final_message is not supported by {d.name}: the official K3 tokenizer "
                          "has no such option")
    if add_generation_prompt is None:
        add_generation_prompt = True
    # kwargs the official encoder does not read are ignored by it (apply_chat_template(**kwargs))
    return {"add_generation_prompt": add_generation_prompt, **{k: v for k, v in options.items() if k in d.options}}


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
    k3 = _k3_call(dialect, add_generation_prompt, continue_final_message, options, messages, strict, tools)
    if k3 is not None:
        return render_k3(messages, tools, **k3)
    w = Writer(marked=False)
    _render(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
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
    ``strict`` and the other arguments are :func:`render`'s."""
    k3 = _k3_call(dialect, add_generation_prompt, continue_final_message, options, messages, strict, tools)
    if k3 is not None:
        return [Segment(g.text, g.message_index, g.trainable) for g in render_k3_segments(messages, tools, **k3)]
    w = Writer(marked=True)
    _render(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
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
    if get_dialect(dialect).family not in RENDERERS:
        raise NotImplementedError(f"render_layout covers the families of RENDERERS; for {get_dialect(dialect).name} "
                                  "use kimi_chat.families.k3.render.render_k3_segments / render_k3_ids")
    w = Writer(marked=True)
    _render(w, messages, tools, dialect, add_generation_prompt, continue_final_message, options, strict)
    return w.layout()
