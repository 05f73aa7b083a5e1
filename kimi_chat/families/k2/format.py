"""The Kimi-K2 assistant OUTPUT format, as data: terminals, grammar, start rules.

What an assistant turn may look like::

    [<think>REASONING</think>] CONTENT
    [<|tool_calls_section_begin|> (<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>)+
     <|tool_calls_section_end|>] [<|im_end|>]

* :data:`TOKEN_CLASSES`: which marker spellings (from :mod:`kimi_chat.markers`, the one source of
  truth) the grammar sees as which terminal. Every other marker is ``STRAY``: never accepted, always
  dropped with a warning.
* :data:`GRAMMAR`: the rules, a PEG of :mod:`kimi_chat.output.peg` expressions. :class:`~kimi_chat.output.peg.Group`
  names the spans the parser reacts to (``reasoning``, ``section``, ``call``, ``header``,
  ``arguments``, ``end``); :class:`~kimi_chat.output.peg.Recover` marks the tolerant alternatives.
* :data:`START_RULES`, :data:`FIELDS`, and :data:`K2`, the :class:`~kimi_chat.output.format.OutputFormat`
  record :mod:`kimi_chat.parse` runs; :func:`machine` gives the compiled state table of a start rule.

``print(grammar_text())`` shows the grammar in PEG notation (it is copied in ``docs/formats.md``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from ... import markers as M
from ...markers import Marker
from ...output.peg import (
    EOF,
    STRAY,
    TEXT,
    WS,
    Ahead,
    Eof,
    Expr,
    Group,
    Machine,
    Rest,
    Text,
    Tok,
    alt,
    compile_machine,
)
from ...output.peg import grammar_text as _grammar_text
from ...output.peg import opt, recover, seq, star
from ...output.format import OutputFormat, reserved_hints
from .calls import reader

__all__ = [
    "TOKEN_CLASSES",
    "END_OF_TURN_IDS",
    "THINK_CLASSES",
    "STRAY",
    "TEXT",
    "WS",
    "EOF",
    "GRAMMAR",
    "START_RULES",
    "FIELDS",
    "K2",
    "FORMAT",
    "grammar_text",
    "machine",
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

AS_TEXT: Final[dict[str, str]] = {
    **{m.text: "a Kimi-K3 marker, no Kimi-K2 one: the output looks like kimi-k3's (parse it with dialect='kimi-k3')"
       for m in M.K3_MARKERS if m.text not in M.BY_TEXT},
    **reserved_hints({i: m.text for i, m in M.BY_ID.items()}, M.NUM_BASE_TOKENS, M.NUM_RESERVED_SPECIAL + 2,
                     M.reserved_token_name),
}
"""Marker-shaped spellings that are no Kimi-K2 markers -> why: kept as text, with a warning."""

# --------------------------------------------------------------------------------------------------
# The grammar

_CLOSE_BY_END = "closed by the end of the turn"
_CLOSE_BY_NEW = "closed by the start of another message"

GRAMMAR: Final[dict[str, Expr]] = {
    # Reasoning dialects (K2-Thinking): the output may open with <think>, after whitespace.
    "message": seq(Text("content", ws_only=True), opt("reasoning"), "body", opt("end")),
    # The prompt already opened <think> (K2.5 and K2.6 with thinking on): the output starts inside reasoning.
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
"""The rules a parse may start with: reasoning may open the turn / the prompt opened it / no reasoning."""


def grammar_text() -> str:
    """The K2 grammar in PEG notation, one rule per line (``~x``: recovery alternative; ``@g(x)``:
    named group; ``TEXT:f``/``WS:f``: text (whitespace-only) routed to field ``f``)."""
    return _grammar_text(GRAMMAR)


@lru_cache(maxsize=None)
def machine(start_rule: str = "message", *, think: bool = True) -> Machine:
    """The compiled state table of ``GRAMMAR[start_rule]`` (cached). ``think``: ``<think>`` and
    ``</think>`` are markers (reasoning dialects); otherwise they are literal text."""
    return compile_machine(
        GRAMMAR,
        TOKEN_CLASSES,
        start_rule,
        markers=M.MARKERS,
        literal=() if think else THINK_CLASSES,
    )


K2: Final = OutputFormat(
    name="k2",
    token_classes=TOKEN_CLASSES,
    grammar=GRAMMAR,
    start_rules={"reasoning": "message", "prefilled": "message_prefilled", "plain": "message_plain"},
    think_classes=THINK_CLASSES,
    end_of_turn_ids=END_OF_TURN_IDS,
    tool_call_id_prefix=M.TOOL_CALL_ID_PREFIX,
    fields=FIELDS,
    compile=machine,
    reader=reader,
    as_text=AS_TEXT,
)
"""The K2 family's output format, as :mod:`kimi_chat.parse` and :mod:`kimi_chat.grammar` read it."""

FORMAT: Final = K2
"""This family's format, under the name :func:`kimi_chat.output.format.format_for` looks up."""
