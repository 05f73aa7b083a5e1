"""JSON schemas made ready for llguidance's ``%json``: references bundled, annotations dropped, and,
where llguidance still refuses a schema, the closest superset it accepts, with a note for every
constraint dropped (:func:`prepare`).

* :func:`bundle`: every ``$ref`` (local pointers, ``$id``-relative and anchor references, resolved by
  the ``referencing`` library jsonschema uses) rewritten to a ``#/$defs/…`` entry of the root, and
  every ``$id`` / ``$anchor`` removed, so that the schema (or any sub-schema with the root's
  ``$defs`` attached) is self-contained. Exact. A reference that cannot be resolved (remote) becomes
  ``{}`` (any value), with a note.
* :func:`prepare`: :func:`bundle`, then compile with llguidance; on a refusal, drop what it names
  (an unimplemented keyword, an unknown ``format``, a ``pattern`` its regex engine rejects,
  ``min/maxProperties`` it cannot express), or approximate ``oneOf`` by ``anyOf``, each a superset,
  each noted with its path; as a last resort llguidance's ``lenient`` mode, then any object.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import llguidance
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable, Unretrievable
from referencing.jsonschema import DRAFT7, DRAFT202012, specification_with

from .gbnf import GrammarError

__all__ = ["Note", "Prepared", "bundle", "prepare", "compile_error", "walk_schemas", "declared_only",
           "ADDITIONAL_PROPERTIES", "ANNOTATIONS", "SEPARATORS"]

ADDITIONAL_PROPERTIES = ("schema", "declared")
"""The readings of undeclared properties :func:`kimi_chat.grammar.constraint` offers (its docstring)."""

ANNOTATIONS = frozenset({"title", "description", "examples", "default", "$comment", "deprecated", "readOnly",
                         "writeOnly", "$schema", "contentEncoding", "contentMediaType", "contentSchema",
                         "$vocabulary"})
"""Keywords that never constrain an instance (JSON Schema 2020-12 annotations): dropped, exactly."""

SEPARATORS: Mapping[str, Any] = {"whitespace_flexible": False, "item_separator": ", ?", "key_separator": ": ?"}
"""``x-guidance`` of every ``%json``: JSON written as Kimi writes it, ``json.dumps``' default spacing
(``{"a": 1, "b": 2}``) or compact (``{"a":1,"b":2}``), no other whitespace."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("additionalProperties", "unevaluatedProperties", "items", "additionalItems", "not", "if", "then",
               "else", "contains", "propertyNames", "unevaluatedItems")
_ROOT_URI = "urn:kimi-chat:schema"
_MAX_ROUNDS = 12


@dataclass(frozen=True)
class Note:
    """A constraint not enforced exactly: the schema path and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class Prepared:
    """A schema llguidance compiles (``schema``), whether it is the original's exact equivalent, and
    the notes naming what is not enforced."""

    schema: Any
    exact: bool
    notes: tuple[Note, ...]


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_$][\w$-]*", key) else f"{path}[{json.dumps(key)}]"


def walk_schemas(schema: Any, path: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every (sub-)schema object in ``schema`` with its path, keyword-aware (a property named like a
    keyword is not mistaken for one)."""
    if not isinstance(schema, dict):
        return
    yield schema, path
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for k, sub in value.items():
                yield from walk_schemas(sub, _join(_join(path, key), k))
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for j, sub in enumerate(value):
                yield from walk_schemas(sub, _join(_join(path, key), j))
        elif key in _SCHEMA_ONE:
            if isinstance(value, list):  # items as a list (draft 4-2019)
                for j, sub in enumerate(value):
                    yield from walk_schemas(sub, _join(_join(path, key), j))
            else:
                yield from walk_schemas(value, _join(path, key))


def _map_schema(schema: Any, fn: Callable[[Any, Any, str], Any], ctx: Any, path: str) -> Any:
    """A copy of ``schema`` with ``fn(sub, ctx, sub_path)`` applied to every sub-schema position
    (``fn`` recurses by calling :func:`_map_schema` itself)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        at = _join(path, key)
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: fn(sub, ctx, _join(at, k)) for k, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [fn(sub, ctx, _join(at, j)) for j, sub in enumerate(value)]
        elif key in _SCHEMA_ONE:
            out[key] = ([fn(sub, ctx, _join(at, j)) for j, sub in enumerate(value)] if isinstance(value, list)
                        else fn(value, ctx, at))
        else:
            out[key] = copy.deepcopy(value)
    return out


def declared_only(schema: Any) -> Any:
    """``schema`` read with ``additional_properties="declared"``: every object schema that declares
    properties (``properties`` or ``required``) and leaves ``additionalProperties`` unsaid gets
    ``additionalProperties: false``, so only declared properties are generated. An explicit
    ``additionalProperties`` (true or a schema), an object without declared properties (free-form) and
    the members of an ``allOf`` (whose properties add up, which a ``false`` in one member would forbid)
    are left as they are."""

    def visit(sub: Any, in_all_of: bool, where: str) -> Any:
        if not isinstance(sub, dict):
            return sub
        out = {}
        for key, value in sub.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                out[key] = {k: visit(v, False, where) for k, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [visit(v, key == "allOf", where) for v in value]
            elif key in _SCHEMA_ONE:
                out[key] = [visit(v, False, where) for v in value] if isinstance(value, list) else visit(
                    value, False, where)
            else:
                out[key] = value
        if not in_all_of and "allOf" not in sub and "additionalProperties" not in sub and (
                "properties" in sub or "required" in sub):
            out["additionalProperties"] = False
        return out

    return visit(schema, False, "")


def bundle(schema: Any, path: str) -> tuple[Any, list[Note]]:
    """``schema`` with every reference resolved into the root's ``$defs`` (module docstring), the
    annotations dropped, and the notes of references that could not be resolved."""
    if not isinstance(schema, dict):
        return schema, []
    base = schema.get("$id") if isinstance(schema.get("$id"), str) else _ROOT_URI
    spec = specification_with(schema.get("$schema", ""), default=DRAFT202012) if isinstance(
        schema.get("$schema", ""), str) else DRAFT202012
    try:
        registry = Registry().with_resource(uri=base, resource=spec.create_resource(schema)).crawl()
    except (AttributeError, TypeError):  # draft-4..7 shapes (``items`` as a list) under 2020-12
        spec = DRAFT7
        registry = Registry().with_resource(uri=base, resource=spec.create_resource(schema)).crawl()
    defs: dict[str, Any] = {}
    names: dict[int, str] = {}
    notes: list[Note] = []

    def visit(sub: Any, resolver: Any, where: str) -> Any:
        if not isinstance(sub, dict):
            return sub
        if isinstance(sub.get("$id"), str) and sub is not schema:
            resolver = resolver.in_subresource(spec.create_resource(sub))
        out = _map_schema({k: v for k, v in sub.items() if k not in ANNOTATIONS and k not in ("$id", "$anchor",
                                                                                               "$dynamicAnchor")},
                          visit, resolver, where)
        out.pop("$defs", None)
        out.pop("definitions", None)
        ref = sub.get("$ref")
        if isinstance(ref, str):
            try:
                resolved = resolver.lookup(ref)
            except (Unresolvable, NoSuchResource, Unretrievable) as e:
                notes.append(Note(_join(where, "$ref"), f"reference {ref!r} cannot be resolved ({e}): any value"))
                del out["$ref"]
                return out
            target = resolved.contents
            key = id(target)
            if key not in names:
                names[key] = f"kc{len(names)}"
                defs[names[key]] = None  # reserved: a cycle refers to it before it is done
                defs[names[key]] = visit(target, resolved.resolver, f"{where}({ref})")
            out["$ref"] = f"#/$defs/{names[key]}"
        return out

    out = visit(schema, registry.resolver(base_uri=base), path)
    if defs:
        out["$defs"] = defs
    return out, notes


def compile_error(schema: Any) -> str | None:
    """llguidance's reason for refusing ``schema`` (``None``: it compiles)."""
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    return "; ".join(messages) or "refused" if is_error else None


def _regex_ok(pattern: str) -> bool:
    is_error, _ = llguidance.LLMatcher.validate_grammar_with_warnings(
        llguidance.LLMatcher.grammar_from_regex(pattern))
    return not is_error


def _drop(schema: Any, path: str, pick: Callable[[dict[str, Any]], list[str]], reason: Callable[[str], str],
          notes: list[Note]) -> bool:
    """Remove, in place, the keywords ``pick`` names in each sub-schema; note each. Whether any was."""
    dropped = False
    for sub, where in list(walk_schemas(schema, path)):
        for key in pick(sub):
            notes.append(Note(_join(where, key), reason(key) if key != "format" else
                              f"format {sub[key]!r} is not enforced by llguidance"))
            del sub[key]
            dropped = True
    return dropped


def _loosen(schema: Any, path: str, error: str, notes: list[Note]) -> bool:
    """One step to a superset of ``schema`` llguidance may accept, guided by its ``error`` (in place;
    notes appended). Whether anything changed."""
    m = re.search(r"Unimplemented keys: \[(.*?)\]", error)
    if m:
        keys = set(re.findall(r'"([^"]+)"', m.group(1)))
        return _drop(schema, path, lambda s: [k for k in s if k in keys],
                     lambda k: f"{k!r} is not supported by llguidance: not enforced", notes)
    m = re.search(r"Unknown format: (\S+)", error)
    if m:
        fmt = m.group(1)
        return _drop(schema, path, lambda s: ["format"] if s.get("format") == fmt else [], str, notes)
    if "regex" in error:
        return _drop(schema, path, lambda s: ["pattern"] if isinstance(s.get("pattern"), str)
                     and not _regex_ok(s["pattern"]) else [],
                     lambda k: "the pattern uses regex features llguidance lacks (look-around, …): not enforced",
                     notes)
    if "min/maxProperties" in error:
        return _drop(schema, path, lambda s: [k for k in ("minProperties", "maxProperties") if k in s],
                     lambda k: f"{k!r} with optional properties is not supported by llguidance: not enforced",
                     notes)
    if "oneOf" in error and not schema.setdefault("x-guidance", {}).get("coerce_one_of"):
        schema["x-guidance"]["coerce_one_of"] = True
        for sub, where in walk_schemas(schema, path):
            if "oneOf" in sub:
                notes.append(Note(_join(where, "oneOf"), "enforced as anyOf (more than one branch may match)"))
        return True
    return False


def prepare(schema: Any, path: str) -> Prepared:
    """``schema`` as llguidance compiles it, with :data:`SEPARATORS` (module docstring)."""
    if schema is True or schema is None:
        schema = {}
    out, notes = bundle(schema, path)
    if out is False:
        raise GrammarError(f"{path}: a false schema accepts no value")
    if not isinstance(out, dict):
        raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(out).__name__}")
    out["x-guidance"] = dict(SEPARATORS)
    for _ in range(_MAX_ROUNDS):
        error = compile_error(out)
        if error is None:
            break
        if not _loosen(out, path, error, notes):
            if not out["x-guidance"].get("lenient"):
                out["x-guidance"]["lenient"] = True
                notes.append(Note(path, f"llguidance refuses the schema ({error}); compiled in lenient mode "
                                        "(unsupported keywords ignored)"))
                continue
            if notes and notes[-1].reason.endswith("compiled in lenient mode (unsupported keywords ignored)"):
                notes.pop()
            notes.append(Note(path, f"llguidance refuses the schema ({error}): any JSON value of its type"))
            out = {"x-guidance": dict(SEPARATORS)}
            if isinstance(schema, dict) and isinstance(schema.get("type"), (str, list)):
                out["type"] = schema["type"]
    else:  # pragma: no cover - every round removes something or ends in the fallback
        notes.append(Note(path, "llguidance refuses the schema: any JSON value"))
        out = {"x-guidance": dict(SEPARATORS)}
    return Prepared(out, not notes, tuple(notes))
