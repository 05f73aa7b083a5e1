"""Which marker spellings a grammar must keep out of free text, and which it may write as special
tokens: both read from the output format the parser runs (the family record's ``output_format`` and
``format_markers``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..output import peg as F
from .. import markers as M
from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, get_dialect
from ..output import StreamParser

__all__ = ["RESERVED_TOKEN_PREFIX", "forbidden_text", "forbidden_spellings", "default_token_markers", "output_machine",
           "format_markers"]

RESERVED_TOKEN_PREFIX = M.reserved_token_name(0)[: M.reserved_token_name(0).index("0")]
"""``<|reserved_token_``: every reserved special id is spelled with this prefix."""


def output_machine(dialect: str | Dialect, options: Mapping[str, Any]) -> F.Machine:
    """The compiled output format the parser runs for ``dialect`` and render ``options`` (its start
    rule is the one the parser picks)."""
    return StreamParser(dialect, **options).machine


def forbidden_spellings(machine: F.Machine) -> tuple[str, ...]:
    """Every marker spelling ``machine``'s lexer recognises, plus the reserved-token prefix."""
    return tuple(sorted(machine.classes)) + (RESERVED_TOKEN_PREFIX,)


def forbidden_text(dialect: str | Dialect = DEFAULT_DIALECT, **options: Any) -> tuple[str, ...]:
    """The strings free text may not contain for this dialect: every marker spelling the parser's
    lexer recognises (:attr:`kimi_chat.output.peg.Machine.classes`) plus the reserved-token prefix."""
    return forbidden_spellings(output_machine(dialect, options))


def format_markers(dialect: str | Dialect = DEFAULT_DIALECT) -> tuple[M.Marker, ...]:
    """The markers with a special-token id that the output format of ``dialect``'s family writes (its
    record's ``format_markers``): K2, every marker of :data:`kimi_chat.families.k2.format.TOKEN_CLASSES`;
    K3, the tag markers (``<|open|>``, ``<|close|>``, ``<|sep|>``) and ``<|end_of_msg|>``."""
    return get_dialect(dialect).family_parts.markers.output


def default_token_markers(dialect: str | Dialect = DEFAULT_DIALECT) -> frozenset[str]:
    """Marker spellings taken to be single special tokens of a model of ``dialect``: every format
    marker with an id (:func:`format_markers`), except ``<think>``/``</think>`` in a dialect without
    reasoning: they are tokens (163606/163607) in the vocabulary of the reasoning dialects (K2-Thinking,
    K2.5, K2.6: ``reference/PROVENANCE.md``, the config their token ids are rendered with), plain text in
    Kimi-K2-Instruct's. :class:`kimi_chat.engines.native.NativeModel` asks the loaded model instead."""
    d = get_dialect(dialect)
    return frozenset(m.text for m in format_markers(d) if m not in (M.THINK_BEGIN, M.THINK_END) or d.reasoning)
