"""The streaming parser: a format's compiled state table run over the lexer's tokens.

The lexer (:class:`~kimi_chat.output.lexer.MarkerLexer`; :class:`~kimi_chat.families.k3.tags.TagLexer` for
K3's tags) cuts markers out of the chunks, holding back only an undecided marker prefix; the state
table compiled from the format's grammar (:mod:`kimi_chat.output.format`) decides what each token means;
its group events and the text of each field go where :mod:`kimi_chat.output.fields` says; with token
ids, :mod:`kimi_chat.output.ids` says which spellings are markers. Deltas come out as soon as decided.

Options of :class:`StreamParser` and :func:`parse`:

* ``dialect``: a dialect name or :class:`~kimi_chat.dialects.Dialect` (its ``reasoning``: ``<think>``
  is a marker; ``prefills_think(**options)``: the output starts inside reasoning; K3: the think
  channel unless ``thinking=False``, then the response channel).
* ``tools``: the declared tools (OpenAI shape, a list, read by :func:`~kimi_chat.output.normalise_tools`):
  names are checked, an opaque K2 header gets its name from the argument keys, K3 arguments are
  checked against the schema.
* ``thinking_prefilled`` / ``reasoning``: override the dialect (output starts inside reasoning /
  ``<think>`` is a marker; K3's think tags are always markup: ``reasoning=False`` is a ``TypeError``).
* ``content_after_tool_calls``: text after a tool-call section (K3: after the tools channel) is
  content (default), else dropped with a ``text_after_tool_calls`` warning.
* ``include_invalid``: how tool calls stream. ``False`` (the default): a call goes out once its
  status is decided, whole, if it is ``ok`` (``Delta.tool_calls``, numbered ``0, 1, ...`` as in
  ``ParsedMessage.to_openai()``), else reported in ``Delta.invalid_tool_calls``: a client that
  forwards ``delta.to_openai()`` never executes a call it must not. ``True``: every call streamed as
  written, piece by piece, as soon as decided (its status only in :attr:`StreamParser.message`).
* ``tokenizer``: decodes token ids (a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`, a ``transformers``
  tokenizer or ``id -> bytes``): with ids given, markers are placed exactly (:meth:`StreamParser.feed`).
* ``**options``: render options of the prompt (``thinking=False``); one the dialect does not take
  is a ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, get_dialect
from .format import format_for
from .peg import AS_TEXT, CUT, EOF, TEXT, WS, State, Transition
from .fields import Runs, Turn, event_tables, family_parts
from .ids import TokenMarkers
from .lexer import Utf8Chunks
from .buffers import DecidedCalls, DeltaBuffer, TextField
from .types import Delta, ParsedMessage, ParsedToolCall
from .warnlog import WarningLog

__all__ = ["StreamParser", "parse"]

_RUN_FIELDS = frozenset({"between", "call_between", "after", "outside"})  # Runs.leave ends their runs


class StreamParser:
    """Parse an assistant turn incrementally.

    >>> p = StreamParser()
    >>> deltas = p.feed("Hi<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0")
    >>> deltas += p.feed("<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>")
    >>> deltas += p.finish()
    >>> p.message.tool_calls[0].name, p.message.stop_reason.value
    ('f', 'tool_calls')

    ``feed(text)`` takes the next chunk (``str``, or ``bytes`` decoded as UTF-8 across chunk
    boundaries) and returns the :class:`Delta` objects it decided; ``finish()`` ends the input.
    ``message`` is the :class:`ParsedMessage` so far, kept up to date incrementally (reading it
    after every feed costs about the size of what changed, not of the whole message).

    Options: see the module docstring (the same for :func:`parse`).
    """

    _deltas: type[DeltaBuffer] = DeltaBuffer
    """The delta buffer's class (:func:`parse`'s parser, which returns no deltas, builds none: :class:`_Whole`)."""

    def __init__(
        self,
        dialect: str | Dialect = DEFAULT_DIALECT,
        *,
        tools: Sequence[Any] | None = None,
        thinking_prefilled: bool | None = None,
        reasoning: bool | None = None,
        content_after_tool_calls: bool = True,
        tokenizer: Any = None,
        include_invalid: bool = False,
        **options: Any,
    ) -> None:
        d = get_dialect(dialect)
        d.check_options(options, what="render option", require_bool=False)
        self._log = WarningLog()
        self._snaps: list[ParsedToolCall] = []  # snapshots of the closed calls (final), in order
        fmt = format_for(d)
        self.dialect = d
        self.format = fmt
        self._out = self._deltas()
        self._pos = 0  # offset of the first character not yet decided (the start of the lexer's pending)
        where = lambda: self._pos  # noqa: E731 - the offset the runs and the tag lexer record
        call_out = self._out if include_invalid else DecidedCalls(self._out)
        m, lexer, calls = family_parts(fmt, d, tools, call_out, self._warn, thinking_prefilled, reasoning, options,
                                       where)
        self.machine = m
        self._lexer = lexer
        self._calls = calls
        self._end_class, self._end_spellings = fmt.end_of_turn
        self._end_due = False  # an end-of-turn id came while the text lags its ids
        self._state: State = m.start
        self._decoder: Utf8Chunks | None = None
        self._content = TextField(TextField.CONTENT, self._out)
        self._reasoning = TextField(TextField.REASONING, self._out)
        self._turn = Turn()
        self._runs = Runs(self._content, where, self._warn, content_after_tool_calls, calls)
        self._finished = False
        self._final: ParsedMessage | None = None
        self._tokenizer = tokenizer
        # token ids' markers: made when the first ids come (at once with a tokenizer: a wrong one is refused here)
        self._id_markers = None if tokenizer is None else TokenMarkers(m.markers, self._warn, tokenizer)
        self._sinks, self._handlers = event_tables(self._turn, self._runs, self._content, self._reasoning,
                                                   where)
        self._sink = self._sinks[m.start.field]

    # ---------------------------------------------------------------------------- public interface

    @property
    def state(self) -> str:
        """The current state of the machine, readable (e.g. ``TEXT:arguments in
        section/call/arguments``), plus ``ended``/``finished`` when they apply."""
        s = self._state.name
        if self._finished:
            return s + " (finished)"
        if self._turn.raw:
            return "ended (ignoring the rest)"
        return s

    @property
    def offset(self) -> int:
        """Number of input characters decided so far (the undecided held-back suffix excluded)."""
        return self._pos

    def feed(self, text: str | bytes, token_ids: Sequence[int] | None = None) -> list[Delta]:
        """Parse the next chunk; return the deltas it decided (possibly none).

        ``token_ids`` (optional): the ids of the chunk's tokens. With them a marker is a marker only
        if its special id came (a spelling typed as ordinary tokens is text: :mod:`kimi_chat.output.ids`;
        exact for any chunking with ``tokenizer=``), and an end-of-turn id whose text a relay
        stripped still ends the turn. A chunk without ids is decided by its text. ``str`` and
        ``bytes`` chunks may be mixed: a ``str`` that comes while a UTF-8 character is incomplete
        ends it (U+FFFD, with a warning), in order.
        """
        if self._finished:
            raise RuntimeError("StreamParser.feed() after finish()")
        if isinstance(text, str):
            if self._decoder is not None:
                text = self._end_utf8("a str chunk came") + text
        elif isinstance(text, (bytes, bytearray, memoryview)):
            if self._decoder is None:
                self._decoder = Utf8Chunks()
            text = self._decoder.decode(bytes(text))
        else:
            raise TypeError(f"StreamParser.feed() takes str or bytes, not {type(text).__name__}")
        turn = self._turn
        if turn.raw:
            if self._lexer.pending:  # the turn ended in text while a marker prefix was held back
                text = self._lexer.flush() + text
            if token_ids is not None:
                self._ids().after_end(text, self._pos)
            self._ignore(text)
        elif text:
            lx = self._lexer
            if token_ids is not None:
                self._ids().add(text, token_ids, self._pos + len(lx.pending))
            if lx.pending or lx.start0 in text or lx.start1 in text:
                rest = (lx.feed(text, self._text, self._marker) if token_ids is None
                        else lx.feed(text, self._text, self._marker, self._ids().real, self._pos))
                if rest is not None:  # the turn ended: the rest is ignored
                    if token_ids is not None:
                        self._ids().after_end(rest, self._pos)
                    self._ignore(rest)
            elif self._state.loop:  # the fast path: no marker can start in this chunk
                self._sink(text)  # type: ignore[misc]
                self._pos += len(text)
            else:
                self._text(text)
        elif token_ids:  # no text yet (an incomplete character): the ids still count
            self._ids().add(text, token_ids, self._pos + len(self._lexer.pending))
        if token_ids is not None and not turn.ended and not self.format.end_of_turn_ids.isdisjoint(token_ids):
            pending = self._lexer.pending
            if self._ids().lagging(self._end_spellings) or (pending and any(
                    e.startswith(pending) for e in self._end_spellings)):  # the text lags: the end's is to come
                self._end_due = True
            else:  # the end-of-turn token came after this chunk's text, and its spelling was stripped
                self._end_by_id()
        return self._out.take()

    def _ids(self) -> TokenMarkers:
        """The markers placed by token id (:mod:`kimi_chat.output.ids`), made on first use."""
        ids = self._id_markers
        if ids is None:
            ids = self._id_markers = TokenMarkers(self.machine.markers, self._warn, self._tokenizer)
        return ids

    def _end_by_id(self) -> None:
        """An end-of-turn id whose spelling is not in the text ends the turn where the text stands."""
        self._end_due = False
        self._flush_pending()
        if not self._turn.raw and self._end_class is not None:
            tr = self._state.trans.get(self._end_class)
            if tr is not None:
                self._go(tr, self._end_class, "", self._pos)

    def finish(self) -> list[Delta]:
        """End the input: close what is open (a call left open is ``unclosed``) and return the
        last deltas. Calling it again returns ``[]``."""
        if self._finished:
            return []
        first: list[Delta] = []
        if self._decoder is not None:
            rest = self._end_utf8("the input ended")
            if rest:  # an incomplete character at the end: U+FFFD, whose deltas are the first of these
                first = self.feed(rest)
        if self._end_due and not self._turn.ended:  # an end-of-turn id whose text never came
            self._end_by_id()
        if self._id_markers is not None:  # ids of other markers whose text never came
            self._id_markers.unmatched("".join(self._turn.trailing) + self._lexer.pending,
                                       self._end_spellings, self._pos)
        self._flush_pending()
        if self._turn.raw:
            for w in self._turn.warnings():
                self._log.add(w.kind, w.message, w.offset, w.text)
        else:
            self._go(self._state.trans[EOF], EOF, "", self._pos)
        self._finished = True
        self._final = None
        last = self._out.take()
        return first + last if first else last

    @property
    def message(self) -> ParsedMessage:
        """The :class:`ParsedMessage` so far (final after :meth:`finish`).

        Each read is a new message whose lists are its own; a closed call's :class:`ParsedToolCall`
        (and an unchanged open one's) is the same object from read to read. A read costs what changed
        since the last one plus a copy of the two lists (see :mod:`kimi_chat.output.warnlog`: repeated
        warnings are merged, so the warning list stays short)."""
        if self._final is not None:
            return self._final
        warnings = self._log.list()
        if self._turn.raw and not self._finished:
            warnings += self._turn.warnings()
        calls = self._calls.calls
        snaps = self._snaps
        done = len(calls) - (self._calls.current is not None)  # every call before the open one is closed
        while len(snaps) < done:  # a closed call never changes: its snapshot is taken once
            snaps.append(calls[len(snaps)].snapshot())
        tool_calls = snaps[:done]
        if done < len(calls):
            tool_calls.append(calls[-1].snapshot())
        msg = ParsedMessage(
            content=self._content.value(),
            reasoning_content=self._reasoning.value(),
            tool_calls=tool_calls,
            stop_reason=self._turn.stop_reason(self._finished, bool(calls)),
            warnings=warnings,
        )
        if self._finished:
            self._final = msg
        return msg

    def tool_call(self, index: int) -> ParsedToolCall | None:
        """Call ``index`` of :attr:`message` (the same object its ``tool_calls`` holds), or ``None``
        if there is no such call (yet): what a server reads when a call's first delta comes, in O(1)
        however many calls came before."""
        calls = self._calls.calls
        if not 0 <= index < len(calls):
            return None
        if index < len(self._snaps):
            return self._snaps[index]
        return calls[index].snapshot()  # a call's index is its position in the list

    def __repr__(self) -> str:
        return f"<StreamParser {self.dialect.name} at {self._pos}: {self.state}>"

    # ---------------------------------------------------------------------------- input

    def _end_utf8(self, why: str) -> str:
        """End the UTF-8 decoder's pending bytes: an incomplete character is U+FFFD, with a warning."""
        rest, pending = self._decoder.end()  # type: ignore[union-attr]
        if pending:
            self._warn("incomplete_utf8", f"{why} inside a UTF-8 character ({pending.hex(' ')}): replaced "
                       "by U+FFFD", self._pos + len(self._lexer.pending), rest)
        return rest

    def _flush_pending(self) -> None:
        """The held-back suffix is text after all (the input ended, or an end token came)."""
        if self._turn.raw:
            self._ignore(self._lexer.flush())
        else:
            self._lexer.flush_into(self._text, self._marker)

    def _text(self, piece: str) -> bool:
        """Text ``piece`` at the current offset; returns whether the turn has ended (a lexer that
        holds tags back stops there, as after a marker that ended it)."""
        st = self._state
        if not st.loop:
            tr = st.trans.get(WS if piece.isspace() else TEXT)
            if tr is None:  # a rest state (after the end of the turn): its sink takes everything
                pass
            elif tr.target is not st or tr.events:
                self._go(tr, TEXT, "", self._pos)
        self._sink(piece)  # type: ignore[misc]
        self._pos += len(piece)
        return self._turn.raw

    def _marker(self, cls: str, spelling: str) -> bool:
        tr = self._state.trans.get(cls)
        turn = self._turn
        if tr is not None:
            self._go(tr, cls, spelling, self._pos)
        elif turn.raw:  # the turn ended inside this chunk: the rest is ignored
            turn.ignore(spelling, self._pos)
        elif cls == AS_TEXT or cls in self.format.think_classes:  # marker-shaped, no marker here: text, warned
            self._warn(*self._as_text(spelling), self._pos, spelling)
            return self._text(spelling)
        else:
            if cls == CUT:  # the input ended inside a tag: dropped, the turn is truncated
                turn.truncated = True
                self._warn("truncated_tag", f"tag cut by the end of the text dropped: {spelling}", self._pos, spelling)
            else:
                self._warn("stray_marker", f"stray marker {spelling} dropped", self._pos, spelling)
            self._calls.stray(spelling)
        self._pos += len(spelling)
        return turn.raw

    def _as_text(self, spelling: str) -> tuple[str, str]:
        """``(kind, message)`` of the warning for ``spelling`` kept as text: another dialect's marker or a
        reserved token's name (``foreign_marker``), or a reasoning marker where it is none
        (``think_as_text``: reasoning is off, or none is open here). Never joined across: the text on
        both sides keeps it between them."""
        hint = self.format.as_text.get(spelling)
        if hint is not None:
            return "foreign_marker", f"{spelling} kept as text: {hint}"
        if spelling not in self.machine.markers.classes:  # reasoning off: the reasoning markers are text
            from ..dialect_records import K2_DIALECTS

            writers = ", ".join(d.aliases[0] if d.aliases else n for n, d in K2_DIALECTS.items() if d.reasoning)
            return "think_as_text", (f"{spelling} kept as text: reasoning is off for {self.dialect.name}; the "
                                     f"reasoning dialects write it ({writers}): parse with one of them (or pass "
                                     "reasoning=True) if the text before it is reasoning")
        return "think_as_text", (f"{spelling} kept as text: no reasoning is open here (the prompt did not open it, "
                                 "e.g. with thinking=False, or it closed before); the text before it may be reasoning")

    def _ignore(self, text: str) -> None:
        if text:
            self._turn.ignore(text, self._pos)
            self._pos += len(text)

    def _go(self, tr: Transition, tok: str, spelling: str, offset: int) -> None:
        if spelling:  # a marker read as structure: no merged warning spans it
            self._log.cut()
        fld = self._state.field
        if fld in _RUN_FIELDS:
            self._runs.leave(fld)
        for kind, name, arg in tr.events:
            if kind == "warn":
                self._warn(name, arg, offset, spelling)  # type: ignore[arg-type]
            else:
                self._handlers[kind, name](arg, tok, spelling, offset)  # type: ignore[arg-type]
        target = tr.target
        self._state = target
        self._sink = self._sinks[target.field]

    def _warn(self, kind: str, message: str, offset: int, text: str = "") -> None:
        self._log.add(kind, message, offset, text)


def parse(
    text: str | bytes,
    *,
    dialect: str | Dialect = DEFAULT_DIALECT,
    tools: Iterable[Any] | None = None,
    thinking_prefilled: bool | None = None,
    token_ids: Sequence[int] | None = None,
    tokenizer: Any = None,
    **options: Any,
) -> ParsedMessage:
    """Parse a whole assistant turn (the text the model generated after the generation prompt).

    Same options as :class:`StreamParser` (``reasoning``, ``content_after_tool_calls`` and render
    options such as ``thinking=False`` go in ``options``). ``token_ids``: the ids of ``text`` (then a
    marker is a marker only where its special id is; pass ``tokenizer=`` to place them exactly, see
    :meth:`StreamParser.feed`). Never raises on any text; raises
    ``TypeError`` when ``text`` is not ``str``/``bytes`` or ``tools`` is not a list of tools.
    """
    if not isinstance(text, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"parse() takes the model's output as str or bytes, not {type(text).__name__}")
    p = _Whole(dialect, tools=tools, thinking_prefilled=thinking_prefilled,  # type: ignore[arg-type]
               tokenizer=tokenizer, **options)
    p.feed(text, token_ids)
    p.finish()
    return p.message


class _NoDeltas(DeltaBuffer):
    """A delta buffer whose deltas nobody reads: :meth:`take` builds none (the entries are dropped)."""

    __slots__ = ()

    def take(self) -> list[Delta]:
        """Nothing (the entries so far are dropped)."""
        self.entries = []
        return []


class _Whole(StreamParser):
    """:func:`parse`'s parser: a :class:`StreamParser` whose ``feed``/``finish`` return no deltas (none is built)."""

    _deltas = _NoDeltas
