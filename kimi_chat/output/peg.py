"""PEG expressions over marker tokens and text, and their compiler to a deterministic state table.

This module knows nothing about any model family: a format module (:mod:`kimi_chat.families.k2.format`)
hands it the terminal classes (marker spellings by class), the rules and the start rule as data.

* Expressions: :class:`Tok` (one marker of a terminal class), :class:`Text` (a run of non-marker
  text, routed to a result field), :class:`Seq`, :class:`Choice` (ordered), :class:`Opt`,
  :class:`Star`, :class:`Ahead` (``&X``, zero-width), :class:`Eof` (``!.``) and :class:`Rest`
  (everything left, markers included). :class:`Group` names the spans a parser reacts to and
  :class:`Recover` marks the tolerant alternatives: a parser accepts them (with a warning when they
  carry one), a generation grammar (GBNF) leaves them out. :class:`Ref` names another rule.
* :func:`compile_machine` translates a start rule into a :class:`Machine`: a position automaton
  whose states are the grammar's terminals and whose transitions follow the PEG's ordered choice,
  plus the lexer tables of the active marker spellings (:class:`MarkerTable`).
* :func:`grammar_text` prints rules in PEG notation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Final, Union

__all__ = [
    "STRAY",
    "AS_TEXT",
    "CUT",
    "TEXT",
    "WS",
    "EOF",
    "Expr",
    "Tok",
    "Text",
    "Seq",
    "Choice",
    "Opt",
    "Star",
    "Ahead",
    "Eof",
    "Rest",
    "Group",
    "Recover",
    "Ref",
    "seq",
    "alt",
    "opt",
    "star",
    "recover",
    "grammar_text",
    "MarkerTable",
    "Transition",
    "State",
    "Machine",
    "compile_machine",
]

STRAY: Final = "STRAY"
"""Class of every marker spelling the grammar never accepts: always dropped by a parser."""
AS_TEXT: Final = "AS_TEXT"
"""The class of marker-shaped spellings a parse cuts out only to warn about them, and keeps as text: a
spelling of this machine's that is not a marker here (the reasoning markers without reasoning), another
family's marker, a reserved token's name (:meth:`MarkerTable.with_text`)."""
CUT: Final = "CUT"
"""Class of a token a lexer found cut short by the end of the input (a prefix of a K3 tag, see
:mod:`kimi_chat.families.k3.tags`): dropped by a parser, which then reports the turn truncated."""
TEXT: Final = "TEXT"
"""Pseudo-terminal: a run of text containing a non-whitespace character."""
WS: Final = "WS"
"""Pseudo-terminal: a run of whitespace-only text."""
EOF: Final = "EOF"
"""Pseudo-terminal: end of input."""

# --------------------------------------------------------------------------------------------------
# Expressions


class Expr:
    """A PEG expression. Subclasses are frozen dataclasses; ``str()`` gives PEG notation."""

    __slots__ = ()

    def _prec(self) -> int:  # 0 choice, 1 sequence, 2 atom/suffix
        return 2

    def _wrap(self, prec: int) -> str:
        s = str(self)
        return f"({s})" if self._prec() < prec else s


@dataclass(frozen=True, eq=False)
class Tok(Expr):
    """One marker of terminal class ``cls`` (a key of the format's terminal classes)."""

    cls: str

    def __str__(self) -> str:
        return self.cls


@dataclass(frozen=True, eq=False)
class Text(Expr):
    """A run of text (no markers), possibly empty, routed to ``field``; ``ws_only``: whitespace only."""

    field: str
    ws_only: bool = False

    def __str__(self) -> str:
        return f"{'WS' if self.ws_only else 'TEXT'}:{self.field}"


@dataclass(frozen=True, eq=False)
class Seq(Expr):
    """Sequence."""

    items: tuple[Expr, ...]

    def _prec(self) -> int:
        return 1

    def __str__(self) -> str:
        return " ".join(i._wrap(2 if isinstance(i, Seq) else 1) for i in self.items)


@dataclass(frozen=True, eq=False)
class Choice(Expr):
    """Ordered choice: the first alternative that applies wins."""

    alts: tuple[Expr, ...]

    def _prec(self) -> int:
        return 0

    def __str__(self) -> str:
        return " / ".join(a._wrap(1) for a in self.alts)


@dataclass(frozen=True, eq=False)
class Opt(Expr):
    """Optional (``x?``)."""

    expr: Expr

    def __str__(self) -> str:
        return self.expr._wrap(2) + "?"


@dataclass(frozen=True, eq=False)
class Star(Expr):
    """Greedy repetition (``x*``)."""

    expr: Expr

    def __str__(self) -> str:
        return self.expr._wrap(2) + "*"


@dataclass(frozen=True, eq=False)
class Ahead(Expr):
    """Positive lookahead ``&CLS``: the next token is ``cls``; consumes nothing."""

    cls: str

    def __str__(self) -> str:
        return "&" + self.cls


@dataclass(frozen=True, eq=False)
class Eof(Expr):
    """End of input (``!.``)."""

    def __str__(self) -> str:
        return "!."


@dataclass(frozen=True, eq=False)
class Rest(Expr):
    """Everything that is left, markers included (``.*``), routed to ``field``."""

    field: str

    def __str__(self) -> str:
        return f".*:{self.field}"


@dataclass(frozen=True, eq=False)
class Group(Expr):
    """A named span; the parser acts when it is entered and left."""

    name: str
    expr: Expr

    def __str__(self) -> str:
        return f"@{self.name}({self.expr})"


@dataclass(frozen=True, eq=False)
class Recover(Expr):
    """A tolerant alternative: accepted by the parser, with warning ``why`` (if any) when entered;
    not part of the format a model should produce (a generation grammar leaves it out)."""

    expr: Expr
    kind: str = ""
    why: str | None = None

    def __str__(self) -> str:
        return "~" + self.expr._wrap(2)


@dataclass(frozen=True, eq=False)
class Ref(Expr):
    """A reference to another rule of the grammar."""

    name: str

    def __str__(self) -> str:
        return self.name


ExprLike = Union[Expr, str]


def _x(e: ExprLike) -> Expr:
    return Ref(e) if isinstance(e, str) else e


def seq(*items: ExprLike) -> Seq:
    """Sequence of expressions (a ``str`` is a :class:`Ref`)."""
    return Seq(tuple(_x(i) for i in items))


def alt(*alts: ExprLike) -> Choice:
    """Ordered choice (a ``str`` is a :class:`Ref`)."""
    return Choice(tuple(_x(a) for a in alts))


def opt(e: ExprLike) -> Opt:
    """Optional expression."""
    return Opt(_x(e))


def star(e: ExprLike) -> Star:
    """Greedy repetition."""
    return Star(_x(e))


def recover(e: ExprLike, kind: str = "", why: str | None = None) -> Recover:
    """A tolerant alternative (see :class:`Recover`)."""
    return Recover(_x(e), kind, why)



def grammar_text(rules: Mapping[str, Expr]) -> str:
    """The grammar in PEG notation, one rule per line (``~x``: recovery alternative; ``@g(x)``:
    named group; ``TEXT:f``/``WS:f``: text (whitespace-only) routed to field ``f``)."""
    width = max(map(len, rules))
    return "\n".join(f"{name:<{width}} <- {expr}" for name, expr in rules.items())


# --------------------------------------------------------------------------------------------------
# Compilation to a state table


@dataclass(eq=False)
class _Node:
    """A node of the expanded grammar tree (references inlined, every occurrence distinct)."""

    kind: str
    expr: Expr
    kids: list[_Node] = _field(default_factory=list)
    path: tuple[_Node, ...] = ()  # enclosing group / star / recover nodes, outermost first
    follow: list[tuple[_Node, _Node | None]] = _field(default_factory=list)  # (position, via star)
    uid: int = 0

    @property
    def is_position(self) -> bool:
        return self.kind in ("tok", "text", "ahead", "eof", "rest", "accept", "start")


@dataclass(frozen=True)
class Transition:
    """What happens on one terminal in one state: ``events`` in order, then the state becomes ``target``.

    An event is ``("enter"|"exit", group, consumed)`` (``consumed``: the token belongs to the group)
    or ``("warn", kind, why)``.
    """

    target: State
    events: tuple[tuple[str, str, object], ...]


@dataclass(eq=False)
class State:
    """One state of the compiled machine: a terminal position of the grammar."""

    id: int
    kind: str
    """``start``, ``tok``, ``text``, ``rest``, ``accept`` (zero-width positions never become states)."""
    name: str
    """The terminal, in PEG notation, with the rule path (for debugging and ``repr``)."""
    field: str | None = None
    """Result field of text read in this state (text and rest states)."""
    trans: dict[str, Transition] = _field(default_factory=dict)
    """Terminal class (or ``TEXT``/``WS``/``EOF``) -> transition. Missing marker classes are stray."""
    loop: bool = False
    """Text and whitespace both stay in this state with no events (the fast path)."""

    def __repr__(self) -> str:
        return f"<State {self.id} {self.name}>"


def _alternation(spellings: Iterable[str]) -> re.Pattern[str]:
    """One regex matching any of ``spellings`` (none a prefix of another), as a trie: their common
    prefixes written once, so that hundreds of spellings (the reserved tokens' names) cost a scan no
    more than a few do."""
    return re.compile(_trie(sorted(set(spellings))))


def _trie(words: list[str]) -> str:
    """The regex of the sorted, distinct ``words`` (none a prefix of another), factored on their first
    character."""
    if len(words) == 1:
        return re.escape(words[0])
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault(w[0], []).append(w[1:])
    alts = [re.escape(c) + (_trie(rest) if len(rest) > 1 else re.escape(rest[0])) for c, rest in groups.items()]
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


@dataclass(frozen=True)
class MarkerTable:
    """The marker spellings a lexer recognises, and their terminal classes.

    Built by :meth:`build`, which checks what a streaming lexer relies on: no spelling is a prefix of
    another, and a spelling's first character does not occur again inside any spelling (so only the
    last such character of a chunk can start a held-back marker prefix).
    """

    classes: Mapping[str, str]
    """Marker spelling -> terminal class (:data:`STRAY` for spellings the grammar never accepts)."""
    prefixes: frozenset[str]
    """Every proper prefix of a spelling (what a chunk end may hold back)."""
    max_len: int
    """Length of the longest spelling."""
    start_chars: str
    """The characters spellings start with, sorted."""
    pattern: re.Pattern[str]
    """A regex matching any spelling (longest first)."""
    by_start: tuple[re.Pattern[str], ...]
    """Per start character (in :attr:`start_chars` order), a regex matching the spellings that start
    with it: their common first character makes each a C-speed literal-prefix search over plain text."""

    @classmethod
    def build(cls, classes: Mapping[str, str]) -> MarkerTable:
        """The table of ``classes`` (spelling -> class); ``ValueError`` if the spellings break the
        lexer's rules (see the class docstring)."""
        if not classes:
            raise ValueError("a marker table needs at least one spelling")
        starts = {s[0] for s in classes}
        for s in classes:
            if any(c in starts for c in s[1:]):
                raise ValueError(f"marker {s!r} contains a marker start character after its first")
            for o in classes:
                if o != s and o.startswith(s):
                    raise ValueError(f"marker {s!r} is a prefix of {o!r}")
        return cls(
            classes=dict(classes),
            prefixes=frozenset(s[:k] for s in classes for k in range(1, len(s))),
            max_len=max(map(len, classes)),
            start_chars="".join(sorted(starts)),
            pattern=_alternation(classes),
            by_start=tuple(_alternation([s for s in classes if s[0] == c]) for c in sorted(starts)),
        )

    def with_text(self, spellings: Iterable[str]) -> MarkerTable:
        """This table plus ``spellings`` (those it lacks) as :data:`AS_TEXT`: what a parse cuts out to
        warn about, then keeps as text."""
        extra = {s: AS_TEXT for s in spellings if s not in self.classes}
        return MarkerTable.build({**self.classes, **extra}) if extra else self


@dataclass(frozen=True)
class Machine:
    """A compiled start rule plus the lexer table of the active markers."""

    start_rule: str
    start: State
    states: tuple[State, ...]
    markers: MarkerTable
    """The active marker spellings (those of a class made literal are not markers at all)."""

    @property
    def classes(self) -> Mapping[str, str]:
        """Marker spelling -> terminal class (``STRAY`` for markers the grammar never accepts)."""
        return self.markers.classes

    @property
    def prefixes(self) -> frozenset[str]:
        """Every proper prefix of an active marker spelling (what a chunk end may hold back)."""
        return self.markers.prefixes

    @property
    def max_len(self) -> int:
        """Length of the longest active marker spelling."""
        return self.markers.max_len

    @property
    def start_chars(self) -> str:
        """The characters active marker spellings start with."""
        return self.markers.start_chars


def _expand(e: Expr, rules: dict[str, Expr], path: tuple[_Node, ...], stack: tuple[str, ...],
            positions: list[_Node]) -> _Node:
    if isinstance(e, Ref):
        if e.name in stack:
            raise ValueError(f"recursive rule {e.name!r}")
        return _expand(rules[e.name], rules, path, stack + (e.name,), positions)
    kinds = {Tok: "tok", Text: "text", Ahead: "ahead", Eof: "eof", Rest: "rest", Seq: "seq",
             Choice: "choice", Opt: "opt", Star: "star", Group: "group", Recover: "recover"}
    n = _Node(kinds[type(e)], e, path=path)
    if n.is_position:
        n.uid = len(positions) + 1
        positions.append(n)
    elif isinstance(e, (Seq, Choice)):
        n.kids = [_expand(k, rules, path, stack, positions) for k in (e.items if isinstance(e, Seq) else e.alts)]
    else:
        assert isinstance(e, (Opt, Star, Group, Recover))
        inner = path + (n,) if isinstance(e, (Star, Group, Recover)) else path
        n.kids = [_expand(e.expr, rules, inner, stack, positions)]
    return n


def _nullable(n: _Node) -> bool:
    if n.kind in ("text", "rest", "opt", "star"):
        return True
    if n.kind == "seq":
        return all(map(_nullable, n.kids))
    if n.kind == "choice":
        return any(map(_nullable, n.kids))
    if n.kind in ("group", "recover"):
        return _nullable(n.kids[0])
    return False


def _first(n: _Node) -> list[_Node]:
    if n.is_position:
        return [n]
    if n.kind == "seq":
        out: list[_Node] = []
        for k in n.kids:
            out += _first(k)
            if not _nullable(k):
                break
        return out
    return [p for k in n.kids for p in _first(k)]


def _dedupe(edges: list[tuple[_Node, _Node | None]]) -> list[tuple[_Node, _Node | None]]:
    seen: set[int] = set()
    out = []
    for p, via in edges:
        if id(p) not in seen:
            seen.add(id(p))
            out.append((p, via))
    return out


def _walk(n: _Node, cont: list[tuple[_Node, _Node | None]]) -> list[tuple[_Node, _Node | None]]:
    """Set ``follow`` of every position in ``n`` given what may come after ``n``; return the ordered
    entry list of ``n`` (its first positions, then ``cont`` if ``n`` is nullable)."""
    if n.kind == "text":
        n.follow = _dedupe([(n, None)] + cont)
        return n.follow
    if n.kind == "rest":
        n.follow = cont
        return _dedupe([(n, None)] + cont)
    if n.is_position:
        n.follow = cont
        return [(n, None)]
    if n.kind == "seq":
        entry = cont
        for k in reversed(n.kids):
            entry = _walk(k, entry)
        return entry
    if n.kind == "choice":
        return _dedupe([e for k in n.kids for e in _walk(k, cont)])
    if n.kind == "opt":
        return _dedupe(_walk(n.kids[0], cont) + cont)
    if n.kind == "star":
        body = n.kids[0]
        if _nullable(body):
            raise ValueError(f"nullable repetition body: {body.expr}")
        _walk(body, _dedupe([(p, n) for p in _first(body)] + cont))
        return _dedupe([(p, None) for p in _first(body)] + cont)
    return _walk(n.kids[0], cont)  # group, recover


def _matches(q: _Node, t: str) -> bool:
    e = q.expr
    if q.kind == "text":
        return t == WS or (t == TEXT and not e.ws_only)  # type: ignore[attr-defined]
    if q.kind == "tok":
        return t == e.cls  # type: ignore[attr-defined]
    if q.kind in ("eof", "accept"):
        return t == EOF
    if q.kind == "rest":
        return t != EOF
    return False


def _resolve(p: _Node, t: str) -> list[tuple[_Node, _Node | None]] | None:
    """The first (in PEG order) position reachable from ``p`` that takes terminal ``t``, through
    zero-width lookaheads: the path to it as ``(position, star looped through or None)`` pairs,
    lookaheads first, the target last."""

    def search(edges, chain):
        for q, via in edges:
            if q.kind == "ahead":
                if q.expr.cls == t:
                    r = search(q.follow, chain + [(q, via)])
                    if r is not None:
                        return r
            elif _matches(q, t):
                return chain + [(q, via)]
        return None

    return search(p.follow, [])


def _groups(path: tuple[_Node, ...]) -> list[_Node]:
    return [a for a in path if a.kind == "group"]


def _eager_exits(q: _Node) -> list[_Node]:
    """Groups (innermost first) that end as soon as ``q`` is consumed: nothing that may follow ``q``
    is in the same instance of the group."""
    out = []
    for g in reversed(_groups(q.path)):
        # f keeps g open if it is inside g, unless reaching it loops through a star around g
        # (that starts a new instance of g)
        if any(g in f.path and (via is None or via not in g.path) for f, via in q.follow):
            break
        out.append(g)
    return out


def _open_path(q: _Node) -> tuple[_Node, ...]:
    closed = set(map(id, _eager_exits(q))) if q.kind == "tok" else set()
    return tuple(a for a in q.path if id(a) not in closed)


def _events(p: _Node, t: str, steps: list[tuple[_Node, _Node | None]]):
    """Events of moving from ``p`` along ``steps``: groups left and entered (in order), warnings of
    recovery alternatives entered, and the groups the target closes at once."""
    ev: list[tuple[str, str, object]] = []
    cur = _open_path(p)
    for z, via in steps:
        path = z.path
        common = 0
        while common < min(len(cur), len(path)) and cur[common] is path[common]:
            common += 1
        if via is not None and via in path:  # looping through a star restarts what is inside it
            common = min(common, path.index(via) + 1)
        for a in reversed(cur[common:]):
            if a.kind == "group":
                ev.append(("exit", a.expr.name, False))
        for a in path[common:]:
            if a.kind == "group":
                ev.append(("enter", a.expr.name, True))
            elif a.kind == "recover" and a.expr.why and not (t == EOF and a.expr.kind == "truncated"):
                ev.append(("warn", a.expr.kind, a.expr.why))
        cur = path
    target = steps[-1][0]
    if target.kind in ("eof", "accept"):  # everything still open ends with the input
        ev.extend(("exit", a.expr.name, False) for a in reversed(cur) if a.kind == "group")
    if target.kind == "tok":
        for g in _eager_exits(target):
            ev.append(("exit", g.expr.name, True))
    return tuple(ev)


def _spelling(m: object) -> str:
    return m if isinstance(m, str) else m.text  # type: ignore[attr-defined]


def compile_machine(
    rules: Mapping[str, Expr],
    token_classes: Mapping[str, Sequence[object]],
    start_rule: str,
    *,
    markers: Iterable[object] = (),
    literal: Iterable[str] = (),
) -> Machine:
    """Compile ``rules[start_rule]`` to a :class:`Machine`.

    * ``token_classes``: terminal class -> its marker spellings (``str``, or objects with a ``text``
      attribute such as :class:`kimi_chat.markers.Marker`);
    * ``markers``: every other spelling the lexer must still cut out of the text (the family's other
      special tokens): they are :data:`STRAY`;
    * ``literal``: classes that are not markers in this machine (their spellings are plain text),
      e.g. the reasoning markers of a model without reasoning.

    Compilation is not cached here: the format modules cache their machines.
    """
    literal = frozenset(literal)
    unknown = literal - set(token_classes)
    if unknown:
        raise ValueError(f"literal classes {sorted(unknown)} are not terminal classes")
    if start_rule not in rules:
        raise ValueError(f"no start rule {start_rule!r} (rules: {', '.join(rules)})")
    positions: list[_Node] = []
    root = _expand(rules[start_rule], rules, (), (start_rule,), positions)
    accept = _Node("accept", Eof())
    start = _Node("start", Eof())
    start.follow = _walk(root, [(accept, None)])

    classes = [c for c in token_classes if c not in literal]
    terminals = classes + [TEXT, WS, EOF]
    nodes = [start] + [p for p in positions if p.kind in ("tok", "text", "rest")] + [accept]
    states = {id(n): State(i, n.kind, _describe(n), getattr(n.expr, "field", None)) for i, n in enumerate(nodes)}

    def state_of(q: _Node) -> State:
        return states[id(q)]

    for n in nodes:
        st = state_of(n)
        if n.kind == "accept":
            continue
        if n.kind == "rest":
            st.trans[EOF] = Transition(state_of(accept), tuple(("exit", g.expr.name, False)
                                                               for g in reversed(_groups(n.path))))
            continue
        for t in terminals:
            r = _resolve(n, t)
            if r is None:
                if t in (TEXT, WS, EOF):
                    raise ValueError(f"grammar {start_rule!r}: state {st.name} does not accept {t}")
                continue
            q = r[-1][0]
            tgt = state_of(accept) if q.kind == "eof" else state_of(q)
            st.trans[t] = Transition(tgt, _events(n, t, r))
        st.loop = n.kind == "text" and all(
            st.trans[t].target is st and not st.trans[t].events for t in (TEXT, WS)
        )

    spellings: dict[str, str] = {_spelling(m): STRAY for m in markers}
    for c, ms in token_classes.items():
        for m in ms:
            spellings[_spelling(m)] = STRAY if c in literal else c
    for c in literal:
        for m in token_classes[c]:
            del spellings[_spelling(m)]
    return Machine(
        start_rule=start_rule,
        start=state_of(start),
        states=tuple(states.values()),
        markers=MarkerTable.build(spellings),
    )


def _describe(n: _Node) -> str:
    where = "/".join(a.expr.name for a in n.path if a.kind == "group")
    return f"{n.expr}" + (f" in {where}" if where else "") if n.kind not in ("start", "accept") else n.kind.upper()
