"""The K2 family's part of :func:`kimi_chat.grammar.constraint`: the Lark translation of
:mod:`kimi_chat.families.k2.format` (the GBNF translator :class:`~kimi_chat.families.k2.grammar.K2Translator`
with ``%json`` arguments: :mod:`kimi_chat.grammar.lark`), and the markers :meth:`Constraint.accepts`
tokenises as special tokens.

A call is ``<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGS<|tool_call_end|>``,
IDX counting the turn's calls from ``first_index`` (the running index the templates and the parser
use), ARGS the tool's schema as llguidance compiles it, written with ``json.dumps``' default spacing or
compact (:data:`kimi_chat.grammar.schemas.SEPARATORS`). ``<|im_end|>`` (or ``[EOS]``) ends the turn:
the engine's end-of-generation token, allowed once the grammar is complete.
"""

from __future__ import annotations

from typing import Any

from ... import markers as M
from ...dialect_records import DialectRecord as Dialect
from .format import GRAMMAR, TOKEN_CLASSES
from ...grammar.lark import LarkTranslatorMixin
from .grammar import K2Translator
from ...grammar.vocabulary import default_token_markers

__all__ = ["LarkK2Translator", "TRANSLATOR", "GRAMMAR", "special_markers", "end_markers", "after_reasoning"]


class LarkK2Translator(LarkTranslatorMixin, K2Translator):
    """:class:`~kimi_chat.families.k2.grammar.K2Translator` writing Lark (its JSON writer is
    :class:`~kimi_chat.grammar.lark.LarkJson`)."""


TRANSLATOR = LarkK2Translator
"""The translator :func:`~kimi_chat.grammar.lark.build_lark` runs over :data:`GRAMMAR` for this family."""


def special_markers(dialect: Dialect) -> tuple[M.Marker, ...]:
    """The markers that are special tokens of a ``dialect`` model (``<think>`` only where the dialect reasons)."""
    tokens = default_token_markers(dialect)
    return tuple(m for m in M.MARKERS if m.id is not None and (m.text in tokens or m not in
                                                                (M.THINK_BEGIN, M.THINK_END)))


def end_markers(dialect: Dialect) -> tuple[str, ...]:
    """The spellings that end the turn (the engine's end-of-generation tokens)."""
    return tuple(m.text for m in TOKEN_CLASSES["END_TURN"])


def after_reasoning(dialect: Dialect) -> tuple[dict[str, Any], str | None]:
    """Where a grammar starts once the reasoning ended (:func:`kimi_chat.grammar.translate.after_reasoning`):
    the body, as with thinking off where the dialect has the switch (K2.5/K2.6), and no reasoning block;
    the parser's start rule for those options."""
    if not dialect.reasoning:
        return {}, None
    return ({"thinking": False} if "thinking" in dialect.options else {}) | {"reasoning": False}, None
