"""Segment-wise encoding: the token-encoding policy of a family whose official tokenizer encodes the prompt
piece by piece (Kimi-K3's ``encoding_k3.build_chat_segments``), not the whole text at once.

Each part the renderer wrote (:class:`~kimi_chat.prompt.writer.Layout`) is encoded on its own, so BPE never
merges across parts and every token belongs to one part: a template literal (a marker, an image prompt) with
special tokens allowed, input text as ordinary text (special-token spellings typed by a user stay text).
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
from ..prompt.writer import Layout
from .tokenizer import MAX_NO_WHITESPACES_CHARS

__all__ = ["encode_parts", "typed_special", "raise_typed"]

_CACHE_MAX_LEN = 48
_CACHE_MAX_ENTRIES = 1 << 16
_CACHES: PerTokenizer[tuple[dict[str, list[int]], dict[str, list[int]]]] = PerTokenizer("k3.tokenizer_ids")
"""Per tokenizer: (literal part -> ids, text part -> ids) of short parts, encoded once (bounded by
``_CACHE_MAX_ENTRIES`` each)."""


def _caches(tokenizer: Any) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """(literal part -> ids, text part -> ids) of ``tokenizer``: short parts, encoded once."""
    return _CACHES.get(tokenizer, lambda _: ({}, {}))


def encode_parts(
    lay: Layout, tokenizer: Any, cuts: Sequence[int] | None = None, special_text: bool = False
) -> tuple[list[int], list[int]]:
    """``(ids, ends)``: the segment-wise ids of ``lay.parts`` (module docstring) and, for each part index in
    ``cuts`` (in order, the last ``len(parts)``), the number of ids of ``parts[:cut]`` (``[len(ids)]``
    without ``cuts``). ``special_text``: text parts too are encoded with special tokens allowed."""
    literals, cache = _caches(tokenizer)
    parts = lay.parts
    texts = lay.texts
    encode_ordinary = tokenizer.encoding.encode_ordinary
    encode = tokenizer.encode
    short = _CACHE_MAX_LEN
    long_text = MAX_NO_WHITESPACES_CHARS  # above this, KimiTokenizer.encode applies the official long-run cuts
    ids: list[int] = []
    ends: list[int] = []
    extend = ids.extend
    get = cache.get
    lit_get = literals.get
    n_texts = len(texts)
    t = 0  # texts[t]: the next text part
    nxt = texts[0] if n_texts else -1
    for a, b in (zip([0, *cuts], cuts) if cuts is not None else ((0, len(parts)),)):
        for k in range(a, b):
            p = parts[k]
            if k != nxt:  # a template literal: special tokens allowed
                if not p:
                    continue
                toks = lit_get(p)
                if toks is None:
                    toks = encode(p, allow_special=True)
                    if len(p) <= short:
                        if len(literals) >= _CACHE_MAX_ENTRIES:
                            literals.clear()
                        literals[p] = toks
                extend(toks)
                continue
            t += 1
            nxt = texts[t] if t < n_texts else -1
            if not p:
                continue
            if special_text:
                extend(encode(p, allow_special=True))
                continue
            toks = get(p)
            if toks is None:
                toks = encode_ordinary(p) if len(p) <= long_text else encode(p, allow_special=False)
                if len(p) <= short:
                    if len(cache) >= _CACHE_MAX_ENTRIES:
                        cache.clear()
                    cache[p] = toks
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
