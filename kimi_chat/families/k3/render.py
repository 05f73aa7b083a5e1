"""The Kimi-K3 formatter: OpenAI-style messages + tools -> the exact K3 (XTML) prompt, text and token ids.

One pass (:func:`kimi_chat.families.k3.prompt_pass.build`). The output
is byte-identical to the official K3 tokenizer's ``apply_chat_template(messages, tools=tools,
tokenize=False, ...)`` (``encoding_k3.build_chat_segments`` joined), and :func:`render_k3_ids` is
token-identical to its ``tokenize=True`` (checked by the golden and property tests against
:mod:`kimi_chat.oracle_k3`).

The prompt is a sequence of messages made of four special tokens::

    <|open|>TAG k="v" ...<|sep|> BODY <|close|>TAG<|sep|>          (every message ends <|end_of_msg|>)

    [tool declaration]         message role="system" type="tool-declare"   (tools given)
    [thinking effort]          message role="system" type="thinking-effort" (thinking on, effort set)
    messages                   user / system (name=...), system with tools -> "## New Tools Available",
                               assistant: think (thinking on) + response + tools/call/argument|json,
                               tool results: role="tool" tool="NAME" index="N", re-ordered by tool_call_id
    [tool-choice]              required / none
    [response-format]          json_object / json_schema
    [generation prompt]        <|open|>message role="assistant"<|sep|><|open|>think|response<|sep|>

The official tokenizer encodes the prompt **segment by segment**: each marker as its special id, each
other piece (a tag name, `` role``, ``="``, an attribute value, ``"``, a message body...) as ordinary
text on its own, so BPE never merges across pieces and text typed by a user never becomes a marker.
The renderer writes exactly those pieces into a :class:`~kimi_chat.prompt.writer.Writer`: markers and image
prompts (encoded with special tokens allowed) as template literals, every other piece as text (tag names
and attribute syntax too: the encoder encodes them as ordinary text), so text, segments and ids come from
one pass. It writes by items (:meth:`~kimi_chat.prompt.writer.Writer.items`): the scaffolding of every
message is a constant :class:`~kimi_chat.prompt.writer.Run` of segments, so :mod:`kimi_chat.tokens.segments`
encodes each run once per tokenizer and the :class:`~kimi_chat.prompt.writer.Layout` is unfolded only when
it is read.

Roles the encoder does not know (``developer`` among them) are dropped, as it drops them. Where the
official encoder raises (``thinking_effort="medium"``, arguments that are JSON but not an object, a
tool result whose tool name cannot be resolved, a tool call without a name...), this raises
:class:`~kimi_chat.errors.RenderError` naming the message index and field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from typing_extensions import TypedDict, Unpack

from kimi_chat.errors import RenderError
from kimi_chat.families.k3.prompt_pass import CONTROL_ORDER, UNSET, build
from kimi_chat.dialect_records import DialectRecord as Dialect
from kimi_chat.messages import check_bool
from kimi_chat.prompt.writer import Layout, Writer
from kimi_chat.surrogates import warn_lone_surrogates
from kimi_chat.tokens.segments import encode_items

__all__ = ["K3Segment", "K3Options", "render_k3", "render_k3_segments", "render_k3_ids", "write_k3"]


class K3Segment(NamedTuple):
    """One segment of the official K3 encoding. ``special``: a marker (or image prompt), encoded with
    special tokens allowed; otherwise ordinary text (never a special id). ``message_index`` is the
    index in the caller's ``messages`` (-1 for scaffolding: tool declaration, thinking effort,
    tool-choice / response-format messages, generation prompt); ``trainable`` marks what the model
    produced in an assistant message (after its opening ``think``, or ``response`` with thinking off,
    up to and including the closing ``<|close|>message<|sep|><|end_of_msg|>``)."""

    text: str
    special: bool
    message_index: int
    trainable: bool


class K3Options(TypedDict, total=False):
    """The keyword options of :func:`render_k3_segments` / :func:`render_k3_ids` (those of
    :func:`render_k3`, with the same defaults)."""

    add_generation_prompt: bool
    thinking: bool
    thinking_effort: str | None
    tool_choice: Any
    response_format: Any
    response_schema: Any
    image_prompts: Sequence[str] | None


def render_k3(
    messages: Sequence[Any],
    tools: Sequence[Any] | None = None,
    *,
    add_generation_prompt: bool = True,
    thinking: bool = True,
    thinking_effort: str | None = "max",
    tool_choice: Any = None,
    response_format: Any = None,
    response_schema: Any = UNSET,
    image_prompts: Sequence[str] | None = None,
) -> str:
    """The Kimi-K3 prompt the official tokenizer renders for ``messages`` and ``tools``.

    Defaults are the official tokenizer's: ``add_generation_prompt=True``, ``thinking=True`` and
    ``thinking_effort="max"`` (``None``: no thinking-effort message). ``tool_choice`` ``"required"`` /
    ``"none"`` and ``response_format`` ``"json_object"`` / ``"json_schema"`` (a string or an OpenAI
    ``{"type": ...}`` object) add their system messages; ``response_schema`` overrides the schema read
    from ``response_format.json_schema``. ``image_prompts`` replace image parts and
    ``<|kimi_image_placeholder|>`` text in order (as the vision processor passes them).

    Raises :class:`~kimi_chat.messages.InvalidMessagesError` for messages that are not message objects
    (or have no ``role``) and :class:`~kimi_chat.errors.RenderError` where the official encoder raises.
    """
    check_bool("add_generation_prompt", add_generation_prompt)
    thinking = bool(thinking)  # the official encoder reads it by truth value (lint: non-bool-option)
    w = Writer(marked=False)
    build(messages, tools, add_generation_prompt, thinking, thinking_effort, tool_choice, response_format,
           response_schema, image_prompts, w)
    return "".join(w.parts)


_OPTION_NAMES = frozenset(K3Options.__annotations__)
_DEFAULT_ARGS: tuple[bool, Any, Any, Any, Any, Any] = (True, "max", None, None, UNSET, None)
"""The encoder's defaults of the options :func:`~kimi_chat.families.k3.prompt_pass.build` takes after
``add_generation_prompt``, in its order."""
_DEFAULTS: dict[str, Any] = dict(zip(("thinking", "thinking_effort", "tool_choice", "response_format",
                                      "response_schema", "image_prompts"), _DEFAULT_ARGS))
"""The same by option name."""


def _write(w: Writer, messages: Sequence[Any], tools: Sequence[Any] | None, options: Mapping[str, Any]) -> None:
    """Write the prompt of :func:`render_k3`'s ``options`` into ``w`` (a marked writer's first mark at 0)."""
    unknown = options.keys() - _OPTION_NAMES if options else None
    if unknown:
        raise TypeError(f"unknown Kimi-K3 option(s): {', '.join(sorted(unknown))}")
    add_generation_prompt = options.get("add_generation_prompt", True)
    check_bool("add_generation_prompt", add_generation_prompt)
    thinking, effort, choice, fmt, schema, images = (options.get(k, v) for k, v in _DEFAULTS.items())
    # thinking: the official encoder reads it by truth value (lint: non-bool-option)
    build(messages, tools, add_generation_prompt, bool(thinking), effort, choice, fmt, schema, images, w)


def _layout(messages: Sequence[Any], tools: Sequence[Any] | None, options: Mapping[str, Any]) -> Layout:
    w = Writer(marked=True)
    _write(w, messages, tools, options)
    return w.layout()


def write_k3(
    w: Writer, d: Dialect, messages: Sequence[Any], tools: Sequence[Any] | None, add_generation_prompt: bool | None,
    continue_final_message: bool, options: Mapping[str, Any], strict: bool,
) -> bool:
    """The K3 family's prompt writer (:func:`kimi_chat.prompt.render` and its views, for a K3 dialect): the
    encoder's own input handling (``strict`` checked on the input as given; ``continue_final_message`` is
    refused: the official K3 tokenizer has no such option; ``add_generation_prompt`` defaults to True), the
    kwargs the encoder does not read ignored (as its ``apply_chat_template(**kwargs)`` ignores them).
    Returns the ``add_generation_prompt`` used."""
    if strict:
        # imported here: the validator imports the dialect records (which hold this writer)
        from kimi_chat.validation import check_strict

        check_strict(d, messages, tools, True if add_generation_prompt is None else add_generation_prompt, options)
    if continue_final_message:
        raise RenderError(f"continue_final_message is not supported by {d.name}: the official K3 tokenizer "
                          "has no such option")
    if add_generation_prompt is None:
        add_generation_prompt = True
    if not options:  # every option at the encoder's default: what _write does with none, at once
        if type(add_generation_prompt) is not bool:
            check_bool("add_generation_prompt", add_generation_prompt)
        thinking, effort, choice, fmt, schema, images = _DEFAULT_ARGS
        build(messages, tools, add_generation_prompt, thinking, effort, choice, fmt, schema, images, w)
        return add_generation_prompt
    read = {k: v for k, v in options.items() if k in d.options}
    read["add_generation_prompt"] = add_generation_prompt
    _write(w, messages, tools, read)
    return add_generation_prompt


def render_k3_segments(
    messages: Sequence[Any], tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[K3Segment]:
    """:func:`render_k3` (same options) as the official encoder's segments (:class:`K3Segment`, empty
    ones dropped as the encoder drops them); ``"".join(s.text for s in segments) == render_k3(...)``."""
    return [K3Segment(p.text, p.literal, p.message_index, p.trainable) for p in _layout(messages, tools, options).pieces()]


def render_k3_ids(
    messages: Sequence[Any], tokenizer: Any, tools: Sequence[Any] | None = None, **options: Unpack[K3Options]
) -> list[int]:
    """The token ids of the K3 prompt, equal to the official ``apply_chat_template(..., tokenize=True)``
    (options as for :func:`render_k3`).

    ``tokenizer`` is a K3 :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`
    (``KimiTokenizer.from_reference("k3")``). Each segment is encoded on its own, as the official
    tokenizer does (:mod:`kimi_chat.tokens.segments`): markers as their special ids, text as ordinary text
    (special-token spellings typed by a user stay text), so BPE never merges across segments. A lone
    surrogate in the text is encoded as U+FFFD, as the official tokenizer does, with a
    :class:`~kimi_chat.errors.LoneSurrogateWarning`."""
    specials = tokenizer.special_tokens
    missing = [t for t in CONTROL_ORDER if t not in specials]
    if missing:
        raise ValueError(
            f"{tokenizer!r} is not a Kimi-K3 tokenizer (no special token {missing[0]}); "
            "use KimiTokenizer.from_reference('k3')"
        )
    w = Writer(marked=True)
    _write(w, messages, tools, options)
    items, marks = w.written_items()
    warn_lone_surrogates(items, marks, messages, tools, options, stacklevel=2)
    return encode_items(items, tokenizer)[0]
