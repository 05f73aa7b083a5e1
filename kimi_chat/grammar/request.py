"""One constraint per request, for every engine: the assistant output a Kimi model may write, as an
llguidance grammar (Lark; tool arguments and ``response_format`` schemas compiled by llguidance's
``%json``), derived from the same output format the parser runs (:mod:`kimi_chat.output.format`).

:func:`constraint` builds a :class:`Constraint`:

* ``lark`` / :meth:`Constraint.grammar`: what ``llguidance.LLMatcher`` takes (markers are special
  tokens: typed marker text never satisfies them, and free text cannot spell a marker);
  :meth:`Constraint.matcher` over a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`;
* ``exact`` / ``notes``: whether every schema is enforced exactly, and what is not (schema path and
  reason, :mod:`kimi_chat.grammar.schemas`); :meth:`Constraint.validate` checks the produced
  arguments with ``jsonschema`` and gives a failing call the status ``schema_mismatch``;
* :meth:`Constraint.accepts`: whether constrained generation could produce exactly this text (the
  text :func:`kimi_chat.parse` takes, with or without the end-of-turn marker), on a byte-level
  tokenizer with the family's markers as special tokens (no reference data needed);
* ``gbnf`` / ``gbnf_exact`` / ``gbnf_notes``: the GBNF export for llama-server's ``--grammar``
  (:func:`~kimi_chat.grammar.tool_call_grammar`, the tools' and the ``response_format`` schemas by
  the rules of :func:`~kimi_chat.grammar.json_schema_to_gbnf`), with its own exactness.

The family-specific part is ``kimi_chat.families.<family>.constraint`` (``TRANSLATOR`` and ``GRAMMAR``,
the walk's translator and the format it walks; ``special_markers``, ``end_markers``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

import jsonschema
import llguidance
import llguidance.tiktoken

from .. import markers as M
from ..caches import LRUCache, PerTokenizer, content_key
from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..output.tools import normalise_tools
from ..output.types import ParsedMessage, ToolCallStatus
from .gbnf import GrammarError
from .lark import build_lark
from .schemas import ADDITIONAL_PROPERTIES, Note, bundle, declared_only, walk_schemas
from .tool_calls import tool_call_grammar
from .translate import RESPONSE_PATH, after_reasoning, response_schema

__all__ = ["ConstraintNote", "Constraint", "constraint", "llg_tokenizer", "byte_tokenizer", "clear_cache", "CACHE_SIZE"]

ConstraintNote = Note
"""What a constraint does not enforce exactly: ``path`` (e.g.
``tools[1].function.parameters.properties.when.format``) and ``reason``."""

_GBNF_UNENFORCED = ("pattern", "format", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                    "uniqueItems", "minProperties", "maxProperties", "patternProperties", "dependentRequired",
                    "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "if", "then",
                    "else", "not", "contains", "propertyNames", "oneOf")

_GBNF_ENUM_SIBLINGS = frozenset({"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                                 "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "items",
                                 "prefixItems", "properties", "required", "additionalProperties", "minProperties",
                                 "maxProperties", "not", "allOf", "anyOf", "oneOf", "$ref"})
"""Keywords that may exclude an ``enum``/``const`` value, which the GBNF rules (the value as it is) ignore."""


@dataclass(frozen=True)
class Constraint:
    """The constraint of one request (module docstring)."""

    dialect: Dialect
    lark: str
    """The llguidance Lark grammar; markers by name (``<|tool_call_begin|>``) are special tokens only."""
    exact: bool
    """Every schema in it is enforced exactly (else see ``notes``; :meth:`validate` checks the output)."""
    notes: tuple[Note, ...]
    schemas: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Tool name -> its ``parameters`` schema as declared (what :meth:`validate` checks)."""
    request: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The request's arguments of :func:`~kimi_chat.grammar.tool_call_grammar` (for the GBNF export)."""
    schema_notes: tuple[Note, ...] = field(default=(), repr=False, compare=False)
    """The notes of reading the schemas (invalid schemas, references resolved loosely), which hold for the
    GBNF export too (it reads the same bundled schemas)."""

    @cached_property
    def _gbnf(self) -> tuple[str, tuple[Note, ...]]:
        # built on first use: the GBNF export costs more than the Lark grammar (its marker-free text
        # and strings are automata written out as rules)
        req = dict(self.request)
        response = req.pop("response", None)
        policy = req.pop("additional_properties", "schema")
        notes = list(self.schema_notes)
        notes += _gbnf_notes(normalise_tools(req.get("tools"), error=GrammarError), response, policy)
        try:
            gbnf = tool_call_grammar(**req, reply_schema=response)
        except GrammarError as e:
            gbnf = ""
            where = "response_format" if str(e).startswith(RESPONSE_PATH) else "tools"
            notes.append(Note(where, f"no GBNF export: {e}"))
        return gbnf, tuple(dict.fromkeys(notes))

    @property
    def gbnf(self) -> str:
        """The GBNF export (root rule ``root``) for llama-server ``--grammar`` / llama.cpp (``""``: none)."""
        return self._gbnf[0]

    @property
    def gbnf_exact(self) -> bool:
        """Whether the GBNF export enforces every schema exactly (see ``gbnf_notes``)."""
        return bool(self._gbnf[0]) and not self._gbnf[1]

    @property
    def gbnf_notes(self) -> tuple[Note, ...]:
        """What the GBNF export does not enforce exactly (keywords ``json_schema_to_gbnf`` leaves out)."""
        return self._gbnf[1]

    def grammar(self) -> str:
        """The grammar as ``llguidance.LLMatcher`` takes it."""
        return llguidance.grammar_from("lark", self.lark)

    def matcher(self, tokenizer: Any) -> llguidance.LLMatcher:
        """A fresh matcher over ``tokenizer`` (a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`, or an
        ``llguidance.LLTokenizer``)."""
        tok = tokenizer if isinstance(tokenizer, llguidance.LLTokenizer) else llg_tokenizer(tokenizer)
        return llguidance.LLMatcher(tok, self.grammar(), log_level=0)

    def _family(self) -> Any:
        return self.dialect.family_parts.grammar.constraint()

    def accepts(self, text: str) -> bool:
        """Whether constrained generation could produce exactly ``text`` (the assistant output, markers
        spelled as in :func:`kimi_chat.parse`'s input; a final end-of-turn marker is optional)."""
        fam = self._family()
        tok, ids = byte_tokenizer(self.dialect)
        tokens = _tokenize(text, ids)
        ends = {ids[m] for m in fam.end_markers(self.dialect) if m in ids}
        if tokens and tokens[-1] in ends:
            tokens = tokens[:-1]
        m = llguidance.LLMatcher(tok, self.grammar(), log_level=0)
        if m.is_error():  # pragma: no cover - constraint() checked the grammar compiles
            raise GrammarError(f"llguidance refuses the grammar: {m.get_error()}")
        return m.consume_tokens(tokens) and not m.is_error() and m.is_accepting()

    def validate(self, message: ParsedMessage) -> ParsedMessage:
        """``message`` with every ``ok`` call whose arguments do not satisfy its tool's ``parameters``
        schema (``jsonschema``, formats checked where jsonschema can) given the status
        ``schema_mismatch`` (so ``to_openai`` reports it under ``invalid_tool_calls``)."""
        calls = []
        changed = False
        for call in message.tool_calls:
            if call.status is ToolCallStatus.OK and call.name in self.schemas:
                if _mismatch(self.schemas[call.name], call.arguments):
                    call = replace(call, status=ToolCallStatus.SCHEMA_MISMATCH)
                    changed = True
            calls.append(call)
        return replace(message, tool_calls=calls) if changed else message


def _schema_key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, default=str)


@lru_cache(maxsize=256)
def _validator(key: str) -> Any:
    schema = json.loads(key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _invalid_schema(schema: Any, path: str) -> list[Note]:
    """A note when ``schema`` is not a valid JSON Schema of its draft (2020-12 by default), naming
    where: it is enforced only as far as llguidance reads it."""
    if schema is None or isinstance(schema, bool):
        return []
    try:
        key = json.dumps(schema, default=repr)
    except (TypeError, ValueError):  # pragma: no cover - normalise_tools passes JSON-like schemas
        return []
    found = _schema_error(key)
    if found is None:
        return []
    where, message = found
    return [Note(path + where, f"not a valid JSON Schema ({message}): enforced as far as llguidance reads it")]


@lru_cache(maxsize=256)
def _schema_error(key: str) -> tuple[str, str] | None:
    """Where (a path suffix) and why the schema ``key`` (JSON) is not a valid JSON Schema of its
    draft; ``None`` if it is. Cached: the 2020-12 meta-schema check costs about 20 ms."""
    schema = json.loads(key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.path), e.message[:200]
    return None


def _mismatch(schema: Any, arguments: str) -> bool:
    if schema is None:
        schema = {"type": "object"}
    try:
        value = json.loads(arguments)
    except ValueError:
        return True
    try:
        return next(_validator(_schema_key(schema)).iter_errors(value), None) is not None
    except (jsonschema.exceptions._WrappedReferencingError,  # a remote reference: cannot be checked
            jsonschema.exceptions.SchemaError, jsonschema.exceptions.UnknownType):  # an invalid schema (noted)
        return False


# ---------------------------------------------------------------------- tokenizers

_LLG_TOKENIZERS: PerTokenizer[llguidance.LLTokenizer] = PerTokenizer("grammar.llg_tokenizers")


def llg_tokenizer(tokenizer: Any) -> llguidance.LLTokenizer:
    """The llguidance tokenizer of a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer` (tiktoken ranks and
    special tokens; the end-of-turn specials it has are the end-of-generation tokens). Cached per
    tokenizer (weakly: it goes with the tokenizer; building one takes about a second), thread-safe."""
    return _LLG_TOKENIZERS.get(tokenizer, _build_llg_tokenizer)


def _build_llg_tokenizer(tokenizer: Any) -> llguidance.LLTokenizer:
    specials = tokenizer.special_tokens
    eos = [specials[m.text] for m in (M.IM_END, M.K3_END_OF_MSG, M.EOS) if m.text in specials]
    return llguidance.tiktoken.lltokenizer_from_encoding(tokenizer._enc, n_vocab=tokenizer.vocab_size,
                                                         eos_token=eos or None)


class _ByteVocab:
    """A byte-level vocabulary (ids 0..255) plus special tokens (ids from 256), for llguidance."""

    def __init__(self, specials: Sequence[str], eos: str) -> None:
        self.tokens = [bytes([i]) for i in range(256)] + [s.encode() for s in specials]
        self.special_token_ids = list(range(256, 256 + len(specials)))
        self.eos_token_id = 256 + list(specials).index(eos)
        self.bos_token_id = None

    def __call__(self, s: str | bytes) -> list[int]:
        return list(s if isinstance(s, bytes) else s.encode())


@lru_cache(maxsize=16)
def byte_tokenizer(dialect: Dialect) -> tuple[llguidance.LLTokenizer, dict[str, int]]:
    """A byte-level llguidance tokenizer whose special tokens are ``dialect``'s markers (its family's
    ``special_markers``), and the id of each marker spelling."""
    fam = dialect.family_parts.grammar.constraint()
    specials = [m.text for m in fam.special_markers(dialect)]
    vocab = _ByteVocab(specials, fam.end_markers(dialect)[0])
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(vocab)), {s: 256 + i for i, s in enumerate(specials)}


def _tokenize(text: str, ids: Mapping[str, int]) -> list[int]:
    """``text`` as byte tokens, the marker spellings of ``ids`` as their special tokens."""
    out: list[int] = []
    i = 0
    data = text
    starts = {s[0] for s in ids}
    by_len = sorted(ids, key=len, reverse=True)
    while i < len(data):
        if data[i] in starts:
            hit = next((s for s in by_len if data.startswith(s, i)), None)
            if hit is not None:
                out.append(ids[hit])
                i += len(hit)
                continue
        out.extend(data[i].encode())
        i += 1
    return out


# ---------------------------------------------------------------------- building

def _off_type(schema: Mapping[str, Any]) -> bool:
    """Whether an ``enum``/``const`` value of ``schema`` is not of its ``type``."""
    t = schema.get("type")
    if t is None:
        return False
    types = set(t) if isinstance(t, list) else {t}
    vals = [schema["const"]] if "const" in schema else schema.get("enum")
    names = {bool: "boolean", str: "string", type(None): "null", dict: "object", list: "array", float: "number"}
    for v in vals if isinstance(vals, list) else []:
        kind = "integer" if isinstance(v, int) and not isinstance(v, bool) else names.get(type(v), "?")
        if kind not in types and not (kind == "integer" and "number" in types):
            return True
    return False


def _gbnf_notes(fns: Mapping[str, Mapping[str, Any]], response: Any, policy: str = "schema") -> list[Note]:
    """What the GBNF export leaves out of the tools' schemas and the reply's (``response``), read with
    ``additional_properties=policy`` (undeclared properties: never generated beside declared ones, which
    ``"declared"`` asks for unless ``additionalProperties`` is explicitly allowed)."""
    notes = []
    schemas = [(fn.get("parameters"), f"tools[{i}].function.parameters") for i, fn in enumerate(fns.values())]
    if response is not None:
        schemas.append((response, RESPONSE_PATH))
    for schema, path in schemas:
        for sub, where in walk_schemas(schema, path):
            for key in _GBNF_UNENFORCED:
                if key in sub:
                    notes.append(Note(f"{where}.{key}", f"{key!r} is not enforced by the GBNF export"))
            if ("enum" in sub or "const" in sub) and (set(sub) & _GBNF_ENUM_SIBLINGS or _off_type(sub)):
                notes.append(Note(f"{where}.{'enum' if 'enum' in sub else 'const'}",
                                  "enum/const values are not checked against the other keywords by the GBNF export"))
            if "minimum" in sub and sub["minimum"] != 0:
                notes.append(Note(f"{where}.minimum", "'minimum' is not enforced by the GBNF export"))
            if isinstance(sub.get("properties"), Mapping) and sub.get("additionalProperties", True) is not False \
                    and (policy == "schema" or "additionalProperties" in sub):
                notes.append(Note(f"{where}.additionalProperties",
                                  "the GBNF export never generates undeclared properties"))
    return notes


_WALK_PATH = re.compile(r"^tools\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]\.parameters")


def _request_path(path: str, names: Mapping[str, int]) -> str:
    """A path the walk wrote (``tools['NAME'].parameters/properties/x``, perhaps followed by a message)
    in the request's terms (``tools[0].function.parameters.properties.x``)."""
    m = _WALK_PATH.match(path)
    if m is None:
        return path
    try:
        name = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):  # pragma: no cover - the walk writes repr() of the name
        return path
    if name not in names:  # pragma: no cover - the walk only names declared tools
        return path
    rest, colon, message = path[m.end():].partition(": ")
    return f"tools[{names[name]}].function.parameters{rest.replace('/', '.')}{colon}{message}"


def _note_path(note: Note, names: Mapping[str, int]) -> Note:
    return Note(_request_path(note.path, names), note.reason)


def constraint(tools: Sequence[Any] | None = None, *, dialect: str | Dialect, tool_choice: Any = "auto",
               parallel_tool_calls: bool = True, response_format: Any = None, additional_properties: str = "schema",
               **render_options: Any) -> Constraint:
    """The constraint of one request's assistant output (module docstring).

    * ``tools``, ``tool_choice`` (``"auto"``, ``"none"``, ``"required"``, ``{"type": "function",
      "function": {"name": ...}}``), ``parallel_tool_calls``: as in the request (``"auto"`` without
      tools is ``"none"``);
    * ``response_format``: ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema":
      {"schema": ...}}`` constrains the reply (K2: the content; K3: the response channel);
    * ``additional_properties``: how undeclared properties (of the tools' arguments and the reply) are
      read, the same for every family. ``"schema"`` (the default) reads the schema as JSON Schema does:
      an object takes undeclared properties unless ``additionalProperties`` is false (K2: llguidance's
      ``%json``; K3: argument elements with any other key and any type the encoder writes, after the
      declared ones). ``"declared"`` generates only declared properties where an object declares some
      and leaves ``additionalProperties`` unsaid (an explicit ``true`` or schema is honoured, a
      free-form object stays free-form), as most engines do for a forced call. ``"schema"`` is the
      default because it is the schema's own meaning (every valid call can be generated: what ``exact``
      promises) and what K2 has always enforced; a server that wants tighter calls asks for
      ``"declared"``. Either is a reading, not an inexactness: ``exact``/``notes`` are about the schema
      as read;
    * ``render_options``: the prompt's render options (``thinking=False``...), plus ``first_index``
      (the running index of the first call, default 0), ``max_calls`` (default 8), ``reasoning``
      (allow reasoning where the format has it, default True), ``content`` (allow content before
      forced calls, default False) and ``after_reasoning`` (default False: the grammar starts where the
      reasoning ended, for a server that applies it from its reasoning parser's end; K2: the body, as
      with thinking off; K3: after the think channel).

    Raises :class:`~kimi_chat.grammar.GrammarError` for an unknown named tool, ``"required"`` without
    tools, a malformed ``response_format``, or a grammar llguidance refuses.

    The result is cached for the last :data:`CACHE_SIZE` distinct requests (a server sees the same
    tools again and again; a :class:`Constraint` is immutable).
    """
    d = get_dialect(dialect)
    # an exact key (kimi_chat.caches.content_key: plain data only, types and key order kept: the order of
    # properties is the order the grammar writes them in); None (a tool object...): not cached
    if additional_properties not in ADDITIONAL_PROPERTIES:
        raise GrammarError(f"additional_properties: expected one of {', '.join(map(repr, ADDITIONAL_PROPERTIES))}, "
                           f"got {additional_properties!r}")
    key = content_key([tools, d.name, tool_choice, parallel_tool_calls, response_format, additional_properties,
                       render_options])
    return _CACHE.get_or_compute(
        key, lambda: _build(tools, d, tool_choice, parallel_tool_calls, response_format, render_options,
                            additional_properties))


CACHE_SIZE = 64
"""How many distinct requests' constraints :func:`constraint` keeps."""
_CACHE: LRUCache[Constraint] = LRUCache("grammar.constraints", CACHE_SIZE)


def clear_cache() -> None:
    """Forget the cached constraints and schema checks (benchmarks measure a cold build with it)."""
    _CACHE.clear()
    _schema_error.cache_clear()


def _build(tools: Sequence[Any] | None, d: Dialect, tool_choice: Any, parallel_tool_calls: bool,
           response_format: Any, render_options: Mapping[str, Any], additional_properties: str = "schema") -> Constraint:
    """:func:`constraint`, uncached."""
    options = dict(render_options)
    start = None
    if options.pop("after_reasoning", False):
        options, start = after_reasoning(d, options)
    max_calls = int(options.pop("max_calls", 8))
    first_index = int(options.pop("first_index", 0))
    reasoning = bool(options.pop("reasoning", True))
    content = bool(options.pop("content", False))
    fns = normalise_tools(tools, error=GrammarError)
    if tool_choice == "auto" and not fns:
        tool_choice = "none"
    response = response_schema(response_format)
    notes: list[Note] = []
    bundled = []
    for i, (name, fn) in enumerate(fns.items()):
        params = fn.get("parameters")
        notes += _invalid_schema(params, f"tools[{i}].function.parameters")
        if isinstance(params, Mapping):
            params, ref_notes = bundle(dict(params), f"tools[{i}].function.parameters")
            notes += ref_notes
            if additional_properties == "declared":
                params = declared_only(params)
        bundled.append({"type": "function", "function": {**fn, "parameters": params}})
    notes += _invalid_schema(response, RESPONSE_PATH)
    if isinstance(response, Mapping):
        response, ref_notes = bundle(dict(response), RESPONSE_PATH)
        notes += ref_notes
        if additional_properties == "declared":
            response = declared_only(response)
    prepared = tuple(notes)  # what reading the schemas found (invalid schemas, references): the GBNF export's too
    fam = d.family_parts.grammar.constraint()
    names = {name: i for i, name in enumerate(fns)}
    try:
            lark, family_notes = build_lark(fam.TRANSLATOR, fam.GRAMMAR, bundled, tool_choice, parallel_tool_calls, d,
                                        max_calls, first_index, None, reasoning, content, options, response,
                                        start_rule=start)
    except GrammarError as e:
        raise GrammarError(_request_path(str(e), names)) from None
    notes += family_notes
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(llguidance.grammar_from("lark", lark))
    if is_error:
        raise GrammarError(f"llguidance refuses the grammar of this request: {'; '.join(messages)}")
    unique = tuple(dict.fromkeys(_note_path(n, names) for n in notes))
    request = dict(tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls, dialect=d,
                   max_calls=max_calls, first_index=first_index, reasoning=reasoning, content=content,
                   response=response, after_reasoning=start is not None, **options)
    request["additional_properties"] = additional_properties
    return Constraint(dialect=d, lark=lark, exact=not unique, notes=unique, schema_notes=prepared,
                      schemas={name: fn.get("parameters") for name, fn in fns.items()}, request=request)
