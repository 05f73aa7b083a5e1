"""The K2 family's GBNF translation: markers, ``functions.NAME:IDX`` headers, JSON arguments.

:func:`kimi_chat.grammar.tool_call_grammar` (:mod:`kimi_chat.grammar.tool_calls`, where the rules of the
translation are listed) runs the translator of the dialect's family: for K2, this module's, over the output
grammar of :mod:`kimi_chat.families.k2.format` (the same rules :class:`~kimi_chat.output.StreamParser` runs);
the walk every family's translator shares is :mod:`kimi_chat.grammar.translate`.
"""

from __future__ import annotations

from typing import Any

from ...output import peg as F
from ... import markers as M
from .format import TOKEN_CLASSES
from ...grammar.gbnf import GrammarError, literal, optional
from ...grammar.translate import Ctx, FormatTranslator, Unrequirable

__all__ = ["CALL_ID_PREFIX", "K2Translator"]

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
