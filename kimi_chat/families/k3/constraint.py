"""The K3 family's part of :func:`kimi_chat.grammar.constraint`: the Lark translation of
:mod:`kimi_chat.families.k3.format` (the GBNF translator :class:`~kimi_chat.families.k3.grammar.K3Translator`,
with every JSON-typed value a ``%json`` of its property's schema: :mod:`kimi_chat.grammar.lark`), and
the markers :meth:`Constraint.accepts` tokenises as special tokens.

Arguments are typed ``argument`` elements, as ``encoding_k3`` writes them: a ``string`` value raw
(``minLength``/``maxLength``, ``enum``/``const`` enforced; ``pattern`` and ``format`` are not, on raw
text: noted), any other value JSON (its schema compiled by llguidance, ``json.dumps`` spacing or
compact). A property's ``anyOf``/``oneOf`` is an alternative per branch (``oneOf``'s exclusivity is
not enforced: noted), as are object keywords of the parameters other than ``properties`` /
``required`` / ``additionalProperties`` (noted). ``<|end_of_msg|>`` ends the turn (the engine's
end-of-generation token).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import markers as M
from ...dialects import Dialect
from ...grammar.lark import LarkTranslatorMixin
from ...grammar.schemas import ANNOTATIONS, Note
from .grammar import GRAMMAR, K3Translator

__all__ = ["LarkK3Translator", "TRANSLATOR", "GRAMMAR", "special_markers", "end_markers", "after_reasoning"]

_OBJECT_ENFORCED = frozenset({"type", "properties", "required", "additionalProperties", "$defs", "definitions",
                              "$ref", "$id", "$anchor", "x-guidance"}) | ANNOTATIONS
_RAW_STRING_UNENFORCED = ("pattern", "format")


class LarkK3Translator(LarkTranslatorMixin, K3Translator):
    """:class:`~kimi_chat.families.k3.grammar.K3Translator` writing Lark, noting what the typed
    argument elements do not enforce (module docstring)."""

    def call_elements(self, name: str) -> str:
        params = self.tools[name].get("parameters")
        path = f"tools[{name!r}].parameters"
        if name not in self.elements and isinstance(params, Mapping) and not any(k in params for k in ("anyOf",
                                                                                                      "oneOf")):
            props = params.get("properties")
            extra = params.get("additionalProperties", True)
            if isinstance(props, Mapping) and props:
                for key in params:
                    if key not in _OBJECT_ENFORCED:
                        self.notes.append(Note(f"{path}.{key}", f"{key!r} is not enforced on argument elements"))
                if extra is not False:
                    self.notes.append(Note(f"{path}.additionalProperties", "undeclared properties are never "
                                           "generated (the argument elements are the declared properties)"))
            elif extra is False or "patternProperties" in params:
                self.notes.append(Note(path, "only a json element is generated, not the argument elements the "
                                             "encoder writes for such an object"))
        return super().call_elements(name)

    _value_schema: Any = None  # the property's schema as declared, while its argument element is written

    _value_path = ""

    def argument(self, tool: str, key: str, schema: Any, root: Any, path: str) -> str:
        self._value_schema, self._value_path = schema, path
        try:
            return super().argument(tool, key, schema, root, path)
        finally:
            self._value_schema = None

    def free_argument(self, tool: str, schema: Any, root: Any, path: str) -> str:
        self._value_schema, self._value_path = schema, path
        try:
            return super().free_argument(tool, schema, root, path)
        finally:
            self._value_schema = None

    def values(self, schema: Any, root: Any, name: str, path: str, depth: int) -> dict[str, list[str]]:
        if isinstance(schema, Mapping) and "oneOf" in schema:
            self.notes.append(Note(f"{path}.oneOf", "enforced as anyOf (more than one branch may match)"))
        if isinstance(schema, Mapping) and ("enum" in schema or "const" in schema) and \
                set(schema) - {"enum", "const", "type"} - ANNOTATIONS:
            self.notes.append(Note(f"{path}.enum", "enum/const values are not checked against the other keywords"))
        return super().values(schema, root, name, path, depth)

    def typed(self, ty: str, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        if ty == "string":
            for key in _RAW_STRING_UNENFORCED:
                if key in schema:
                    self.notes.append(Note(f"{path}.{key}", f"{key!r} is not enforced on a raw string value"))
            return super().typed(ty, schema, root, name, path)
        if self._value_schema is not None:
            # a JSON value: the declared schema and the element's type, intersected by llguidance
            # (exact, where the walk's own merge of allOf/anyOf branches is only the type split)
            # (a sibling ``type`` intersects; the walk took ``ty`` from the schema's own types or branches)
            declared = self._value_schema if isinstance(self._value_schema, Mapping) else {}
            return self.json.schema({**declared, "type": ty}, root, name, self._value_path)
        return super().typed(ty, schema, root, name, path)  # pragma: no cover - values run in an element


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
