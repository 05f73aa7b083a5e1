"""Lone surrogates (U+D800..U+DFFF: a JSON ``\\ud800`` escape without its pair) in token-level rendering.

Such a string is not Unicode text. The official tokenizer (tiktoken) encodes it after replacing each
lone surrogate by U+FFFD (a pair by the character it stands for), so kimi_chat's ids do the same in
every dialect; :func:`warn_lone_surrogates` says where with a
:class:`~kimi_chat.errors.LoneSurrogateWarning`, and :func:`utf8_len` measures text as the tokenizer
sees it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import LoneSurrogateWarning
from .messages import string_paths, to_plain

__all__ = ["warn_lone_surrogates", "utf8_len"]


def _first_surrogate(s: str) -> int | None:
    """The index of the first lone surrogate in ``s`` (``None``: ``s`` is Unicode text). UTF-8
    encoding is the fast test (C speed, fails exactly at a surrogate)."""
    if s.isascii():
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


def warn_lone_surrogates(parts: Sequence[str], marks: Sequence[tuple[int, int, bool]], messages: Sequence[Any],
                         tools: Any, options: Mapping[str, Any], stacklevel: int, text: str | None = None) -> None:
    """A :class:`~kimi_chat.errors.LoneSurrogateWarning` naming the message (from the renderer's
    ``marks``) and field of the first lone surrogate in the prompt ``parts`` (``text``: their join, if
    at hand), if there is one: the tokenizer encodes it as U+FFFD, as the official one does. The same
    check for every dialect."""
    if text is None:
        text = "".join(parts)
    at = _first_surrogate(text)
    if at is None:
        return
    pos, owner = 0, -1
    starts = {m[0]: m[1] for m in marks}
    for k, part in enumerate(parts):
        owner = starts.get(k, owner)
        pos += len(part)
        if pos > at:
            break
    sources = [("", messages[owner])] if owner >= 0 else [("tools", tools), *options.items()]
    path = None
    for root, value in sources:
        path = next((p for p, v in string_paths(to_plain(value), root) if _first_surrogate(v) is not None), None)
        if path is not None:
            break
    why = (f"lone surrogate U+{ord(text[at]):04X} (not Unicode text) is encoded as the official tokenizer "
           "encodes it (as U+FFFD; a pair of surrogates as the character it stands for): the ids do not decode "
           "back to the rendered text")
    warnings.warn(LoneSurrogateWarning(why, message_index=owner if owner >= 0 else None, field=path),
                  stacklevel=stacklevel + 1)


def utf8_len(s: str) -> int:
    """The UTF-8 length of ``s`` as the tokenizer sees it (lone surrogates as U+FFFD, as tiktoken does)."""
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError:
        return len(s.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8"))
