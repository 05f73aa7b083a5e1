"""GBNF grammars (llama.cpp) that constrain a model's output to the Kimi tool-call format.

:func:`tool_call_grammar` translates the output grammar of :mod:`kimi_chat.format` (the same rules
:class:`~kimi_chat.parse.StreamParser` runs) into GBNF, specialised for one request:

* the start rule is the one the parser would use for the dialect and render options (plain, with
  optional reasoning, or starting inside pre-filled reasoning);
* :class:`~kimi_chat.format.Recover` alternatives (what the parser tolerates but a model should not
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

JSON schema coverage (the common subset of tool schemas): ``type`` (one or a list), ``enum``,
``const``, ``anyOf``/``oneOf``, ``allOf`` of object schemas (merged), ``nullable``, local ``$ref``
(``#/$defs/…``, ``#/definitions/…``, recursion allowed), objects with ``properties``/``required``
(properties in declaration order), free-form objects (``additionalProperties``: true or a schema, and
no ``properties``), arrays with ``items``/``prefixItems``/``minItems``/``maxItems``, strings with
``minLength``/``maxLength``, integers (``minimum >= 0`` drops the sign), numbers, booleans, null,
``true``/``{}`` (any JSON value).

Not covered (accepted, not enforced): ``pattern``, ``format``, numeric bounds other than a
non-negative minimum, ``multipleOf``, ``uniqueItems``, ``minProperties``/``maxProperties``,
``patternProperties``, ``dependentRequired``/``dependentSchemas``, ``if``/``then``/``else``, ``not``,
remote ``$ref``. Properties not declared in ``properties`` are never generated (as if
``additionalProperties`` were false). Property order is the declaration order. ``oneOf`` is
treated as ``anyOf``. Raises :class:`GrammarError` for ``false`` schemas and ``$ref`` it cannot
resolve. Strings with ``minLength``/``maxLength`` never contain a raw ``<`` or ``[`` (they are written
``\\u003c``, ``\\u005b``) so that no marker can be spelled inside them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import format as F
from . import markers as M
from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .errors import KimiChatError

__all__ = [
    "GrammarError",
    "tool_call_grammar",
    "json_schema_to_gbnf",
    "default_token_markers",
    "forbidden_text",
    "CALL_ID_PREFIX",
]

CALL_ID_PREFIX = M.TOOL_CALL_ID_PREFIX
"""Tool-call headers are ``functions.NAME:IDX`` (what the templates render and the parser reads).
The header syntax is not part of :mod:`kimi_chat.format` (it is free text there)."""

RESERVED_TOKEN_PREFIX = M.reserved_token_name(0)[: M.reserved_token_name(0).index("0")]
"""``<|reserved_token_``: every reserved special id is spelled with this prefix."""


class GrammarError(KimiChatError, ValueError):
    """The request cannot be turned into a grammar (unknown named tool, unsupported schema...)."""


# --------------------------------------------------------------------------------------------------
# GBNF helpers


def _char(c: str, in_class: bool) -> str:
    o = ord(c)
    if c.isalnum() and o < 128:
        return c
    if c == " " and not in_class:
        return c
    if o < 0x80:
        return f"\\x{o:02X}"
    if o <= 0xFFFF:
        return f"\\u{o:04X}"
    return f"\\U{o:08X}"


def _lit(s: str) -> str:
    """A GBNF string literal."""
    out = []
    for c in s:
        if c.isascii() and c.isprintable() and c not in '"\\':
            out.append(c)
        else:
            out.append(_char(c, False))
    return '"' + "".join(out) + '"'


def _class(chars: Iterable[str], negate: bool, extra: str = "") -> str:
    body = "".join(_char(c, True) for c in sorted(set(chars))) + extra
    return "[" + ("^" if negate else "") + body + "]"


_NAME_RE = re.compile(r"[^A-Za-z0-9]+")


def _slug(s: str) -> str:
    return _NAME_RE.sub("-", s).strip("-").lower() or "x"


class _Rules:
    """An ordered set of GBNF rules with unique names."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.rules:
            k += 1
            name = f"{base}-{k}"
        self.rules[name] = ""  # reserve
        return name

    def set(self, name: str, body: str) -> str:
        self.rules[name] = body
        return name

    def text(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def _alt(items: Sequence[str]) -> str:
    items = list(dict.fromkeys(items))
    if len(items) == 1:
        return items[0]
    return "(" + " | ".join(i if i else '""' for i in items) + ")"


def _opt(x: str) -> str:
    if not x:
        return ""
    return f"({x})?" if " " in x or "|" in x else f"{x}?"


# --------------------------------------------------------------------------------------------------
# Text that spells no marker


def forbidden_text(dialect: str | Dialect = DEFAULT_DIALECT, **options: Any) -> tuple[str, ...]:
    """The strings free text may not contain for this dialect: every marker spelling the parser's
    lexer recognises (:attr:`kimi_chat.format.Machine.classes`) plus the reserved-token prefix."""
    m = _machine(dialect, options)
    return tuple(sorted(m.classes)) + (RESERVED_TOKEN_PREFIX,)


class _Avoid:
    """A DFA (Aho-Corasick over the forbidden strings) rendered as GBNF rules: text whose every
    prefix avoids the forbidden strings. ``json``: JSON string characters (no quote, backslash or
    control character raw; escapes allowed and reset the automaton)."""

    def __init__(self, rules: _Rules, forbidden: Collection[str], prefix: str, json_string: bool) -> None:
        forbidden = [f for f in forbidden if f]
        nodes = sorted({f[:k] for f in forbidden for k in range(len(f))}, key=lambda s: (len(s), s))
        index = {s: i for i, s in enumerate(nodes)}
        sigma = sorted({c for f in forbidden for c in f})

        def step(q: str, c: str) -> int | None:
            s = q + c
            if any(s.endswith(f) for f in forbidden):
                return None
            for k in range(len(s)):
                if s[k:] in index:
                    return index[s[k:]]
            return 0

        names = [f"{prefix}-{i}" for i in range(len(nodes))]
        base_excl = '"\\' if json_string else ""
        ctrl = "\\x00-\\x1F" if json_string else "\\x00"
        escape = '"\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) ' + names[0] if json_string else ""
        for i, q in enumerate(nodes):
            special = {}
            dead = []
            for c in sigma:
                if c in base_excl:
                    continue
                t = step(q, c)
                if t is None:
                    dead.append(c)
                elif t != 0:
                    special[c] = t
            alts = [_class(list(special) + dead + list(base_excl), True, ctrl) + " " + names[0]]
            alts += [f"{_lit(c)} {names[t]}" for c, t in special.items()]
            if escape:
                alts.append(escape)
            rules.set(names[i], "(" + " | ".join(alts) + ")?")
        self.start = names[0]


# --------------------------------------------------------------------------------------------------
# JSON schema -> GBNF


_INT = '("0" | [1-9] [0-9]{0,15})'
_FRAC = '("." [0-9]{1,16})?'
_EXP = '([eE] [-+]? [0-9]{1,3})?'


class _Json:
    """JSON-schema to GBNF translation into a shared rule set."""

    def __init__(self, rules: _Rules, jstring: str, prefix: str = "") -> None:
        self.r = rules
        self.jstring = jstring  # rule: the characters of an unbounded JSON string (no quotes)
        self.prefix = prefix
        self._prims: dict[str, str] = {}
        self._refs: dict[tuple[int, str], str] = {}

    # shared primitives, created on first use
    def prim(self, kind: str) -> str:
        if kind in self._prims:
            return self._prims[kind]
        name = self.r.fresh(f"json-{kind}")
        self._prims[kind] = name
        if kind == "ws":
            body = '" "?'
        elif kind == "string":
            body = f'"\\"" {self.jstring} "\\""'
        elif kind == "safe-char":
            body = '[^"\\\\<\\x5B\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})'
        elif kind == "integer":
            body = f'"-"? {_INT}'
        elif kind == "natural":
            body = _INT
        elif kind == "number":
            body = f'"-"? {_INT} {_FRAC} {_EXP}'
        elif kind == "boolean":
            body = '"true" | "false"'
        elif kind == "null":
            body = '"null"'
        elif kind == "value":
            obj, arr = self.prim("object"), self.prim("array")
            body = " | ".join([obj, arr, self.prim("string"), self.prim("number"), self.prim("boolean"), self.prim("null")])
        elif kind == "object":
            ws, s, v = self.prim("ws"), self.prim("string"), self.prim("value")
            body = f'"{{" ({s} ":" {ws} {v} ("," {ws} {s} ":" {ws} {v})*)? "}}"'
        elif kind == "array":
            ws, v = self.prim("ws"), self.prim("value")
            body = f'"[" ({v} ("," {ws} {v})*)? "]"'
        else:  # pragma: no cover
            raise AssertionError(kind)
        self.r.set(name, body)
        return name

    def schema(self, schema: Any, root: Any, name: str, path: str) -> str:
        """An expression for ``schema`` (rules are added for its parts)."""
        if schema is True or schema == {}:
            return self.prim("value")
        if schema is False:
            raise GrammarError(f"{path}: a false schema accepts no value")
        if not isinstance(schema, Mapping):
            raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}")
        if "$ref" in schema:
            return self.ref(schema["$ref"], root, path)
        if "const" in schema:
            return _lit(json.dumps(schema["const"], ensure_ascii=False))
        if "enum" in schema:
            vals = schema["enum"]
            if not isinstance(vals, list) or not vals:
                raise GrammarError(f"{path}/enum: expected a non-empty list")
            return _alt([_lit(json.dumps(v, ensure_ascii=False)) for v in vals])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise GrammarError(f"{path}/{key}: expected a non-empty list")
                rest = {k: v for k, v in schema.items() if k != key}
                alts = [self.rule(_merge(rest, s, root) if rest else s, root, f"{name}-{j}", f"{path}/{key}/{j}")
                        for j, s in enumerate(subs)]
                return _alt(alts)
        if "allOf" in schema:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for s in schema["allOf"]:
                merged = _merge(merged, s, root)
            return self.schema(merged, root, name, path)
        t = schema.get("type")
        if t is None:
            if "properties" in schema or "additionalProperties" in schema:
                t = "object"
            elif "items" in schema or "prefixItems" in schema:
                t = "array"
            else:
                return self.prim("value")
        types = list(t) if isinstance(t, list) else [t]
        if schema.get("nullable") is True and "null" not in types:
            types.append("null")
        alts = [self.typed(ty, schema, root, name if len(types) == 1 else f"{name}-{ty}", path) for ty in types]
        return _alt(alts)

    def rule(self, schema: Any, root: Any, name: str, path: str) -> str:
        """A named rule for ``schema`` (or a primitive's name)."""
        expr = self.schema(schema, root, name, path)
        if re.fullmatch(r"[A-Za-z0-9-]+", expr):
            return expr
        rn = self.r.fresh(name)
        self.r.set(rn, expr)
        return rn

    def ref(self, ref: Any, root: Any, path: str) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise GrammarError(f"{path}/$ref: only local references (#/...) are supported, got {ref!r}")
        key = (id(root), ref)
        if key in self._refs:
            return self._refs[key]
        target: Any = root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise GrammarError(f"{path}/$ref: cannot resolve {ref!r}")
        rn = self.r.fresh(f"{self.prefix}ref-{_slug(ref[1:]) or 'root'}")
        self._refs[key] = rn
        self.r.set(rn, self.schema(target, root, rn, ref))
        return rn

    def typed(self, ty: Any, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        if ty == "null":
            return self.prim("null")
        if ty == "boolean":
            return self.prim("boolean")
        if ty == "integer":
            lo = schema.get("minimum", schema.get("exclusiveMinimum"))
            natural = isinstance(lo, (int, float)) and not isinstance(lo, bool) and lo >= 0
            return self.prim("natural" if natural else "integer")
        if ty == "number":
            return self.prim("number")
        if ty == "string":
            lo, hi = schema.get("minLength"), schema.get("maxLength")
            if lo is None and hi is None:
                return self.prim("string")
            lo = int(lo or 0)
            rep = f"{{{lo},{int(hi)}}}" if hi is not None else f"{{{lo},}}"
            return f'"\\"" {self.prim("safe-char")}{rep} "\\""'
        if ty == "array":
            return self.array(schema, root, name, path)
        if ty == "object":
            return self.object(schema, root, name, path)
        raise GrammarError(f"{path}/type: unknown type {ty!r}")

    def array(self, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        ws = self.prim("ws")
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(prefix, list) and prefix:
            parts = [self.rule(s, root, f"{name}-{j}", f"{path}/prefixItems/{j}") for j, s in enumerate(prefix)]
            return '"[" ' + f' "," {ws} '.join(parts) + ' "]"'
        item = self.rule(items, root, f"{name}-item", f"{path}/items")
        lo = int(schema.get("minItems", 0) or 0)
        hi = schema.get("maxItems")
        if hi is not None and int(hi) == 0:
            return '"[" "]"'
        more_lo = max(lo - 1, 0)
        more = f'("," {ws} {item})' + (f"{{{more_lo},{int(hi) - 1}}}" if hi is not None else f"{{{more_lo},}}")
        more = more.replace("{0,}", "*")
        inner = f"{item} {more}"
        return f'"[" {inner} "]"' if lo > 0 else f'"[" ({inner})? "]"'

    def object(self, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        props = schema.get("properties")
        if not props:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return '"{" "}"'
            if extra is True or extra == {}:
                return self.prim("object")
            ws, s = self.prim("ws"), self.prim("string")
            v = self.rule(extra, root, f"{name}-value", f"{path}/additionalProperties")
            return f'"{{" ({s} ":" {ws} {v} ("," {ws} {s} ":" {ws} {v})*)? "}}"'
        if not isinstance(props, Mapping):
            raise GrammarError(f"{path}/properties: expected an object")
        required = set(schema.get("required") or ())
        ws = self.prim("ws")
        kvs = []
        for k, sub in props.items():
            v = self.rule(sub, root, f"{name}-{_slug(k)}", f"{path}/properties/{k}")
            kvs.append((f"{_lit(json.dumps(k, ensure_ascii=False))} \":\" {ws} {v}", k in required))
        if all(req for _, req in kvs):
            return '"{" ' + f' "," {ws} '.join(kv for kv, _ in kvs) + ' "}"'
        # optional properties: rest(i, first) = the properties i.. given whether one was written
        n = len(kvs)
        cont: list[str] = [""] * (n + 1)
        first: list[str] = [""] * (n + 1)
        for i in range(n - 1, -1, -1):
            kv, req = kvs[i]
            c_next, f_next = cont[i + 1], first[i + 1]
            c_body = f'"," {ws} {kv}' + (f" {c_next}" if c_next else "")
            f_body = kv + (f" {c_next}" if c_next else "")
            if not req:
                c_body = f"({c_body})?" if not c_next else f'("," {ws} {kv})? {c_next}'
                f_body = f"{f_body} | {f_next}" if f_next else f"({f_body})?"
            cont[i] = self.r.set(self.r.fresh(f"{name}-rest-{i}"), c_body)
            first[i] = self.r.set(self.r.fresh(f"{name}-first-{i}"), f_body)
        return f'"{{" {first[0]} "}}"'


def _merge(a: Mapping[str, Any], b: Any, root: Any) -> dict[str, Any]:
    if b is True or b == {}:
        return dict(a)
    if not isinstance(b, Mapping):
        raise GrammarError("allOf: only object schemas can be merged")
    if "$ref" in b and len(b) == 1:
        ref = b["$ref"]
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            raise GrammarError(f"allOf: cannot resolve {ref!r}")
        b = target
    out = dict(a)
    for k, v in b.items():
        if k == "properties":
            out["properties"] = {**(out.get("properties") or {}), **v}
        elif k == "required":
            out["required"] = list(dict.fromkeys([*(out.get("required") or []), *v]))
        elif k not in out:
            out[k] = v
    return out


def json_schema_to_gbnf(schema: Any, *, root_name: str = "root") -> str:
    """A standalone GBNF grammar for JSON values following ``schema`` (see the module docstring for
    what is covered). JSON strings avoid every marker spelling of the default dialect."""
    rules = _Rules()
    rules.fresh(root_name)
    avoid = _Avoid(rules, forbidden_text(DEFAULT_DIALECT), "jstr", json_string=True)
    j = _Json(rules, avoid.start)
    rules.set(root_name, j.schema(schema, schema, "value", "#"))
    return rules.text()


# --------------------------------------------------------------------------------------------------
# The output format -> GBNF


def _machine(dialect: str | Dialect, options: Mapping[str, Any]) -> F.Machine:
    from .parse import StreamParser  # the start rule is the one the parser picks

    return StreamParser(dialect, **options).machine


def default_token_markers(dialect: str | Dialect = DEFAULT_DIALECT) -> frozenset[str]:
    """Marker spellings taken to be single special tokens of a model of ``dialect``: every format
    marker with an id, except ``<think>``/``</think>``, which are tokens only in the K2.5/K2.6
    vocabulary. :class:`kimi_chat.runtime.NativeModel` asks the loaded model instead."""
    d = get_dialect(dialect)
    out = set()
    for ms in F.TOKEN_CLASSES.values():
        for m in ms:
            if m.id is not None and (m not in (M.THINK_BEGIN, M.THINK_END) or d.think == "k25"):
                out.add(m.text)
    return frozenset(out)


@dataclass(frozen=True)
class _Ctx:
    tool: str | None = None
    index: int | None = None


_UNREQUIRABLE = ("END_TURN", "NEW_MESSAGE")


class _Translator:
    def __init__(self, rules: _Rules, tools: dict[str, Any], names: list[str], choice: str, parallel: bool,
                 max_calls: int, first_index: int, token_markers: Collection[str], text_rule: str,
                 reasoning: bool, content: bool, json: _Json) -> None:
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
            s = _slug(n)
            while s in self.slugs.values():
                s += "-x"
            self.slugs[n] = s

    # which groups an expression contains (through references)
    def has(self, e: F.Expr, group: str) -> bool:
        if isinstance(e, F.Group):
            return e.name == group or self.has(e.expr, group)
        if isinstance(e, F.Ref):
            return self.has(F.GRAMMAR[e.name], group)
        if isinstance(e, F.Seq):
            return any(self.has(i, group) for i in e.items)
        if isinstance(e, F.Choice):
            return any(self.has(a, group) for a in e.alts if not isinstance(a, F.Recover))
        if isinstance(e, (F.Opt, F.Star)):
            return self.has(e.expr, group)
        return False

    def tok(self, cls: str) -> str:
        m = F.TOKEN_CLASSES[cls][0]  # the canonical spelling of the terminal class
        if m.text in self.token_markers:
            return m.text if m.text.startswith("<") and m.text.endswith(">") else f"<[{m.id}]>"
        return _lit(m.text)

    def text(self, e: F.Text, ctx: _Ctx) -> str:
        f = e.field
        if f == "header":
            assert ctx.tool is not None and ctx.index is not None
            return _lit(M.tool_call_id(ctx.tool, ctx.index))
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
                body = self.x(F.GRAMMAR[e.name], ctx)
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
            return _alt(alts) if any(alts) else ""
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
            return _opt(self.x(e.expr, ctx))
        if isinstance(e, F.Star):
            return self.star(e, ctx)
        if isinstance(e, F.Group):
            if e.name == "call" and ctx.tool is None:
                alts = []
                for n in self.names:
                    rn = self.r.fresh(f"call-{ctx.index}-{self.slugs[n]}")
                    self.r.set(rn, self.x(e.expr, replace(ctx, tool=n)))
                    alts.append(rn)
                return _alt(alts)
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
                return _opt(body) if self.choice == "auto" else body
            # the calls of a section: unrolled so that each header carries its index
            n = self.max_calls if self.parallel else 1
            nxt = ""
            for k in range(n - 1, -1, -1):
                body = self.x(e.expr, replace(ctx, index=self.first_index + k))
                rn = self.r.fresh(f"calls-from-{self.first_index + k}")
                self.r.set(rn, body + (" " + _opt(nxt) if nxt else ""))
                nxt = rn
            return nxt
        raise GrammarError(f"repetition {e} has no generation rule")  # pragma: no cover


class _Unrequirable(Exception):
    pass


def _function_tools(tools: Sequence[Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, t in enumerate(tools or ()):
        if hasattr(t, "model_dump"):
            t = t.model_dump()
        if not isinstance(t, Mapping):
            raise GrammarError(f"tools[{i}]: expected a mapping, got {type(t).__name__}")
        if t.get("type", "function") != "function":
            continue
        fn = t.get("function", t)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise GrammarError(f"tools[{i}]: no function name")
        if fn["name"] in out:
            raise GrammarError(f"tools[{i}]: duplicate function name {fn['name']!r}")
        out[fn["name"]] = fn
    return out


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
    fns = _function_tools(tools)
    choice, names = _choice(tool_choice, fns)
    machine = _machine(dialect, options)
    if token_markers is None:
        token_markers = default_token_markers(dialect)
    rules = _Rules()
    rules.fresh("root")
    forbidden = tuple(sorted(machine.classes)) + (RESERVED_TOKEN_PREFIX,)
    tr = _Translator(
        rules, fns, names, choice, parallel_tool_calls, max_calls, first_index, token_markers,
        text_rule="text", reasoning=reasoning, content=content, json=_Json(rules, "jstr-0"),
    )
    try:
        body = tr.x(F.Ref(machine.start_rule), _Ctx())
    except _Unrequirable as e:  # pragma: no cover - the format only has them in optional/recovery parts
        raise GrammarError(f"the format requires {e} where a grammar cannot") from None
    rules.set("root", body or '""')
    used = rules.text()
    if re.search(r"\btext\b", used):
        _Avoid(rules, forbidden, "text", json_string=False)
        rules.rules["text"] = "text-0"
    if "jstr-0" in used:
        _Avoid(rules, forbidden, "jstr", json_string=True)
    return _prune(rules)


def _prune(rules: _Rules) -> str:
    """The grammar text, without rules unreachable from ``root``."""
    ref = re.compile(r"(?<![\"<\\\[\w-])([a-z][a-z0-9-]*)(?![\w-])")
    seen = {"root"}
    todo = ["root"]
    while todo:
        body = rules.rules[todo.pop()]
        # ignore literals and classes when looking for references
        stripped = re.sub(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|<[^>]*>', " ", body)
        for m in ref.finditer(stripped):
            n = m.group(1)
            if n in rules.rules and n not in seen:
                seen.add(n)
                todo.append(n)
    return "".join(f"{n} ::= {b}\n" for n, b in rules.rules.items() if n in seen)
