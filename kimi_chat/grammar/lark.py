"""The Lark writer (llguidance's grammar syntax) of the walk :mod:`kimi_chat.grammar.translate` runs.

The walk writes its rules in the syntax GBNF and llguidance's Lark share (string literals with
``\\x``/``\\u`` escapes, ``<|token|>`` / ``<[id]>`` token references, ``( | )``, ``?``, ``*``, ``{m,n}``,
rule names of lower-case letters, digits and ``-``); :func:`to_lark` prints the rule set as Lark:

* ``name ::= body`` becomes ``name: body``, and ``start: root`` is added;
* GBNF character classes (``[^<\\x5B]{1,64}``) become regex terminals (``/[^<\\x5B]{1,64}/``);
* a rule whose body is ``%json {…}`` (a schema, :func:`json_rule`) is kept as it is;
* a rule whose body is ``%terminal EXPR`` (:func:`terminal_rule`: an llguidance terminal expression,
  regexes combined with ``|``, ``&`` and ``~``) becomes a terminal of that expression and the rule
  naming it;
* the free-text rule ``text`` is one terminal: any text none of whose substrings is a forbidden
  marker spelling (``/(?s:.*)/ & ~/(?s:.*)(M1|M2|…)(?s:.*)/``). Markers in the grammar are special
  tokens (``<|tool_call_begin|>``): typed text (its bytes) can never satisfy them, and free text
  cannot spell one either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .gbnf import Rules

__all__ = ["to_lark", "lark_string", "json_rule", "terminal_rule", "regex_escape", "text_terminal", "LarkJson", "LarkTranslatorMixin", "build_lark"]

_PIECE = re.compile(r'"(?:[^"\\]|\\.)*"|<[^>]*>|(\[(?:[^\]\\]|\\.)*\](?:\{\d*(?:,\d*)?\})?)')
_TEXT_THEN_LITERAL = re.compile(r'(?<![\w-])text ("(?:[^"\\]|\\.)*")')
_RULE_LINE = re.compile(r"^([a-z][a-z0-9-]*) ::= (.*)$")
_REGEX_META = set(r"\.+*?()|[]{}^$#&-~/")


def regex_escape(s: str) -> str:
    """``s`` as a literal inside an llguidance regex (``/…/``)."""
    return "".join("\\" + c if c in _REGEX_META else (c if c.isprintable() else f"\\x{{{ord(c):X}}}") for c in s)


def text_terminal(forbidden: Collection[str]) -> str:
    """The Lark terminal of free text containing none of the ``forbidden`` strings."""
    alts = "|".join(regex_escape(f) for f in sorted(set(forbidden)) if f)
    if not alts:
        return "/(?s:.*)/"
    return f"/(?s:.*)/ & ~/(?s:.*)({alts})(?s:.*)/"


def json_rule(rules: Rules, base: str, schema: Any) -> str:
    """A new rule (named from ``base``) holding ``%json`` of ``schema``; returns its name."""
    return rules.set(rules.fresh(base), "%json " + json.dumps(schema, ensure_ascii=False, sort_keys=False))


_TERMINAL = "%terminal "


def terminal_rule(rules: Rules, base: str, expr: str) -> str:
    """A new rule (named from ``base``) matching the llguidance terminal expression ``expr`` (one lexeme:
    ``/regex/`` pieces combined with ``|``, ``&``, ``~`` and parentheses); returns its name."""
    return rules.set(rules.fresh(base), _TERMINAL + expr)


_STRING_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|U[0-9A-Fa-f]{8}|.)")


def lark_string(literal: str) -> str:
    r"""A GBNF string literal (``"a\x22b"``) as every llguidance version reads a Lark string: ``\xHH``
    (which llguidance 1.7, the one vLLM 0.33 pins, refuses) as ``\"`` / ``\\`` / ``\u00HH``,
    ``\UHHHHHHHH`` (which no version takes) as the character itself; other escapes as they are."""

    def sub(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] == "x" and len(e) == 3:
            o = int(e[1:], 16)
            return '\\"' if o == 0x22 else "\\\\" if o == 0x5C else f"\\u{o:04X}"
        if e[0] == "U" and len(e) == 9:
            return chr(int(e[1:], 16))
        return m.group(0)

    return _STRING_ESCAPE.sub(sub, literal)


def _body(body: str) -> str:
    if body.startswith("%json "):
        return body

    def piece(m: re.Match[str]) -> str:
        if m.group(1):
            return f"/{m.group(1)}/"
        return lark_string(m.group(0)) if m.group(0).startswith('"') else m.group(0)

    return _PIECE.sub(piece, body)


def to_lark(rules: Rules, forbidden: Collection[str], root: str = "root") -> str:
    """The rules reachable from ``root`` as an llguidance Lark grammar (module docstring); ``text``
    (when used) avoids ``forbidden``."""
    rules.set("text", "TEXT")
    lines = ["start: " + root]
    suffixed: dict[str, str] = {}

    def until(m: re.Match[str]) -> str:
        # free text followed by literal text: llguidance's lexer does not backtrack out of a greedy
        # lexeme, so the text ends lazily at the literal (its suffix), which it cannot contain
        if m.group(1) not in suffixed:
            suffixed[m.group(1)] = f"text-until-{len(suffixed)}"
        return suffixed[m.group(1)]

    for line in rules.pruned(root).splitlines():
        m = _RULE_LINE.match(line)
        if m is None:  # pragma: no cover - Rules writes one rule per line
            raise ValueError(f"not a rule line: {line!r}")
        if m.group(2).startswith(_TERMINAL):
            term = m.group(1).upper().replace("-", "_")
            lines += [f"{m.group(1)}: {term}", f"{term}: {m.group(2)[len(_TERMINAL):]}"]
            continue
        body = m.group(2) if m.group(2).startswith("%json ") else _TEXT_THEN_LITERAL.sub(until, m.group(2))
        lines.append(f"{m.group(1)}: {_body(body)}")
    lines += [f"{name}[suffix={lark_string(lit)}]: TEXT" for lit, name in suffixed.items()]
    if "text: TEXT" in lines or suffixed:
        lines.append("TEXT: " + text_terminal(forbidden))
    return "\n".join(lines) + "\n"


class LarkJson:
    """The JSON writer of the Lark walk, in place of :class:`~kimi_chat.grammar.json_schema.JsonSchemaTranslator`
    (same ``schema`` / ``typed`` methods): each schema position becomes a ``%json`` rule of the schema
    as :func:`~kimi_chat.grammar.schemas.prepare` makes it (the root's ``$defs`` attached, so a
    sub-schema's references resolve), and what is not enforced exactly is collected in ``notes``."""

    def __init__(self, rules: Rules) -> None:
        self.r = rules
        self.prefix = ""
        self.notes: list[Any] = []
        self._done: dict[tuple[str, str], str] = {}

    def _rule(self, schema: Any, root: Any, name: str, path: str) -> str:
        from .schemas import prepare  # llguidance: only where a Lark grammar is built

        if isinstance(schema, dict) and schema is not root and isinstance(root, dict) and "$defs" in root:
            schema = {**schema, "$defs": root["$defs"]}
        key = (json.dumps(schema, sort_keys=True, default=str), path)
        if key not in self._done:
            prepared = prepare(schema, path)
            self.notes.extend(prepared.notes)
            self._done[key] = json_rule(self.r, f"{name}-json", prepared.schema)
        return self._done[key]

    def schema(self, schema: Any, root: Any, name: str, path: str) -> str:
        """A value of ``schema`` (``root``: the schema its references point into)."""
        return self._rule(schema, root, name, path)

    def typed(self, ty: str, schema: Any, root: Any, name: str, path: str) -> str:
        """A value of ``schema`` of JSON type ``ty``."""
        return self._rule({**schema, "type": ty}, root, name, path)


class LarkTranslatorMixin:
    """What every family's Lark translator adds to its GBNF one (put it first among the bases):
    ``notes`` for what the family's own translation does not enforce exactly. (The reply of a
    ``response_format`` is the walk's, :meth:`~kimi_chat.grammar.translate.FormatTranslator.reply`:
    here a ``%json`` of its schema.)"""

    notes: list[Any]


def build_lark(translator: type[Any], grammar: Mapping[str, Any], tools: Sequence[Any] | None, tool_choice: Any,
               parallel_tool_calls: bool, dialect: Any, max_calls: int, first_index: int,
               token_markers: Collection[str] | None, reasoning: bool, content: bool, options: Mapping[str, Any],
               response_schema: Any, start_rule: str | None = None) -> tuple[str, tuple[Any, ...]]:
    """The Lark grammar of ``translator`` (a family's GBNF translator with :class:`LarkTranslatorMixin`)
    over ``grammar`` for one request, and the notes of what it does not enforce exactly."""
    from .translate import walk

    writers: list[LarkJson] = []

    def json_writer(rules: Rules, forbidden: Collection[str]) -> LarkJson:
        writers.append(LarkJson(rules))
        return writers[-1]

    def configure(tr: Any) -> None:
        tr.notes = []

    rules, tr = walk(translator, grammar, tools, tool_choice, parallel_tool_calls, dialect, max_calls, first_index,
                     token_markers, reasoning, content, options, json=json_writer, configure=configure,
                     reply_schema=response_schema, start_rule=start_rule)
    lark = to_lark(rules, tr.forbidden)
    return lark, tuple(tr.notes) + tuple(n for w in writers for n in w.notes)
