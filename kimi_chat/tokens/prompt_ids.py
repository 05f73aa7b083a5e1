"""The ids of a K2-family prompt from the prompts encoded before, per tokenizer.

Two facts of the encoder make this exact: it encodes the text between two special tokens on its own (so
the ids after a special token do not depend on what precedes it), and the K2 vocabularies' special-token
names are prefix-free (so a name ending where a prefix ends is matched there in any text that starts with
that prefix). :func:`encode_whole` uses both:

* **a prompt seen before as a prefix**: a chat client sends the whole conversation on every turn, so the
  previous request's prompt, which ends with a special token (the generation prompt's), starts the next
  one; and a request sent again is its own prefix. The ids of the longest such prompt are reused and only
  the rest is encoded. The prompts are kept in a bounded LRU per tokenizer (:data:`PREFIXES`,
  :data:`PREFIX_CHARS` characters of text at most);
* **the first turn's body**: a server declares the same tools (or the same system prompt) on every request
  of every user: the body between ``<|im_middle|>`` and ``<|im_end|>`` is the same text each time, its ids
  looked up by that text (at most 16 bodies per tokenizer).

Text longer than :data:`PIECEWISE_CHARS` is encoded in one tiktoken call, whose ``allowed_special`` set is
converted to a Rust set on every call (about 0.1 µs a name: some 28 µs for the 258 names of a K2
vocabulary, a tenth of encoding a 30-message conversation). What tiktoken does with that set is look up
each special-token name it finds in the text, so any set holding every name that occurs in the text gives
the same ids: the names a K2 template writes (:data:`_TEMPLATE_NAMES`) are passed alone when a search for
the others (their spellings up to a first digit, so ``<|reserved_token_`` stands for all of those; a few
C-level regex searches, about 1 µs per 1000 characters) finds none, the whole set otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from os.path import commonprefix
from typing import TYPE_CHECKING

from .. import markers as M
from ..caches import LRUCache, PerTokenizer
from .text_ids import TextIds, text_ids

if TYPE_CHECKING:
    from .tokenizer import KimiTokenizer

__all__ = ["encode_whole", "remember_prompt", "PREFIXES", "PREFIX_CHARS"]

PREFIXES = 32
"""Prompts kept per tokenizer (the most recently used)."""
PREFIX_CHARS = 1 << 20
"""Characters of prompt text kept per tokenizer, at most (with their ids: about 8 MB)."""
PIECEWISE_CHARS = 2048
"""Text up to this long is encoded piece by piece between its special tokens (:meth:`TextIds.with_specials`:
the pieces' ids cached, no per-call set of allowed names); longer text in one call (fewer calls into
tiktoken, no split)."""
_FIRST_BODY_MIN = 256
"""Shorter first-turn bodies are encoded with the rest (no lookup)."""
_FIRST_BODY_MAX = 1 << 16
"""Longer ones are not kept (each entry's memory bounded)."""
_IM_MIDDLE, _IM_END = M.IM_MIDDLE.text, M.IM_END.text
_TEMPLATE_NAMES = frozenset(m.text for m in (
    M.IM_SYSTEM, M.IM_USER, M.IM_ASSISTANT, M.IM_MIDDLE, M.IM_END, M.TOOL_CALLS_SECTION_BEGIN, M.TOOL_CALLS_SECTION_END,
    M.TOOL_CALL_BEGIN, M.TOOL_CALL_ARGUMENT_BEGIN, M.TOOL_CALL_END, M.THINK_BEGIN, M.THINK_END, M.MEDIA_BEGIN,
    M.MEDIA_CONTENT, M.MEDIA_END, M.MEDIA_PAD))
"""The special-token names K2 templates write: passed alone to tiktoken when no other name is in the text."""
_SEARCH_CHARS = 1 << 14
"""Longer text is encoded with every name allowed (searching it for the other names would cost more than the
smaller set saves)."""


def _searches(others: Iterable[str]) -> tuple[Callable[[str], object], ...]:
    """Regex searches that find something in every text holding one of ``others`` (and perhaps in some
    holding none): each name's spelling up to its first digit, grouped by first character, each group one
    pattern starting with its common prefix (a literal: the regex engine scans for it at C speed)."""
    probes = sorted({re.match(r"\D*", n).group() or n for n in others})  # type: ignore[union-attr]
    groups: dict[str, list[str]] = {}
    for p in probes:
        groups.setdefault(p[0], []).append(p)
    out = []
    for group in groups.values():
        head = commonprefix(group)
        rest = "|".join(re.escape(p[len(head) :]) for p in group)
        out.append(re.compile(f"{re.escape(head)}(?:{rest})").search)
    return tuple(out)


class _Known:
    """One tokenizer's prompts (text -> ids, weighed by length) and first-turn bodies (text -> ids)."""

    __slots__ = ("prompts", "bodies", "prefix_free", "ends", "text", "_encode", "_names", "_template", "_others")

    def __init__(self, tok: "KimiTokenizer") -> None:
        self.text: TextIds = text_ids(tok)
        self._encode = tok.encoding.encode
        self._names = tok._special_names
        self._template = _TEMPLATE_NAMES & self._names
        self._others = _searches(self._names - self._template)
        self.prompts: LRUCache[list[int]] = LRUCache(None, PREFIXES, max_weight=PREFIX_CHARS)
        self.bodies: LRUCache[list[int]] = LRUCache(None, 16)
        self.prefix_free = self.text.prefix_free
        self.ends = self.text.id_to_name
        """Special id -> its name: a prompt is kept when its ids end with the special token its text ends with."""

    def encode(self, s: str) -> list[int]:
        """``s`` encoded with every special-token name special (a new list)."""
        if len(s) <= PIECEWISE_CHARS and self.prefix_free:  # names found by shape as tiktoken finds them
            return self.text.with_specials(s)
        names = self._template
        if len(s) > _SEARCH_CHARS:
            names = self._names
        else:
            for search in self._others:
                if search(s) is not None:  # perhaps a name the template does not write: allow them all
                    names = self._names
                    break
        return self._encode(s, allowed_special=names, disallowed_special=())  # type: ignore[no-any-return]


_KNOWN: PerTokenizer[_Known] = PerTokenizer("tokens.prompt_ids")


def _longest_known(known: _Known, text: str) -> tuple[str, list[int]] | None:
    """The longest known prompt that starts ``text``, and its ids (two that start it differ in length)."""
    starting = list(filter(text.startswith, known.prompts.keys()))  # a C-level pass over at most PREFIXES
    if not starting:
        return None
    prompt = max(starting, key=len) if len(starting) > 1 else starting[0]
    ids = known.prompts.get(prompt)  # now the most recently used (None: dropped meanwhile, or caches bypassed)
    return None if ids is None else (prompt, ids)


def encode_whole(tok: "KimiTokenizer", text: str) -> list[int]:
    """``tok.encoding.encode(text)`` with every special-token text special (``text`` has no long-input
    cut), from the prompts encoded before (module docstring)."""
    known = _KNOWN.get(tok, _Known)
    hit = _longest_known(known, text) if known.prefix_free else None
    if hit is not None:
        ids = [*hit[1], *known.encode(text[len(hit[0]) :])]
    else:
        ids = _first_turn(known, text)
    if ids and known.prefix_free:
        name = known.ends.get(ids[-1])
        if name is not None and text.endswith(name) and (hit is None or len(text) > len(hit[0])):
            known.prompts.put(text, ids[:], len(text))  # a copy: the caller owns `ids`
    return ids


def remember_prompt(tok: "KimiTokenizer", text: str, ids: list[int]) -> bool:
    """Keep ``ids``, the encoding of prompt ``text`` (every special-token text special, as
    :func:`encode_whole` gives it) obtained otherwise (cut from a longer prompt's ids), so that a later prompt
    starting with ``text`` reuses them; kept only where :func:`encode_whole` would keep it (``ids`` end with
    the special token ``text`` ends with, prefix-free names, and every special-token name in ``text`` is a
    special id in ``ids``). Whether it was kept."""
    known = _KNOWN.get(tok, _Known)
    name = known.ends.get(ids[-1]) if ids and known.prefix_free else None
    if name is None or not text.endswith(name):
        return False
    # every special-token name in the text a special id (not text typed in a message and encoded as text, as
    # render_tokens' default policy does): the ids :func:`encode_whole` would give, which every policy reuses
    specials = tok.special_tokens
    names = sum(map(specials.__contains__, known.text.shape.findall(text)))  # the shape has no group: the matches
    if names != sum(map(tok.special_ids.__contains__, ids)):
        return False
    known.prompts.put(text, ids[:], len(text))
    return True


def _first_turn(known: _Known, text: str) -> list[int]:
    """The encoding with the first turn's body looked up by its text."""
    h = text.find(_IM_MIDDLE) + len(_IM_MIDDLE)
    end = text.find(_IM_END, h) if h >= len(_IM_MIDDLE) else -1
    if not _FIRST_BODY_MIN <= end - h <= _FIRST_BODY_MAX:
        return known.encode(text)
    body = text[h:end]
    body_ids = known.bodies.get(body)
    if body_ids is None:
        body_ids = known.encode(body)
        known.bodies.put(body, body_ids)
    return [*known.encode(text[:h]), *body_ids, *known.encode(text[end:])]
