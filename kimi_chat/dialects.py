"""Dialects: the handle a user holds, over the declarative records of :mod:`kimi_chat.dialect_records`.

:func:`get_dialect` takes a canonical name (``kimi-k2.6``), an alias (``kimi-k2-thinking``) or a published model
name (``moonshotai/Kimi-K2.6``, ``Kimi-K2.6``; the names each record lists in :attr:`Dialect.model_names`, as
tiktoken lists its models' encodings) and returns the :class:`Dialect`: its facts (family, status, the options it
reads, its reasoning policy, the markers that end its turns) and what one does with it (:meth:`Dialect.render`,
:meth:`~Dialect.render_tokens`, :meth:`~Dialect.parse`, :meth:`~Dialect.stream`, :meth:`~Dialect.constraint`,
:meth:`~Dialect.lint`, :meth:`~Dialect.tokenizer`). The free functions (:func:`kimi_chat.render` with
``dialect=``...) take the same names.

The record class and the registry are in :mod:`kimi_chat.dialect_records` (re-exported here: ``Status``,
``DIALECTS``, ``register_dialect``, ``dialect_for_model``...), which every stage imports and which registers the
built-in dialects each family owns (``kimi_chat/families/<name>/dialects.py``); this module adds the methods,
whose types are the stages' (so the stages never import it: no import cycle). Once it is imported
(``import kimi_chat`` does so first) the registry holds handles: a name gives the same object here, in the
records' :func:`~kimi_chat.dialect_records.get_dialect` and in :data:`DIALECTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from . import dialect_records as _records
from .dialect_records import (ALIASES, DEFAULT_DIALECT, DIALECTS, K2_DIALECTS, MODEL_NAMES, DialectRecord, K2Spec,
                              K3Spec, Status, dialect_for_model, dialect_for_served_model, dialect_names, model_key)
from .errors import ReferenceDataError

if TYPE_CHECKING:
    from .findings import LintWarning
    from .grammar.request import Constraint
    from .output.stream import StreamParser
    from .output.types import ParsedMessage
    from .prompt.writer import Segment
    from .tokens.rendered import RenderedTokens
    from .tokens.tokenizer import KimiTokenizer

__all__ = [
    "Status",
    "Dialect",
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
    "model_key",
    "register_dialect",
    "unregister_dialect",
    "dialect_for_served_model",
]


@dataclass(frozen=True)
class Dialect(DialectRecord):
    """One official template revision and the handle to work in it: a :class:`~kimi_chat.dialect_records.DialectRecord`
    (its fields and facts) whose methods do each stage's work in this dialect (:meth:`render`,
    :meth:`render_tokens`, :meth:`parse`, :meth:`stream`, :meth:`constraint`, :meth:`lint`, :meth:`tokenizer`).

    >>> d = get_dialect("moonshotai/Kimi-K2.6")
    >>> d.name, d.reasoning_policy
    ('kimi-k2.6', 'history-split-or-all')
    >>> d.parse("2+2 is 4</think>4").content
    '4'
    """

    @classmethod
    def of(cls, record: DialectRecord) -> Dialect:
        """The handle of ``record`` (a handle is returned as it is; a plain record becomes one, field by field)."""
        if isinstance(record, Dialect):
            return record
        if not isinstance(record, DialectRecord):
            raise TypeError(f"a Dialect is made of a DialectRecord, not {type(record).__name__}")
        return cls(**{f.name: getattr(record, f.name) for f in fields(DialectRecord)})

    def render(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
               add_generation_prompt: bool | None = None, continue_final_message: bool = False,
               strict: bool = False, **options: Any) -> str:
        """The prompt text (:func:`kimi_chat.render` with this dialect)."""
        return _stage("render")(messages, tools=tools, dialect=self, add_generation_prompt=add_generation_prompt,
                      continue_final_message=continue_final_message, strict=strict, **options)

    def render_segments(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                        add_generation_prompt: bool | None = None, continue_final_message: bool = False,
                        strict: bool = False, **options: Any) -> list[Segment]:
        """The prompt as attributed pieces (:func:`kimi_chat.render_segments` with this dialect)."""
        return _stage("render_segments")(messages, tools=tools, dialect=self, add_generation_prompt=add_generation_prompt,
                               continue_final_message=continue_final_message, strict=strict, **options)

    def render_tokens(self, messages: Sequence[Any], *, tokenizer: KimiTokenizer | None = None,
                      tools: Sequence[Any] | None = None, add_generation_prompt: bool | None = None,
                      continue_final_message: bool = False, special_tokens: Any = "text", strict: bool = False,
                      **options: Any) -> RenderedTokens:
        """The prompt as token ids with their attribution (:func:`kimi_chat.render_tokens` with this dialect);
        ``tokenizer`` defaults to :meth:`tokenizer` (the reference data's)."""
        return _stage("render_tokens")(messages, tokenizer=tokenizer if tokenizer is not None else self.tokenizer(),
                             tools=tools, dialect=self, add_generation_prompt=add_generation_prompt,
                             continue_final_message=continue_final_message, special_tokens=special_tokens,
                             strict=strict, **options)

    def parse(self, text: str | bytes, *, tools: Iterable[Any] | None = None, thinking_prefilled: bool | None = None,
              token_ids: Sequence[int] | None = None, tokenizer: Any = None, **options: Any) -> ParsedMessage:
        """A whole assistant turn, parsed (:func:`kimi_chat.parse` with this dialect)."""
        return _stage("parse")(text, dialect=self, tools=tools, thinking_prefilled=thinking_prefilled, token_ids=token_ids,
                     tokenizer=tokenizer, **options)

    def stream(self, *, tools: Sequence[Any] | None = None, **options: Any) -> StreamParser:
        """An incremental parser of one assistant turn (:class:`kimi_chat.StreamParser` with this dialect)."""
        return _stage("stream")(self, tools=tools, **options)

    def constraint(self, tools: Sequence[Any] | None = None, **options: Any) -> Constraint:
        """The llguidance constraint of one request's output (:func:`kimi_chat.grammar.constraint` with this
        dialect; needs the ``constraints`` extra)."""
        return _stage("constraint")(tools, dialect=self, **options)

    def lint(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None, add_generation_prompt: bool = True,
             **options: Any) -> list[LintWarning]:
        """Findings about ``messages`` as this dialect renders them (:func:`kimi_chat.lint`)."""
        return _stage("lint")(messages, dialect=self, tools=tools, add_generation_prompt=add_generation_prompt, **options)

    def tokenizer(self, *, reference_dir: Any = None) -> KimiTokenizer:
        """This dialect's reference tokenizer (:meth:`KimiTokenizer.from_reference` of the config its family
        names), loaded once per config. Raises :class:`~kimi_chat.errors.ReferenceDataError` naming the fix
        when the reference data (``$KIMI_CHAT_REFERENCE_DIR``) is missing, ``ModuleNotFoundError`` naming the
        extra to install when tiktoken is."""
        config = self.family_parts.tokens.reference_tokenizer(self)
        key = (config, str(reference_dir) if reference_dir is not None else None)
        tok = _TOKENIZERS.get(key)
        if tok is None:
            try:
                tok = _stage("tokenizer")(config, reference_dir=reference_dir)
            except ModuleNotFoundError as e:
                if e.name != "tiktoken":
                    raise
                raise ModuleNotFoundError(f"the tokenizer of {self.name} needs tiktoken: "
                                          "pip install -e '.[tokenizer]' (in the kimi_chat checkout)", name="tiktoken") from e
            except ReferenceDataError as e:
                raise ReferenceDataError(
                    f"the reference tokenizer of {self.name} ({config!r}) is not available: {e}; set "
                    "$KIMI_CHAT_REFERENCE_DIR to the reference data, or load one with "
                    "KimiTokenizer.from_dir(MODEL_DIRECTORY) and pass it as tokenizer=") from e
            _TOKENIZERS[key] = tok
        return tok


_TOKENIZERS: dict[tuple[str, str | None], Any] = {}
"""The reference tokenizers loaded by :meth:`Dialect.tokenizer`, by config (and directory)."""

_STAGES: dict[str, Callable[..., Any]] = {}
"""The functions behind :class:`Dialect`'s methods, by method name (:func:`bind_stages`)."""


def bind_stages(**stages: Callable[..., Any]) -> None:
    """Bind the functions behind :class:`Dialect`'s methods (``render=``, ``parse=``, ``stream=``...):
    :mod:`kimi_chat`'s ``__init__``, which imports every stage, binds them (this module names the stages' types
    for type checkers only, and loads no stage of its own)."""
    _STAGES.update(stages)


def _stage(name: str) -> Callable[..., Any]:
    """The bound function of method ``name``; ``KeyError`` where none is bound."""
    return _STAGES[name]


def get_dialect(name: str | DialectRecord) -> Dialect:
    """The dialect ``name`` names: a canonical name (``kimi-k2.6``), an alias (``kimi-k2-thinking``) or a published
    model name (``moonshotai/Kimi-K2.6``, ``Kimi-K2.6``, ``kimi-k2.6``: :func:`dialect_for_model`); a
    :class:`Dialect` passes through, a plain :class:`~kimi_chat.dialect_records.DialectRecord` becomes its handle.

    Raises :class:`~kimi_chat.errors.UnknownDialectError` with the closest names and the known ones otherwise.
    """
    return Dialect.of(_records.get_dialect(name))


def register_dialect(dialect: DialectRecord) -> Dialect:
    """Add a dialect record (a :class:`Dialect`, or a plain record) to the registry and return its handle, the
    object :func:`get_dialect` then returns for its name, aliases and model names. Raises ``ValueError`` naming
    the clash when a name, alias or model name is another dialect's already, and for an unregistered family."""
    return Dialect.of(_records.register_dialect(dialect))


def unregister_dialect(name: str) -> Dialect:
    """Remove the dialect named ``name`` (canonical) with its aliases and model names, and return its handle.
    Raises :class:`~kimi_chat.errors.UnknownDialectError` for a name that is no registered dialect."""
    return Dialect.of(_records.unregister_dialect(name))


_records.use_handle(Dialect.of)

KIMI_K3: Dialect = get_dialect("kimi-k3")
"""The Kimi-K3 dialect (rendered by :mod:`kimi_chat.families.k3.render`)."""
