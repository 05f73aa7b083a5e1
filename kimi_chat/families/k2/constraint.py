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

from collections.abc import Mapping, Sequence
from typing import Any

from ... import markers as M
from ...dialects import Dialect
from .format import GRAMMAR, TOKEN_CLASSES
from ...grammar.lark import LarkTranslatorMixin, build_lark
from .grammar import K2Translator
from ...grammar.vocabulary import default_token_markers

__all__ = ["LarkK2Translator", "lark_grammar", "special_markers", "end_markers"]


class LarkK2Translator(LarkTranslatorMixin, K2Translator):
    """:class:`~kimi_chat.families.k2.grammar.K2Translator` writing Lark (its JSON writer is
    :class:`~kimi_chat.grammar.lark.LarkJson`)."""


def lark_grammar(tools: Sequence[Any] | None, *, dialect: Dialect, tool_choice: Any, parallel_tool_calls: bool,
                 response_schema: Any, max_calls: int, first_index: int, reasoning: bool, content: bool,
                 options: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The Lark grammar of one K2 request and its notes."""
    return build_lark(LarkK2Translator, GRAMMAR, tools, tool_choice, parallel_tool_calls, dialect, max_calls,
                      first_index, None, reasoning, content, options, response_schema)


def special_markers(dialect: Dialect) -> tuple[M.Marker, ...]:
    """The markers that are special tokens of a ``dialect`` model (``<think>`` only for K2.5/K2.6)."""
    tokens = default_token_markers(dialect)
    return tuple(m for m in M.MARKERS if m.id is not None and (m.text in tokens or m not in
                                                                (M.THINK_BEGIN, M.THINK_END)))


def end_markers(dialect: Dialect) -> tuple[str, ...]:
    """The spellings that end the turn (the engine's end-of-generation tokens)."""
    return tuple(m.text for m in TOKEN_CLASSES["END_TURN"])
