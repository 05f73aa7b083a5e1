"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

:func:`tool_call_grammar` translates the output grammar of :mod:`kimi_chat.families.k2.format` (the same rules
:class:`~kimi_chat.output.StreamParser` runs) into GBNF, specialised for one request:

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

For a Kimi-K3 dialect (``Dialect.family == "k3"``) the same function translates
:mod:`kimi_chat.families.k3.format` instead (:mod:`kimi_chat.families.k3.grammar`: tags, typed ``argument``
elements); the walk both share is :mod:`kimi_chat.grammar.translate`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ...output import peg as F
from ... import markers as M
from ...dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .format import GRAMMAR, TOKEN_CLASSES
from ...grammar.gbnf import GrammarError, literal, optional
from ...grammar.translate import Ctx, FormatTranslator, Unrequirable, build_grammar

__all__ = ["CALL_ID_PREFIX", "K2Translator", "tool_call_grammar"]

CALL_ID_PREFIX = M.TOOL_CALL_ID_PREFIX
"""Tool-call headers are ``functions.NAME:IDX`` (what the templates render and the parser reads).
The header syntax is not part of :mod:`kimi_chat.families.k2.format` (it is free text there)."""


_UNREQUIRABLE = ("END_TURN", "NEW_MESSAGE")


class K2Translator(FormatTranslator):
    """The K2 format (:mod:`kimi_chat.families.k2.format`): markers, ``functions.NAME:IDX`` headers, JSON
    arguments."""

    ctx_groups = ("call", "header", "arguments")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.args: dict[str, str] = {}

    def tok(self, e: F.Tok, ctx: Ctx) -> str:
        if e.cls in _UNREQUIRABLE:
            raise Unrequirable(e.cls)
        m = TOKEN_CLASSES[e.cls][0]  # the canonical spelling of the terminal class
        return self.marker(m.text, m.id)

    def text(self, e: F.Text, ctx: Ctx) -> str:
        f = e.field
        if f == "header":
            if ctx.tool is None or ctx.index is None:  # pragma: no cover - the walk sets both in a call
                raise GrammarError("a call header outside a call")
            return literal(M.tool_call_id(ctx.tool, ctx.index))
        if f == "arguments":
            if ctx.tool is None:  # pragma: no cover - the walk sets it in a call
                raise GrammarError("call arguments outside a call")
            return self.arguments(ctx.tool)
        if e.ws_only or f in ("between", "after", "ignored"):
            return ""  # whitespace is allowed by the format; a model is not asked for it
        if f == "content":
            return self.text_rule if (self.content or self.choice in ("none", "auto")) else ""
        if f == "reasoning":
            return self.text_rule
        raise GrammarError(f"format field {f!r} has no generation rule")  # pragma: no cover

    def arguments(self, name: str) -> str:
        if name not in self.args:
            fn = self.tools[name]
            params = fn.get("parameters")
            if params is None:
                params = {"type": "object", "properties": {}}
            rn = self.r.fresh(f"args-{self.slugs[name]}")
            self.args[name] = rn
            self.json.prefix = f"args-{self.slugs[name]}-"
            self.r.set(rn, self.json.schema(params, params, rn, f"tools[{name!r}].parameters"))
        return self.args[name]

    def opt(self, e: F.Opt, ctx: Ctx) -> str:
        if self.has(e.expr, "end"):
            return ""  # the engine ends the turn (end-of-generation) when the grammar is complete
        if self.has(e.expr, "arguments"):
            return self.x(e.expr, ctx)  # always write the argument begin (the parser warns without)
        if self.has(e.expr, "reasoning") and not self.reasoning:
            return ""
        return optional(self.x(e.expr, ctx))

    def star(self, e: F.Star, ctx: Ctx) -> str:
        if self.has(e.expr, "call"):
            if self.has(e.expr, "section"):  # the sections of the turn
                return self.calls_part(self.x(e.expr, ctx))
            return self.calls(e, ctx)  # the calls of a section
        raise GrammarError(f"repetition {e} has no generation rule")  # pragma: no cover


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
    * ``options``: render options of the prompt (``thinking=False``...), as for the parser
      (K3, ``thinking=False``: the output starts inside the response channel).

    Raises :class:`GrammarError` for an unknown named tool, ``"required"`` without tools or a schema
    that cannot be translated.
    """
    d = get_dialect(dialect)
    if d.family == "k3":
        from ..k3.grammar import GRAMMAR as K3_GRAMMAR, K3Translator

        return build_grammar(K3Translator, K3_GRAMMAR, tools, tool_choice, parallel_tool_calls, d, max_calls,
                             first_index, token_markers, reasoning, content, options)
    return build_grammar(K2Translator, GRAMMAR, tools, tool_choice, parallel_tool_calls, d, max_calls,
                         first_index, token_markers, reasoning, content, options)
