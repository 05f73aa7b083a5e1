"""Which Kimi format family a server is serving (K2 or Kimi-K3), and what a K3 prompt says.

One pair of server flags (``--tool-call-parser kimi_chat --reasoning-parser kimi_chat``) serves both
families; :func:`choose_family` decides per parser instance, in this order:

1. ``chat_template_kwargs["kimi_chat_dialect"]`` of the request (a dialect name such as ``kimi-k3`` or
   ``kimi-k2-instruct-0905``; where the framework passes the request's kwargs to the parser);
2. the environment variable ``KIMI_CHAT_DIALECT`` (the same name and meaning as for kimi_chat's vLLM
   renderer plugin: a dialect name);
3. the tokenizer: K3's vocabulary has ``<|open|>`` and ``<|end_of_msg|>`` at their K3 ids (where K2
   has ``<|im_end|>`` / ``<|im_user|>``); anything else is K2.

The choice and its reason are logged at INFO (once per distinct choice and reason).

K3 prompts are read with token ids (:func:`k3_prompt_channel`, :func:`k3_reasoning_ended`): a tag
is ``<|open|>`` / ``<|close|>`` ... ``<|sep|>`` by their special ids, so marker text spelled by ordinary
tokens (a user typing ``<|close|>think<|sep|>``) is never taken for a tag.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from .. import markers as M
from ..dialects import Dialect, get_dialect

__all__ = [
    "DIALECT_ENV",
    "DIALECT_KWARG",
    "Family",
    "tokenizer_family",
    "choose_family",
    "override",
    "k3_prompt_channel",
    "k3_reasoning_ended",
    "k3_reasoning_ends_in",
]

Family = Literal["k2", "k3"]

DIALECT_ENV = "KIMI_CHAT_DIALECT"
"""Environment override: a kimi_chat dialect name (``kimi-k3``, ``kimi-k2.6``, ...)."""
DIALECT_KWARG = "kimi_chat_dialect"
"""Per-request override: this ``chat_template_kwargs`` key, a dialect name."""

_OPEN, _CLOSE, _SEP, _END = M.K3_OPEN.id, M.K3_CLOSE.id, M.K3_SEP.id, M.K3_END_OF_MSG.id
_TAG_SPAN = 64
"""How many tokens a tag name and its attributes may take (``<|open|>call tool="..." index="1"<|sep|>``)."""

_KNOWN: weakref.WeakKeyDictionary[Any, Family] = weakref.WeakKeyDictionary()
_LOGGED: set[tuple[str, str]] = set()


def _token_id(tokenizer: Any, text: str) -> int | None:
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is not None:
        return convert(text)
    return tokenizer.get_vocab().get(text)


def tokenizer_family(tokenizer: Any) -> Family:
    """``k3`` if the tokenizer has ``<|open|>`` and ``<|end_of_msg|>`` at K3's ids, else ``k2``
    (cached per tokenizer)."""
    try:
        return _KNOWN[tokenizer]
    except (KeyError, TypeError):
        pass
    k3 = (_token_id(tokenizer, M.K3_OPEN.text) == _OPEN and _token_id(tokenizer, M.K3_END_OF_MSG.text) == _END)
    fam: Family = "k3" if k3 else "k2"
    try:
        _KNOWN[tokenizer] = fam
    except TypeError:  # not weak-referenceable
        pass
    return fam


def _dialect(name: str, where: str) -> Dialect:
    try:
        return get_dialect(name)
    except (KeyError, ValueError) as e:
        raise ValueError(f"{where}: {name!r} is not a kimi_chat dialect name ({e})") from None


def override(chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[Dialect, str] | None:
    """The dialect an override names, and where (``None``: no override). A name that is no dialect is a
    ``ValueError`` naming the setting."""
    ctk = chat_template_kwargs or {}
    if ctk.get(DIALECT_KWARG):
        name = str(ctk[DIALECT_KWARG])
        return _dialect(name, f"chat_template_kwargs[{DIALECT_KWARG!r}]"), f"chat_template_kwargs {DIALECT_KWARG}={name}"
    if os.environ.get(DIALECT_ENV):
        name = os.environ[DIALECT_ENV]
        return _dialect(name, f"${DIALECT_ENV}"), f"${DIALECT_ENV}={name}"
    return None


def choose_family(tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None,
                  logger: logging.Logger | None = None) -> Family:
    """The family to parse with (see the module docstring for the order); logs the choice at INFO."""
    ov = override(chat_template_kwargs)
    if ov is not None:
        fam, why = ov[0].family, ov[1]
    elif tokenizer is None:
        fam, why = "k2", "no tokenizer given and no override"
    else:
        fam = tokenizer_family(tokenizer)
        why = ("the tokenizer has <|open|>/<|end_of_msg|> at the Kimi-K3 ids" if fam == "k3"
               else "the tokenizer has no Kimi-K3 <|open|>/<|end_of_msg|> tokens")
    if logger is not None and (fam, why) not in _LOGGED:
        _LOGGED.add((fam, why))
        logger.info("kimi_chat parses the %s format family (%s)", "Kimi-K3" if fam == "k3" else "Kimi-K2", why)
    return fam


Decode = Callable[[Sequence[int]], str]


def _tag_name(ids: Sequence[int], i: int, decode: Decode) -> str | None:
    """The name of the tag whose ``<|open|>``/``<|close|>`` is at ``i`` (``None``: no ``<|sep|>`` within
    reach, or none yet)."""
    end = min(len(ids), i + 1 + _TAG_SPAN)
    for j in range(i + 1, end):
        t = ids[j]
        if t == _SEP:
            body = decode(ids[i + 1:j]).strip()
            return body.split(None, 1)[0] if body else ""
        if t in (_OPEN, _CLOSE, _END):
            return None
    return None


def _last_tags(ids: Sequence[int], decode: Decode):
    """The tags of ``ids`` from the last one backwards: ``(kind, name)``, ``kind`` ``"open"``/``"close"``."""
    for i in range(len(ids) - 1, -1, -1):
        t = ids[i]
        if t == _OPEN or t == _CLOSE:
            name = _tag_name(ids, i, decode)
            if name is not None:
                yield ("open" if t == _OPEN else "close"), name


def k3_prompt_channel(ids: Sequence[int], decode: Decode) -> str | None:
    """The channel a K3 prompt leaves open for the output, read from its last tag (only the current
    assistant message is looked at): ``"think"`` (thinking on), ``"response"`` (thinking off), or
    ``None`` (the prompt ends with no channel open: the output may open one; treated as ``think``
    pre-filled by the parsers, whose grammar accepts a redundant ``<|open|>think<|sep|>``)."""
    for kind, name in _last_tags(ids, decode):
        if kind == "open" and name in ("think", "response"):
            return name
        return None
    return None


def k3_reasoning_ended(ids: Sequence[int], decode: Decode) -> bool:
    """Whether reasoning is over at the end of ``ids`` (a prompt, or prompt + output): judged by the
    last channel tag of the current assistant message. ``<|close|>think<|sep|>`` or an opened
    response/tools channel ends it; ``<|open|>think<|sep|>`` (or the message header, think then being
    pre-filled) keeps it open. History before the last ``<|open|>message ...<|sep|>`` is never read."""
    for kind, name in _last_tags(ids, decode):
        if kind == "close" and name == "think":
            return True
        if kind == "open" and name in ("response", "tools"):
            return True
        if name in ("think", "message"):
            return False
    return False


def k3_reasoning_ends_in(context: Sequence[int], delta: Sequence[int], decode: Decode) -> bool:
    """Whether a tag that ends reasoning (see :func:`k3_reasoning_ended`) is completed by a
    ``<|sep|>`` in ``delta`` (``context``: the ids before it, of which only the tail is read)."""
    if _SEP not in delta:
        return False
    window = list(context[-_TAG_SPAN:]) + list(delta)
    base = len(window) - len(delta)
    for k in range(len(delta)):
        if window[base + k] != _SEP:
            continue
        for i in range(base + k - 1, -1, -1):
            t = window[i]
            if t == _OPEN or t == _CLOSE:
                name = _tag_name(window, i, decode)
                if (t == _CLOSE and name == "think") or (t == _OPEN and name in ("response", "tools")):
                    return True
                break
            if t == _SEP or t == _END:
                break
    return False
