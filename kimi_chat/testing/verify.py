"""The requests ``verify`` renders for a dialect: the hypothesis strategy of its format family's requests.

The testing side holds each family's strategies and finds them by the dialect's family record
(:attr:`~kimi_chat.dialect_records.DialectRecord.family_parts`); a family names no strategy (the families import
nothing from :mod:`kimi_chat.testing`). A new family adds its line to :func:`_strategies`. The strategy modules
need hypothesis (an optional dependency): they are imported on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..dialect_records import DialectRecord
    from ..families import Family

__all__ = ["verify_requests"]


def verify_requests(d: DialectRecord) -> Any:
    """The hypothesis strategy of the requests ``verify`` renders for ``d``: dicts of ``messages``, ``tools``,
    ``add_generation_prompt`` and ``options``. ``LookupError`` names a family with no strategies here."""
    family = d.family_parts
    for serves, requests in _strategies():
        if serves is family:
            return requests(d)
    raise LookupError(f"no request strategies for dialect {d.name}'s family {d.family!r} in kimi_chat.testing")


def _strategies() -> tuple[tuple[Family, Callable[[DialectRecord], Any]], ...]:
    """Each family's record and the function giving its dialects' request strategy."""
    from ..families.k2.family import FAMILY as K2
    from ..families.k3.family import FAMILY as K3

    return ((K2, _k2_requests), (K3, _k3_requests))


def _k2_requests(d: DialectRecord) -> Any:
    """:func:`kimi_chat.testing.strategies.requests` of ``d`` (its template options drawn too)."""
    from .strategies import requests

    return requests(d.name)


def _k3_requests(d: DialectRecord) -> Any:
    """:func:`kimi_chat.testing.strategies_k3.k3_requests`, its tokenizer kwargs as ``verify``'s request fields."""
    from .strategies_k3 import k3_requests

    return k3_requests().map(_k3_request)


def _k3_request(drawn: Mapping[str, Any]) -> dict[str, Any]:
    # strategies_k3 draws the tokenizer's kwargs; verify's requests keep add_generation_prompt apart
    options = dict(drawn["kwargs"])
    agp = options.pop("add_generation_prompt", True)
    return {"messages": drawn["messages"], "tools": drawn["tools"], "add_generation_prompt": agp, "options": options}
