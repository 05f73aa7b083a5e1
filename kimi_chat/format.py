"""Deprecated: the names :mod:`kimi_chat.grammar` still imports from here.

The PEG machinery is :mod:`kimi_chat.peg`; the K2 output format (terminals, grammar, start rules)
is :mod:`kimi_chat.formats.k2`. This shim goes once nothing imports it.
"""

from __future__ import annotations

from .formats.k2 import END_OF_TURN_IDS, FIELDS, GRAMMAR, START_RULES, THINK_CLASSES, TOKEN_CLASSES, grammar_text
from .formats.k2 import machine as compile_machine
from .peg import (
    EOF,
    STRAY,
    TEXT,
    WS,
    Ahead,
    Choice,
    Eof,
    Expr,
    Group,
    Machine,
    Opt,
    Recover,
    Ref,
    Rest,
    Seq,
    Star,
    State,
    Text,
    Tok,
    Transition,
)

__all__ = [
    "TOKEN_CLASSES", "END_OF_TURN_IDS", "THINK_CLASSES", "STRAY", "TEXT", "WS", "EOF", "Expr", "Tok",
    "Text", "Seq", "Choice", "Opt", "Star", "Ahead", "Eof", "Rest", "Group", "Recover", "Ref",
    "GRAMMAR", "START_RULES", "FIELDS", "grammar_text", "Transition", "State", "Machine",
    "compile_machine",
]
