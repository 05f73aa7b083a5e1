"""A small GBNF recognizer for the tests (the subset kimi_chat.grammar writes, which is llama.cpp's
syntax): special-token references match their spelling; :func:`sample` draws random texts of a grammar.
Independent of kimi_chat.grammar's code."""

from __future__ import annotations

import random
import re
import sys
from functools import lru_cache
from typing import Any

from kimi_chat import markers as M


def _parse_char(s: str, i: int) -> tuple[str, int]:
    if s[i] == "\\":
        c = s[i + 1]
        if c == "x":
            return chr(int(s[i + 2 : i + 4], 16)), i + 4
        if c == "u":
            return chr(int(s[i + 2 : i + 6], 16)), i + 6
        if c == "U":
            return chr(int(s[i + 2 : i + 10], 16)), i + 10
        return {"n": "\n", "r": "\r", "t": "\t"}.get(c, c), i + 2
    return s[i], i + 1


class Gbnf:
    """A parsed GBNF grammar; :meth:`matches` says whether a whole text is in its language."""

    def __init__(self, text: str) -> None:
        self.rules: dict[str, object] = {}
        for line in text.splitlines():
            if not line.strip():
                continue
            name, body = line.split(" ::= ", 1)
            node, i = self._alt(body, 0)
            assert i == len(body), (line, i)
            self.rules[name] = node
        for name in self.rules:
            self._check_refs(self.rules[name])

    def _check_refs(self, node: object) -> None:
        kind = node[0]  # type: ignore[index]
        if kind == "ref":
            assert node[1] in self.rules, f"undefined rule {node[1]}"  # type: ignore[index]
        elif kind in ("alt", "seq"):
            for k in node[1]:  # type: ignore[index]
                self._check_refs(k)
        elif kind == "rep":
            self._check_refs(node[1])  # type: ignore[index]

    def _ws(self, s: str, i: int) -> int:
        while i < len(s) and s[i] == " ":
            i += 1
        return i

    def _alt(self, s: str, i: int) -> tuple[object, int]:
        alts = []
        seq, i = self._seq(s, i)
        alts.append(seq)
        while i < len(s) and s[i] == "|":
            seq, i = self._seq(s, self._ws(s, i + 1))
            alts.append(seq)
        return ("alt", tuple(alts)), i

    def _seq(self, s: str, i: int) -> tuple[object, int]:
        items = []
        while i < len(s) and s[i] not in "|)":
            item, i = self._atom(s, i)
            # suffixes
            if i < len(s) and s[i] in "?*+":
                lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[s[i]]
                item = ("rep", item, lo, hi)
                i += 1
            elif i < len(s) and s[i] == "{":
                j = s.index("}", i)
                spec = s[i + 1 : j]
                if "," in spec:
                    a, b = spec.split(",")
                    item = ("rep", item, int(a), int(b) if b else None)
                else:
                    item = ("rep", item, int(spec), int(spec))
                i = j + 1
            items.append(item)
            i = self._ws(s, i)
        return ("seq", tuple(items)), i

    def _atom(self, s: str, i: int) -> tuple[object, int]:
        c = s[i]
        if c == '"':
            i += 1
            out = []
            while s[i] != '"':
                ch, i = _parse_char(s, i)
                out.append(ch)
            return ("lit", "".join(out)), i + 1
        if c == "[":
            i += 1
            neg = s[i] == "^"
            if neg:
                i += 1
            ranges = []
            while s[i] != "]":
                a, i = _parse_char(s, i)
                b = a
                if s[i] == "-" and s[i + 1] != "]":
                    b, i = _parse_char(s, i + 1)
                ranges.append((a, b))
            return ("cls", neg, tuple(ranges)), i + 1
        if c == "<":
            j = s.index(">", i)
            tok = s[i : j + 1]
            if tok.startswith("<["):
                tok = M.BY_ID[int(tok[2:-2])].text
            return ("tok", tok), j + 1
        if c == "(":
            node, i = self._alt(s, self._ws(s, i + 1))
            assert s[i] == ")"
            return node, i + 1
        m = re.compile(r"[a-zA-Z0-9-]+").match(s, i)
        assert m, s[i:]
        return ("ref", m.group()), m.end()

    def matches(self, text: str, root: str = "root") -> bool:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20000))  # the matcher recurses per character; restored below
        try:
            return self._matches(text, root)
        finally:
            sys.setrecursionlimit(limit)

    def _matches(self, text: str, root: str) -> bool:
        memo: dict[tuple[int, int], frozenset[int]] = {}

        def m(node, pos: int) -> frozenset[int]:
            key = (id(node), pos)
            if key in memo:
                return memo[key]
            kind = node[0]
            if kind == "lit" or kind == "tok":
                r = frozenset([pos + len(node[1])]) if text.startswith(node[1], pos) else frozenset()
            elif kind == "cls":
                if pos < len(text):
                    ch = text[pos]
                    inside = any(a <= ch <= b for a, b in node[2])
                    r = frozenset([pos + 1]) if inside != node[1] else frozenset()
                else:
                    r = frozenset()
            elif kind == "ref":
                r = m(self.rules[node[1]], pos)
            elif kind == "alt":
                r = frozenset().union(*(m(a, pos) for a in node[1]))
            elif kind == "seq":
                cur = frozenset([pos])
                for it in node[1]:
                    cur = frozenset().union(*(m(it, p) for p in cur)) if cur else cur
                r = cur
            else:  # rep
                _, inner, lo, hi = node
                cur, out, n = frozenset([pos]), set(), 0
                if lo == 0:
                    out.add(pos)
                while cur and (hi is None or n < hi):
                    cur = frozenset().union(*(m(inner, p) for p in cur)) - ({pos} if hi is None else set())
                    n += 1
                    if n >= lo:
                        out |= cur
                    if hi is None and n > len(text) + 1:
                        break
                r = frozenset(out)
            memo[key] = r
            return r

        return len(text) in m(("ref", root), 0)


@lru_cache(maxsize=None)
def compiled(text: str) -> Gbnf:
    return Gbnf(text)


def accepts(grammar: str, text: str) -> bool:
    return compiled(grammar).matches(text)


SAMPLE_CHARS = list("abcxyz AZ09_-.,:;!?é中🦄\n\t\"\\/{}[]<>|&=") + ["<|", "[E", "|>"]
"""The characters :func:`sample` draws character classes from (marker starts included)."""


def sample(g: Gbnf, rnd: random.Random, node: Any = ("ref", "root"), depth: int = 0) -> str:
    """A random text of the grammar (biased to stop recursion as it deepens)."""
    kind = node[0]
    if kind in ("lit", "tok"):
        return node[1]
    if kind == "ref":
        return sample(g, rnd, g.rules[node[1]], depth + 1)
    if kind == "alt":
        alts = node[1]
        if depth > 40:  # prefer an alternative that ends: the empty one, else the shortest literal-looking one
            alts = [a for a in alts if a == ("seq", ())] or alts
        return sample(g, rnd, rnd.choice(alts), depth)
    if kind == "seq":
        return "".join(sample(g, rnd, i, depth) for i in node[1])
    if kind == "rep":
        _, inner, lo, hi = node
        top = lo + (0 if depth > 40 else 3)
        n = rnd.randint(lo, top if hi is None else min(hi, top))
        return "".join(sample(g, rnd, inner, depth + 1) for _ in range(n))
    neg, ranges = node[1], node[2]
    pool = [c for piece in SAMPLE_CHARS for c in piece]
    ok = [c for c in pool if any(a <= c <= b for a, b in ranges) != neg]
    return rnd.choice(ok)
