"""The Kimi-K2 assistant OUTPUT format, as a PEG over marker tokens and text.

This module is the single definition of what an assistant turn may look like::

    [<think>REASONING</think>] CONTENT
    [<|tool_calls_section_begin|> (<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>)+
     <|tool_calls_section_end|>] [<|im_end|>]

It has three parts, all plain data:

* :data:`TOKEN_CLASSES`: which marker spellings (from :mod:`kimi_chat.markers`, the one source of
  truth) the grammar sees as which terminal. Every other marker is ``STRAY``: never accepted, always
  dropped with a warning.
* :data:`GRAMMAR`: the rules, a PEG built from :class:`Tok` (one marker), :class:`Text` (a run of
  non-marker text, routed to a result field), :class:`Seq`, :class:`Choice` (ordered),
  :class:`Opt`, :class:`Star`, :class:`Ahead` (``&X``, zero-width), :class:`Eof` (``!.``) and
  :class:`Rest` (everything left, markers included). :class:`Group` names the spans the parser
  reacts to (``reasoning``, ``section``, ``call``, ``header``, ``arguments``, ``end``) and
  :class:`Recover` marks the tolerant alternatives: the parser accepts them (with a warning when
  they carry one), a generation grammar (GBNF) leaves them out.
* :func:`compile_machine`: translates a start rule into a deterministic state table (a position
  automaton: states are the grammar's terminals, transitions follow the PEG's ordered choice).
  :mod:`kimi_chat.parse` runs that table over a marker/text token stream; it never re-reads text.

``print(grammar_text())`` shows the grammar in PEG notation (it is copied in ``docs/format.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as _field
from functools import lru_cache
from typing import Final, Union

from . import markers as M
from .markers import Marker

__all__ = [
    "TOKEN_CLASSES",
    "END_OF_TURN_IDS",
    "STRAY",
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
    "GRAMMAR",
    "START_RULES",
    "FIELDS",
    "grammar_text",
    "Transition",
    "State",
    "Machine",
    "compile_machine",
]

# --------------------------------------------------------------------------------------------------
# Terminals

TOKEN_CLASSES: Final[dict[str, tuple[Marker, ...]]] = {
    "THINK_BEGIN": (M.THINK_BEGIN,),
    "THINK_END": (M.THINK_END,),
    # the singular spelling is emitted by some models; accepted silently
    "SECTION_BEGIN": (M.TOOL_CALLS_SECTION_BEGIN, M.TOOL_CALL_SECTION_BEGIN_SINGULAR),
    "SECTION_END": (M.TOOL_CALLS_SECTION_END, M.TOOL_CALL_SECTION_END_SINGULAR),
    "CALL_BEGIN": (M.TOOL_CALL_BEGIN,),
    "ARG_BEGIN": (M.TOOL_CALL_ARGUMENT_BEGIN,),
    "CALL_END": (M.TOOL_CALL_END,),
    # <|im_end|> is what the templates write; [EOS] is the tokenizer's eos_token
    "END_TURN": (M.IM_END, M.EOS),
    # a role header: the model began the next message without closing its own
    "NEW_MESSAGE": (M.IM_USER, M.IM_ASSISTANT, M.IM_SYSTEM),
}
"""Terminal class -> the marker spellings that are that terminal."""

END_OF_TURN_IDS: Final[frozenset[int]] = frozenset(
    m.id for m in TOKEN_CLASSES["END_TURN"] if m.id is not None
)
"""Token ids that end the turn (used when a relay strips special tokens from the text but passes ids)."""

STRAY: Final = "STRAY"
"""Class of every other marker (``<|im_middle|>``, ``[BOS]``, media markers, ...): always dropped."""
TEXT: Final = "TEXT"
"""Pseudo-terminal: a run of text containing a non-whitespace character."""
WS: Final = "WS"
"""Pseudo-terminal: a run of whitespace-only text."""
EOF: Final = "EOF"
"""Pseudo-terminal: end of input."""

THINK_CLASSES: Final = ("THINK_BEGIN", "THINK_END")
"""Classes that are markers only when reasoning is on (else ``<think>`` is literal text)."""

FIELDS: Final[dict[str, str]] = {
    "content": "the message content",
    "reasoning": "reasoning_content",
    "header": "a tool call's header (its id, which names the function)",
    "arguments": "a tool call's arguments",
    "between": "text inside a tool-call section outside any call (whitespace ignored, else dropped "
    "with a warning)",
    "after": "text after a tool-call section (content; whitespace-only is ignored)",
    "ignored": "everything after the end of the turn (ignored with a warning)",
}
"""Where :class:`Text` goes, by field name."""

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
    """One marker of terminal class ``cls`` (a key of :data:`TOKEN_CLASSES`)."""

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
    """A reference to another rule of :data:`GRAMMAR`."""

    name: str

    def __str__(self) -> str:
        return self.name


ExprLike = Union[Expr, str]


def _x(e: ExprLike) -> Expr:
    return Ref(e) if isinstance(e, str) else e


def seq(*items: ExprLike) -> Seq:
    return Seq(tuple(_x(i) for i in items))


def alt(*alts: ExprLike) -> Choice:
    return Choice(tuple(_x(a) for a in alts))


def opt(e: ExprLike) -> Opt:
    return Opt(_x(e))


def star(e: ExprLike) -> Star:
    return Star(_x(e))


def recover(e: ExprLike, kind: str = "", why: str | None = None) -> Recover:
    return Recover(_x(e), kind, why)


# --------------------------------------------------------------------------------------------------
# The grammar

_CLOSE_BY_END = "closed by the end of the turn"
_CLOSE_BY_NEW = "closed by the start of another message"

GRAMMAR: Final[dict[str, Expr]] = {
    # Reasoning dialects (K2-Thinking): the output may open with <think>, after whitespace.
    "message": seq(Text("content", ws_only=True), opt("reasoning"), "body", opt("end")),
    # The prompt already opened <think> (K2.5 with thinking on): the output starts inside reasoning.
    # A redundant <think> at the very start is accepted silently.
    "message_prefilled": seq("reasoning_prefilled", "body", opt("end")),
    # Instruct dialects: <think> is not a marker at all (literal text).
    "message_plain": seq("body", opt("end")),
    "reasoning": Group("reasoning", seq(Tok("THINK_BEGIN"), Text("reasoning"), "reasoning_close")),
    "reasoning_prefilled": Group(
        "reasoning",
        seq(
            Text("reasoning", ws_only=True),
            opt(recover(Tok("THINK_BEGIN"), "redundant_think")),
            Text("reasoning"),
            "reasoning_close",
        ),
    ),
    "reasoning_close": alt(
        Tok("THINK_END"),
        recover(Ahead("SECTION_BEGIN"), "reasoning_unclosed", "reasoning closed by a tool-call section"),
        recover(Ahead("CALL_BEGIN"), "reasoning_unclosed", "reasoning closed by a tool call"),
        recover(Ahead("END_TURN"), "reasoning_unclosed", "reasoning " + _CLOSE_BY_END),
        recover(Ahead("NEW_MESSAGE"), "reasoning_unclosed", "reasoning " + _CLOSE_BY_NEW),
        recover(Eof(), "truncated"),
    ),
    "body": seq(Text("content"), star(seq("tool_calls", Text("after")))),
    "tool_calls": alt(
        Group("section", seq(Tok("SECTION_BEGIN"), "calls", "section_close")),
        recover(
            Group("section", seq(Ahead("CALL_BEGIN"), "calls", "implicit_section_close")),
            "implicit_section",
            "tool call without a section begin",
        ),
    ),
    "calls": seq(Text("between"), star(seq("call", Text("between")))),
    "section_close": alt(
        Tok("SECTION_END"),
        recover(Ahead("END_TURN"), "section_unclosed", "tool-call section " + _CLOSE_BY_END),
        recover(Ahead("NEW_MESSAGE"), "section_unclosed", "tool-call section " + _CLOSE_BY_NEW),
        recover(Eof(), "truncated"),
    ),
    # no section begin: no section end is owed either
    "implicit_section_close": alt(
        Tok("SECTION_END"),
        recover(Ahead("END_TURN")),
        recover(Ahead("NEW_MESSAGE")),
        recover(Eof()),
    ),
    "call": Group(
        "call",
        seq(
            Tok("CALL_BEGIN"),
            Group("header", Text("header")),
            opt(Group("arguments", seq(Tok("ARG_BEGIN"), Text("arguments")))),
            "call_close",
        ),
    ),
    "call_close": alt(
        Tok("CALL_END"),
        recover(Ahead("CALL_BEGIN"), "call_unclosed", "tool call closed by the next tool call"),
        recover(Ahead("SECTION_END"), "call_unclosed", "tool call closed by the section end"),
        recover(Ahead("END_TURN"), "call_unclosed", "tool call " + _CLOSE_BY_END),
        recover(Ahead("NEW_MESSAGE"), "call_unclosed", "tool call " + _CLOSE_BY_NEW),
        recover(Eof(), "truncated"),
    ),
    "end": alt(
        Group("end", seq(Tok("END_TURN"), Rest("ignored"))),
        recover(
            Group("end", seq(Tok("NEW_MESSAGE"), Rest("ignored"))),
            "new_message",
            "the turn was ended by the start of another message, not by an end-of-turn marker",
        ),
    ),
}
"""The output grammar, rule name -> expression (rules may only reference rules, never recursively)."""

START_RULES: Final = ("message", "message_prefilled", "message_plain")


def grammar_text(rules: dict[str, Expr] | None = None) -> str:
    """The grammar in PEG notation, one rule per line (``~x``: recovery alternative; ``@g(x)``:
    named group; ``TEXT:f``/``WS:f``: text (whitespace-only) routed to field ``f``)."""
    rules = GRAMMAR if rules is None else rules
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


@dataclass(frozen=True)
class Machine:
    """A compiled start rule plus the lexer tables for the active markers."""

    start_rule: str
    start: State
    states: tuple[State, ...]
    classes: dict[str, str]
    """Marker spelling -> terminal class (``STRAY`` for markers the grammar never accepts)."""
    prefixes: frozenset[str]
    """Every proper prefix of an active marker spelling (what a chunk end may hold back)."""
    max_len: int
    """Length of the longest active marker spelling."""
    start_chars: str
    """The characters active marker spellings start with."""


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


@lru_cache(maxsize=None)
def compile_machine(start_rule: str = "message", *, think: bool = True) -> Machine:
    """Compile ``GRAMMAR[start_rule]`` to a :class:`Machine`. ``think``: ``<think>``/``</think>`` are
    markers (reasoning dialects); otherwise they are literal text and the think classes are unused."""
    positions: list[_Node] = []
    root = _expand(GRAMMAR[start_rule], GRAMMAR, (), (start_rule,), positions)
    accept = _Node("accept", Eof())
    start = _Node("start", Eof())
    start.follow = _walk(root, [(accept, None)])

    classes = [c for c in TOKEN_CLASSES if think or c not in THINK_CLASSES]
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

    spellings: dict[str, str] = {}
    for m in M.MARKERS:
        spellings[m.text] = STRAY
    for c, ms in TOKEN_CLASSES.items():
        for m in ms:
            spellings[m.text] = c if c in classes else STRAY
    if not think:
        for c in THINK_CLASSES:
            for m in TOKEN_CLASSES[c]:
                del spellings[m.text]
    _check_spellings(spellings)
    prefixes = frozenset(s[:k] for s in spellings for k in range(1, len(s)))
    return Machine(
        start_rule=start_rule,
        start=state_of(start),
        states=tuple(states.values()),
        classes=spellings,
        prefixes=prefixes,
        max_len=max(map(len, spellings)),
        start_chars="".join(sorted({s[0] for s in spellings})),
    )


def _check_spellings(spellings: dict[str, str]) -> None:
    """The lexer relies on: no spelling is a prefix of another, and a spelling's first character
    does not occur again inside any spelling (so only the last such character of a chunk can start
    a held-back marker prefix)."""
    starts = {s[0] for s in spellings}
    for s in spellings:
        if any(c in starts for c in s[1:]):
            raise ValueError(f"marker {s!r} contains a marker start character after its first")
        for o in spellings:
            if o != s and o.startswith(s):
                raise ValueError(f"marker {s!r} is a prefix of {o!r}")


def _describe(n: _Node) -> str:
    where = "/".join(a.expr.name for a in n.path if a.kind == "group")
    return f"{n.expr}" + (f" in {where}" if where else "") if n.kind not in ("start", "accept") else n.kind.upper()
