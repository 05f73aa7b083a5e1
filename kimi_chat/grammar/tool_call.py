"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

:func:`tool_call_grammar` translates the output grammar of :mod:`kimi_chat.formats.k2` (the same rules
:class:`~kimi_chat.parse.StreamParser` runs) into GBNF, specialised for one request:

* the start rule is the one the parser would use for the dialect and render options (plain, with
  optional reasoning, or starting inside pre-filled reasoning);
* :class:`~kimi_chat.peg.Recover` alternatives (what the parser tolerates but a model should not
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
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import peg as F
from ..formats.k2 import GRAMMAR, TOKEN_CLASSES
from .. import markers as M
from ..dialects import DEFAULT_DIALECT, Dialect
from ..parse.toolcalls import normalise_tools
from .gbnf import GrammarError, Rules, alternation, avoiding, literal, optional, slug
from .json_schema import JsonSchemaTranslator
from .vocabulary import default_token_markers, forbidden_spellings, output_machine

__all__ = ["CALL_ID_PREFIX", "tool_call_grammar"]

CALL_ID_PREFIX = M.TOOL_CALL_ID_PREFIX
"""Tool-call headers are ``functions.NAME:IDX`` (what the templates render and the parser reads).
The header syntax is not part of :mod:`kimi_chat.formats.k2` (it is free text there)."""


@dataclass(frozen=True)
class _Ctx:
    tool: str | None = None
    index: int | None = None


_UNREQUIRABLE = ("END_TURN", "NEW_MESSAGE")


class _Translator:
    def __init__(self, rules: Rules, tools: dict[str, Any], names: list[str], choice: str, parallel: bool,
                 max_calls: int, first_index: int, token_markers: Collection[str], text_rule: str,
                 reasoning: bool, content: bool, json: JsonSchemaTranslator) -> None:
        self.r = rules
        self.tools = tools
        self.names = names
        self.choice = choice
        self.parallel = parallel
        self.max_calls = max_calls
        self.first_index = first_index
        self.token_markers = frozenset(token_markers)
        self.text_rule = text_rule
        self.reasoning = reasoning
        self.content = content
        self.json = json
        self.args: dict[str, str] = {}
        self.done: dict[tuple[str, _Ctx], str] = {}
        self.slugs: dict[str, str] = {}
        for n in names:
            s = slug(n)
            while s in self.slugs.values():
                s += "-x"
            self.slugs[n] = s

    # which groups an expression contains (through references)
    def has(self, e: F.Expr, group: str) -> bool:
        if isinstance(e, F.Group):
            return e.name == group or self.has(e.expr, group)
        if isinstance(e, F.Ref):
            return self.has(GRAMMAR[e.name], group)
        if isinstance(e, F.Seq):
            return any(self.has(i, group) for i in e.items)
        if isinstance(e, F.Choice):
            return any(self.has(a, group) for a in e.alts if not isinstance(a, F.Recover))
        if isinstance(e, (F.Opt, F.Star)):
            return self.has(e.expr, group)
        return False

    def tok(self, cls: str) -> str:
        m = TOKEN_CLASSES[cls][0]  # the canonical spelling of the terminal class
        if m.text in self.token_markers:
            return m.text if m.text.startswith("<") and m.text.endswith(">") else f"<[{m.id}]>"
        return literal(m.text)

    def text(self, e: F.Text, ctx: _Ctx) -> str:
        f = e.field
        if f == "header":
            assert ctx.tool is not None and ctx.index is not None
            return literal(M.tool_call_id(ctx.tool, ctx.index))
        if f == "arguments":
            assert ctx.tool is not None
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

    def x(self, e: F.Expr, ctx: _Ctx) -> str:
        if isinstance(e, F.Ref):
            if not (self.has(e, "call") or self.has(e, "header") or self.has(e, "arguments")):
                ctx = _Ctx()  # the rule does not depend on the call being written
            key = (e.name, ctx)
            if key not in self.done:
                base = e.name.replace("_", "-")
                if ctx.index is not None:
                    base += f"-{ctx.index}"
                if ctx.tool is not None:
                    base += f"-{self.slugs[ctx.tool]}"
                rn = self.r.fresh(base)
                body = self.x(GRAMMAR[e.name], ctx)
                if body and " " not in body and "|" not in body:
                    del self.r.rules[rn]  # a single terminal or reference: inline it
                    self.done[key] = body
                elif body:
                    self.r.set(rn, body)
                    self.done[key] = rn
                else:
                    del self.r.rules[rn]
                    self.done[key] = ""
            return self.done[key]
        if isinstance(e, F.Seq):
            return " ".join(p for p in (self.x(i, ctx) for i in e.items) if p)
        if isinstance(e, F.Choice):
            alts = [self.x(a, ctx) for a in e.alts if not isinstance(a, F.Recover)]
            if not alts:
                return ""
            return alternation(alts) if any(alts) else ""
        if isinstance(e, F.Recover):
            return ""
        if isinstance(e, F.Tok):
            if e.cls in _UNREQUIRABLE:
                raise _Unrequirable(e.cls)
            return self.tok(e.cls)
        if isinstance(e, F.Text):
            return self.text(e, ctx)
        if isinstance(e, F.Opt):
            if self.has(e.expr, "end"):
                return ""  # the engine ends the turn (end-of-generation) when the grammar is complete
            if self.has(e.expr, "arguments"):
                return self.x(e.expr, ctx)  # always write the argument begin (the parser warns without)
            if self.has(e.expr, "reasoning") and not self.reasoning:
                return ""
            return optional(self.x(e.expr, ctx))
        if isinstance(e, F.Star):
            return self.star(e, ctx)
        if isinstance(e, F.Group):
            if e.name == "call" and ctx.tool is None:
                alts = []
                for n in self.names:
                    rn = self.r.fresh(f"call-{ctx.index}-{self.slugs[n]}")
                    self.r.set(rn, self.x(e.expr, replace(ctx, tool=n)))
                    alts.append(rn)
                return alternation(alts)
            return self.x(e.expr, ctx)
        if isinstance(e, (F.Ahead, F.Eof, F.Rest)):
            raise GrammarError(f"format expression {e} is only expected in recovery alternatives")
        raise GrammarError(f"unknown format expression {e!r}")  # pragma: no cover

    def star(self, e: F.Star, ctx: _Ctx) -> str:
        if self.has(e.expr, "call"):
            if self.has(e.expr, "section"):  # the sections of the turn
                if self.choice == "none":
                    return ""
                body = self.x(e.expr, ctx)
                return optional(body) if self.choice == "auto" else body
            # the calls of a section: unrolled so that each header carries its index
            n = self.max_calls if self.parallel else 1
            nxt = ""
            for k in range(n - 1, -1, -1):
                body = self.x(e.expr, replace(ctx, index=self.first_index + k))
                rn = self.r.fresh(f"calls-from-{self.first_index + k}")
                self.r.set(rn, body + (" " + optional(nxt) if nxt else ""))
                nxt = rn
            return nxt
        raise GrammarError(f"repetition {e} has no generation rule")  # pragma: no cover


class _Unrequirable(Exception):
    pass


def _choice(tool_choice: Any, tools: Mapping[str, Any]) -> tuple[str, list[str]]:
    if tool_choice is None:
        tool_choice = "auto" if tools else "none"
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise GrammarError(f"tool_choice: expected 'none', 'auto', 'required' or a named function, got {tool_choice!r}")
        if tool_choice == "required" and not tools:
            raise GrammarError("tool_choice 'required' needs at least one function tool")
        return tool_choice, list(tools)
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function", tool_choice)
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            raise GrammarError(f"tool_choice: no function name in {tool_choice!r}")
        if name not in tools:
            raise GrammarError(f"tool_choice names {name!r}, which is not a declared function tool "
                               f"(declared: {', '.join(tools) or 'none'})")
        return "named", [name]
    raise GrammarError(f"tool_choice: unsupported value {tool_choice!r}")


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
    * ``first_index``: the index of the first call's ``functions.NAME:IDX`` header;
    * ``token_markers``: marker spellings that are single tokens of the model (written as token
      references); default :func:`default_token_markers`;
    * ``reasoning``: allow a ``<think>`` block where the dialect's format has one (ignored when the
      prompt pre-fills ``<think>``: reasoning is then mandatory);
    * ``content``: allow content before the tool calls with ``"required"``/named choices;
    * ``options``: render options of the prompt (``thinking=False``...), as for the parser.

    Raises :class:`GrammarError` for an unknown named tool, ``"required"`` without tools or a schema
    that cannot be translated.
    """
    if max_calls < 1:
        raise GrammarError("max_calls must be at least 1")
    fns = normalise_tools(tools, error=GrammarError)
    choice, names = _choice(tool_choice, fns)
    machine = output_machine(dialect, options)
    if token_markers is None:
        token_markers = default_token_markers(dialect)
    rules = Rules()
    rules.fresh("root")
    forbidden = forbidden_spellings(machine)
    tr = _Translator(
        rules, fns, names, choice, parallel_tool_calls, max_calls, first_index, token_markers,
        text_rule="text", reasoning=reasoning, content=content, json=JsonSchemaTranslator(rules, "jstr-0"),
    )
    try:
        body = tr.x(F.Ref(machine.start_rule), _Ctx())
    except _Unrequirable as e:  # pragma: no cover - the format only has them in optional/recovery parts
        raise GrammarError(f"the format requires {e} where a grammar cannot") from None
    rules.set("root", body or '""')
    used = rules.text()
    if re.search(r"\btext\b", used):
        rules.set("text", avoiding(rules, forbidden, "text", json_string=False))
    if "jstr-0" in used:
        avoiding(rules, forbidden, "jstr", json_string=True)
    return rules.pruned("root")
