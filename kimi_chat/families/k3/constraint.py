"""The K3 family's part of :func:`kimi_chat.grammar.constraint`: the Lark translation of
:mod:`kimi_chat.families.k3.format` (the GBNF translator :class:`~kimi_chat.families.k3.grammar.K3Translator`,
with every JSON-typed value a ``%json`` of its property's schema: :mod:`kimi_chat.grammar.lark`), and
the markers :meth:`Constraint.accepts` tokenises as special tokens.

Arguments are typed ``argument`` elements, as ``encoding_k3`` writes a dict, for every object branch of
the parameters (:meth:`~kimi_chat.families.k3.grammar.K3Translator.call_elements`): a ``string`` value raw,
one terminal of the property's whole schema (:func:`~kimi_chat.grammar.strings.string_terminal`: pattern,
format, lengths, enum/const, composition), any other value JSON (the declared schema intersected with the
element's type, compiled by llguidance, ``json.dumps`` spacing or compact); undeclared keys as
``additional_properties`` reads the schema (a terminal spelling none of the declared keys; not kept
distinct from one another, which no grammar can: a repeat, which ``encoding_k3`` never writes, is the
parser's ``duplicate_argument`` warning, and a ``minProperties`` of 2 or more is noted). Notes: what
llguidance leaves out of a JSON value (its ``%json``), a ``oneOf`` of the arguments object llguidance
cannot prove exclusive, and the object keywords the elements do not hold the arguments to (``not``,
``dependencies``, ``propertyNames``...), each once with its path.
``<|end_of_msg|>`` ends the turn (the engine's end-of-generation token).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ... import markers as M
from ...dialect_records import DialectRecord as Dialect
from ...grammar.lark import LarkTranslatorMixin, regex_escape, terminal_rule, text_terminal
from ...grammar.schemas import Note, prepare, walk_schemas
from ...grammar.strings import pattern_regex, string_terminal
from .grammar import GRAMMAR, K3Translator
from .inputs import esc

__all__ = ["LarkK3Translator", "TRANSLATOR", "GRAMMAR", "special_markers", "end_markers", "after_reasoning"]

_OBJECT_KEYWORDS = ("propertyNames", "patternProperties", "unevaluatedProperties",
                    "dependentRequired", "dependentSchemas", "dependencies", "if", "then", "else", "not", "enum",
                    "const")
"""Keywords on the object of a call's arguments that the argument elements do not hold it to (each noted
once, with its path)."""


class LarkK3Translator(LarkTranslatorMixin, K3Translator):
    """:class:`~kimi_chat.families.k3.grammar.K3Translator` writing Lark: JSON values by llguidance
    (``%json`` of the declared schema intersected with the element's type), raw strings as one
    terminal of their schema (:func:`~kimi_chat.grammar.strings.string_terminal`), undeclared keys as a
    terminal that spells none of the declared ones; notes only for what is not enforced (module
    docstring)."""

    extra_arguments = True

    def call_elements(self, name: str) -> str:
        params = self.tools[name].get("parameters")
        self._members: set[str] = set()  # the paths of the arguments object's members (branch_elements)
        out = super().call_elements(name)
        if isinstance(params, Mapping) and _holds_one_of(params):
            # a oneOf of the arguments object is its branches (anyOf); exact where llguidance proves the
            # branches disjoint, else its note ("enforced as anyOf"), with the path (its other notes are
            # the ones of the values, which their own %json or terminal gives)
            for n in prepare(params, f"tools[{name!r}].parameters").notes:
                if n.path.endswith(".oneOf") and _canonical(n.path[: -len(".oneOf")]) in self._members:
                    self.notes.append(n)
        return out

    def branch_elements(self, tool: str, members: list[tuple[Mapping[str, Any], str]], root: Any, path: str,
                        j: int) -> str | None:
        self._members.update(_canonical(path + where[1:] if where.startswith("#") else where)
                             for _, where in members)
        return super().branch_elements(tool, members, root, path, j)

    def branch_notes(self, members: list[tuple[Mapping[str, Any], str]], path: str) -> None:
        noted = {n.path for n in self.notes}
        declared = {k for m, _ in members if isinstance(m.get("properties"), Mapping) for k in m["properties"]}
        for m, where in members:
            at = where.replace("/", ".")
            for key in _OBJECT_KEYWORDS:
                if key not in m or f"{at}.{key}" in noted or (key == "else" and "if" in m) or (
                        key == "then" and "if" in m):
                    continue
                if key == "patternProperties" and isinstance(m[key], Mapping) and not any(
                        self._matches(p, k) for p in m[key] for k in declared) and (
                        len(m[key]) == 1 and all(pattern_regex(p) is not None for p in m[key])):
                    continue  # undeclared keys matching it are its elements; no declared key matches it
                self.notes.append(Note(f"{where}.{key}", f"{key!r} is not enforced on argument elements"))

    def repeat_notes(self, at: str) -> None:
        if at not in {n.path for n in self.notes}:
            self.notes.append(Note(at, "counts argument elements, and an undeclared key may be written twice "
                                       "(no grammar keeps the keys distinct): that makes one property"))

    @staticmethod
    def _matches(pattern: str, key: str) -> bool:
        try:
            return re.search(pattern, key) is not None
        except re.error:
            return True

    _value_schema: Any = None  # the property's schema as declared, while its argument element is written

    _value_path = ""

    def argument(self, tool: str, key: str, schema: Any, root: Any, path: str) -> str | None:
        self._value_schema, self._value_path = schema, path
        try:
            return super().argument(tool, key, schema, root, path)
        finally:
            self._value_schema = None

    def free_argument(self, tool: str, schema: Any, root: Any, path: str, declared: tuple[str, ...] = (),
                      pattern: str | None = None, patterns: tuple[str, ...] = ()) -> str:
        self._value_schema, self._value_path = schema, path
        try:
            return super().free_argument(tool, schema, root, path, declared, pattern, patterns)
        finally:
            self._value_schema = None

    def extra_key(self, base: str, declared: tuple[str, ...], pattern: str | None = None,
                  patterns: tuple[str, ...] = ()) -> str:
        """Any key as the encoder writes an attribute value (``&`` and ``"`` escaped), none of the declared
        ones, no marker spelling; matching ``pattern`` (without ``&`` or ``"``) and no other of
        ``patterns`` (a key two patterns match is not written: noted), else none of ``patterns``."""
        expr = f"({text_terminal(self.forbidden)}) & /(?:[^\"&]|&amp;|&quot;)*/"
        if declared:
            expr += " & ~/" + "|".join(regex_escape(esc(k)) or "(?:)" for k in declared) + "/"
        for p in patterns:
            rx = pattern_regex(p)
            if rx is None:
                continue
            expr += f' & /[^"&]*/ & /{rx}/' if p == pattern else f" & ~/{rx}/"
        return terminal_rule(self.r, f"{base}-key", expr)

    def values(self, schema: Any, root: Any, name: str, path: str, depth: int) -> dict[str, list[str]]:
        narrowed = self._values_schema(schema, root, path)
        if narrowed is False:
            return {}  # no enum/const value satisfies the schema
        if depth == 0:
            out = super().values(narrowed, root, name, path, depth)
            if "string" in out:
                term = string_terminal(schema, root, self.forbidden, path.replace("/", "."), self.notes,
                                       lambda v, s: _valid(v, s, root))
                if term is None:
                    del out["string"]
                else:
                    out["string"] = [terminal_rule(self.r, f"{name}-str", term)]
            return out
        return super().values(narrowed, root, name, path, depth)

    @staticmethod
    def _values_schema(schema: Any, root: Any, path: str) -> Any:
        """``schema`` with its ``enum``/``const`` cut to the values that satisfy the whole schema."""
        if not isinstance(schema, Mapping) or not ("enum" in schema or "const" in schema):
            return schema
        vals = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(vals, list):
            return schema
        keep = [v for v in vals if _valid(v, schema, root)]
        return {"enum": keep} if keep else False

    def typed(self, ty: str, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        if ty == "string":
            return '""'  # replaced by the raw string terminal of the whole declared schema (values)
        if self._value_schema is not None:
            # a JSON value: the declared schema and the element's type, intersected by llguidance
            declared = self._value_schema if isinstance(self._value_schema, Mapping) else {}
            return self.json.schema({**declared, "type": ty}, root, name, self._value_path)
        return super().typed(ty, schema, root, name, path)  # pragma: no cover - values run in an element


def _holds_one_of(schema: Any) -> bool:
    return isinstance(schema, Mapping) and any("oneOf" in sub for sub, _ in walk_schemas(dict(schema), ""))


def _canonical(path: str) -> str:
    """A schema path as the walk (``/anyOf/0``) or :func:`~kimi_chat.grammar.schemas.prepare`
    (``.anyOf[0]``) writes it, in one spelling."""
    return re.sub(r"\[(\d+)\]", r".\1", path).replace("/", ".")


def _valid(value: Any, schema: Any, root: Any) -> bool:
    """Whether ``value`` satisfies ``schema`` (its references into ``root``), by ``jsonschema``."""
    import jsonschema

    if isinstance(schema, Mapping) and isinstance(root, Mapping) and schema is not root:
        schema = {**schema, **{k: root[k] for k in ("$defs", "definitions") if k in root}}
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions._WrappedReferencingError,
            jsonschema.exceptions.UnknownType):
        return True


TRANSLATOR = LarkK3Translator
"""The translator :func:`~kimi_chat.grammar.lark.build_lark` runs over :data:`GRAMMAR` for this family."""


def special_markers(dialect: Dialect) -> tuple[M.Marker, ...]:
    """The special tokens of the K3 tokenizer."""
    return tuple(m for m in M.K3_MARKERS if m.id is not None)


def end_markers(dialect: Dialect) -> tuple[str, ...]:
    """The spellings that end the turn: ``<|end_of_msg|>``."""
    return (M.K3_END_OF_MSG.text,)


def after_reasoning(dialect: Dialect) -> tuple[dict[str, Any], str | None]:
    """Where a grammar starts once the reasoning ended (:func:`kimi_chat.grammar.translate.after_reasoning`):
    right after the think channel's close tag (what ends the reasoning), thinking on: ``after_think``."""
    return {}, "after_think"
