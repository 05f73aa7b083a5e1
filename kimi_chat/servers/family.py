"""Which Kimi format family a server is serving: its :class:`~kimi_chat.families.Family` record.

One pair of server flags (``--tool-call-parser kimi_chat --reasoning-parser kimi_chat``) serves both
families; :func:`choose_family` decides per parser instance, in this order:

1. ``chat_template_kwargs["kimi_chat_dialect"]`` of the request (a dialect name such as ``kimi-k3`` or
   ``kimi-k2-instruct-0905``; where the framework passes the request's kwargs to the parser);
2. the environment variable ``KIMI_CHAT_DIALECT`` (the same name and meaning as for kimi_chat's vLLM
   renderer plugin: a dialect name);
3. the tokenizer: a family whose distinctive special tokens (its server hooks' ``VOCABULARY``) are at
   their ids (Kimi-K3: ``<|open|>`` and ``<|end_of_msg|>``, where K2 has ``<|im_end|>`` / ``<|im_user|>``);
   anything else is the default dialect's family (K2).

The choice and its reason are logged at INFO (once per distinct choice and reason). What a family's prompt
and output say, read by token ids, is the family's (:mod:`kimi_chat.servers.hooks`; Kimi-K3's tags:
:mod:`kimi_chat.families.k3.serving`).
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, dialect_for_served_model, get_dialect
from ..errors import KimiChatError
from ..families import Family, family_names, family_of
from ..families.k3.serving import prompt_channel as k3_prompt_channel
from ..families.k3.serving import reasoning_ended as k3_reasoning_ended
from ..families.k3.serving import tag_ends_reasoning as k3_reasoning_ends_in
from .hooks import serving_of

__all__ = [
    "DIALECT_ENV",
    "DIALECT_KWARG",
    "Family",
    "tokenizer_family",
    "choose_family",
    "override",
    "model_names",
    "named_dialect",
    "read_json",
    "k3_prompt_channel",
    "k3_reasoning_ended",
    "k3_reasoning_ends_in",
]
# ``Family`` is the family record (kimi_chat.families); the k3_* names are Kimi-K3's tag readers, kept here
# for their old importers (:mod:`kimi_chat.families.k3.serving` holds them).

DIALECT_ENV = "KIMI_CHAT_DIALECT"
"""Environment override: a kimi_chat dialect name (``kimi-k3``, ``kimi-k2.6``, ...)."""
DIALECT_KWARG = "kimi_chat_dialect"
"""Per-request override: this ``chat_template_kwargs`` key, a dialect name."""

_KNOWN: weakref.WeakKeyDictionary[Any, tuple[Family, str]] = weakref.WeakKeyDictionary()
_LOGGED: set[tuple[str, str]] = set()


def _token_id(tokenizer: Any, text: str) -> int | None:
    convert = getattr(tokenizer, "convert_tokens_to_ids", None)
    if convert is not None:
        return convert(text)
    return tokenizer.get_vocab().get(text)


def _spelled(record: Family) -> str:
    return "/".join(m.text for m in serving_of(record).VOCABULARY)


def _by_vocabulary(tokenizer: Any) -> tuple[Family, str]:
    """The family whose distinctive tokens the tokenizer has at their ids, and why (cached per tokenizer)."""
    try:
        return _KNOWN[tokenizer]
    except (KeyError, TypeError):
        pass
    records = [family_of(n) for n in family_names()]
    distinct = [r for r in records if serving_of(r).VOCABULARY]
    found = next((r for r in distinct
                  if all(_token_id(tokenizer, m.text) == m.id for m in serving_of(r).VOCABULARY)), None)
    if found is not None:
        choice = found, f"the tokenizer has {_spelled(found)} at the {found.title} ids"
    else:
        others = ", ".join(f"{r.title} {_spelled(r)}" for r in distinct)
        choice = family_of(get_dialect(DEFAULT_DIALECT)), f"the tokenizer has no {others} tokens"
    try:
        _KNOWN[tokenizer] = choice
    except TypeError:  # not weak-referenceable
        pass
    return choice


def tokenizer_family(tokenizer: Any) -> Family:
    """The family whose distinctive special tokens the tokenizer has at their ids (Kimi-K3's
    ``<|open|>`` and ``<|end_of_msg|>``), else the default dialect's (K2); cached per tokenizer."""
    return _by_vocabulary(tokenizer)[0]


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
    """The family record to parse with (see the module docstring for the order); logs the choice at INFO."""
    ov = override(chat_template_kwargs)
    if ov is not None:
        fam, why = family_of(ov[0]), ov[1]
    elif tokenizer is None:
        fam, why = family_of(get_dialect(DEFAULT_DIALECT)), "no tokenizer given and no override"
    else:
        fam, why = _by_vocabulary(tokenizer)
    if logger is not None and (fam.name, why) not in _LOGGED:
        _LOGGED.add((fam.name, why))
        logger.info("kimi_chat parses the %s format family (%s)", fam.title, why)
    return fam


def read_json(path: Path) -> dict[str, Any]:
    """A model directory's JSON file (``config.json``, ``tokenizer_config.json``), ``{}`` when absent.
    Raises :class:`~kimi_chat.errors.KimiChatError` naming the file when it is not readable JSON."""
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise KimiChatError(f"{path}: not readable JSON ({e})") from e


def model_names(directory: str | Path) -> list[str]:
    """The names a model directory goes by: ``config.json``'s ``_name_or_path``, the repository id of a Hugging
    Face cache snapshot (``models--ORG--NAME/snapshots/REV``) and the directory's own name."""
    d = Path(directory)
    names = []
    declared = read_json(d / "config.json").get("_name_or_path")
    if isinstance(declared, str) and declared:
        names.append(declared)
    names += [part[len("models--"):].replace("--", "/") for part in d.parts if part.startswith("models--")]
    names.append(d.name)
    return names


def named_dialect(names: list[str]) -> Dialect | None:
    """The dialect a served model's names choose where its chat template cannot tell, as vLLM's renderer and
    ``serve`` choose it (:func:`kimi_chat.dialects.dialect_for_served_model`: ``moonshotai/Kimi-K2.7-Code``
    ships Kimi-K2.6's template); ``None``: the names choose none (the template or the tokenizer decides)."""
    name = dialect_for_served_model(names, None)
    return get_dialect(name) if name is not None else None
