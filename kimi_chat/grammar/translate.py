"""The walk from an output format (:mod:`kimi_chat.output.format`, the rules the parser runs) to GBNF, shared
by the format families: :class:`FormatTranslator` translates references, sequences, choices and
groups the same way for every family and asks its subclass what the family's terminals, text fields,
options and repetitions become (:mod:`~kimi_chat.families.k2.grammar` for K2,
:mod:`~kimi_chat.families.k3.grammar` for K3); :func:`build_grammar` runs one over a request.

Common to every family:

* :class:`~kimi_chat.output.peg.Recover` alternatives (what the parser tolerates but a model should not
  produce) and end-of-input alternatives (truncation) are left out;
* each rule of the format becomes one GBNF rule (inlined when it is a single item), specialised for
  the tool call being written when it contains one of :attr:`FormatTranslator.ctx_groups`;
* the ``call`` group becomes one alternative per allowed tool, and the repetition of calls is unrolled
  so that each call knows its position (``_Ctx.index``);
* free text avoids the marker spellings of the format (:func:`~kimi_chat.grammar.gbnf.avoiding`), as
  do JSON strings.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..output import peg as F
from ..dialect_records import DialectRecord as Dialect
from ..output.tools import normalise_tools
from .gbnf import GrammarError, Rules, alternation, avoiding, literal, optional, slug
from .json_schema import JsonSchemaTranslator
from .vocabulary import default_token_markers, forbidden_spellings, output_machine

__all__ = ["Ctx", "Unrequirable", "FormatTranslator", "tool_choice", "response_schema", "after_reasoning", "walk",
           "build_grammar", "check_no_marker", "RESPONSE_PATH"]

RESPONSE_PATH = "response_format.json_schema.schema"
"""Where the reply's schema is in a request (the path notes and errors about it name)."""


@dataclass(frozen=True)
class Ctx:
    """What a rule being translated depends on: the tool of the call and the call's position."""

    tool: str | None = None
    index: int | None = None


class Unrequirable(Exception):
    """A terminal the grammar cannot require (an end-of-generation marker) outside an optional part."""


class FormatTranslator:
    """A format's grammar (rule name -> :mod:`kimi_chat.output.peg` expression) translated into ``rules``.

    Subclasses define :meth:`tok`, :meth:`text`, :meth:`opt` and :meth:`star` (and may refine
    :meth:`ordered_choice` / :meth:`group`); ``ctx_groups`` are the groups whose translation depends on the
    call being written."""

    ctx_groups: tuple[str, ...] = ("call",)

    response_schema: Any = None
    """The JSON schema the reply must satisfy (``response_format``; ``None``: free text), set by :func:`walk`."""

    def __init__(self, rules: Rules, grammar: Mapping[str, F.Expr], tools: dict[str, Any], names: list[str],
                 choice: str, parallel: bool, max_calls: int, first_index: int, token_markers: Collection[str],
                 text_rule: str, reasoning: bool, content: bool, json: JsonSchemaTranslator) -> None:
        self.r = rules
        self.grammar = grammar
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
        self.forbidden: tuple[str, ...] = ()  # the marker spellings text may not contain (set by build_grammar)
        self.done: dict[tuple[str, Ctx], str] = {}
        self._reply: str | None = None
        self.slugs: dict[str, str] = {}
        for n in names:
            s = slug(n)
            while s in self.slugs.values():
                s += "-x"
            self.slugs[n] = s

    # ------------------------------------------------------------------ family hooks

    def tok(self, e: F.Tok, ctx: Ctx) -> str:  # pragma: no cover - abstract
        """The GBNF of terminal ``e``."""
        raise NotImplementedError

    def text(self, e: F.Text, ctx: Ctx) -> str:  # pragma: no cover - abstract
        """The GBNF of text field ``e`` (empty: nothing is generated there)."""
        raise NotImplementedError

    def opt(self, e: F.Opt, ctx: Ctx) -> str:
        """The GBNF of an optional part (default: optional)."""
        return optional(self.x(e.expr, ctx))

    def star(self, e: F.Star, ctx: Ctx) -> str:  # pragma: no cover - abstract
        """The GBNF of a repetition."""
        raise NotImplementedError

    def ordered_choice(self, e: F.Choice, ctx: Ctx) -> str:
        """An ordered choice: its alternatives but the recovery and end-of-input ones."""
        alts = [self.x(a, ctx) for a in e.alts if not isinstance(a, (F.Recover, F.Eof))]
        return alternation(alts) if any(alts) else ""

    def group(self, e: F.Group, ctx: Ctx) -> str:
        """A group: the ``call`` group outside a call is one alternative per allowed tool."""
        if e.name == "call" and ctx.tool is None:
            alts = []
            for n in self.names:
                rn = self.r.fresh(f"call-{ctx.index}-{self.slugs[n]}")
                self.r.set(rn, self.x(e.expr, replace(ctx, tool=n)))
                alts.append(rn)
            return alternation(alts)
        return self.x(e.expr, ctx)

    # ------------------------------------------------------------------ the walk

    def has(self, e: F.Expr, group: str) -> bool:
        """Whether ``e`` contains group ``group`` (through references, outside recovery alternatives)."""
        if isinstance(e, F.Group):
            return e.name == group or self.has(e.expr, group)
        if isinstance(e, F.Ref):
            return self.has(self.grammar[e.name], group)
        if isinstance(e, F.Seq):
            return any(self.has(i, group) for i in e.items)
        if isinstance(e, F.Choice):
            return any(self.has(a, group) for a in e.alts if not isinstance(a, F.Recover))
        if isinstance(e, (F.Opt, F.Star)):
            return self.has(e.expr, group)
        return False

    def marker(self, text: str, token_id: int | None) -> str:
        """A marker: a token reference if it is a single token of the target vocabulary
        (``<|name|>`` spellings by name, others by id), else its literal text."""
        if text in self.token_markers:
            return text if text.startswith("<") and text.endswith(">") else f"<[{token_id}]>"
        return literal(text)

    def x(self, e: F.Expr, ctx: Ctx) -> str:
        """The GBNF of expression ``e`` in context ``ctx`` (empty: nothing to generate)."""
        if isinstance(e, F.Ref):
            return self.ref(e, ctx)
        if isinstance(e, F.Seq):
            return " ".join(p for p in (self.x(i, ctx) for i in e.items) if p)
        if isinstance(e, F.Choice):
            return self.ordered_choice(e, ctx)
        if isinstance(e, F.Recover):
            return ""
        if isinstance(e, F.Tok):
            return self.tok(e, ctx)
        if isinstance(e, F.Text):
            return self.reply(e, self.text(e, ctx))
        if isinstance(e, F.Opt):
            return self.opt(e, ctx)
        if isinstance(e, F.Star):
            return self.star(e, ctx)
        if isinstance(e, F.Group):
            return self.group(e, ctx)
        if isinstance(e, (F.Ahead, F.Eof, F.Rest)):
            raise GrammarError(f"format expression {e} is only expected in recovery alternatives")
        raise GrammarError(f"unknown format expression {e!r}")  # pragma: no cover

    def reply(self, e: F.Text, out: str) -> str:
        """Text field ``e`` (its family translation ``out``) as ``response_format`` wants it: where a
        schema is given, the content (K2's content, K3's response channel) is a JSON value of it (the
        JSON writer's: GBNF or llguidance's ``%json``), required with ``tool_choice`` ``none``, optional
        with ``auto`` (the model may call a tool instead); forced calls keep what the family writes."""
        if e.field != "content" or e.ws_only or not out or self.response_schema is None:
            return out
        if self._reply is None:
            self.json.prefix = "response-"
            self._reply = self.json.schema(self.response_schema, self.response_schema, "response", RESPONSE_PATH)
            if " " in self._reply or "|" in self._reply:
                self._reply = self.r.set(self.r.fresh("response"), self._reply)
        return self._reply if self.choice == "none" else optional(self._reply) if self.choice == "auto" else out

    def ref(self, e: F.Ref, ctx: Ctx) -> str:
        """A rule of the format: one GBNF rule per (rule, context), inlined when a single item."""
        if not any(self.has(e, g) for g in self.ctx_groups):
            ctx = Ctx()  # the rule does not depend on the call being written
        key = (e.name, ctx)
        if key not in self.done:
            base = e.name.replace("_", "-")
            if ctx.index is not None:
                base += f"-{ctx.index}"
            if ctx.tool is not None:
                base += f"-{self.slugs[ctx.tool]}"
            rn = self.r.fresh(base)
            body = self.x(self.grammar[e.name], ctx)
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

    def calls(self, e: F.Star, ctx: Ctx) -> str:
        """The repetition of calls, unrolled so that each call carries its index: one call, or
        1..``max_calls`` with ``parallel``."""
        n = self.max_calls if self.parallel else 1
        nxt = ""
        for k in range(n - 1, -1, -1):
            body = self.x(e.expr, replace(ctx, index=self.first_index + k))
            rn = self.r.fresh(f"calls-from-{self.first_index + k}")
            self.r.set(rn, body + (" " + optional(nxt) if nxt else ""))
            nxt = rn
        return nxt

    def calls_part(self, body: str) -> str:
        """A part holding the calls (section, tools channel) as ``tool_choice`` wants it: absent
        (``none``), optional (``auto``) or required."""
        if self.choice == "none":
            return ""
        return optional(body) if self.choice == "auto" else body


def check_no_marker(text: str, forbidden: Collection[str], where: str) -> None:
    """A GrammarError (naming ``where``) if ``text``, which a grammar writes as literal text with no
    escape (a tool name, a K3 attribute), spells one of the ``forbidden`` markers: a model writing it
    would make the parser read a marker there."""
    for f in forbidden:
        if f in text:
            raise GrammarError(f"{where}: the value {text!r} spells the marker {f!r}, which a model cannot "
                               "write as text")


def tool_choice(tool_choice: Any, tools: Mapping[str, Any]) -> tuple[str, list[str]]:
    """``(choice, names)``: ``none`` / ``auto`` / ``required`` / ``named`` and the tools a call may
    name. Raises :class:`GrammarError` for an unknown value or a name that is not a declared tool."""
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


def response_schema(response_format: Any) -> Any:
    """The JSON schema an OpenAI ``response_format`` constrains the reply to: ``{"type": "object"}``
    for ``json_object``, the given schema for ``json_schema``, ``None`` (free text) for ``text`` or no
    ``response_format``. Raises :class:`GrammarError` naming the field for a malformed one."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise GrammarError(f"response_format: expected an object, got {type(response_format).__name__}")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if schema is None:
            raise GrammarError("response_format.json_schema: no schema")
        return schema
    raise GrammarError(f"response_format.type: expected 'text', 'json_object' or 'json_schema', got {kind!r}")


def after_reasoning(dialect: Dialect, options: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The render/grammar ``options`` and the format rule to start at for a grammar that starts where the
    reasoning ended (a server applies it from there: vLLM, SGLang with a reasoning parser): the family's
    ``after_reasoning`` (its constraint module; K2: the body, as with thinking off; K3: after the think
    channel, whose close ended the reasoning), over ``options``."""
    extra, start = dialect.family_parts.grammar.constraint().after_reasoning(dialect)
    return {**options, **extra}, start


def walk(translator: type[FormatTranslator], grammar: Mapping[str, F.Expr], tools: Sequence[Any] | None,
         tool_choice_: Any, parallel_tool_calls: bool, dialect: str | Dialect, max_calls: int,
         first_index: int, token_markers: Collection[str] | None, reasoning: bool, content: bool,
         options: Mapping[str, Any], json: Any = None,
         configure: Any = None, reply_schema: Any = None,
         start_rule: str | None = None) -> tuple[Rules, FormatTranslator]:
    """The walk of ``translator`` over ``grammar`` from the start rule the parser picks for ``dialect``
    and render ``options``: the rule set (root rule ``root``; the free-text rule ``text`` is left for the
    writer to define: GBNF here, Lark in :mod:`kimi_chat.grammar.lark`) and the translator. ``json``:
    a factory ``(rules, forbidden) -> JSON writer`` (default: :class:`JsonSchemaTranslator`, GBNF);
    ``configure``: called with the translator before the walk; ``reply_schema``: the JSON schema the
    reply must satisfy (:func:`response_schema`; :meth:`FormatTranslator.reply`); ``start_rule``: the
    format rule to start at instead of the parser's (:func:`after_reasoning`)."""
    if max_calls < 1:
        raise GrammarError("max_calls must be at least 1")
    fns = normalise_tools(tools, error=GrammarError)
    choice, names = tool_choice(tool_choice_, fns)
    machine = output_machine(dialect, options)
    if token_markers is None:
        token_markers = default_token_markers(dialect)
    forbidden = forbidden_spellings(machine)
    for n in names:
        check_no_marker(n, forbidden, "tools: function name")
    rules = Rules()
    rules.fresh("root")
    tr = translator(rules, grammar, fns, names, choice, parallel_tool_calls, max_calls, first_index, token_markers,
                    text_rule="text", reasoning=reasoning, content=content,
                    json=(json or (lambda r, f: JsonSchemaTranslator(r, "jstr-0", forbidden=f)))(rules, forbidden))
    tr.forbidden = forbidden
    tr.response_schema = reply_schema
    if configure is not None:
        configure(tr)
    try:
        body = tr.x(F.Ref(start_rule or machine.start_rule), Ctx())
    except Unrequirable as e:  # pragma: no cover - the formats only have them in optional/recovery parts
        raise GrammarError(f"the format requires {e} where a grammar cannot") from None
    rules.set("root", body or '""')
    return rules, tr


def build_grammar(translator: type[FormatTranslator], grammar: Mapping[str, F.Expr], tools: Sequence[Any] | None,
                  tool_choice_: Any, parallel_tool_calls: bool, dialect: str | Dialect, max_calls: int,
                  first_index: int, token_markers: Collection[str] | None, reasoning: bool, content: bool,
                  options: Mapping[str, Any], reply_schema: Any = None, start_rule: str | None = None) -> str:
    """The pruned GBNF (root rule ``root``) of ``translator`` run over ``grammar`` from the start rule
    the parser picks for ``dialect`` and render ``options`` (see :func:`~kimi_chat.grammar.tool_call_grammar`)."""
    rules, tr = walk(translator, grammar, tools, tool_choice_, parallel_tool_calls, dialect, max_calls, first_index,
                     token_markers, reasoning, content, options, reply_schema=reply_schema, start_rule=start_rule)
    forbidden = tr.forbidden
    used = rules.text()
    if re.search(r"\btext\b", used):
        rules.set("text", avoiding(rules, forbidden, "text", json_string=False))
    if "jstr-0" in used:
        avoiding(rules, forbidden, "jstr", json_string=True)
    return rules.pruned("root")
