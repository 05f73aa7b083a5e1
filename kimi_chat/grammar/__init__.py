"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

* :mod:`~kimi_chat.grammar.gbnf`: GBNF primitives (literals, escaping, rule names, alternation,
  text avoiding given strings, pruning);
* :mod:`~kimi_chat.grammar.json_schema`: JSON schema -> GBNF (:func:`json_schema_to_gbnf`);
* :mod:`~kimi_chat.grammar.vocabulary`: the marker spellings free text must avoid
  (:func:`forbidden_text`) and those written as special tokens (:func:`default_token_markers`);
* :mod:`~kimi_chat.grammar.tool_calls`: :func:`tool_call_grammar`, the grammar of one request's
  assistant output, translated from the output format the parser runs by the family's translator
  (:mod:`~kimi_chat.families.k2.grammar`, :mod:`~kimi_chat.families.k3.grammar`), on the walk of
  :mod:`~kimi_chat.grammar.translate` they share.
"""

from __future__ import annotations

from .gbnf import GrammarError
from .json_schema import json_schema_to_gbnf
from .tool_calls import CALL_ID_PREFIX, tool_call_grammar
from .vocabulary import RESERVED_TOKEN_PREFIX, default_token_markers, forbidden_text, format_markers

__all__ = [
    "GrammarError",
    "tool_call_grammar",
    "json_schema_to_gbnf",
    "default_token_markers",
    "forbidden_text",
    "format_markers",
    "CALL_ID_PREFIX",
    "RESERVED_TOKEN_PREFIX",
]
