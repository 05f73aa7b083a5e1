"""JSON schema -> GBNF: the grammar of the JSON values a schema accepts (the arguments of a tool call).

Coverage (the common subset of tool schemas): ``type`` (one or a list), ``enum``, ``const``,
``anyOf``/``oneOf``, ``allOf`` of object schemas (merged, members may be local ``$ref``),
``nullable``, local ``$ref`` (``#``, ``#/$defs/…``, ``#/definitions/…``, JSON-pointer escapes,
recursion allowed), objects with ``properties``/``required`` (properties in declaration order),
free-form objects (``additionalProperties``: true or a schema, and no ``properties``), arrays with
``items``/``prefixItems``/``minItems``/``maxItems``, strings with ``minLength``/``maxLength``,
integers (``minimum >= 0`` drops the sign), numbers, booleans, null, ``true``/``{}`` (any JSON value).

Not covered (accepted, not enforced): ``pattern``, ``format``, numeric bounds other than a
non-negative minimum, ``multipleOf``, ``uniqueItems``, ``minProperties``/``maxProperties``,
``patternProperties``, ``dependentRequired``/``dependentSchemas``, ``if``/``then``/``else``, ``not``.
Properties not declared in ``properties`` are never generated (as if ``additionalProperties`` were
false). ``oneOf`` is treated as ``anyOf``.

Refused with :class:`~kimi_chat.grammar.gbnf.GrammarError` (naming the schema path): a ``false``
schema, a schema that is neither an object nor a boolean, an unknown ``type``, an empty or non-list
``enum``/``anyOf``/``oneOf``/``allOf``, ``properties`` that is not an object, ``allOf`` members that
are not object schemas, remote ``$ref`` or ``$ref`` to an anchor (``#name``), and a ``$ref`` that does
not resolve, and ``minItems`` above ``maxItems`` or ``minLength`` above ``maxLength``, a count that
is not a non-negative integer (``inf`` included), ``required`` that is not a list of strings, a
property name that is not a string, a ``const``/``enum`` value that is not JSON, schemas nested more
than :data:`MAX_DEPTH` levels deep (or an ``allOf``/``$ref`` cycle that never reaches a schema),
and a ``minItems``/``minLength`` above :data:`MAX_REPEAT` (no model writes that much).
A ``maxItems``/``maxLength`` above :data:`MAX_REPEAT` is dropped (the count is not enforced, as
grammar engines expand counted repetitions into that many rules).

Literal text copied from the schema (property names, ``const``/``enum`` values) never spells a
marker: where a JSON string in it contains a marker spelling (``a<|tool_call_end|>b``), the
marker's first character is written as a ``\\uXXXX`` escape (:func:`json_literal`), which decodes
to the same value.

JSON strings are drawn from a caller-given rule (the tool-call grammar's marker-free strings);
strings with ``minLength``/``maxLength`` never contain a raw ``<`` or ``[`` (they are written
``\\u003c``, ``\\u005b``) so that no marker can be spelled inside them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from .gbnf import GrammarError, Rules, alternation, avoiding, is_rule_name, literal, slug
from .vocabulary import forbidden_text

__all__ = ["JsonSchemaTranslator", "json_schema_to_gbnf", "resolve_ref", "merge_schemas", "json_literal", "bounds",
           "required_names", "properties_of", "MAX_DEPTH", "MAX_REPEAT"]

MAX_DEPTH = 64
"""The deepest schema nesting (and ``allOf``/``$ref`` merge chain) translated; deeper is a GrammarError."""

MAX_REPEAT = 1000
"""The largest repetition count written into a grammar (``minItems``/``minLength`` above it are a
GrammarError, ``maxItems``/``maxLength`` above it are not enforced)."""

_INT = '("0" | [1-9] [0-9]{0,15})'
_FRAC = '("." [0-9]{1,20})?'
"""Bounded digits (a constrained model cannot run on), enough for every float ``json.dumps`` writes: in fixed
notation (1e-4 <= |x| < 1e16) up to 16 integer digits, and up to 17 significant digits after up to three
zeros in the fraction (``0.00012345678901234567``: 20)."""
_EXP = '([eE] [-+]? [0-9]{1,3})?'


def resolve_ref(ref: Any, root: Any, path: str) -> Any:
    """The schema a local ``$ref`` (``#`` or a JSON pointer ``#/a/b``) points to inside ``root``.
    ``path`` names the referring schema in errors."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise GrammarError(f"{path}/$ref: only local references (#/...) are supported, got {ref!r}")
    if ref != "#" and not ref.startswith("#/"):
        raise GrammarError(f"{path}/$ref: anchors are not supported, only JSON pointers (#/...), got {ref!r}")
    target: Any = root
    for part in ref[2:].split("/") if ref != "#" else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise GrammarError(f"{path}/$ref: cannot resolve {ref!r}")
    return target


def merge_schemas(a: Mapping[str, Any], b: Any, root: Any, path: str, depth: int = 0) -> dict[str, Any]:
    """``a`` with the object schema ``b`` merged in (an ``allOf`` member): ``properties`` and
    ``required`` are united, other keys of ``a`` win. A ``$ref`` in ``b`` is resolved and merged
    with ``b``'s other keys (``depth`` counts those, up to :data:`MAX_DEPTH`)."""
    if depth > MAX_DEPTH:
        raise GrammarError(f"{path}/$ref: reference chain more than {MAX_DEPTH} levels deep (a cycle?)")
    if b is True or b == {}:
        return dict(a)
    if not isinstance(b, Mapping):
        raise GrammarError(f"{path}: only object schemas can be merged, got {type(b).__name__}")
    if "$ref" in b:
        siblings = {k: v for k, v in b.items() if k != "$ref"}
        b = merge_schemas(siblings, resolve_ref(b["$ref"], root, path), root, path, depth + 1)
    out = dict(a)
    for k, v in b.items():
        if k == "properties":
            out["properties"] = {**(properties_of(out, path) or {}), **(properties_of(b, path) or {})}
        elif k == "required":
            out["required"] = list(dict.fromkeys([*required_names(out, path), *required_names(b, path)]))
        elif k not in out:
            out[k] = v
    return out


def properties_of(schema: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """``schema["properties"]`` (``None`` when absent); a GrammarError unless it is an object whose
    keys are strings."""
    props = schema.get("properties")
    if props is None:
        return None
    if not isinstance(props, Mapping):
        raise GrammarError(f"{path}/properties: expected an object, got {type(props).__name__}")
    for k in props:
        if not isinstance(k, str):
            raise GrammarError(f"{path}/properties: property names must be strings, got {k!r}")
    return props


def required_names(schema: Mapping[str, Any], path: str) -> list[str]:
    """``schema["required"]`` (empty when absent); a GrammarError unless it is a list of strings."""
    req = schema.get("required")
    if req is None:
        return []
    if not isinstance(req, (list, tuple)) or not all(isinstance(r, str) for r in req):
        raise GrammarError(f"{path}/required: expected a list of property names, got {req!r}")
    return list(req)


def _count(schema: Mapping[str, Any], key: str, path: str) -> int | None:
    v = schema.get(key)
    if v is None:
        return None
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0
            or (isinstance(v, float) and not v.is_integer())):
        raise GrammarError(f"{path}/{key}: expected a non-negative integer, got {v!r}")
    return int(v)


def bounds(schema: Mapping[str, Any], lo_key: str, hi_key: str, path: str) -> tuple[int, int | None]:
    """``(low, high)`` repetition counts of ``schema`` (``minItems``/``maxItems`` or
    ``minLength``/``maxLength``): ``low`` 0 when absent, ``high`` ``None`` when absent or above
    :data:`MAX_REPEAT` (not enforced). A GrammarError for a count that is not a non-negative integer,
    ``low`` above ``high`` or ``low`` above :data:`MAX_REPEAT`."""
    lo, hi = _count(schema, lo_key, path) or 0, _count(schema, hi_key, path)
    if hi is not None and hi < lo:
        raise GrammarError(f"{path}: {lo_key} {lo} is above {hi_key} {hi}")
    if lo > MAX_REPEAT:
        raise GrammarError(f"{path}/{lo_key}: {lo} is above the grammar's limit of {MAX_REPEAT}")
    return lo, (hi if hi is not None and hi <= MAX_REPEAT else None)


def json_literal(value: Any, forbidden: Collection[str], path: str) -> str:
    """The GBNF literal of ``value`` as JSON, where no ``forbidden`` string (marker spelling) occurs:
    an occurrence inside a JSON string gets its first character written as ``\\uXXXX`` (the JSON
    decodes to the same value). A GrammarError (naming ``path``) for a value that is not JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as e:
        raise GrammarError(f"{path}: the value cannot be written as JSON ({type(e).__name__}: {e})") from None
    orig = text
    for _ in range(len(text) + 1):
        hits = [text.find(f) for f in forbidden if f and f in text]
        if not hits:
            break
        i = min(hits)
        text = text[:i] + f"\\u{ord(text[i]):04x}" + text[i + 1:]
    try:
        same = json.dumps(json.loads(text), ensure_ascii=False) == orig
    except (ValueError, RecursionError):  # pragma: no cover - json.dumps wrote it, so it reads back
        same = False
    if not same:
        raise GrammarError(f"{path}: the value {value!r} spells a marker outside a JSON string")
    return literal(text)


class JsonSchemaTranslator:
    """JSON schema to GBNF, into a shared :class:`~kimi_chat.grammar.gbnf.Rules` set.

    ``string_chars`` names the rule for the characters of an unbounded JSON string (between the
    quotes); ``prefix`` starts the names of the rules made for ``$ref`` targets; ``forbidden`` are the
    marker spellings literal JSON text must not contain (:func:`json_literal`)."""

    def __init__(self, rules: Rules, string_chars: str, prefix: str = "", forbidden: Collection[str] = ()) -> None:
        self.r = rules
        self.string_chars = string_chars
        self.prefix = prefix
        self.forbidden: Collection[str] = forbidden
        self._prims: dict[str, str] = {}
        self._refs: dict[tuple[int, str], str] = {}
        self._depth = 0

    def prim(self, kind: str) -> str:
        """The rule of a shared primitive (``ws``, ``string``, ``integer``, ``value``...), made on
        first use."""
        if kind in self._prims:
            return self._prims[kind]
        name = self.r.fresh(f"json-{kind}")
        self._prims[kind] = name
        if kind == "ws":
            body = '" "?'
        elif kind == "string":
            body = f'"\\"" {self.string_chars} "\\""'
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
        else:
            raise ValueError(f"unknown JSON primitive {kind!r}")
        self.r.set(name, body)
        return name

    def schema(self, schema: Any, root: Any, name: str, path: str) -> str:
        """An expression for ``schema`` (rules are added for its parts); ``root`` is the document
        ``$ref`` resolves in, ``name`` the base of new rule names, ``path`` the schema's path."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise GrammarError(f"{path}: schema nested more than {MAX_DEPTH} levels deep "
                                   "(or an allOf/$ref cycle)")
            return self._schema(schema, root, name, path)
        finally:
            self._depth -= 1

    def _schema(self, schema: Any, root: Any, name: str, path: str) -> str:
        if schema is True or schema == {}:
            return self.prim("value")
        if schema is False:
            raise GrammarError(f"{path}: a false schema accepts no value")
        if not isinstance(schema, Mapping):
            raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}")
        if "$ref" in schema:
            return self.ref(schema["$ref"], root, path)
        if "const" in schema:
            return json_literal(schema["const"], self.forbidden, f"{path}/const")
        if "enum" in schema:
            vals = schema["enum"]
            if not isinstance(vals, list) or not vals:
                raise GrammarError(f"{path}/enum: expected a non-empty list")
            return alternation([json_literal(v, self.forbidden, f"{path}/enum/{j}") for j, v in enumerate(vals)])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                subs = schema[key]
                if not isinstance(subs, list) or not subs:
                    raise GrammarError(f"{path}/{key}: expected a non-empty list")
                rest = {k: v for k, v in schema.items() if k != key}
                alts = [
                    self.rule(merge_schemas(rest, s, root, f"{path}/{key}/{j}") if rest else s, root,
                              f"{name}-{j}", f"{path}/{key}/{j}")
                    for j, s in enumerate(subs)
                ]
                return alternation(alts)
        if "allOf" in schema:
            subs = schema["allOf"]
            if not isinstance(subs, list) or not subs:
                raise GrammarError(f"{path}/allOf: expected a non-empty list")
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for j, s in enumerate(subs):
                merged = merge_schemas(merged, s, root, f"{path}/allOf/{j}")
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
        return alternation(alts)

    def rule(self, schema: Any, root: Any, name: str, path: str) -> str:
        """A named rule for ``schema`` (or a primitive's name)."""
        expr = self.schema(schema, root, name, path)
        if is_rule_name(expr):
            return expr
        return self.r.set(self.r.fresh(name), expr)

    def ref(self, ref: Any, root: Any, path: str) -> str:
        """The rule of a local ``$ref`` target (one per target, so recursion terminates)."""
        target = resolve_ref(ref, root, path)
        key = (id(root), ref)
        if key in self._refs:
            return self._refs[key]
        rn = self.r.fresh(f"{self.prefix}ref-{slug(ref[1:]) or 'root'}")
        self._refs[key] = rn
        self.r.set(rn, self.schema(target, root, rn, ref))
        return rn

    def typed(self, ty: Any, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        """An expression for one ``type`` of ``schema``."""
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
            lo, hi = bounds(schema, "minLength", "maxLength", path)
            if lo == 0 and hi is None:
                return self.prim("string")
            rep = f"{{{lo},{hi}}}" if hi is not None else f"{{{lo},}}"
            return f'"\\"" {self.prim("safe-char")}{rep} "\\""'
        if ty == "array":
            return self.array(schema, root, name, path)
        if ty == "object":
            return self.object(schema, root, name, path)
        raise GrammarError(f"{path}/type: unknown type {ty!r}")

    def array(self, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        """An array: ``prefixItems`` (exactly those), else ``items`` between ``minItems`` and
        ``maxItems``."""
        ws = self.prim("ws")
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(prefix, list) and prefix:
            parts = [self.rule(s, root, f"{name}-{j}", f"{path}/prefixItems/{j}") for j, s in enumerate(prefix)]
            return '"[" ' + f' "," {ws} '.join(parts) + ' "]"'
        lo, hi = bounds(schema, "minItems", "maxItems", path)
        if hi == 0:
            return '"[" "]"'
        item = self.rule(items, root, f"{name}-item", f"{path}/items")
        more_lo = max(lo - 1, 0)
        more = f'("," {ws} {item})' + (f"{{{more_lo},{hi - 1}}}" if hi is not None else f"{{{more_lo},}}")
        more = more.replace("{0,}", "*")
        inner = f"{item} {more}"
        return f'"[" {inner} "]"' if lo > 0 else f'"[" ({inner})? "]"'

    def object(self, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        """An object: its ``properties`` in declaration order (``required`` ones always present),
        or, without ``properties``, a free-form object whose values follow
        ``additionalProperties``."""
        props = properties_of(schema, path)
        if not props:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                return '"{" "}"'
            if extra is True or extra == {}:
                return self.prim("object")
            ws, s = self.prim("ws"), self.prim("string")
            v = self.rule(extra, root, f"{name}-value", f"{path}/additionalProperties")
            return f'"{{" ({s} ":" {ws} {v} ("," {ws} {s} ":" {ws} {v})*)? "}}"'
        required = set(required_names(schema, path))
        ws = self.prim("ws")
        kvs = []
        for k, sub in props.items():
            v = self.rule(sub, root, f"{name}-{slug(k)}", f"{path}/properties/{k}")
            key = json_literal(k, self.forbidden, f"{path}/properties/{k}")
            kvs.append((f"{key} \":\" {ws} {v}", k in required))
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


def json_schema_to_gbnf(schema: Any, *, root_name: str = "root", forbidden: Collection[str] | None = None) -> str:
    """A standalone GBNF grammar (root rule ``root_name``) for the JSON values ``schema`` accepts
    (see the module docstring for what is covered). JSON strings avoid the ``forbidden`` strings:
    by default every marker spelling of the default dialect
    (:func:`~kimi_chat.grammar.forbidden_text`)."""
    if forbidden is None:
        forbidden = forbidden_text()
    rules = Rules()
    rules.fresh(root_name)
    j = JsonSchemaTranslator(rules, avoiding(rules, forbidden, "jstr", json_string=True), forbidden=forbidden)
    rules.set(root_name, j.schema(schema, schema, "value", "#"))
    return rules.text()
