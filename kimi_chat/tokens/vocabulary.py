"""Does a tokenizer fit a dialect? Its special tokens must hold the markers the dialect's family writes.

A K2 tokenizer for a K3 dialect (or the other way round) would encode the other family's markers as
ordinary text; :func:`check_vocabulary` refuses it, naming the missing special token and the reference
tokenizer to use (the family record's ``vocabulary`` and ``reference_tokenizer``).
"""

from __future__ import annotations

from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..errors import RenderError
from ..families import registered_families

__all__ = ["vocabulary_problem", "check_vocabulary"]


def _has(tokenizer: Any, family: Any) -> bool:
    specials = tokenizer.special_tokens
    return all(m.text in specials for m in family.markers.vocabulary)


def vocabulary_problem(tokenizer: Any, d: Dialect) -> str | None:
    """Why ``tokenizer`` cannot encode ``d``'s prompts (its special tokens are not those of ``d``'s family:
    a K2 tokenizer for a K3 dialect, a K3 tokenizer for a K2 one), naming the missing special token; ``None``
    when it can. (The one check behind :func:`check_vocabulary` and the CLI's tokenizer flags.)"""
    family = d.family_parts
    specials = tokenizer.special_tokens
    missing = [m.text for m in family.markers.vocabulary if m.text not in specials]
    if not missing:
        return None
    others = [f for f in registered_families() if f.name != family.name]
    other = next((f for f in others if _has(tokenizer, f)), others[0] if others else family)
    return (f"the tokenizer has no special token {missing[0]} that dialect {d.name} ({d.family} family) writes "
            f"(is it a {other.title} tokenizer?)")


def check_vocabulary(tokenizer: Any, d: Dialect) -> None:
    """Refuse a tokenizer whose special tokens are not those of ``d``'s family
    (:func:`vocabulary_problem`): :class:`~kimi_chat.errors.RenderError` (a ``ValueError``)."""
    problem = vocabulary_problem(tokenizer, d)
    if problem is not None:
        ref = d.family_parts.tokens.base_tokenizer
        raise RenderError(f"{problem}; use KimiTokenizer.from_reference({ref!r}) or that model's tokenizer")
