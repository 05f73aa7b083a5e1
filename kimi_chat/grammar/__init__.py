"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

* :mod:`~kimi_chat.grammar.gbnf`: GBNF primitives (literals, escaping, rule names, alternation,
  text avoiding given strings, pruning);
* :mod:`~kimi_chat.grammar.json_schema`: JSON schema -> GBNF (:func:`json_schema_to_gbnf`);
* :mod:`~kimi_chat.grammar.vocabulary`: the marker spellings free text must avoid
  (:func:`forbidden_text`) and those written as special tokens (:func:`default_token_markers`);
* :mod:`~kimi_chat.grammar.tool_calls`: :func:`tool_call_grammar`, the grammar of one request's
  assistant output, translated from the output format the parser runs by the family's translator
  (:mod:`~kimi_chat.families.k2.grammar`, :mod:`~kimi_chat.families.k3.grammar`), on the walk of
  :mod:`~kimi_chat.grammar.translate` they share;
* :mod:`~kimi_chat.grammar.request`: :func:`constraint`, the llguidance constraint of one request
  (Lark, schemas by llguidance; needs the ``constraints`` extra, imported on first use);
* :mod:`~kimi_chat.grammar.strings`: a raw (unquoted) string value held to its schema as one llguidance
  terminal (Kimi-K3 ``string`` arguments).
"""

from __future__ import annotations

from typing import Any

from .gbnf import GrammarError
from .json_schema import json_schema_to_gbnf
from .tool_calls import CALL_ID_PREFIX, tool_call_grammar
from .vocabulary import RESERVED_TOKEN_PREFIX, default_token_markers, forbidden_text, format_markers

_LAZY = ("constraint", "Constraint", "ConstraintNote", "llg_tokenizer")


def __getattr__(name: str) -> Any:
    """:func:`constraint` and its types, imported on first use (they need llguidance)."""
    if name in _LAZY:
        from . import request

        globals().update({n: getattr(request, n) for n in _LAZY})
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GrammarError",
    "tool_call_grammar",
    "json_schema_to_gbnf",
    "default_token_markers",
    "forbidden_text",
    "format_markers",
    "CALL_ID_PREFIX",
    "RESERVED_TOKEN_PREFIX",
]  # constraint, Constraint, ConstraintNote, llg_tokenizer: lazily (llguidance), not star-imported
