"""The assistant OUTPUT formats, as data: one module per model family.

A family's module builds one :class:`OutputFormat` record out of plain data and hands it to the
generic machinery: :mod:`kimi_chat.output.peg` compiles its grammar, :mod:`kimi_chat.parse` runs the state
table over the lexer's tokens, :mod:`kimi_chat.grammar` derives GBNF from the same rules. Neither
names a family's markers; everything family-specific is in the record.

The interface a family provides, as the ``output_format`` of its :class:`~kimi_chat.families.Family` record
(:mod:`kimi_chat.families.k2.format`; :mod:`kimi_chat.families.k3.format`, the Kimi-K3 XTML tags
``<|open|>NAME attrs<|sep|>`` / ``<|close|>NAME<|sep|>``):

* ``token_classes``: terminal class -> the marker spellings that are that terminal (any other special
  token of the family, passed to :func:`kimi_chat.output.peg.compile_machine` as ``markers``, is ``STRAY``);
* ``grammar``: rule name -> :class:`kimi_chat.output.peg.Expr`, with the groups the parser reacts to:
  ``reasoning``, ``section``, ``call``, ``header``, ``arguments``, ``end``, and text routed to the
  fields of ``fields`` (``content``, ``reasoning``, ``header``, ``arguments``, ``between``,
  ``after``, ``ignored``);
* ``start_rules``: which rule a parse starts with, by case: ``reasoning`` (the output may open
  reasoning), ``prefilled`` (the prompt opened it), ``plain`` (no reasoning: the ``think_classes``
  are literal text);
* ``end_of_turn_ids``: token ids that end the turn (a relay may strip their text but pass the ids);
* ``tool_call_id_prefix``: the prefix of a call header that names the function (``functions.`` in
  ``functions.NAME:IDX``; ``""`` where the name comes from elsewhere);
* ``compile(start_rule, think=...)``: the cached compiled :class:`~kimi_chat.output.peg.Machine`;
* ``reader``: the lexer and the call assembler of one parse (see :attr:`OutputFormat.reader`);
* ``as_text``: marker-shaped spellings that are no markers of the family (another family's markers,
  ``<|reserved_token_N|>``) -> why (which dialect writes them): a parse cuts them out of the text only to
  warn (``foreign_marker``), and keeps them as text (:meth:`OutputFormat.parse_table`).

A family whose terminals are tags (K3) sets ``tags`` (its tag classes have no spellings of their
own: :class:`kimi_chat.families.k3.tags.TagLexer` builds them out of the tag markers) and adds its groups
to the grammar; the parser's handlers are keyed by group name, so a family reuses them where the
groups mean the same (``reasoning``, ``call``, ``end``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .peg import Expr, Machine, MarkerTable

__all__ = ["OutputFormat", "format_for", "reserved_hints"]


@dataclass(frozen=True)
class OutputFormat:
    """One family's output format, as data (see the module docstring for each field)."""

    name: str
    token_classes: Mapping[str, Sequence[Any]]
    grammar: Mapping[str, Expr]
    start_rules: Mapping[str, str]
    think_classes: tuple[str, ...]
    end_of_turn_ids: frozenset[int]
    tool_call_id_prefix: str
    fields: Mapping[str, str]
    compile: Callable[..., Machine]
    reader: Callable[..., tuple[Machine, Any, Any]]
    """The family's reader: ``reader(fmt, dialect, tools, out, warn, thinking_prefilled, reasoning, options,
    where)`` -> ``(machine, lexer, call assembler)`` of one parse (:func:`kimi_chat.output.fields.family_parts`):
    which start rule the options pick, the lexer of its terminals (markers, or K3's tags), the call
    assembler (which adds its fields and groups to the parser's tables, ``add_events``)."""
    as_text: Mapping[str, str] = field(default_factory=dict)
    """Spelling -> why it is kept as text (see the module docstring)."""
    tags: Any = None
    """A family whose terminals are tags (K3): its :class:`kimi_chat.families.k3.format.TagSet`, read by the
    tag lexer (:mod:`kimi_chat.families.k3.tags`); ``None``: the terminals are the marker spellings."""

    def machine(self, *, prefilled: bool, think: bool) -> Machine:
        """The compiled machine of a parse: ``prefilled``: the output starts inside reasoning;
        ``think``: reasoning markers are markers (implied by ``prefilled``)."""
        case = "prefilled" if prefilled else ("reasoning" if think else "plain")
        return self.compile(self.start_rules[case], think=prefilled or think)

    def parse_table(self, machine: Machine) -> MarkerTable:
        """The marker table a parse's lexer runs: ``machine.markers`` plus, as
        :data:`~kimi_chat.output.peg.AS_TEXT`, the reasoning markers where they are no markers (reasoning
        off) and the :attr:`as_text` spellings. The parser keeps those as text, with a warning naming the
        spelling and its offset: marker-shaped text never passes silently, and text is never joined across
        a dropped marker. Built once per machine (a format has a few)."""
        tables = self._parse_tables
        hit = tables.get(id(machine))
        if hit is None or hit[0] is not machine:
            think = [getattr(m, "text", m) for c in self.think_classes for m in self.token_classes[c]]
            hit = tables[id(machine)] = (machine, machine.markers.with_text([*think, *self.as_text]))
        return hit[1]

    @cached_property
    def _parse_tables(self) -> dict[int, tuple[Machine, MarkerTable]]:
        return {}

    @cached_property
    def end_of_turn(self) -> tuple[str | None, frozenset[str]]:
        """``(class, spellings)``: the terminal class of the end-of-turn markers (``None`` if no class holds
        one) and their spellings (the markers among ``token_classes`` whose id is in ``end_of_turn_ids``);
        computed once per format."""
        ids = self.end_of_turn_ids
        cls = next((c for c, ms in self.token_classes.items() if any(getattr(x, "id", None) in ids for x in ms)), None)
        return cls, frozenset(x.text for ms in self.token_classes.values() for x in ms if getattr(x, "id", None) in ids)


def reserved_hints(names: Mapping[int, str], first: int, count: int, name: Callable[[Any], str]) -> dict[str, str]:
    """The reserved tokens' names (``name(i)``) -> why each is kept as text, for the ``count`` special
    ids from ``first`` (``names``: id -> the marker the family's vocabulary names it). A model file whose
    vocabulary spells its special tokens so (some GGUF conversions) writes them instead of the markers."""
    out = {}
    for i in range(first, first + count):
        what = f"{names[i]} in Kimi's vocabulary" if i in names else "reserved in Kimi's vocabulary"
        out[name(i)] = (
            f"not a marker of this dialect: the name of special id {i} ({what}); a model file whose vocabulary "
            f"names special tokens {name('N')} writes these: read its output with its token ids and "
            "tokenizer=, or fix its vocabulary")
    return out


def format_for(dialect: object) -> OutputFormat:
    """The output format of ``dialect`` (a :class:`~kimi_chat.dialects.Dialect`): its family record's
    ``output_format`` (:attr:`~kimi_chat.dialects.Dialect.family_parts`). ``NotImplementedError`` names the
    family of an object that has no registered family's parts (not a dialect, or a dialect of an unregistered
    family: ``kimi_chat.get_dialect(name)`` makes a dialect and names the registered families)."""
    try:
        family = dialect.family_parts  # type: ignore[attr-defined]
    except (KeyError, AttributeError):
        name = getattr(dialect, "name", dialect)
        raise NotImplementedError(f"dialect {name}: no output format for the {getattr(dialect, 'family', 'k2')!r} "
                                  "family (format_for takes a Dialect of a registered family: "
                                  "kimi_chat.get_dialect(name) makes one)") from None
    return family.output_format
