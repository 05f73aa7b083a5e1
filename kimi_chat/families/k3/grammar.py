"""The Kimi-K3 translation of :func:`~kimi_chat.grammar.tool_call_grammar`: the output grammar of
:mod:`kimi_chat.families.k3.format` (the rules :class:`~kimi_chat.output.StreamParser` runs for ``kimi-k3``) as
GBNF, specialised for one request, writing what the official ``encoding_k3`` writes for an assistant
message::

    [REASONING]<|close|>think<|sep|><|open|>response<|sep|>[CONTENT]<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
      <|open|>argument key="city" type="string"<|sep|>Zürich<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>

* The start rule is the parser's: inside the pre-filled think channel (thinking on; ``reasoning=False``
  closes it at once) or the pre-filled response channel (``thinking=False``).
* The response channel is always written (the encoder always writes it; the format accepts a turn
  without one only before the message close); its text is free with ``tool_choice`` ``none`` /
  ``auto`` (or ``content=True``), else empty.
* The tools channel: absent (``none``), optional (``auto``), required (``required`` / a named
  function); its calls are unrolled (one, or 1..``max_calls`` with ``parallel_tool_calls``) with
  ``index`` the 1-based position (``first_index + 1`` first), as the encoder numbers them.
* A call's elements are what the encoder writes for a dict of arguments, per object branch of the
  parameters (a top-level ``anyOf``/``oneOf``, also under ``allOf``/``$ref``): one typed ``argument``
  element per declared property, in declaration order, required ones always present, optional ones
  allowed, then (the Lark translator; here only for a free-form object) elements with undeclared keys.
  Undeclared keys are not kept distinct (no grammar can): one may be written twice, which ``encoding_k3``
  never does (each key of a dict once) and the parser warns ``duplicate_argument`` about. The arguments
  still satisfy the schema (JSON readers take the last value) except a ``minProperties`` of 2 or more
  (elements are counted) above the required properties and one more, which the Lark translation notes.
  The ``type`` attribute is the encoder's name of the value's JSON type (``string``, ``number`` for
  integers and numbers, ``boolean``, ``null``, ``object``, ``array``); a property that allows several
  types is an alternative per type. A ``string`` value is raw text (the encoder writes it unquoted) that
  cannot spell a marker (bounded strings: no ``<`` or ``[`` at all); any other value is JSON following the
  property's schema (:class:`~kimi_chat.grammar.json_schema.JsonSchemaTranslator`, JSON strings
  marker-free). No ``json`` element: the encoder writes one only for arguments that are not a JSON object.
  A function without ``parameters`` is a call without elements.
* The grammar ends with ``<|close|>message<|sep|>``: ``<|end_of_msg|>`` is the end-of-generation
  token, which llama.cpp allows only once the grammar is complete and cannot match as part of it.
* Markers (``<|open|>``, ``<|close|>``, ``<|sep|>``) are token references when they are single tokens
  of the target vocabulary; tag names and attributes are literal text (attribute values escaped as
  the encoder escapes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import markers as M
from ...output import peg as F
from .format import GRAMMAR, TAGS
from .inputs import esc, xtml_type
from ...grammar.gbnf import GrammarError, alternation, literal, optional, slug
from ...grammar.json_schema import bounds, json_literal, merge_schemas, properties_of, required_names, resolve_ref
from ...grammar.translate import Ctx, FormatTranslator, check_no_marker

__all__ = ["GRAMMAR", "K3Translator", "XTML_TYPES"]

XTML_TYPES: Mapping[str, str] = {"string": "string", "integer": "number", "number": "number",
                                 "boolean": "boolean", "null": "null", "object": "object", "array": "array"}
"""JSON-schema type -> the ``type`` attribute ``encoding_k3`` writes for a value of that type."""

_TAG_NAMES = {cls: name for name, cls in TAGS.open_classes.items()}
_CLOSE_NAMES = {cls: name for name, cls in TAGS.close_classes.items()}
_MARKER_IDS = {M.K3_OPEN.text: M.K3_OPEN.id, M.K3_CLOSE.text: M.K3_CLOSE.id, M.K3_SEP.text: M.K3_SEP.id}
_RAW_CHAR = r"[^<\x5B\x00]"  # a character of a bounded raw string: no marker can start with it
_MAX_REF_DEPTH = 32
_MAX_BRANCHES = 64
_MAX_COUNT = 64


def _attrs(*pairs: tuple[str, Any]) -> str:
    # _open_tag / _attr of the encoder: ` key="value"` with & and " escaped
    return "".join(f' {k}="{esc(v)}"' for k, v in pairs)


class K3Translator(FormatTranslator):
    """The K3 format (:mod:`kimi_chat.families.k3.format`): tags, typed argument elements (module docstring)."""

    ctx_groups = ("call", "argument", "json")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.elements: dict[str, str] = {}

    # ------------------------------------------------------------------ tags

    def tag(self, opener: str, body: str) -> str:
        """``<|open|>BODY<|sep|>`` / ``<|close|>BODY<|sep|>`` (markers as tokens where they are)."""
        return " ".join((self.marker(opener, _MARKER_IDS[opener]), literal(body),
                         self.marker(TAGS.sep, _MARKER_IDS[TAGS.sep])))

    def tok(self, e: F.Tok, ctx: Ctx) -> str:
        cls = e.cls
        if cls in _CLOSE_NAMES:
            return self.tag(TAGS.close, _CLOSE_NAMES[cls])
        if cls == "CALL_OPEN":
            if ctx.tool is None or ctx.index is None:  # pragma: no cover - the walk sets both in a call
                raise GrammarError("a call tag outside a call")
            return self.tag(TAGS.open, "call" + _attrs(("tool", ctx.tool), ("index", ctx.index + 1)))
        if cls == "JSON_OPEN":
            return self.tag(TAGS.open, "json" + _attrs(("type", "object")))
        if cls in _TAG_NAMES:
            return self.tag(TAGS.open, _TAG_NAMES[cls])
        raise GrammarError(f"format terminal {cls} has no generation rule")  # pragma: no cover

    # ------------------------------------------------------------------ text, options, repetitions

    def text(self, e: F.Text, ctx: Ctx) -> str:
        f = e.field
        if e.ws_only or f in ("outside", "between", "call_between", "ignored"):
            return ""  # whitespace or stray text: allowed by the parser, not asked of a model
        if f == "content":
            return self.text_rule if (self.content or self.choice in ("none", "auto")) else ""
        if f == "reasoning":
            return self.text_rule if self.reasoning else ""
        raise GrammarError(f"format field {f!r} has no generation rule")  # pragma: no cover

    def opt(self, e: F.Opt, ctx: Ctx) -> str:
        if self.has(e.expr, "tools"):
            return self.calls_part(self.x(e.expr, ctx))
        if self.has(e.expr, "response"):
            return self.x(e.expr, ctx)  # the encoder always writes the response channel
        return optional(self.x(e.expr, ctx))

    def star(self, e: F.Star, ctx: Ctx) -> str:
        if self.has(e.expr, "call"):
            return self.calls(e, ctx)
        raise GrammarError(f"repetition {e} has no generation rule")  # pragma: no cover

    def ordered_choice(self, e: F.Choice, ctx: Ctx) -> str:
        if ctx.tool is not None and self.has(e, "argument"):  # a call's elements: argument* or json
            return self.call_elements(ctx.tool)
        return super().ordered_choice(e, ctx)

    def group(self, e: F.Group, ctx: Ctx) -> str:
        if e.name in ("end", "trailing"):
            return ""  # <|end_of_msg|> is the end-of-generation token (module docstring)
        return super().group(e, ctx)

    # ------------------------------------------------------------------ a call's elements

    extra_arguments = False
    """Whether the translation writes argument elements with undeclared keys beside declared ones (the GBNF
    export does not: it cannot keep them apart from the declared keys; noted in ``gbnf_notes``; the Lark
    translator does)."""

    def call_elements(self, name: str) -> str:
        """The elements of a call of ``name`` (one rule per tool): one alternative per object branch of
        the parameters (a top-level ``anyOf``/``oneOf``, also under ``allOf`` or a ``$ref``), each the
        argument elements ``encoding_k3`` writes for an object of that branch: the declared properties in
        declaration order (the required ones always), then undeclared ones where the branch allows
        them."""
        if name in self.elements:
            return self.elements[name]
        s = self.slugs[name]
        path = f"tools[{name!r}].parameters"
        params = self.tools[name].get("parameters")
        if params is None:  # a function without parameters: a call without elements
            self.elements[name] = '""'
            return '""'
        self.json.prefix = f"args-{s}-"
        rn = self.r.fresh(f"args-{s}")
        self.elements[name] = rn
        branches = self.object_branches(params, params, path, 0)
        self._dead = "no branch"
        alts = [a for j, b in enumerate(branches)
                if (a := self.branch_elements(name, b, params, path, j)) is not None]
        if not alts:
            raise GrammarError(f"{path}: no JSON object satisfies the parameters schema ({self._dead}; the "
                               "encoder writes arguments only for an object): fix the schema")
        self.r.set(rn, alternation(alts) or '""')
        return rn

    def object_branches(self, schema: Any, root: Any, path: str, depth: int) -> list[list[tuple[Mapping[str, Any], str]]]:
        """The object branches of ``schema``: each a list of member schemas (with their paths), none with
        ``$ref``/``allOf``/``anyOf``/``oneOf`` left, that an instance of the branch satisfies all of."""
        if depth > _MAX_REF_DEPTH:
            raise GrammarError(f"{path}: $ref chain too deep (allOf/anyOf/$ref nested more than {_MAX_REF_DEPTH} "
                               "levels: a cycle?)")
        if schema is True:
            return [[]]
        if schema is False:
            return []
        if not isinstance(schema, Mapping):
            raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}")
        base = {k: v for k, v in schema.items() if k not in ("$ref", "allOf", "anyOf", "oneOf")}
        out: list[list[tuple[Mapping[str, Any], str]]] = [[(base, path)]]

        def times(other: list[list[tuple[Mapping[str, Any], str]]]) -> None:
            out[:] = [a + b for a in out for b in other]
            if len(out) > _MAX_BRANCHES:
                raise GrammarError(f"{path}: more than {_MAX_BRANCHES} object branches (anyOf/oneOf combined by "
                                   "allOf): simplify the schema")

        if "$ref" in schema:
            ref = schema["$ref"]
            times(self.object_branches(resolve_ref(ref, root, path), root, str(ref), depth + 1))
        if "allOf" in schema:
            subs = schema["allOf"]
            if not isinstance(subs, list) or not subs:
                raise GrammarError(f"{path}/allOf: expected a non-empty list")
            for j, sub in enumerate(subs):
                times(self.object_branches(sub, root, f"{path}/allOf/{j}", depth + 1))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise GrammarError(f"{path}/{key}: expected a non-empty list")
                union = [b for j, sub in enumerate(subs)
                         for b in self.object_branches(sub, root, f"{path}/{key}/{j}", depth + 1)]
                times(union)
        return out

    def branch_elements(self, tool: str, members: list[tuple[Mapping[str, Any], str]], root: Any, path: str,
                        j: int) -> str | None:
        """The argument elements of one object branch (:meth:`object_branches`); ``None`` when no object
        satisfies it."""
        keys: dict[str, str] = {}  # property -> the path of its first declaration
        required: list[str] = []
        for m, where in members:
            t = m.get("type")
            if t is not None and "object" not in (t if isinstance(t, list) else [t]):
                self._dead = f"{where}/type: not an object"
                return None  # this branch holds no object: the encoder writes no arguments for it
            for k in properties_of(m, where) or {}:
                keys.setdefault(k, f"{where}/properties/{k}")
            required += [r for r in required_names(m, where) if r not in required]
        for r in required:
            keys.setdefault(r, f"{path}/required")
        self.branch_notes(members, path)
        parts = []
        for k, where in keys.items():
            subs: list[Any] = []
            for m, _ in members:
                props = properties_of(m, where) or {}
                if k in props:
                    subs.append(props[k])
                elif m.get("additionalProperties", True) not in (True, {}):
                    subs.append(m["additionalProperties"])
            if any(x is False for x in subs):
                if k in required:
                    self._dead = f"{where}: a false schema accepts no value"
                    return None
                continue
            sub = subs[0] if len(subs) == 1 else ({"allOf": subs} if subs else True)
            el = self.argument(tool, k, sub, root, where)
            if el is None:
                if k in required:
                    self._dead = f"{where}: no value satisfies the schema"
                    return None
                continue
            parts.append((el, k in required))
        extras = self.extra_schema(members)
        pats: dict[str, Any] = {}
        for m, _ in members:
            if isinstance(m.get("patternProperties"), Mapping):
                pats.update(m["patternProperties"])
        free = []
        if self.extra_arguments or not keys:
            for p, ps in pats.items():
                if ps is not False:
                    free.append(self.free_argument(tool, ps, root, f"{path}/patternProperties/{p}", tuple(keys),
                                                   p, tuple(pats)))
            if extras is not None:
                free.append(self.free_argument(tool, extras, root, f"{path}/additionalProperties", tuple(keys),
                                               None, tuple(pats)))
        free = [f for f in free if f != '""']
        lo, hi = self.property_counts(members)
        if free and lo >= 2 + sum(req for _, req in parts):
            # the required elements and one undeclared key written several times may make the count
            self.repeat_notes(f"{path}.minProperties")
        if lo <= sum(req for _, req in parts) and (hi is None or hi >= len(parts) and not free):
            seq = [el if req else optional(el) for el, req in parts] + ([f"{alternation(free)}*"] if free else [])
            return " ".join(seq) or '""'
        counted = self.counted(parts, alternation(free) if free else None, lo, hi, f"args-{self.slugs[tool]}-{j}")
        if counted is None:
            self._dead = f"{path}: minProperties/maxProperties leave no object"
        return counted

    def property_counts(self, members: list[tuple[Mapping[str, Any], str]]) -> tuple[int, int | None]:
        """The branch's ``minProperties`` (the largest of its members') and ``maxProperties`` (the
        smallest; ``None``: no bound)."""
        lo, hi = 0, None
        for m, where in members:
            if "minProperties" in m:
                lo = max(lo, bounds(m, "minProperties", "maxProperties", where)[0])
            if isinstance(m.get("maxProperties"), int) and not isinstance(m["maxProperties"], bool) \
                    and m["maxProperties"] >= 0:
                hi = m["maxProperties"] if hi is None else min(hi, m["maxProperties"])
        return lo, hi

    def counted(self, parts: list[tuple[str, bool]], free: str | None, lo: int, hi: int | None,
                base: str) -> str | None:
        """The elements ``parts`` (``(rule, required)``, in order) then any number of ``free`` ones, with
        between ``lo`` and ``hi`` elements in all: rules ``S(i, n)`` (the elements from ``i`` on, ``n``
        written so far, counted up to the bound that matters). ``None``: no count fits."""
        cap = lo if hi is None else hi
        if cap > _MAX_COUNT:
            raise GrammarError(f"{base}: minProperties/maxProperties above {_MAX_COUNT} with optional "
                               "properties: not translated")
        memo: dict[tuple[int, int], str | None] = {}

        def rest(i: int, n: int) -> str | None:
            n = min(n, cap) if hi is None else n
            if hi is not None and n > hi:
                return None
            if (i, n) in memo:
                return memo[(i, n)]
            memo[(i, n)] = None  # no cycle: i or n grows, but reserve the entry
            alts: list[str] = []
            if i == len(parts):
                if n >= lo:
                    alts.append('""')
                if free is not None:
                    if hi is None and n >= lo:
                        alts = [f"{free}*"]
                    elif hi is None or n < hi:
                        nxt = rest(i, n + 1)
                        if nxt is not None:
                            alts.append(f"{free} {nxt}")
            else:
                el, req = parts[i]
                with_el = rest(i + 1, n + 1)
                if with_el is not None:
                    alts.append(f"{el} {with_el}")
                if not req:
                    without = rest(i + 1, n)
                    if without is not None:
                        alts.append(without)
            out = self.r.set(self.r.fresh(f"{base}-n"), alternation(alts)) if alts else None
            memo[(i, n)] = out
            return out

        return rest(0, 0)

    def extra_schema(self, members: list[tuple[Mapping[str, Any], str]]) -> Any:
        """The schema of an undeclared property's value in a branch (``None``: none is allowed): every
        member's ``additionalProperties`` (``additional_properties="declared"`` has made it false where
        the schema leaves it unsaid: :func:`~kimi_chat.grammar.schemas.declared_only`)."""
        subs = []
        for m, _ in members:
            extra = m.get("additionalProperties", True)
            if extra is False:
                return None
            if extra is not True and extra != {}:
                subs.append(extra)
        return subs[0] if len(subs) == 1 else ({"allOf": subs} if subs else True)

    def branch_notes(self, members: list[tuple[Mapping[str, Any], str]], path: str) -> None:
        """Notes of what a branch's argument elements leave out (the Lark translator's)."""

    def repeat_notes(self, at: str) -> None:
        """A note (the Lark translator's) that the branch's ``minProperties`` (``at``) is not enforced
        exactly: its elements are counted, and two elements may spell the same undeclared key (no grammar
        keeps an unbounded set of keys distinct), which makes one property of the arguments (noted where the
        required properties and one more do not reach the count)."""

    def resolve(self, schema: Any, root: Any, path: str, depth: int) -> Any:
        """``schema`` with a top-level ``$ref`` and ``allOf`` resolved."""
        if depth > _MAX_REF_DEPTH:
            raise GrammarError(f"{path}: $ref chain too deep")
        if isinstance(schema, Mapping) and "$ref" in schema:
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            target = self.resolve(resolve_ref(schema["$ref"], root, path), root, str(schema["$ref"]), depth + 1)
            return merge_schemas(siblings, target, root, path) if siblings else target
        if isinstance(schema, Mapping) and "allOf" in schema:
            subs = schema["allOf"]
            if not isinstance(subs, list) or not subs:
                raise GrammarError(f"{path}/allOf: expected a non-empty list")
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for j, sub in enumerate(subs):
                merged = merge_schemas(merged, sub, root, f"{path}/allOf/{j}")
            return self.resolve(merged, root, path, depth + 1)
        return schema

    def argument(self, tool: str, key: str, schema: Any, root: Any, path: str) -> str | None:
        """One ``argument`` element for property ``key``: an alternative per ``type`` attribute (``None``
        when no value satisfies ``schema``)."""
        check_no_marker(key, self.forbidden, f"{path}: argument name")
        base = f"arg-{self.slugs[tool]}-{slug(key)}"
        by_type = self.values(schema, root, base, path, 0)
        if not by_type:
            return None
        close = self.tok(F.Tok("ARGUMENT_CLOSE"), Ctx())
        alts = []
        for kind, exprs in by_type.items():
            head = self.tag(TAGS.open, "argument" + _attrs(("key", key), ("type", kind)))
            alts.append(f"{head} {alternation(exprs)} {close}")
        return self.r.set(self.r.fresh(base), alternation(alts))

    def free_argument(self, tool: str, schema: Any, root: Any, path: str, declared: tuple[str, ...] = (),
                      pattern: str | None = None, patterns: tuple[str, ...] = ()) -> str:
        """An ``argument`` element with an undeclared key (:meth:`extra_key`: matching ``pattern``, else
        none of ``patterns``) and a value of ``schema`` (``additionalProperties`` or the pattern's)."""
        base = f"arg-{self.slugs[tool]}-any"
        key = self.extra_key(base, declared, pattern, patterns)
        by_type = self.values(schema, root, base, path, 0)
        if not by_type:
            return '""'
        close = self.tok(F.Tok("ARGUMENT_CLOSE"), Ctx())
        opener, sep = self.marker(TAGS.open, _MARKER_IDS[TAGS.open]), self.marker(TAGS.sep, _MARKER_IDS[TAGS.sep])
        alts = [f'{opener} {literal("argument key=" + chr(34))} {key} {literal(chr(34) + _attrs(("type", kind)))} '
                f"{sep} {alternation(exprs)} {close}" for kind, exprs in by_type.items()]
        return self.r.set(self.r.fresh(base), alternation(alts))

    def extra_key(self, base: str, declared: tuple[str, ...], pattern: str | None = None,
                  patterns: tuple[str, ...] = ()) -> str:
        """The rule of an undeclared key as the attribute value: here 1 to 64 characters without a quote,
        ``&``, marker start or control character (GBNF writes extra keys only where none is declared)."""
        return self.r.set(self.r.fresh(f"{base}-key"), r'[^"&<\x5B\x00-\x1F]{1,64}')

    def values(self, schema: Any, root: Any, name: str, path: str, depth: int) -> dict[str, list[str]]:
        """The values ``schema`` accepts, by ``type`` attribute: GBNF of the text inside the element."""
        out: dict[str, list[str]] = {}

        def add(kind: str, expr: str) -> None:
            exprs = out.setdefault(kind, [])
            if expr not in exprs:
                exprs.append(expr)

        if depth > _MAX_REF_DEPTH:
            raise GrammarError(f"{path}: $ref chain too deep")
        if schema is True or schema == {}:
            for ty in ("string", "number", "boolean", "null", "object", "array"):
                add(XTML_TYPES[ty], self.typed(ty, {}, root, name, path))
            return out
        if schema is False:
            raise GrammarError(f"{path}: a false schema accepts no value")
        if not isinstance(schema, Mapping):
            raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}")
        schema = self.resolve(schema, root, path, depth)
        if "const" in schema or "enum" in schema:
            vals = [schema["const"]] if "const" in schema else schema["enum"]
            if not isinstance(vals, list) or not vals:
                raise GrammarError(f"{path}/enum: expected a non-empty list")
            for v in vals:
                add(xtml_type(v), self.constant(v, path))
            return out
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise GrammarError(f"{path}/{key}: expected a non-empty list")
                rest = {k: v for k, v in schema.items() if k != key}
                for j, sub in enumerate(subs):
                    merged = merge_schemas(rest, sub, root, f"{path}/{key}/{j}") if rest else sub
                    for kind, exprs in self.values(merged, root, f"{name}-{j}", f"{path}/{key}/{j}",
                                                   depth + 1).items():
                        for ex in exprs:
                            add(kind, ex)
                return out
        t = schema.get("type")
        if t is None:
            if "properties" in schema or "additionalProperties" in schema:
                t = "object"
            elif "items" in schema or "prefixItems" in schema:
                t = "array"
            else:
                return self.values(True, root, name, path, depth)
        types = list(t) if isinstance(t, list) else [t]
        if schema.get("nullable") is True and "null" not in types:
            types.append("null")
        for ty in types:
            if not isinstance(ty, str) or ty not in XTML_TYPES:
                raise GrammarError(f"{path}/type: unknown type {ty!r}")
            add(XTML_TYPES[ty], self.typed(ty, schema, root, name if len(types) == 1 else f"{name}-{ty}", path))
        return out

    def typed(self, ty: str, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        """A value of JSON type ``ty``: a raw string, or JSON by the schema translator."""
        if ty != "string":
            return self.json.typed(ty, schema, root, name, path)
        lo, hi = bounds(schema, "minLength", "maxLength", path)
        if lo == 0 and hi is None:
            return self.text_rule
        return f"{_RAW_CHAR}{{{lo},{'' if hi is None else hi}}}"

    def constant(self, value: Any, path: str) -> str:
        """A ``const`` / ``enum`` value as the encoder writes it (a string raw, the rest as JSON)."""
        if not isinstance(value, str):
            return json_literal(value, self.forbidden, path)
        check_no_marker(value, self.forbidden, path)
        return literal(value) if value else '""'
