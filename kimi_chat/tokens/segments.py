"""Segment-wise encoding: the token-encoding policy of a family whose official tokenizer encodes the prompt
piece by piece (Kimi-K3's ``encoding_k3.build_chat_segments``), not the whole text at once.

Each part the renderer wrote (:class:`~kimi_chat.prompt.writer.Layout`) is encoded on its own, so BPE never
merges across parts and every token belongs to one part: a template literal (a marker, an image prompt) with
special tokens allowed, input text as ordinary text (special-token spellings typed by a user stay text).
:func:`encode_items` reads the writer's items (:meth:`~kimi_chat.prompt.writer.Writer.written_items`): a
constant run of parts is encoded once per tokenizer, by its text.
:func:`kimi_chat.tokens.render_tokens` takes this path for a family whose record says ``segment_wise``.
The three ``special_tokens`` policies, for special-token text inside a text part:

* ``"text"`` (default): ordinary text, as the official K3 tokenizer encodes it;
* ``"strict"``: :class:`~kimi_chat.errors.RenderError` naming the message index and field (:func:`typed_special`
  finds it, :func:`raise_typed` names the field);
* ``"special"``: each text part encoded with special tokens allowed (what a server encoding text parts with
  special tokens allowed would produce; not the official ids).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..caches import PerTokenizer
from ..errors import RenderError
from ..messages import string_paths, to_plain
from ..prompt.writer import Layout, Literal, Run
from .text_ids import text_ids
from .tokenizer import MAX_NO_WHITESPACES_CHARS

__all__ = ["encode_items", "typed_special", "raise_typed"]

_CACHE_MAX_LEN = 48
_CACHE_MAX_ENTRIES = 1 << 16
_CACHES: PerTokenizer[tuple[dict[str, list[int]], dict[str, list[int]]]] = PerTokenizer("k3.tokenizer_ids")
"""Per tokenizer: (literal -> ids, run -> ids): short literals, encoded once (bounded by ``_CACHE_MAX_ENTRIES``),
and every constant run (module constants: bounded by the code). Text: :mod:`kimi_chat.tokens.text_ids`."""


def _caches(tokenizer: Any) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    return _CACHES.get(tokenizer, lambda _: ({}, {}))


def _run_ids(run: Run, tokenizer: Any) -> list[int]:
    """The ids of a constant run: its text pieces as ordinary text, its other pieces (markers) with special
    tokens allowed, each on its own."""
    texts = set(run.texts)
    out: list[int] = []
    for k, piece in enumerate(run.pieces):
        if piece:
            out += tokenizer.encode(piece, allow_special=k not in texts)
    return out


def encode_items(
    items: Sequence[str], tokenizer: Any, cuts: Sequence[int] | None = None, special_text: bool = False
) -> tuple[list[int], list[int]]:
    """``(ids, ends)``: the segment-wise ids of a writer's ``items``
    (:meth:`~kimi_chat.prompt.writer.Writer.written_items`, module docstring) and, for each item index in
    ``cuts`` (in order, the last ``len(items)``), the number of ids of ``items[:cut]`` (``[len(ids)]``
    without ``cuts``). ``special_text``: input text too is encoded with special tokens allowed."""
    literals, runs = _caches(tokenizer)
    tids = text_ids(tokenizer)
    ordinary = tids.ids
    encode = tokenizer.encode
    short = _CACHE_MAX_LEN
    long_text = MAX_NO_WHITESPACES_CHARS  # above this, KimiTokenizer.encode applies the official long-run cuts
    ids: list[int] = []
    ends: list[int] = []
    extend = ids.extend
    get = tids.short.get
    run_get = runs.get
    for a, b in (zip([0, *cuts], cuts) if cuts is not None else ((0, len(items)),)):
        for p in items[a:b] if cuts is not None else items:
            cls = type(p)
            if cls is Run:
                toks = run_get(p)
                if toks is None:
                    toks = runs[p] = _run_ids(p, tokenizer)  # type: ignore[arg-type]
                extend(toks)
                continue
            if not p:
                continue
            if cls is Literal:  # a template literal: special tokens allowed
                toks = literals.get(p)
                if toks is None:
                    toks = encode(str(p), allow_special=True)
                    if len(p) <= short:
                        if len(literals) >= _CACHE_MAX_ENTRIES:
                            literals.clear()
                        literals[p] = toks
                extend(toks)
                continue
            if special_text:
                extend(encode(p, allow_special=True))
                continue
            toks = get(p)
            if toks is None:
                toks = ordinary(p) if len(p) <= long_text else encode(p, allow_special=False)
            extend(toks)
        ends.append(len(ids))
    return ids, ends


def typed_special(lay: Layout, first: Callable[[str], str | None]) -> tuple[int, str] | None:
    """``(message_index, name)`` of the first special-token name (``first(text)``: the first in ``text``, or
    None) inside a text part of ``lay``, or None."""
    parts = lay.parts
    if first("\n".join(parts[k] for k in lay.texts)) is None:  # a name holds no whitespace: a C-speed check first
        return None
    bounds = [*lay.marks, (len(parts), -1, False)]
    texts = set(lay.texts)
    for (a, idx, _), (b, _, _) in zip(bounds, bounds[1:]):
        for k in range(a, b):
            if k in texts:
                name = first(parts[k])
                if name is not None:
                    return idx, name
    return None  # pragma: no cover - the joined check only finds names inside a part


def raise_typed(at: tuple[int, str], messages: Sequence[Any], tools: Any, options: Mapping[str, Any]) -> None:
    """Raise the :class:`~kimi_chat.errors.RenderError` of ``special_tokens='strict'`` for the special-token
    name ``at`` = ``(message_index, name)`` (:func:`typed_special`), naming the message index and field
    (``tools``, ``response_schema``... for text of no message)."""
    owner, name = at
    why = (
        f"contains the special-token text {name!r}; special_tokens='strict' refuses it "
        "(the default 'text' encodes it as ordinary text, as the official K3 tokenizer does)"
    )
    if owner >= 0:
        path = next((p for p, s in string_paths(to_plain(messages[owner]), "") if name in s), None)
        raise RenderError(why, message_index=owner, field=path or None)
    sources = [("tools", tools), *((k, v) for k, v in options.items() if k != "image_prompts")]
    for root, value in sources:
        path = next((p for p, s in string_paths(to_plain(value), root) if name in s), None)
        if path is not None:
            raise RenderError(f"{path} {why}")
    raise RenderError(f"the prompt {why}")
