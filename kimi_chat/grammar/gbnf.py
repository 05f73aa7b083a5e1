"""GBNF primitives (llama.cpp's grammar syntax): literals and character classes with escaping, rule
names, an ordered rule set, alternation / option helpers, text that avoids given strings, and
pruning of unreachable rules. Nothing here knows about Kimi or JSON."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

from ..errors import KimiChatError

__all__ = [
    "GrammarError",
    "escape_char",
    "literal",
    "char_class",
    "slug",
    "Rules",
    "alternation",
    "optional",
    "is_rule_name",
    "avoiding",
]


class GrammarError(KimiChatError, ValueError):
    """The request cannot be turned into a grammar (unknown named tool, unsupported schema...)."""


def escape_char(c: str, in_class: bool) -> str:
    """One character as GBNF writes it: ASCII letters and digits (and a space outside a class) as
    themselves, everything else as ``\\xHH`` / ``\\uHHHH`` / ``\\UHHHHHHHH``."""
    o = ord(c)
    if c.isalnum() and o < 128:
        return c
    if c == " " and not in_class:
        return c
    if o < 0x80:
        return f"\\x{o:02X}"
    if o <= 0xFFFF:
        return f"\\u{o:04X}"
    return f"\\U{o:08X}"


def literal(s: str) -> str:
    """A GBNF string literal matching exactly ``s``."""
    out = []
    for c in s:
        if c.isascii() and c.isprintable() and c not in '"\\':
            out.append(c)
        else:
            out.append(escape_char(c, False))
    return '"' + "".join(out) + '"'


def char_class(chars: Iterable[str], negate: bool, extra: str = "") -> str:
    """A character class of ``chars`` (sorted, escaped), negated with ``negate``; ``extra`` is
    appended verbatim (already GBNF, e.g. a range ``\\x00-\\x1F``)."""
    body = "".join(escape_char(c, True) for c in sorted(set(chars))) + extra
    return "[" + ("^" if negate else "") + body + "]"


_NAME_RE = re.compile(r"[^A-Za-z0-9]+")
_RULE_NAME = re.compile(r"[A-Za-z0-9-]+")


def slug(s: str) -> str:
    """A rule-name fragment for ``s``: lower case, runs of other characters as ``-`` (``x`` if
    nothing is left)."""
    return _NAME_RE.sub("-", s).strip("-").lower() or "x"


def is_rule_name(expr: str) -> bool:
    """Whether ``expr`` is a bare rule reference (so it needs no rule of its own)."""
    return _RULE_NAME.fullmatch(expr) is not None


class Rules:
    """An ordered set of GBNF rules with unique names (``fresh`` reserves, ``set`` defines)."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def fresh(self, base: str) -> str:
        """Reserve and return an unused name starting with ``base``."""
        name, k = base, 1
        while name in self.rules:
            k += 1
            name = f"{base}-{k}"
        self.rules[name] = ""  # reserve
        return name

    def set(self, name: str, body: str) -> str:
        """Define (or redefine) rule ``name``; returns ``name``."""
        self.rules[name] = body
        return name

    def text(self) -> str:
        """Every rule, in definition order, one ``name ::= body`` line each."""
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())

    def pruned(self, root: str = "root") -> str:
        """:meth:`text` without the rules unreachable from ``root``."""
        ref = re.compile(r"(?<![\"<\\\[\w-])([a-z][a-z0-9-]*)(?![\w-])")
        seen = {root}
        todo = [root]
        while todo:
            body = self.rules[todo.pop()]
            # ignore literals, classes and token references when looking for rule references
            stripped = re.sub(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|<[^>]*>', " ", body)
            for m in ref.finditer(stripped):
                n = m.group(1)
                if n in self.rules and n not in seen:
                    seen.add(n)
                    todo.append(n)
        return "".join(f"{n} ::= {b}\n" for n, b in self.rules.items() if n in seen)


def alternation(items: Sequence[str]) -> str:
    """``(a | b | ...)`` of the distinct ``items`` (an empty item is ``""``); one item as itself."""
    items = list(dict.fromkeys(items))
    if len(items) == 1:
        return items[0]
    return "(" + " | ".join(i if i else '""' for i in items) + ")"


def optional(x: str) -> str:
    """``x?`` (parenthesised when ``x`` is not a single item); nothing for an empty ``x``."""
    if not x:
        return ""
    return f"({x})?" if " " in x or "|" in x else f"{x}?"


def avoiding(rules: Rules, forbidden: Collection[str], prefix: str, json_string: bool) -> str:
    """Define rules ``PREFIX-0``, ``PREFIX-1``... for text none of whose prefixes contains one of the
    ``forbidden`` strings (a DFA, Aho-Corasick over them, one rule per state); returns the start
    rule's name. ``json_string``: the characters of a JSON string (no raw quote, backslash or
    control character; escapes are allowed and reset the automaton). Otherwise any character but
    NUL."""
    forbidden = [f for f in forbidden if f]
    nodes = sorted({f[:k] for f in forbidden for k in range(len(f))}, key=lambda s: (len(s), s)) or [""]
    index = {s: i for i, s in enumerate(nodes)}
    sigma = sorted({c for f in forbidden for c in f})

    def step(q: str, c: str) -> int | None:
        s = q + c
        if any(s.endswith(f) for f in forbidden):
            return None
        for k in range(len(s)):
            if s[k:] in index:
                return index[s[k:]]
        return 0

    names = [f"{prefix}-{i}" for i in range(len(nodes))]
    base_excl = '"\\' if json_string else ""
    ctrl = "\\x00-\\x1F" if json_string else "\\x00"
    escape = '"\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) ' + names[0] if json_string else ""
    for i, q in enumerate(nodes):
        special = {}
        dead = []
        for c in sigma:
            if c in base_excl:
                continue
            t = step(q, c)
            if t is None:
                dead.append(c)
            elif t != 0:
                special[c] = t
        alts = [char_class(list(special) + dead + list(base_excl), True, ctrl) + " " + names[0]]
        alts += [f"{literal(c)} {names[t]}" for c, t in special.items()]
        if escape:
            alts.append(escape)
        rules.set(names[i], "(" + " | ".join(alts) + ")?")
    return names[0]
