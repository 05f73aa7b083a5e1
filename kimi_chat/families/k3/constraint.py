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

from collections.abc import Mapping, Sequence
from typing import Any

from ... import markers as M
from ...dialects import Dialect
from ...grammar.lark import LarkTranslatorMixin, build_lark
from ...grammar.schemas import ANNOTATIONS, Note
from .grammar import GRAMMAR, K3Translator

__all__ = ["LarkK3Translator", "lark_grammar", "special_markers", "end_markers"]

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

    def values(self, schema: Any, root: Any, name: str, path: str, depth: int) -> dict[str, list[str]]:
        if isinstance(schema, Mapping) and "oneOf" in schema:
            self.notes.append(Note(f"{path}.oneOf", "enforced as anyOf (more than one branch may match)"))
        return super().values(schema, root, name, path, depth)

    def typed(self, ty: str, schema: Mapping[str, Any], root: Any, name: str, path: str) -> str:
        if ty == "string":
            for key in _RAW_STRING_UNENFORCED:
                if key in schema:
                    self.notes.append(Note(f"{path}.{key}", f"{key!r} is not enforced on a raw string value"))
        return super().typed(ty, schema, root, name, path)


def lark_grammar(tools: Sequence[Any] | None, *, dialect: Dialect, tool_choice: Any, parallel_tool_calls: bool,
                 response_schema: Any, max_calls: int, first_index: int, reasoning: bool, content: bool,
                 options: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """The Lark grammar of one K3 request and its notes."""
    return build_lark(LarkK3Translator, GRAMMAR, tools, tool_choice, parallel_tool_calls, dialect, max_calls,
                      first_index, None, reasoning, content, options, response_schema)


def special_markers(dialect: Dialect) -> tuple[M.Marker, ...]:
    """The special tokens of the K3 tokenizer."""
    return tuple(m for m in M.K3_MARKERS if m.id is not None)


def end_markers(dialect: Dialect) -> tuple[str, ...]:
    """The spellings that end the turn: ``<|end_of_msg|>``."""
    return (M.K3_END_OF_MSG.text,)
