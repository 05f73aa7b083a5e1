"""Raw strings as llguidance terminals: the text of a string value the format writes without JSON quoting
(a Kimi-K3 ``string`` argument), held to its schema by one terminal expression (llguidance's regexes
combined with ``|``, ``&`` and ``~``: :func:`kimi_chat.grammar.lark.terminal_rule`).

:func:`string_terminal` reads the schema as JSON Schema reads it for a string instance:

* ``minLength`` / ``maxLength`` (code points): ``/(?s:.{m,n})/``;
* ``pattern`` (ECMA-262, matched anywhere unless anchored): the pattern made a whole-text match
  (``(?s:.*)`` where a top-level alternative is not anchored by ``^`` / ``$``), ``\\d`` and ``\\w`` ASCII
  as in JavaScript (``llguidance.regex_to_lark``); a pattern llguidance's regex engine refuses, or
  with an anchor inside a group, is noted;
* ``format``: the formats llguidance enforces for JSON strings (:data:`FORMATS`), each a regular
  expression written here from its RFC grammar, as strict as llguidance's; another format is noted
  as llguidance notes it for a JSON string;
* ``enum`` / ``const``: the string values that satisfy the rest of the schema (``jsonschema``);
* ``allOf`` (``&``), ``anyOf`` (``|``), ``oneOf`` (exactly one: each branch ``&`` the others
  negated), ``not`` (``~``), ``if``/``then``/``else``, local ``$ref``: composed, exactly;
* ``type`` without ``string``, or ``false``: no string (``None``).

Every raw string is also free text the parser reads as text: no marker spelling inside
(:func:`~kimi_chat.grammar.lark.text_terminal`). Keywords of other types do not apply to a string;
annotations and unknown keywords constrain nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from .gbnf import GrammarError
from .json_schema import resolve_ref
from .lark import regex_escape, text_terminal
from .schemas import Note

__all__ = ["FORMATS", "LLGUIDANCE_FORMATS", "string_terminal", "pattern_regex"]

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "|".join([  # RFC 3986 IPv6address
    rf"(?:{_H16}:){{6}}{_LS32}",
    rf"::(?:{_H16}:){{5}}{_LS32}",
    rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_DAY = r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-9]))"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DUR_T = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_D = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_ATEXT = r"[a-zA-Z0-9!#$%&'*+\-/=?^_`{|}~]"
_UNRESERVED_SUB = r"a-zA-Z0-9\-._~!$&'()*+,;="
_PCT = r"%[0-9a-fA-F]{2}"
_PCHAR = rf"(?:[{_UNRESERVED_SUB}:@]|{_PCT})"
_SEGMENT_NZ = rf"{_PCHAR}+"
_URI = (rf"[a-zA-Z][a-zA-Z0-9+\-.]*:"
        rf"(?://(?:(?:[{_UNRESERVED_SUB}:]|{_PCT})*@)?"
        rf"(?:\[(?:{_IPV6}|v[0-9a-fA-F]+\.[{_UNRESERVED_SUB}:]+)\]|{_IPV4}|(?:[{_UNRESERVED_SUB}]|{_PCT})*)"
        rf"(?::[0-9]*)?(?:/{_PCHAR}*)*"
        rf"|/(?:{_SEGMENT_NZ}(?:/{_PCHAR}*)*)?|{_SEGMENT_NZ}(?:/{_PCHAR}*)*|)"
        rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?")

FORMATS: Mapping[str, str] = {
    "date": _DAY,
    "time": _TIME,
    "date-time": rf"{_DAY}[tT]{_TIME}",
    "duration": rf"P(?:{_DUR_D}(?:{_DUR_T})?|{_DUR_T}|[0-9]+W)",
    "email": rf"{_ATEXT}+(?:\.{_ATEXT}+)*@(?:{_LABEL}(?:\.{_LABEL})*|\[{_IPV4}\])",
    "hostname": rf"{_LABEL}(?:\.{_LABEL})*",
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "uri": _URI,
}
"""Format -> the regular expression (whole-text match) of a raw string value of that format."""

LLGUIDANCE_FORMATS = frozenset(FORMATS)
"""The ``format`` values llguidance enforces on JSON strings (its documentation's list)."""

_ANY = "/(?s:.*)/"
_MAX_ONE_OF = 4


def pattern_regex(pattern: str) -> str | None:
    """``pattern`` (JSON Schema: ECMA-262, matched anywhere in the text) as an llguidance regex of the
    whole text, or ``None`` when it holds an anchor inside a group (not translated)."""
    import llguidance

    alts, depth, start = [], 0, 0
    for i, c in _unquoted(pattern):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            alts.append(pattern[start:i])
            start = i + 1
    alts.append(pattern[start:])
    out = []
    for alt in alts:
        head = alt.startswith("^")
        tail = alt.endswith("$") and not _escaped_at(alt, len(alt) - 1)
        core = alt[1 if head else 0: len(alt) - 1 if tail else len(alt)]
        if _has_anchor(core):
            return None
        out.append(("" if head else "(?s:.*)") + f"(?:{core})" + ("" if tail else "(?s:.*)"))
    return llguidance.regex_to_lark("|".join(out), "dw")


def _escaped_at(s: str, i: int) -> bool:
    n = 0
    while i - 1 - n >= 0 and s[i - 1 - n] == "\\":
        n += 1
    return n % 2 == 1


def _unquoted(s: str) -> Iterator[tuple[int, str]]:
    """``(index, char)`` of each character of regex ``s`` that is neither escaped nor inside a character class
    (a class's opening ``[`` is yielded, what follows it up to its ``]`` is not)."""
    cls, esc = False, False
    for i, c in enumerate(s):
        if esc:
            esc = False
        elif c == "\\":
            esc = True
        elif cls:
            cls = c != "]"
        else:
            cls = c == "["
            yield i, c


def _has_anchor(s: str) -> bool:
    return any(c in "^$" for _, c in _unquoted(s))


def _lark_regex(regex: str) -> str:
    import llguidance

    return llguidance.regex_to_lark(regex, "")


def _regex_ok(regex: str) -> bool:
    import llguidance

    is_error, _ = llguidance.LLMatcher.validate_grammar_with_warnings(
        llguidance.grammar_from("lark", f"start: A\nA: /{regex}/\n"))
    return not is_error


def _join(path: str, key: str) -> str:
    return f"{path}.{key}"


def string_terminal(schema: Any, root: Any, forbidden: Collection[str], path: str, notes: list[Note],
                    valid: Callable[[Any, Any], bool]) -> str | None:
    """The terminal expression of the raw strings ``schema`` accepts (module docstring), ``None`` when it
    accepts none. ``root`` is the document ``$ref`` resolves in; what is not enforced is appended to
    ``notes`` (named from ``path``); ``valid(value, schema)`` checks an ``enum``/``const`` value against
    the whole schema."""
    body = _terminal(schema, root, path, notes, valid, 0)
    if body is None:
        return None
    text = text_terminal(forbidden)
    return text if body == _ANY else f"({text}) & {body}"


def _terminal(schema: Any, root: Any, path: str, notes: list[Note], valid: Callable[[Any, Any], bool],
              depth: int) -> str | None:
    if depth > 64:
        raise GrammarError(f"{path}: schema nested too deep (a $ref cycle?)")
    if schema is True or schema == {}:
        return _ANY
    if schema is False:
        return None
    if not isinstance(schema, Mapping):
        raise GrammarError(f"{path}: a schema must be an object or a boolean, got {type(schema).__name__}")
    t = schema.get("type")
    if t is not None and "string" not in (t if isinstance(t, list) else [t]):
        return None
    if "const" in schema or "enum" in schema:
        vals = [schema["const"]] if "const" in schema else schema.get("enum")
        if not isinstance(vals, list):
            raise GrammarError(f"{path}/enum: expected a list")
        keep = [v for v in dict.fromkeys(v for v in vals if isinstance(v, str)) if valid(v, schema)]
        return "(" + " | ".join(f"/{regex_escape(v)}/" if v else "/(?:)/" for v in keep) + ")" if keep else None
    parts: list[str] = []

    def sub(s: Any, where: str) -> str | None:
        return _terminal(s, root, where, notes, valid, depth + 1)

    lo, hi = schema.get("minLength"), schema.get("maxLength")
    if lo is not None or hi is not None:
        lo = int(lo) if isinstance(lo, (int, float)) and not isinstance(lo, bool) and lo > 0 else 0
        if isinstance(hi, (int, float)) and not isinstance(hi, bool):
            if hi < lo:
                return None
            parts.append(f"/(?s:.{{{lo},{int(hi)}}})/")
        elif lo:
            parts.append(f"/(?s:.{{{lo},}})/")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        rx = pattern_regex(pattern)
        if rx is None or not _regex_ok(rx):
            notes.append(Note(_join(path, "pattern"), "the pattern uses regex features llguidance lacks "
                                                      "(look-around, anchors inside groups, …): not enforced"))
        else:
            parts.append(f"/{rx}/")
    fmt = schema.get("format")
    if isinstance(fmt, str):
        if fmt in FORMATS:
            parts.append(f"/{_lark_regex(FORMATS[fmt])}/")
        else:
            notes.append(Note(_join(path, "format"), f"format {fmt!r} is not enforced by llguidance"))
    if "$ref" in schema:
        target = sub(resolve_ref(schema["$ref"], root, path), str(schema["$ref"]))
        if target is None:
            return None
        parts.append(f"({target})")
    if "allOf" in schema and isinstance(schema["allOf"], list):
        for j, s in enumerate(schema["allOf"]):
            x = sub(s, f"{path}.allOf[{j}]")
            if x is None:
                return None
            parts.append(f"({x})")
    if "anyOf" in schema and isinstance(schema["anyOf"], list):
        xs = [x for j, s in enumerate(schema["anyOf"]) if (x := sub(s, f"{path}.anyOf[{j}]")) is not None]
        if not xs:
            return None
        parts.append("(" + " | ".join(f"({x})" for x in xs) + ")")
    if "oneOf" in schema and isinstance(schema["oneOf"], list):
        xs = [x for j, s in enumerate(schema["oneOf"]) if (x := sub(s, f"{path}.oneOf[{j}]")) is not None]
        if not xs:
            return None
        if len(xs) > _MAX_ONE_OF:
            notes.append(Note(_join(path, "oneOf"), "enforced as anyOf (more than one branch may match)"))
            parts.append("(" + " | ".join(f"({x})" for x in xs) + ")")
        elif len(xs) == 1:
            parts.append(f"({xs[0]})")
        else:
            only = [" & ".join([f"({x})"] + [f"~({y})" for k, y in enumerate(xs) if k != i]) for i, x in enumerate(xs)]
            parts.append("(" + " | ".join(f"({o})" for o in only) + ")")
    if "not" in schema:
        x = sub(schema["not"], f"{path}.not")
        if x == _ANY:
            return None
        if x is not None:
            parts.append(f"~({x})")
    if "if" in schema:
        cond = sub(schema["if"], f"{path}.if")
        then = sub(schema.get("then", True), f"{path}.then")
        other = sub(schema.get("else", True), f"{path}.else")
        alts = []
        if cond is not None and then is not None:
            alts.append(f"({cond}) & ({then})")
        if other is not None:
            alts.append(f"~({cond}) & ({other})" if cond is not None else f"({other})")
        if not alts:
            return None
        parts.append("(" + " | ".join(f"({a})" for a in alts) + ")")
    if not parts:
        return _ANY
    return parts[0] if len(parts) == 1 else " & ".join(parts)
