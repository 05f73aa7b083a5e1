"""Format families: everything one family of Kimi formats needs, behind one record.

A *family* is a way of writing a conversation and an assistant turn: Kimi-K2's ``<|im_*|>`` turns,
``<think>`` and tool-call sections (``k2``); Kimi-K3's XTML tags ``<|open|>TAG attrs<|sep|>`` …
``<|close|>TAG<|sep|>`` and ``<|end_of_msg|>`` (``k3``). Each is one package, ``kimi_chat.families.<name>``,
whose ``family`` module's ``FAMILY`` is its :class:`Family` record, whose ``spec`` module holds the switches
its dialect records set (``K2Spec``, ``K3Spec``) and whose ``dialects`` module's ``RECORDS`` are its built-in
dialect records (:func:`family_dialects`, which :mod:`kimi_chat.dialect_records` registers); each dialect record
names its family. A dialect carries its family's record (:attr:`kimi_chat.dialects.Dialect.family_parts`, resolved once
through :func:`family_of`); the stages (:mod:`kimi_chat.prompt`, :mod:`kimi_chat.tokens`, :mod:`kimi_chat.output`,
:mod:`kimi_chat.grammar`, :mod:`kimi_chat.checks`, …) take their parts from it and know no family by name.
:func:`family_of` is called only where a name becomes a dialect or a family (:mod:`kimi_chat.dialects`, the CLI,
the server plugins' entry).

Adding a family is one new folder (``families/<name>/``, its ``family`` module building ``FAMILY``, its
``dialects`` module listing ``RECORDS``) and one line in :data:`REGISTRY`. The registry holds the family modules'
paths, imported on first use (the one place a module is loaded by a path string): a family package builds on the family-agnostic core (markers, messages, the
prompt writer, the PEG engine, the tokenizer) and the stages reach it only through a dialect's record, so no
import cycle runs through it. A record's server hooks and constraint part are accessors of the family package,
importing those modules on first call. The contract's members name the stage types they hold in their
docstrings and type them by what the stages call (the stage modules take a dialect, so importing their types
here would close an import cycle).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..markers import Marker
    from ..output.format import OutputFormat

__all__ = ["Family", "FamilyMarkers", "TokenPolicy", "GrammarParts", "ServingParts", "OfficialRendering",
           "CheckParts", "REGISTRY", "family_of", "family_names", "registered_families", "family_dialects"]


@dataclass(frozen=True, kw_only=True)
class FamilyMarkers:
    """The family's special markers, by role."""

    all: tuple[Marker, ...]
    """Every special marker of the family (:mod:`kimi_chat.markers`)."""
    output: tuple[Marker, ...]
    """The markers with a special-token id that the output format writes (:func:`kimi_chat.grammar.format_markers`)."""
    vocabulary: tuple[Marker, ...]
    """Special tokens a tokenizer must have to encode the family's prompts (:mod:`kimi_chat.tokens.vocabulary`)."""
    turn_end: Marker
    """The marker that ends every assistant turn (``inspect`` checks the model ends generation at it)."""
    inspected: Callable[[Any], tuple[Marker, ...]]
    """``dialect -> markers`` a model's tokenizer must have at their official ids (``inspect``)."""


@dataclass(frozen=True, kw_only=True)
class TokenPolicy:
    """How the family's prompts become token ids, and which tokenizer does it."""

    segment_wise: bool
    """``False``: the official tokenizer encodes the whole prompt text with the markers special (K2); ``True``:
    segment by segment, each part the writer wrote on its own (K3, :mod:`kimi_chat.tokens.segments`;
    :func:`kimi_chat.prompt.render_segments` then gives those parts)."""
    base_tokenizer: str
    """The family's first reference tokenizer config (the tiny model's default)."""
    reference_tokenizer: Callable[[Any], str]
    """``dialect -> config`` of :meth:`KimiTokenizer.from_reference` that tokenizes it (the CLI's default)."""
    snapshot_tokenizer: Callable[[Any, Any], Any]
    """``(directory, config_file or None) -> KimiTokenizer`` of a model snapshot of the family."""
    turns_position_free: Callable[[Any, Any], bool] | None = None
    """``(dialect, options) -> bool``: whether the family's pass, with these render options, writes every assistant
    turn from the message alone wherever it stands, and every request as the conversation's rendering up to the
    turn's header plus the generation prompt, reasoned from the pass (the samples core then takes every sample
    of a conversation from one rendering, checked: :func:`kimi_chat.data.positions.one_rendering`). ``None``:
    the samples core reasons it from the K2 template renderer (:mod:`kimi_chat.data.positions`)."""


@dataclass(frozen=True, kw_only=True)
class GrammarParts:
    """What grammars and constraints of the family's output are built from (besides the output format)."""

    translator: type[Any]
    """The GBNF translation of ``output_format.grammar`` (a :class:`kimi_chat.grammar.translate.FormatTranslator`:
    :func:`kimi_chat.grammar.tool_call_grammar`)."""
    constraint: Callable[[], ModuleType]
    """The family's part of a llguidance constraint (``TRANSLATOR``, ``GRAMMAR``, ``special_markers``,
    ``end_markers``: :mod:`kimi_chat.grammar.request`; ``after_reasoning``, where a grammar starts once the
    reasoning ended, for the GBNF export too: :func:`kimi_chat.grammar.translate.after_reasoning`), the module
    returned by the family package's accessor, imported on first call (it needs the ``constraints`` extra only
    when a constraint is built)."""


@dataclass(frozen=True, kw_only=True)
class ServingParts:
    """What servers need of the family beyond rendering and parsing."""

    hooks: Callable[[], ModuleType]
    """The family's server hooks (its ``serving`` module: the facts about its reasoning and tool sections,
    :class:`kimi_chat.families.serving.ServingHooks`), imported by the family package on first call
    (:func:`kimi_chat.servers.hooks.serving_of` calls it)."""
    pending_prompt_tokens: Callable[[Sequence[int]], int]
    """``ids -> n``: how many of a prompt's last ids Moonshot counts as pending, not prompt
    (:func:`kimi_chat.servers.contract.prompt_tokens`)."""


@dataclass(frozen=True, kw_only=True)
class OfficialRendering:
    """The family's official rendering: the oracle kimi_chat has parity with."""

    render: Callable[..., str]
    """``(messages, tools, dialect, add_generation_prompt, **options) -> text``
    (:func:`kimi_chat.reference.oracle.render_official`): the dialect's oracle template with its tokenizer's
    pre-processing (K2), the release's own tokenizer (K3)."""
    jinja_templates: bool
    """The official rendering is a Jinja chat template (and kimi_chat ships one per dialect,
    ``templates/<dialect>.jinja``); ``False``: its tokenizer renders in Python, and a Jinja template is a port
    that a host (llama.cpp) runs as given."""


@dataclass(frozen=True, kw_only=True)
class CheckParts:
    """What ``inspect``, ``verify`` and ``identify`` need of the family."""

    fix_hint: str | None
    """What ``inspect`` tells to do about a wrong template where there is no template to use instead
    (``None``: the dialect's own template, :attr:`OfficialRendering.jinja_templates`)."""
    refusals_differ: bool
    """Whether a request the dialect refuses and a template renders is a difference (``verify``): K3's
    refusals are the official encoder's explicit checks; K2's are what the official template cannot render."""
    probes: tuple[Any, ...]
    """The family's own identify probes (:class:`kimi_chat.families.probe.Probe` records), compared with its
    dialects only, after the probes every family shares (:data:`kimi_chat.checks.verification.probes.PROBES`)."""


@dataclass(frozen=True, kw_only=True)
class Family:
    """One format family: what the family-agnostic stages need of it, by role.

    ``name`` is the registry key (``Dialect.family``); ``title`` how users read it (``"Kimi-K2"``). The
    other members each serve one stage: the markers by role, the output format (run by the parser,
    :mod:`kimi_chat.output`, and translated into grammars), the prompt writer, the token-encoding policy,
    the grammar parts, the lint rules, the servers' parts, the official rendering, the checks' parts."""

    name: str
    title: str
    markers: FamilyMarkers
    output_format: OutputFormat
    """The assistant output as data (:class:`kimi_chat.output.format.OutputFormat`)."""
    write_prompt: Callable[..., None]
    """Writes the prompt into a :class:`~kimi_chat.prompt.writer.Writer`: template literals (markers) and input
    text apart, with the attribution marks (a :class:`kimi_chat.prompt.template.PromptWriter`:
    :func:`kimi_chat.prompt.write_prompt`; a template family's: :func:`kimi_chat.prompt.template.template_writer`
    around its renderer)."""
    tokens: TokenPolicy
    grammar: GrammarParts
    lint: Callable[..., list[Any]]
    """The family's lint rules, ``(dialect, messages, tools, add_generation_prompt, options) -> findings``
    (:class:`~kimi_chat.checks.lint.LintWarning` objects): what :func:`kimi_chat.lint` and ``strict=True`` run."""
    serving: ServingParts
    official: OfficialRendering
    checks: CheckParts


REGISTRY: dict[str, str] = {
    "k2": "kimi_chat.families.k2.family",
    "k3": "kimi_chat.families.k3.family",
}
"""Family name -> the module whose ``FAMILY`` is its :class:`Family` (``families/<name>/family.py``; its sibling
``dialects`` module holds the family's records, :func:`family_dialects`). Adding a family is adding a line."""


def family_names() -> tuple[str, ...]:
    """The registered families' names, in registry order."""
    return tuple(REGISTRY)


def registered_families() -> tuple[Family, ...]:
    """Every registered family's record, in registry order (what a stage that compares families reads:
    which family a tokenizer's vocabulary is, each family's identify probes)."""
    return tuple(family_of(name) for name in REGISTRY)


def family_of(dialect_or_name: Any) -> Family:
    """The :class:`Family` of a dialect (a :class:`~kimi_chat.dialects.Dialect`, or anything with a
    ``family`` attribute) or of a family name. ``KeyError`` names an unregistered family."""
    name = dialect_or_name if isinstance(dialect_or_name, str) else getattr(dialect_or_name, "family", "k2")
    family = _LOADED.get(name)
    if family is not None:  # every render asks: a dict lookup, not import_module
        return family
    try:
        module = REGISTRY[name]
    except KeyError:
        raise KeyError(f"no format family {name!r} (families: {', '.join(REGISTRY)})") from None
    family = _LOADED[name] = importlib.import_module(module).FAMILY
    return family


_LOADED: dict[str, Family] = {}
"""The records imported so far, by family name (a record is imported once, as its module is)."""


def family_dialects(name: str) -> tuple[Any, ...]:
    """The built-in dialect records of family ``name`` (:class:`~kimi_chat.dialect_records.DialectRecord` objects,
    oldest first): the ``RECORDS`` of the family package's ``dialects`` module, the sibling of its ``family`` module
    in :data:`REGISTRY` (``families/<name>/dialects.py``). :mod:`kimi_chat.dialect_records` registers them when
    it is imported; loading them does not load the family's record (its stages), only the record class and the
    family's spec. ``KeyError`` names an unregistered family; ``ValueError`` a record of another family."""
    try:
        module = REGISTRY[name]
    except KeyError:
        raise KeyError(f"no format family {name!r} (families: {', '.join(REGISTRY)})") from None
    package = module.rpartition(".")[0]
    records = tuple(importlib.import_module(f"{package}.dialects").RECORDS)
    for i, record in enumerate(records):
        if getattr(record, "family", None) != name:
            raise ValueError(f"{package}.dialects.RECORDS[{i}] ({getattr(record, 'name', record)!r}) is a dialect of "
                             f"family {getattr(record, 'family', None)!r}, not {name!r}")
    return records
