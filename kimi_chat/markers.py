"""The one source of truth for every Kimi marker string and its special-token id.

Every other module imports marker spellings from here; none spells ``<|im_end|>`` itself.

Ids come from the official ``tokenizer_config.json`` (``added_tokens_decoder``) of Kimi-K2-Instruct
(July 2025) and, for the media and ``<think>`` tokens, of the K2.5/K2.6 line (see
``../shared/reference/PROVENANCE.md``). ``special`` is the flag of that config: tokens with
``special=False`` (tool-call markers, ``<think>``) survive ``skip_special_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "Marker",
    "MARKERS",
    "BY_TEXT",
    "BY_ID",
    "NUM_BASE_TOKENS",
    "NUM_RESERVED_SPECIAL",
    "BOS",
    "EOS",
    "IM_END",
    "IM_USER",
    "IM_ASSISTANT",
    "IM_SYSTEM",
    "IM_MIDDLE",
    "START_HEADER_ID",
    "END_HEADER_ID",
    "EOT",
    "TOOL_CALLS_SECTION_BEGIN",
    "TOOL_CALLS_SECTION_END",
    "TOOL_CALL_SECTION_BEGIN_SINGULAR",
    "TOOL_CALL_SECTION_END_SINGULAR",
    "TOOL_CALL_BEGIN",
    "TOOL_CALL_ARGUMENT_BEGIN",
    "TOOL_CALL_END",
    "MEDIA_START",
    "MEDIA_BEGIN",
    "MEDIA_CONTENT",
    "MEDIA_END",
    "MEDIA_PAD",
    "THINK_BEGIN",
    "THINK_END",
    "UNK",
    "PAD",
    "K25_VIDEO_PLACEHOLDER",
    "reserved_token_name",
    "TOOL_CALL_ID_PREFIX",
    "tool_call_id",
    "K3_NUM_RESERVED_SPECIAL",
    "K3_END_OF_MSG",
    "K3_OPEN",
    "K3_CLOSE",
    "K3_SEP",
    "K3_IMAGE_PLACEHOLDER",
    "K3_MARKERS",
    "K3_BY_TEXT",
    "K3_BY_ID",
    "K3_THINKING_EFFORTS",
]


@dataclass(frozen=True)
class Marker:
    """One marker: its spelling, its token id (``None`` if it is not a single token in any official
    config) and whether the official config flags it ``special``."""

    text: str
    id: int | None
    special: bool = True


NUM_BASE_TOKENS: Final = 163584
"""Number of ordinary BPE ranks in ``tiktoken.model`` (ids 0..163583)."""
NUM_RESERVED_SPECIAL: Final = 256
"""``num_reserved_special_tokens`` of ``tokenization_kimi.py``; it numbers 256 + 2 special ids."""

BOS: Final = Marker("[BOS]", 163584)
EOS: Final = Marker("[EOS]", 163585)
IM_END: Final = Marker("<|im_end|>", 163586)
IM_USER: Final = Marker("<|im_user|>", 163587)
IM_ASSISTANT: Final = Marker("<|im_assistant|>", 163588)
START_HEADER_ID: Final = Marker("<|start_header_id|>", 163590)
END_HEADER_ID: Final = Marker("<|end_header_id|>", 163591)
EOT: Final = Marker("[EOT]", 163593)
IM_SYSTEM: Final = Marker("<|im_system|>", 163594)
TOOL_CALLS_SECTION_BEGIN: Final = Marker("<|tool_calls_section_begin|>", 163595, special=False)
TOOL_CALLS_SECTION_END: Final = Marker("<|tool_calls_section_end|>", 163596, special=False)
TOOL_CALL_BEGIN: Final = Marker("<|tool_call_begin|>", 163597, special=False)
TOOL_CALL_ARGUMENT_BEGIN: Final = Marker("<|tool_call_argument_begin|>", 163598, special=False)
TOOL_CALL_END: Final = Marker("<|tool_call_end|>", 163599, special=False)
IM_MIDDLE: Final = Marker("<|im_middle|>", 163601)
# K2.5 / K2.6 line (from the K2.6-derived tokenizer_config.json, UNVERIFIED)
MEDIA_BEGIN: Final = Marker("<|media_begin|>", 163602)
MEDIA_CONTENT: Final = Marker("<|media_content|>", 163603)
MEDIA_END: Final = Marker("<|media_end|>", 163604)
MEDIA_PAD: Final = Marker("<|media_pad|>", 163605)
THINK_BEGIN: Final = Marker("<think>", 163606, special=False)
THINK_END: Final = Marker("</think>", 163607, special=False)
UNK: Final = Marker("[UNK]", 163838)
PAD: Final = Marker("[PAD]", 163839)

# Spellings that are not tokens of any official config, but appear in templates or model output.
MEDIA_START: Final = Marker("<|media_start|>", None)
"""Written by the K2-era templates for images; not a token in any official config (K2.5 uses
``<|media_begin|>``)."""
TOOL_CALL_SECTION_BEGIN_SINGULAR: Final = Marker("<|tool_call_section_begin|>", None, special=False)
"""Singular spelling some models emit; the parser accepts it as a section begin."""
TOOL_CALL_SECTION_END_SINGULAR: Final = Marker("<|tool_call_section_end|>", None, special=False)
K25_VIDEO_PLACEHOLDER: Final = Marker("<|kimi_k25_video_placeholder|>", None)
"""Video placeholder written by the K2.5 template (expanded by the processor, not a token)."""

MARKERS: Final[tuple[Marker, ...]] = (
    BOS, EOS, IM_END, IM_USER, IM_ASSISTANT, START_HEADER_ID, END_HEADER_ID, EOT, IM_SYSTEM,
    TOOL_CALLS_SECTION_BEGIN, TOOL_CALLS_SECTION_END, TOOL_CALL_BEGIN, TOOL_CALL_ARGUMENT_BEGIN,
    TOOL_CALL_END, IM_MIDDLE, MEDIA_BEGIN, MEDIA_CONTENT, MEDIA_END, MEDIA_PAD, THINK_BEGIN,
    THINK_END, UNK, PAD, MEDIA_START, TOOL_CALL_SECTION_BEGIN_SINGULAR,
    TOOL_CALL_SECTION_END_SINGULAR, K25_VIDEO_PLACEHOLDER,
)
BY_TEXT: Final[dict[str, Marker]] = {m.text: m for m in MARKERS}
BY_ID: Final[dict[int, Marker]] = {m.id: m for m in MARKERS if m.id is not None}


def reserved_token_name(token_id: int) -> str:
    """Name ``tokenization_kimi.py`` gives a special id absent from ``added_tokens_decoder``."""
    return f"<|reserved_token_{token_id}|>"


TOOL_CALL_ID_PREFIX: Final = "functions."
"""Tool-call ids the models were trained on are ``functions.NAME:INDEX``."""


def tool_call_id(name: str, index: int) -> str:
    """The canonical tool-call id ``functions.NAME:INDEX``."""
    return f"{TOOL_CALL_ID_PREFIX}{name}:{index}"


# --------------------------------------------------------------------------------------------------
# Kimi-K3 (XTML). K3 re-uses the ids that were <|im_end|>, <|im_user|>, <|im_assistant|> in K2, so its
# markers are kept apart from MARKERS / BY_TEXT / BY_ID (which describe the K2 configs); ids from
# PROVENANCE.md, section "Kimi-K3" (the official tokenizer_config.json was not found; several
# third-party copies agree on them).
# --------------------------------------------------------------------------------------------------

K3_NUM_RESERVED_SPECIAL: Final = 256
"""K3's ``tokenization_kimi.py`` numbers exactly 256 special ids (163584..163839), no ``+ 2``."""
K3_END_OF_MSG: Final = Marker("<|end_of_msg|>", 163586)
"""Ends every K3 message; the generation EOS of K3's ``config.json`` (the model's turn ends here)."""
K3_OPEN: Final = Marker("<|open|>", 163587)
K3_CLOSE: Final = Marker("<|close|>", 163588)
K3_SEP: Final = Marker("<|sep|>", 163589)
"""One third-party source flags ``<|sep|>`` ``special: false``; the oracle recipe makes it special."""
K3_IMAGE_PLACEHOLDER: Final = Marker("<|kimi_image_placeholder|>", None)
"""Written by the K3 encoder for an image (id unresolved: the vision processor replaces it)."""
K3_MARKERS: Final[tuple[Marker, ...]] = (BOS, EOS, K3_END_OF_MSG, K3_OPEN, K3_CLOSE, K3_SEP, UNK, PAD)
"""The named special tokens of the K3 tokenizer (its ``added_tokens_decoder``)."""
K3_BY_TEXT: Final[dict[str, Marker]] = {m.text: m for m in K3_MARKERS}
K3_BY_ID: Final[dict[int, Marker]] = {m.id: m for m in K3_MARKERS if m.id is not None}
K3_THINKING_EFFORTS: Final = ("low", "high", "max")
"""``thinking_effort`` values the K3 encoder accepts (its message text also advertises ``medium``,
which the encoder refuses)."""
