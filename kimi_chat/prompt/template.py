"""The prompt writer of a family whose official machinery is a chat template (Kimi-K2's Jinja templates, as
transformers' ``apply_chat_template`` runs them): the input validated and normalised (:mod:`kimi_chat.messages`),
``strict=True`` applied (:func:`kimi_chat.validation.check_strict`), the template kwargs the dialect reads kept
(the others are ignored, as the template ignores them) and ``continue_final_message`` done the way transformers
does it; the family's renderer writes the prompt in between.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..errors import RenderError
from ..messages import check_bool, normalize_messages, normalize_tools_keyed
from .writer import Writer

__all__ = ["FamilyRenderer", "PromptWriter", "template_writer", "CONTINUE_TAG"]

FamilyRenderer = Callable[
    [Writer, Dialect, "list[dict[str, Any]]", "list[dict[str, Any]] | None", bool, Mapping[str, Any], "bytes | None"],
    None,
]
"""A template family's renderer: ``(writer, dialect, messages, tools, add_generation_prompt, options, tools_key)``,
the input normalised, ``options`` the kwargs the dialect's template reads, ``tools_key`` the tools' exact content
key (:func:`~kimi_chat.messages.normalize_tools_keyed`; ``None``: not cached)."""

PromptWriter = Callable[
    [Writer, Dialect, Sequence[Any], "Sequence[Any] | None", "bool | None", bool, Mapping[str, Any], bool], bool
]
"""A family's prompt writer (its record's ``write_prompt``): ``(writer, dialect, messages, tools,
add_generation_prompt, continue_final_message, options, strict)`` -> the ``add_generation_prompt`` used."""

# what transformers appends to the message it continues, then cuts the prompt at
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


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
        msgs[index] = {**last, "content": content + CONTINUE_TAG}
        return content
    for j in range(len(content) - 1, -1, -1):
        part = content[j]
        if "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise RenderError("continue_final_message: the last text part's text is not a string",
                                  message_index=index, field=f"content[{j}].text")
            content = [*content[:j], {**part, "text": text + CONTINUE_TAG}, *content[j + 1 :]]
            msgs[index] = {**last, "content": content}
            return text
    raise RenderError("continue_final_message is set but the final message has no text part to continue",
                      message_index=index, field="content")


def _cut_at_tag(w: Writer, final: str, index: int) -> None:
    """Cut the prompt where the continuation tag starts (transformers' ``continue_final_message``)."""
    text = "".join(w.parts)
    tag = CONTINUE_TAG.strip()
    if final.strip() not in text or tag not in text:
        raise RenderError("continue_final_message is set but the dialect's template does not write the final "
                          "message's text, so there is nothing to continue", message_index=index, field="content")
    at = text.rindex(tag)
    w.cut(at if text.startswith(CONTINUE_TAG, at) else len(text[:at].rstrip()))


def template_writer(renderer: FamilyRenderer) -> PromptWriter:
    """The :data:`PromptWriter` of a template family whose renderer is ``renderer`` (module docstring)."""

    def write(
        w: Writer, d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None,
        add_generation_prompt: bool | None, continue_final_message: bool, options: Mapping[str, Any], strict: bool,
    ) -> bool:
        if add_generation_prompt is None:
            add_generation_prompt = not continue_final_message
        elif type(add_generation_prompt) is not bool:
            check_bool("add_generation_prompt", add_generation_prompt)
        if continue_final_message and add_generation_prompt:
            raise RenderError("continue_final_message and add_generation_prompt are not compatible (as in "
                              "transformers): continue the final message, or open a new assistant turn")
        msgs = normalize_messages(messages)
        if not msgs:
            raise RenderError("cannot render an empty conversation (the official tokenizer refuses it too)")
        tool_list, tools_key = normalize_tools_keyed(tools)
        if strict:
            # imported here: the validator imports the dialect records (which hold this writer)
            from ..validation import check_strict

            check_strict(d, msgs, tool_list, add_generation_prompt, options)
        final = _tag_final_message(msgs) if continue_final_message else None
        # template kwargs the dialect's template does not read are ignored, as the template ignores them
        read = options
        if options and not options.keys() <= set(d.options):
            read = {k: v for k, v in options.items() if k in d.options}
        renderer(w, d, msgs, tool_list, add_generation_prompt, read, tools_key)
        if final is not None:
            _cut_at_tag(w, final, len(msgs) - 1)
        return add_generation_prompt

    return write

