"""Where the parser's text and group events go: the text fields of each grammar field, the runs that
are dropped (or, K3's text outside any channel, kept) with a warning, and how the turn stands.

:class:`~kimi_chat.output.StreamParser` runs the state table; this module holds what it routes to:

* :class:`Runs`: the sinks of the fields that are not plain content/reasoning (text after a
  tool-call section, inside a section or a call outside its parts, K3 text outside any channel),
  and :meth:`Runs.leave`, which reports a run when the state leaves its field;
* :class:`Turn`: ended / ignoring the rest / truncated, the text after the end, the stop reason;
* :func:`family_parts`: the compiled machine, the lexer and the call assembler of a format (its ``reader``);
* :func:`event_tables`: field -> sink and (enter|exit, group) -> handler; the call assembler of the format
  (K2's :class:`~kimi_chat.families.k2.calls.ToolCalls`, K3's :class:`~kimi_chat.families.k3.calls.TagCalls`)
  adds the fields and groups of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

from .peg import EOF, Machine
from .lexer import MarkerLexer
from .buffers import DecidedCalls, DeltaBuffer, HeldWhitespace, TextField, TextRun, joined
from .types import ParseWarning, StopReason, Warn

__all__ = ["Runs", "Turn", "event_tables", "family_parts", "nothing"]

Sink = Callable[[str], None]
Handler = Callable[[bool, str, str, int], None]


class Runs:
    """The text runs of one parse (see the module docstring). ``content``: the content field (text
    after a section, and K3 text outside any channel, go there); ``where()``: the parser's offset;
    ``warn``: where warnings go; ``content_after``: text after a tool-call section is content."""

    __slots__ = ("content", "where", "warn", "content_after", "after", "run", "outside", "outside_lead", "calls",
                 "after_tools")

    def __init__(self, content: TextField, where: Callable[[], int], warn: Warn, content_after: bool,
                 calls: Any) -> None:
        self.content, self.where, self.warn, self.content_after = content, where, warn, content_after
        self.calls = calls
        self.after = HeldWhitespace()  # a fresh one per after-section run
        self.run = TextRun()
        self.outside = TextRun()
        self.outside_lead = HeldWhitespace()
        self.after_tools = False  # K3: the tools channel has ended (text outside channels is after it)

    def after_text(self, piece: str) -> None:
        """Text after a tool-call section: content, its leading whitespace held."""
        p = self.after.take(piece)
        if p is not None:
            self.content.add(p)

    def run_text(self, piece: str) -> None:
        """Text of a run dropped unless it is whitespace."""
        self.run.add(piece, self.where())

    def call_between(self, piece: str) -> None:
        """K3: text inside a call outside its elements (dropped, kept in the call's raw text)."""
        self.calls.raw_text(piece)  # type: ignore[union-attr]
        self.run.add(piece, self.where())

    def outside_text(self, piece: str) -> None:
        """K3: text outside any channel: content (leading whitespace held), warned when it ends; after
        the tools channel with ``content_after_tool_calls=False``, dropped with a warning (as K2's)."""
        if self.after_tools and not self.content_after:
            self.run.add(piece, self.where())
            return
        self.outside.add(piece, self.where())
        p = self.outside_lead.take(piece)
        if p is not None:
            self.content.add(p)

    def leave(self, fld: str | None) -> None:
        """The state leaves field ``fld``: end its run (a warning if it held more than whitespace)."""
        if fld == "outside" and self.after_tools and not self.content_after:
            fld = "after"
        elif fld == "outside":
            self.outside_lead = HeldWhitespace()
            text = self.outside.end()
            if text is not None:
                self.warn("text_outside_channels", "text outside any channel kept as content",
                          self.outside.offset, text)
            return
        if fld == "after" and self.content_after:
            self.after = HeldWhitespace()
            return
        if fld not in _RUN_WARNINGS:
            return
        text = self.run.end()
        if text is not None:
            kind, message = _RUN_WARNINGS[fld]
            self.warn(kind, message, self.run.offset, text)


_RUN_WARNINGS = {
    "call_between": ("text_in_call", "text inside a tool call, outside its elements, dropped"),
    "between": ("text_in_section", "text inside a tool-call section, outside any call, dropped"),
    "after": ("text_after_tool_calls", "text after a tool-call section dropped (content_after_tool_calls=False)"),
}


class Turn:
    """How the turn stands: ``ended`` (its end marker came), ``raw`` (everything after is ignored
    text), ``truncated`` (the input ended inside a group that needs closing), the ignored text."""

    __slots__ = ("ended", "raw", "truncated", "section_implicit", "trailing", "trailing_offset", "_warning",
                 "_seen")

    def __init__(self) -> None:
        self.ended = False
        self.raw = False
        self.truncated = False
        self.section_implicit = False
        self.trailing: list[str] = []
        self.trailing_offset = 0
        self._warning: ParseWarning | None = None  # the last one made, while no piece came since
        self._seen = 0  # len(trailing) when it was made

    def ignore(self, piece: str, offset: int) -> None:
        """A piece after the end of the turn, at ``offset``."""
        if not self.trailing:
            self.trailing_offset = offset
        self.trailing.append(piece)

    def warnings(self) -> list[ParseWarning]:
        """The warning for the text after the end of the turn (``[]`` if none came): the same object
        while no text came since; else its text joined from the new pieces only (amortised, as
        :func:`~kimi_chat.output.buffers.joined`)."""
        if not self.trailing:
            return []
        w = self._warning
        if w is None or self._seen != len(self.trailing):
            w = self._warning = None  # drop its text first: joined() may then grow the string in place
            text = joined(self.trailing)
            self._seen = len(self.trailing)
            w = self._warning = ParseWarning("text_after_end", "text after the end of the turn ignored",
                                             self.trailing_offset, text)
        return [w]

    def stop_reason(self, finished: bool, has_calls: bool) -> StopReason | None:
        """The stop reason so far (``None`` while the turn is open and the input not finished)."""
        if self.ended:
            return StopReason.TOOL_CALLS if has_calls else StopReason.END_TURN
        if not finished:
            return None
        if self.truncated:
            return StopReason.TRUNCATED
        return StopReason.TOOL_CALLS if has_calls else StopReason.END_OF_TEXT


def family_parts(
    fmt: Any, d: Any, tools: Sequence[Any] | None, out: DeltaBuffer | DecidedCalls, warn: Warn,
    thinking_prefilled: bool | None, reasoning: bool | None, options: Mapping[str, Any],
    where: Callable[[], int] = lambda: 0,
) -> tuple[Machine, MarkerLexer, Any]:
    """The compiled machine, the lexer and the call assembler of a parse of dialect ``d``'s format
    ``fmt``, as the format's ``reader`` builds them (K2: markers, ``<think>`` a marker as the dialect or
    ``reasoning`` says; K3: tags, see :attr:`~kimi_chat.output.format.OutputFormat.reader`).
    ``where()``: the parser's offset (where a lexer's repairs are warned)."""
    return fmt.reader(fmt, d, tools, out, warn, thinking_prefilled, reasoning, options, where)  # type: ignore[no-any-return]


def event_tables(
    turn: Turn, runs: Runs, content: TextField, reasoning: TextField, where: Callable[[], int],
) -> tuple[dict[str | None, Sink | None], dict[tuple[str, str], Handler]]:
    """The parser's two tables: where text goes in each field of the grammar (``sinks``), and what
    each group's enter/exit event does (``handlers``); the K2 call assembler's fields and groups, or
    the K3 one's (tags: channels, typed arguments, the message close): the call assembler adds its own
    (``calls.add_events(sinks, handlers, turn, runs, truncates)``)."""
    calls = runs.calls
    sinks: dict[str | None, Sink | None] = {
        None: None,
        "content": content.add,
        "reasoning": reasoning.add,
        "between": runs.run_text,
        "after": runs.after_text if runs.content_after else runs.run_text,
        "ignored": lambda piece: turn.ignore(piece, where()),
    }

    def truncates(c: bool, tok: str, s: str, o: int) -> None:
        if tok == EOF:
            turn.truncated = True

    def enter_section(c: bool, tok: str, s: str, o: int) -> None:
        turn.section_implicit = tok != "SECTION_BEGIN"

    def exit_section(c: bool, tok: str, s: str, o: int) -> None:
        if tok == EOF and not turn.section_implicit:
            turn.truncated = True

    def exit_call(c: bool, tok: str, s: str, o: int) -> None:
        calls.end(s if c else None, tok == EOF)
        truncates(c, tok, s, o)

    def enter_end(c: bool, tok: str, s: str, o: int) -> None:
        turn.ended = turn.raw = True

    handlers: dict[tuple[str, str], Handler] = {
        ("enter", "reasoning"): lambda c, tok, s, o: content.reset(),  # leading ws is not content
        ("exit", "reasoning"): truncates,
        ("enter", "section"): enter_section,
        ("exit", "section"): exit_section,
        ("enter", "call"): lambda c, tok, s, o: calls.begin(o, s),
        ("exit", "call"): exit_call,
        ("enter", "header"): nothing,
        ("exit", "header"): lambda c, tok, s, o: calls.header_end(tok == EOF),
        ("enter", "arguments"): lambda c, tok, s, o: calls.arguments_begin(s),
        ("exit", "arguments"): nothing,
        ("enter", "end"): enter_end,
        ("exit", "end"): nothing,
    }
    calls.add_events(sinks, handlers, turn, runs, truncates)
    return sinks, handlers


def nothing(consumed: bool, tok: str, spelling: str, offset: int) -> None:
    """The handler of a group event that does nothing."""
