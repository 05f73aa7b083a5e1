"""Kimi-K3 rows with images: the row's ``image_prompts`` (one string per image of the conversation, in order)
in the samples, as the official K3 encoder writes them.

The K3 encoder (``encoding_k3.py``) writes each image as the next of ``image_prompts`` (a string of the vision
processor's markers, ``<|media_begin|>image 8x8<|media_content|><|media_pad|><|media_end|>``, encoded with its
special tokens), and without ``image_prompts`` as ``<|kimi_image_placeholder|>``. An image is an image part of
a message's content (``{"type": "image"}`` / ``"image_url"``) or, with ``image_prompts``, that placeholder typed
in a text. Training data can carry these prompts: they are text and markers, no pixels.

A sample trains requests of several lengths, and ``image_prompts`` is an option of the whole conversation (the
official encoder refuses a request with more prompts than images). So the samples are built with the images
written as the placeholder, and each sample's placeholders are replaced by the prompts in order: a sample starts
at the conversation's first message, so its k-th placeholder is the conversation's k-th image. Positions keep
their labels: a prompt is trained where its image's placeholder was (an image an assistant message holds).

Refused, naming the field (the row is a ``bad_row``): ``image_prompts`` not a list of strings, not as many as the
images, on a dialect whose rendering takes none (its template writes images itself), and the placeholder typed
anywhere but in a message's content (reasoning, tool-call arguments, tools), where a sample could not tell it
from an image.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import markers as M
from .samples import IGNORE_INDEX, InvalidRowError, Sample

if TYPE_CHECKING:
    from ..dialect_records import DialectRecord as Dialect
    from ..tokens.tokenizer import KimiTokenizer

__all__ = ["FIELD", "ImagePrompts", "row_image_prompts"]

FIELD = "image_prompts"
"""The row field (and the K3 render option) of the image prompts."""

PLACEHOLDER = M.K3_IMAGE_PLACEHOLDER.text
_IMAGE_PARTS = ("image", "image_url")


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in _IMAGE_PARTS


def _split(text: str) -> list[dict[str, Any]]:
    """A content string with typed placeholders as the content parts the encoder writes the same way."""
    parts: list[dict[str, Any]] = []
    for k, piece in enumerate(text.split(PLACEHOLDER)):
        if k:
            parts.append({"type": "image"})
        if piece:
            parts.append({"type": "text", "text": piece})
    return parts


def _content_images(content: Any) -> tuple[Any, int]:
    """``content`` with typed placeholders made image parts, and how many images it holds."""
    if isinstance(content, str):
        if PLACEHOLDER not in content:
            return content, 0
        parts = _split(content)
        return parts, sum(1 for p in parts if _is_image(p))
    if isinstance(content, list):
        out: list[Any] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str) \
                    and PLACEHOLDER in part["text"]:
                out += _split(part["text"])
            else:
                out.append(part)
        return out, sum(1 for p in out if _is_image(p))
    return content, 0


@dataclass(frozen=True)
class ImagePrompts:
    """The image prompts of one row, and where its images are: ``before[i]`` images in ``messages[:i]``."""

    prompts: tuple[str, ...]
    before: tuple[int, ...]

    def apply(self, samples: Sequence[Sample], tokenizer: "KimiTokenizer") -> list[Sample]:
        """``samples`` (built with every image as the placeholder) with each placeholder replaced by its prompt's
        ids, labelled as the placeholder was; their spans moved accordingly."""
        slot = tokenizer.encode(PLACEHOLDER, allow_special=True)
        ids = [tokenizer.encode(p, allow_special=True) for p in self.prompts]
        return [self._apply(s, slot, ids) for s in samples]

    def _apply(self, s: Sample, slot: list[int], prompt_ids: list[list[int]]) -> Sample:
        n = len(slot)
        expected = self.before[s.turns[-1] + 1] if s.turns else self.before[-1]
        out_ids: list[int] = []
        out_labels: list[int] = []
        shift: list[tuple[int, int]] = []  # (position in the old ids, growth of the ids before it)
        k = i = 0
        grown = 0
        while i < len(s.input_ids):
            if s.input_ids[i : i + n] == slot and k < len(prompt_ids):
                new = prompt_ids[k]
                trained = s.labels[i] != IGNORE_INDEX
                out_ids += new
                out_labels += new if trained else [IGNORE_INDEX] * len(new)
                k += 1
                i += n
                grown += len(new) - n
                shift.append((i, grown))
                continue
            out_ids.append(s.input_ids[i])
            out_labels.append(s.labels[i])
            i += 1
        if k != expected:
            raise InvalidRowError(
                f"{FIELD}: the sample of messages {s.turns} writes {k} image placeholders where its messages hold "
                f"{expected} images; give the images as content parts ({{\"type\": \"image\"}})")

        def moved(pos: int) -> int:
            return pos + next((g for at, g in reversed(shift) if at <= pos), 0)

        return Sample(out_ids, out_labels, list(s.turns), [(moved(a), moved(b)) for a, b in s.spans])


def row_image_prompts(row: Mapping[str, Any], dialect: "Dialect", messages: list[Any],
                      tools: Sequence[Any] | None) -> tuple[list[Any], ImagePrompts | None]:
    """``(messages, prompts)`` of a row: its messages with typed placeholders in content made image parts, and
    its :class:`ImagePrompts` (``None`` when the row has no ``image_prompts``). Raises
    :class:`~kimi_chat.data.sample.InvalidRowError` naming the field when the prompts cannot be used."""
    prompts = row.get(FIELD)
    if prompts is None:
        return messages, None
    if FIELD not in dialect.options:
        raise InvalidRowError(
            f"{FIELD}: the {dialect.name} rendering takes no image prompts (its template writes each image part "
            f"itself): remove the {FIELD!r} field, or render with a dialect that takes them (kimi-k3)")
    if isinstance(prompts, (str, bytes, Mapping)) or not isinstance(prompts, Sequence) or \
            not all(isinstance(p, str) for p in prompts):
        raise InvalidRowError(f"{FIELD}: must be a list of strings (one image prompt per image, in order), got "
                              f"{type(prompts).__name__}")
    out: list[Any] = []
    before = [0]
    for i, m in enumerate(messages):
        if isinstance(m, Mapping) and "content" in m:
            content, n = _content_images(m["content"])
            rest = {k: v for k, v in m.items() if k != "content"}
            m = {**m, "content": content}
        else:
            n, rest = 0, m
        if PLACEHOLDER in json.dumps(rest, ensure_ascii=False, default=str):
            raise InvalidRowError(
                f"messages[{i}]: {PLACEHOLDER} typed outside the content (reasoning, tool calls, name): with "
                f"{FIELD} the K3 encoder takes it for an image there too; put images in the content only")
        out.append(m)
        before.append(before[-1] + n)
    if tools is not None and PLACEHOLDER in json.dumps(tools, ensure_ascii=False, default=str):
        raise InvalidRowError(f"tools: {PLACEHOLDER} typed in a tool declaration: with {FIELD} the K3 encoder "
                              "takes it for an image; remove it")
    if before[-1] != len(prompts):
        raise InvalidRowError(
            f"{FIELD}: {len(prompts)} prompt(s) given but the messages hold {before[-1]} image(s) (image content "
            f"parts and {PLACEHOLDER} typed in content): give one prompt per image, in order")
    return out, ImagePrompts(tuple(prompts), tuple(before))
