"""Dialect records: one small declarative record per official Kimi chat-template revision, and their registry.

This module is the data every stage reads: :class:`DialectRecord` (the facts of one revision: family, status, the
options it reads, its reasoning policy, the markers that end its turns, its family's parts) and the registry
(:func:`register_dialect`, :func:`get_dialect`, :func:`dialect_for_model`...), which holds the built-in records
once this module is imported. It imports no stage:
the stages (prompt, output, tokens, grammar, checks, servers) import it. The object a user holds is the handle,
:class:`kimi_chat.dialects.Dialect`, a record with the methods that run each stage (``render``, ``parse``,
``stream``, ``constraint``, ``lint``, ``tokenizer``); it lives in :mod:`kimi_chat.dialects`, which imports the
stages, and once it is imported (``import kimi_chat`` imports it first) the registry holds handles
(:func:`use_handle`), so a record found here is the object :func:`kimi_chat.get_dialect` returns.

A record is a shared header (name, status, aliases, model names, the oracle file and the options it renders with,
the options the dialect reads, known problems, its family) and a ``spec`` owned by its family, whose switches are
named by what they do: :class:`~kimi_chat.families.k2.spec.K2Spec` (default system prompt, how tools are declared,
role header names, tool-call id policy, tool result layout, message bodies, media, ``<think>`` policy, end-of-turn
policy) and :class:`~kimi_chat.families.k3.spec.K3Spec`. One renderer per family serves every spec; adding a
revision is adding a record (:func:`register_dialect`). Each family owns its built-in records, in its package's
``dialects`` module (:mod:`kimi_chat.families.k2.dialects`: the K2 revisions, oldest first, a revision that differs
from another in little as ``dataclasses.replace`` of that one, as Kimi-K2.7-Code is of Kimi-K2.6;
:mod:`kimi_chat.families.k3.dialects`: Kimi-K3); this module registers them when it is imported, asking each
registered family for its records through the family registry (:func:`kimi_chat.families.family_dialects`), so
it never imports a family's records by name and they import this module's record class without a cycle.

Each dialect carries its provenance status, from ``../shared/reference/PROVENANCE.md``:

* ``verified``: the oracle template is byte-identical in two or more independent sources;
* ``single-source``: one verbatim copy plus evidence that it is official;
* ``unverified``: copied from a doc or code file, not from a template file;
* ``reconstructed``: rebuilt by us from a renamed or partial copy, or from a sibling's template
  (Kimi-K2.7-Code: no template is public; Kimi-K2.6's, with its reasoning switches forced).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

from .errors import UnknownDialectError
from .families.k2.spec import K2Spec
from .families.k3.spec import K3Spec

if TYPE_CHECKING:
    from .families import Family

__all__ = [
    "Status",
    "DialectRecord",
    "K2Spec",
    "K3Spec",
    "DIALECTS",
    "K2_DIALECTS",
    "ALIASES",
    "MODEL_NAMES",
    "DEFAULT_DIALECT",
    "KIMI_K3",
    "get_dialect",
    "dialect_names",
    "dialect_for_model",
    "register_dialect",
    "unregister_dialect",
    "dialect_for_served_model",
    "model_key",
    "use_handle",
]


class Status(str, Enum):
    """How sure we are that a dialect's oracle template is the official text."""

    VERIFIED = "verified"
    SINGLE_SOURCE = "single-source"
    UNVERIFIED = "unverified"
    RECONSTRUCTED = "reconstructed"


@dataclass(frozen=True)
class DialectRecord:
    """One official template revision, as a set of rendering choices: the data every stage reads.

    The header's fields are read by every stage and the CLI; the family's renderer reads the ``spec``. They are
    facts read off the oracle template named by ``oracle``. The properties are the facts a user
    asks (:attr:`reasoning_policy`, :attr:`thinking_switch`, :attr:`end_markers`; ``family``, ``status`` and
    ``options`` are fields) and the parts of its family (:attr:`family_parts`). The handle a user holds,
    :class:`kimi_chat.dialects.Dialect`, is a record with the methods that do each stage's work in it.

    >>> d = get_dialect("moonshotai/Kimi-K2.6")
    >>> d.name, d.reasoning_policy
    ('kimi-k2.6', 'history-split-or-all')
    """

    name: str
    """Canonical name, e.g. ``kimi-k2-instruct@rev2``."""
    status: Status
    oracle: str
    """Path of the oracle template, relative to the reference directory."""
    summary: str
    spec: K2Spec | K3Spec = field(default_factory=K2Spec)
    """The family's switches (:class:`~kimi_chat.families.k2.spec.K2Spec`, :class:`~kimi_chat.families.k3.spec.K3Spec`),
    named by what they do: read by that family's renderer, lint rules and tooling."""
    options: tuple[str, ...] = ()
    """Render options (template kwargs) this dialect reads, e.g. ``thinking``."""
    aliases: tuple[str, ...] = field(default=())
    family: str = "k2"
    """The format family (a :data:`kimi_chat.families.REGISTRY` name): which renderer and output format serve it.
    ``k2``: ``<|im_*|>`` turns and tool-call sections (every K2 revision, with a ``K2Spec``); ``k3``: XTML,
    rendered in Python by the official ``encoding_k3`` (with a ``K3Spec``)."""
    model_names: tuple[str, ...] = ()
    """Published model names (Hugging Face ids, API names) whose chat format this dialect is: the data of
    :func:`dialect_for_model` and :func:`get_dialect` (case, ``_`` or space for ``-`` and the organisation
    prefix do not matter; a name extended by ``-SUFFIX``, such as ``-GGUF``, is the same model)."""
    known_problems: tuple[str, ...] = ()
    """Codes of the known problems of this revision's official template and of serving it
    (:data:`kimi_chat.checks.known_problems.PROBLEMS` describes each; ``identify`` and ``inspect`` report them)."""
    oracle_options: tuple[tuple[str, Any], ...] = ()
    """Template kwargs the oracle template is rendered with, whatever the request says: a dialect rebuilt from a
    sibling's template with that template's switches fixed (Kimi-K2.7-Code: Kimi-K2.6's template with
    ``thinking`` and ``preserve_thinking`` true)."""

    def __post_init__(self) -> None:
        wants = _SPECS.get(self.family)
        if wants is not None and not isinstance(self.spec, wants):
            raise TypeError(f"dialect {self.name}: a {self.family} dialect's spec is a {wants.__name__}, "
                            f"not {type(self.spec).__name__}")

    @property
    def reads_preserve_thinking(self) -> bool:
        """Whether the template reads ``preserve_thinking`` (K2.6): with it true, every assistant
        turn keeps its reasoning."""
        return "preserve_thinking" in self.options

    @property
    def reasoning(self) -> bool:
        """Whether the model's output may carry ``<think>`` reasoning."""
        return self.spec.reasoning

    def check_options(self, options: Mapping[str, object], *, what: str = "option", require_bool: bool = True) -> None:
        """Refuse template options this dialect does not read (and, with ``require_bool``, non-bool
        values): the check of :func:`~kimi_chat.output.parse` (``render`` ignores unread kwargs, as the
        templates do, and :func:`kimi_chat.lint` reports them).

        ``what`` is how the message calls an option (``"option"``, ``"render option"``). Raises
        ``TypeError`` naming the option and listing the dialect's options.
        """
        for key, value in options.items():
            if key not in self.options:
                takes = ", ".join(self.options) if self.options else "none"
                raise TypeError(f"dialect {self.name} takes no {what} {key!r} (its options: {takes})")
            if require_bool and type(value) is not bool:
                raise TypeError(f"{what} {key!r} of dialect {self.name} must be a bool, got {value!r}")

    def prefills_think(self, **options: object) -> bool:
        """Whether the generation prompt already opens ``<think>``, so the model's output starts
        inside reasoning (K2.5 and K2.6 with ``thinking`` on, K2.7-Code always)."""
        return self.spec.prefills_think("thinking" in self.options, options)

    # -- facts --

    @property
    def family_parts(self) -> Family:
        """The parts of this dialect's format family (its :class:`~kimi_chat.families.Family` record: output
        format, prompt writer, token policy, lint rules, ...), resolved once per family through the registry.
        The stages take them from here; only this property asks the registry
        (:func:`kimi_chat.families.family_of`). ``KeyError`` names an unregistered family."""
        parts = _FAMILY_PARTS.get(self.family)
        if parts is None:  # first use of the family in this process: the registry imports its package
            from .families import family_of

            parts = _FAMILY_PARTS[self.family] = family_of(self.family)
        return parts

    @property
    def keeps_every_reasoning(self) -> bool:
        """Whether every assistant turn's reasoning is rendered, whatever the options (Kimi-K2.7-Code, Kimi-K3)."""
        return self.spec.keeps_every_reasoning

    @property
    def reasoning_policy(self) -> Literal["none", "history-split", "history-split-or-all", "all"]:
        """Which assistant turns keep their reasoning in the prompt: ``none`` (no ``<think>``),
        ``history-split`` (the turns after the last assistant turn without tool calls; the earlier ones an
        empty ``<think></think>``), ``history-split-or-all`` (that, or every turn with ``preserve_thinking``:
        Kimi-K2.6), ``all`` (every turn, always: Kimi-K2.7-Code, Kimi-K3)."""
        if self.keeps_every_reasoning:
            return "all"
        if not self.reasoning:
            return "none"
        return "history-split-or-all" if self.reads_preserve_thinking else "history-split"

    @property
    def always_thinks(self) -> bool:
        """Whether every generation prompt opens reasoning and no option turns it off (Kimi-K2.7-Code): a
        request asking for thinking asks for nothing else, one asking for none cannot be honoured."""
        return not self.thinking_switch and self.prefills_think()

    @property
    def thinking_switch(self) -> bool:
        """Whether the request can turn reasoning off (the ``thinking`` option: K2.5, K2.6, K3)."""
        return "thinking" in self.options

    @property
    def end_markers(self) -> tuple[str, ...]:
        """The marker spellings that end an assistant turn (the engine's end-of-generation tokens)."""
        fam = self.family_parts
        ends = fam.output_format.end_of_turn_ids
        return tuple(m.text for m in fam.markers.all if m.id is not None and m.id in ends)

_SPECS: dict[str, type] = {"k2": K2Spec, "k3": K3Spec}
"""The spec class of each built-in family's dialects (a record of another family may carry either)."""

_FAMILY_PARTS: dict[str, Family] = {}
"""The family records :attr:`DialectRecord.family_parts` resolved so far, by family name."""

DIALECTS: dict[str, DialectRecord] = {}
"""Every dialect, by canonical name (filled by :func:`register_dialect`; change it only through that function)."""

K2_DIALECTS: dict[str, DialectRecord] = {}
"""The K2-family dialects (those with a Jinja template: the oracle templates, our ``templates/``,
``identify`` / ``verify``)."""

ALIASES: dict[str, str] = {}
"""Alias -> canonical dialect name."""

MODEL_NAMES: dict[str, str] = {}
"""Model-name key (:func:`model_key` of each record's :attr:`~DialectRecord.model_names`) -> canonical dialect name."""


def model_key(name: str) -> str:
    """The form model names are compared in: lower case, ``_`` and spaces as ``-``, no organisation prefix,
    ``kimik3`` as ``kimi-k3`` and a two-digit version (``k26``, ``k2-6``) as ``k2.6``."""
    n = name.strip().lower().replace("_", "-").replace(" ", "-").rsplit("/", 1)[-1]
    n = _GLUED_KIMI.sub("kimi-k", n)
    return _VERSION.sub(r"k\1.\2", n)


_GLUED_KIMI = re.compile(r"^kimik(?=\d)")
_VERSION = re.compile(r"(?<![a-z0-9])k(\d)[.-]?(\d)(?![\d])")
_NOT_CHAT = re.compile(r"(?:^|-)base(?:$|-)")
"""A base model (``Kimi-K2-Base``) is not trained on a chat format: its name implies no dialect."""


def _names_of(d: DialectRecord) -> dict[str, str]:
    """Every name ``d`` answers to, by kind: its name and aliases as given, its model names by :func:`model_key`."""
    out = {d.name: "name"} | {a: "alias" for a in d.aliases}
    for m in d.model_names:
        out.setdefault(model_key(m), "model name")
    return out


def register_dialect(dialect: DialectRecord) -> DialectRecord:
    """Add a dialect record to the registry and return what it holds (the record as the handle,
    :class:`kimi_chat.dialects.Dialect`, once that is imported: :func:`use_handle`): :func:`get_dialect` then
    knows its name, aliases and model names, and every stage serves it by its family (``dialect.family``, a
    registered family).
    Raises ``ValueError`` naming the clash when a name, alias or model name is another dialect's already
    (as tiktoken's registry refuses a duplicate encoding name), and for an unregistered family."""
    from .families import family_names

    if not isinstance(dialect, DialectRecord):
        raise TypeError(f"register_dialect takes a DialectRecord record, not {type(dialect).__name__}")
    if dialect.family not in family_names():
        raise ValueError(f"dialect {dialect.name}: no format family {dialect.family!r} "
                         f"(families: {', '.join(family_names())})")
    taken = {n: d.name for d in DIALECTS.values() for n in _names_of(d)}
    for name, kind in _names_of(dialect).items():
        owner = taken.get(name) or taken.get(model_key(name))
        if owner is not None:
            raise ValueError(f"dialect {dialect.name}: {kind} {name!r} is dialect {owner}'s already; "
                             "choose another or unregister_dialect() that one first")
    dialect = _as_handle(dialect)
    DIALECTS[dialect.name] = dialect
    if dialect.family == "k2":
        K2_DIALECTS[dialect.name] = dialect
    ALIASES.update({a: dialect.name for a in dialect.aliases})
    MODEL_NAMES.update({model_key(m): dialect.name for m in dialect.model_names})
    return dialect


def unregister_dialect(name: str) -> DialectRecord:
    """Remove the dialect named ``name`` (canonical) with its aliases and model names, and return its record.
    Raises :class:`~kimi_chat.errors.UnknownDialectError` for a name that is no registered dialect."""
    d = DIALECTS.pop(name, None)
    if d is None:
        raise UnknownDialectError(f"unknown dialect {name!r}; registered: {', '.join(DIALECTS)}")
    K2_DIALECTS.pop(name, None)
    for table in (ALIASES, MODEL_NAMES):
        for key in [k for k, v in table.items() if v == name]:
            del table[key]
    return d


_as_handle: Callable[[DialectRecord], DialectRecord] = lambda d: d
"""What :func:`register_dialect` stores for a record: the record itself until :func:`use_handle` is called."""


def use_handle(as_handle: Callable[[DialectRecord], DialectRecord]) -> None:
    """Hold every registered record, and every one registered from now on, as ``as_handle(record)`` (the handle
    class's constructor from a record, which returns a handle unchanged). :mod:`kimi_chat.dialects` calls it
    once, when it is imported, so :func:`get_dialect` here and there return the same object for a name."""
    global _as_handle
    _as_handle = as_handle
    for name, d in list(DIALECTS.items()):
        DIALECTS[name] = h = as_handle(d)
        if name in K2_DIALECTS:
            K2_DIALECTS[name] = h


def _built_in() -> tuple[DialectRecord, ...]:
    """Every registered family's own records (:func:`kimi_chat.families.family_dialects`: its ``dialects`` module's
    ``RECORDS``, loaded through the family registry), families in registry order, each family's oldest first."""
    from .families import family_dialects, family_names

    return tuple(d for family in family_names() for d in family_dialects(family))


for _d in _built_in():
    register_dialect(_d)
del _d

KIMI_K3: DialectRecord = DIALECTS["kimi-k3"]
"""The Kimi-K3 dialect (its record: :mod:`kimi_chat.families.k3.dialects`; rendered by
:mod:`kimi_chat.families.k3.render`)."""

DEFAULT_DIALECT = "kimi-k2-instruct"


def get_dialect(name: str | DialectRecord) -> DialectRecord:
    """The dialect ``name`` names: a canonical name (``kimi-k2.6``), an alias (``kimi-k2-thinking``) or a published
    model name (``moonshotai/Kimi-K2.6``, ``Kimi-K2.6``, ``kimi-k2.6``: :func:`dialect_for_model`); a handle
    passes through, a plain :class:`DialectRecord` becomes its handle (:func:`use_handle`), so every stage's
    dialect has the handle's methods.

    Raises :class:`~kimi_chat.errors.UnknownDialectError` with the closest names and the known ones otherwise.
    """
    if isinstance(name, DialectRecord):
        return _as_handle(name)
    d = DIALECTS.get(ALIASES.get(name, name))  # type: ignore[arg-type]
    if d is not None:
        return d
    if not isinstance(name, str):
        raise UnknownDialectError(f"a dialect is named by a str or given as a DialectRecord, not {type(name).__name__}")
    key = model_key(name)
    found = DIALECTS.get(ALIASES.get(key, key)) or DIALECTS.get(dialect_for_model(name) or "")
    if found is not None:
        return found
    known = dialect_names()
    close = difflib.get_close_matches(name.lower(), list(dict.fromkeys(known + sorted(MODEL_NAMES))), n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise UnknownDialectError(f"unknown dialect {name!r}{hint}; known dialects and aliases: {', '.join(known)}; "
                              "a published model name (moonshotai/Kimi-K2.6...) names its dialect too")


def dialect_names(*, aliases: bool = True) -> list[str]:
    """Canonical dialect names (and aliases, after them)."""
    return list(DIALECTS) + (list(ALIASES) if aliases else [])


def dialect_for_model(model: str) -> str | None:
    """The canonical dialect a model name implies, or ``None`` when the name does not tell. The names are the
    records' :attr:`~DialectRecord.model_names` (Hugging Face ids such as ``moonshotai/Kimi-K2-Thinking``, API names
    such as ``kimi-k2-0905-preview``), compared by :func:`model_key` (so a GGUF ``general.name`` such as
    ``Kimi K2 Instruct 0905`` and spellings such as ``Kimi_K26`` match) exactly, else by the longest one the
    name extends with ``-SUFFIX`` (``unsloth/Kimi-K2.6-GGUF``, ``kimi-k2-thinking-turbo``).

    ``None`` for ``Kimi-K2-Instruct`` (its template had several revisions), base models (``Kimi-K2-Base``:
    not trained on a chat format), unknown versions (``kimi-k2.7``, ``kimi-k3.1``) and Kimi models of other
    formats (Kimi-VL, Kimi-Linear, Kimi-Dev...)."""
    if not isinstance(model, str):
        return None
    key = model_key(model)
    if not key or _NOT_CHAT.search(key):
        return None
    exact = MODEL_NAMES.get(key)
    if exact is not None:
        return exact
    best = max((k for k in MODEL_NAMES if key.startswith(k + "-")), key=len, default=None)
    return MODEL_NAMES[best] if best is not None else None


def dialect_for_served_model(names: Iterable[str], identified: str | None) -> str | None:
    """The dialect to serve a model as, from its ``names`` (repository id, directory name, GGUF ``general.name``:
    the first that names a dialect, :func:`dialect_for_model`) and the dialect its chat template was identified as
    (``identified``; ``None``: not identified). The template decides, except where it cannot tell: a named dialect
    built from the identified one's template with its switches forced (same oracle: Kimi-K2.7-Code's model ships
    Kimi-K2.6's format), or an unidentified template of a model whose dialect has no template of its own (its
    ``oracle_options``). ``None``: neither tells."""
    named = next((d for d in map(dialect_for_model, names) if d is not None), None)
    if named is None:
        return identified
    d = DIALECTS[named]
    if identified is None:
        return named if d.oracle_options else None
    return named if d.oracle_options and d.oracle == DIALECTS[identified].oracle else identified
