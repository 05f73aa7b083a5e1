"""What the server stages ask of a format family: the hooks of a family's ``serving`` module.

A family's record holds the accessor of its server module (:attr:`kimi_chat.families.Family.serving`, which
imports e.g. :mod:`kimi_chat.families.k3.serving` on first call); :func:`serving_of` calls it and hands it out as a
:class:`ServingHooks`. The stages (:mod:`kimi_chat.servers.stages`), the family detection
(:mod:`kimi_chat.servers.family`) and the plugins (:mod:`kimi_chat.servers.vllm`,
:mod:`kimi_chat.servers.sglang`) decide nothing by a family's name: they ask these hooks. A new family
writes its own ``serving`` module with these names.

The protocol and its types live in the family contract (:mod:`kimi_chat.families.serving`, so the families name
them without importing the servers) and are re-exported here.
"""

from __future__ import annotations

from typing import Any, cast

from ..families import Family, family_of
from ..families.serving import Decode, PromptMode, ServingHooks

__all__ = ["Decode", "PromptMode", "ServingHooks", "serving_of"]


def serving_of(family: Family | str | Any) -> ServingHooks:
    """The server hooks of a family: a :class:`~kimi_chat.families.Family`, a family name, or a dialect
    (anything :func:`~kimi_chat.families.family_of` takes). ``KeyError`` names an unregistered family."""
    record = family if isinstance(family, Family) else family_of(family)
    return cast(ServingHooks, record.serving.hooks())

