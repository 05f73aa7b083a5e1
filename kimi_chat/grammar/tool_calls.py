"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

:func:`tool_call_grammar` translates the output grammar of the dialect's family (the same rules
:class:`~kimi_chat.output.StreamParser` runs; K2: :mod:`kimi_chat.families.k2.format`) into GBNF, specialised
for one request:

* the start rule is the one the parser would use for the dialect and render options (plain, with
  optional reasoning, or starting inside pre-filled reasoning);
* :class:`~kimi_chat.output.peg.Recover` alternatives (what the parser tolerates but a model should not
  produce) are left out;
* ``tool_choice`` decides the tool-call section: ``"none"`` (no section), ``"auto"`` (content, then
  at most one section), ``"required"`` / a named function (exactly one section, no content before it
  unless ``content=True``); ``parallel_tool_calls`` decides one call or 1..``max_calls`` calls;
* each call's header is ``functions.NAME:IDX`` (IDX counts the calls of the turn from
  ``first_index``) and its arguments follow that tool's JSON schema (:func:`json_schema_to_gbnf`);
* free text (content, reasoning) may not contain the spelling of any marker the parser knows
  (``<|im_end|>``, ``[EOS]``, ``<|reserved_token_…|>``…): written as text, the parser would read it
  as a marker. JSON strings in arguments obey the same rule.
* Markers are written as token references (``<|tool_call_begin|>``: only that special token
  matches) when they are single tokens of the target vocabulary (``token_markers``), else as
  literal text. End-of-turn markers (``<|im_end|>``, ``[EOS]``) are not in the grammar: llama.cpp
  cannot require an end-of-generation token, but allows only those once the grammar is complete, so
  generation ends right after the last required piece.

The arguments follow :mod:`kimi_chat.grammar.json_schema`; free text avoids
:func:`~kimi_chat.grammar.vocabulary.forbidden_text`.

The translation is the family's (its record's ``grammar_translator`` run over its ``output_format.grammar``:
:mod:`kimi_chat.families.k2.grammar`; :mod:`kimi_chat.families.k3.grammar`: tags, typed ``argument``
elements); the walk every family shares is :mod:`kimi_chat.grammar.translate`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from .. import markers as M
from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, get_dialect
from .translate import after_reasoning as after_reasoning_options
from .translate import build_grammar

__all__ = ["CALL_ID_PREFIX", "tool_call_grammar"]

CALL_ID_PREFIX = M.TOOL_CALL_ID_PREFIX
"""Tool-call headers are ``functions.NAME:IDX`` (what the templates render and the parser reads)."""


def tool_call_grammar(
    tools: Sequence[Any] | None = None,
    *,
    tool_choice: Any = None,
    parallel_tool_calls: bool = True,
    dialect: str | Dialect = DEFAULT_DIALECT,
    max_calls: int = 8,
    first_index: int = 0,
    token_markers: Collection[str] | None = None,
    reasoning: bool = True,
    content: bool = False,
    reply_schema: Any = None,
    after_reasoning: bool = False,
    **options: Any,
) -> str:
    """A GBNF grammar (root rule ``root``) for the assistant output of one request.

    * ``tools``: OpenAI tools (``{"type": "function", "function": {...}}``; bare functions accepted);
    * ``tool_choice``: ``"none"``, ``"auto"`` (default with tools), ``"required"``, or
      ``{"type": "function", "function": {"name": ...}}``;
    * ``parallel_tool_calls``: several calls (1..``max_calls``) in the section, else exactly one;
    * ``first_index``: the index of the first call's ``functions.NAME:IDX`` header (K3: the first
      call's ``index`` attribute is ``first_index + 1``);
    * ``token_markers``: marker spellings that are single tokens of the model (written as token
      references); default :func:`default_token_markers`;
    * ``reasoning``: allow a ``<think>`` block where the dialect's format has one (ignored when the
      prompt pre-fills ``<think>``: reasoning is then mandatory). Kimi-K3 with thinking on (the
      prompt opened the think channel): ``False`` closes the think channel at once;
    * ``content``: allow content before the tool calls with ``"required"``/named choices (K3: text
      in the response channel);
    * ``reply_schema``: the JSON schema the reply must satisfy (K2: the content; K3: the response
      channel), as ``response_format`` gives it (:func:`~kimi_chat.grammar.translate.response_schema`:
      ``{"type": "object"}`` for ``json_object``); required with ``tool_choice`` ``"none"``, optional
      with ``"auto"`` (the model may call a tool instead). Translated by :func:`json_schema_to_gbnf`'s
      rules (what they do not enforce: :attr:`kimi_chat.grammar.Constraint.gbnf_notes`). Not the K3
      render option ``response_schema`` (which only changes the prompt);
    * ``after_reasoning``: the grammar starts where the reasoning ended (a server that applies it from
      the reasoning parser's end: K2, the body; K3, after the think channel);
    * ``options``: render options of the prompt (``thinking=False``...), as for the parser
      (K3, ``thinking=False``: the output starts inside the response channel).

    Raises :class:`GrammarError` for an unknown named tool, ``"required"`` without tools or a schema
    (of a tool, or ``reply_schema``) that cannot be translated.
    """
    d = get_dialect(dialect)
    family = d.family_parts
    start = None
    if after_reasoning:
        opts, start = after_reasoning_options(d, {"reasoning": reasoning, **options})
        reasoning = bool(opts.pop("reasoning", reasoning))
        options = opts
    return build_grammar(family.grammar.translator, family.output_format.grammar, tools, tool_choice,
                         parallel_tool_calls, d, max_calls, first_index, token_markers, reasoning, content, options,
                         reply_schema=reply_schema, start_rule=start)
