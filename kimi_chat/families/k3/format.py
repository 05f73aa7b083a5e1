"""The Kimi-K3 assistant OUTPUT format (XTML), as data: tags, grammar, start rules.

A K3 completion is markup. The prompt pre-fills ``<|open|>message role="assistant"<|sep|>`` and
``<|open|>think<|sep|>`` (thinking on) or ``<|open|>response<|sep|>`` (``thinking=False``); the model
writes the rest, as the official ``encoding_k3`` writes assistant history::

    REASONING<|close|>think<|sep|><|open|>response<|sep|>CONTENT<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
      <|open|>argument key="city" type="string"<|sep|>Zürich<|close|>argument<|sep|>
    <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>

* Terminals are *tags*: ``<|open|>NAME attrs<|sep|>`` and ``<|close|>NAME<|sep|>`` (the tag lexer,
  :class:`kimi_chat.families.k3.tags.TagLexer`, builds them out of the markers ``<|open|>``, ``<|close|>``,
  ``<|sep|>``; :data:`TAGS` says which tag name is which terminal class), ``<|end_of_msg|>`` and text.
  Tags with an unknown name, malformed tags and the other K3 special tokens are ``STRAY``.
* :data:`GRAMMAR`: the rules, with the groups the parser reacts to (``reasoning``, ``response``,
  ``tools``, ``call``, ``argument``, ``json``, ``close``, ``end``, ``trailing``) and
  :class:`~kimi_chat.output.peg.Recover` alternatives for what models get wrong.
* :data:`K3` / :data:`FORMAT`: the :class:`~kimi_chat.output.format.OutputFormat` record.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from ... import markers as M
from ...output.peg import Ahead, Eof, Expr, Group, Machine, Rest, Text, Tok, alt, compile_machine
from ...output.peg import grammar_text as _grammar_text
from ...output.peg import opt, recover, seq, star
from ...output.format import OutputFormat, reserved_hints
from .calls import reader

__all__ = ["TagSet", "TAGS", "TOKEN_CLASSES", "GRAMMAR", "START_RULES", "FIELDS", "END_OF_TURN_IDS",
           "K3", "FORMAT", "grammar_text", "machine"]


@dataclass(frozen=True)
class TagSet:
    """What a tag lexer needs: the three tag markers and the terminal class of each tag name.

    ``open_classes`` / ``close_classes``: tag name -> terminal class of ``<|open|>NAME ...<|sep|>`` /
    ``<|close|>NAME<|sep|>``; ``max_len``: the longest tag body (name and attributes) held back
    before the tag is released as stray.
    """

    open: str
    close: str
    sep: str
    open_classes: dict[str, str]
    close_classes: dict[str, str]
    max_len: int = 512


_CHANNELS = ("message", "think", "response", "tools", "call", "argument", "json")

TAGS: Final = TagSet(
    open=M.K3_OPEN.text,
    close=M.K3_CLOSE.text,
    sep=M.K3_SEP.text,
    open_classes={n: n.upper() + "_OPEN" for n in _CHANNELS},
    close_classes={n: n.upper() + "_CLOSE" for n in _CHANNELS},
)
"""The K3 tags: every channel name opens and closes (``MESSAGE_OPEN`` is another message starting)."""

TOKEN_CLASSES: Final[dict[str, tuple[object, ...]]] = {
    **{c: () for c in TAGS.open_classes.values()},
    **{c: () for c in TAGS.close_classes.values()},
    "END_OF_MSG": (M.K3_END_OF_MSG,),
}
"""Terminal class -> marker spellings. Tag classes have none: the tag lexer makes them."""

END_OF_TURN_IDS: Final[frozenset[int]] = frozenset({M.K3_END_OF_MSG.id}) if M.K3_END_OF_MSG.id else frozenset()
"""``<|end_of_msg|>``: the generation EOS (a relay may strip its text but pass the id)."""

FIELDS: Final[dict[str, str]] = {
    "content": "the response channel",
    "reasoning": "the think channel (reasoning_content)",
    "outside": "text outside any channel: kept as content, with a warning (whitespace ignored)",
    "between": "text inside the tools channel outside any call (whitespace ignored, else dropped "
    "with a warning)",
    "call_between": "text inside a call outside its elements (as between; kept in the call's raw)",
    "value": "an argument element's value",
    "json": "a json element's text (the call's arguments verbatim)",
    "ignored": "everything after the end of the message (ignored with a warning)",
}
"""Where :class:`~kimi_chat.output.peg.Text` goes, by field name."""

_ENDERS = ("MESSAGE_CLOSE", "END_OF_MSG", "MESSAGE_OPEN")


def _closers(what: str, kind: str, closers: tuple[str, ...], exact: str | None, *extra: Expr) -> Expr:
    """``exact`` (its own close tag), then the ``extra`` alternatives, else recovery: closed by what
    comes next (warned), or the end of the text (truncation, not warned)."""
    alts: list[Expr] = [Tok(exact)] if exact else []
    alts.extend(extra)
    for c in closers:
        alts.append(recover(Ahead(c), kind, f"{what} closed by {c.lower().replace('_', ' ')}"))
    alts.append(recover(Eof(), "truncated"))
    return alt(*alts)


GRAMMAR: Final[dict[str, Expr]] = {
    # thinking on: the prompt opened the think channel
    "message": seq("think_prefilled", Text("outside"), "after_think"),
    # thinking off (thinking=False): the prompt opened the response channel
    # a think channel there anyway (the model thought though the prompt opened the response): it is
    # reasoning, never content joined to the reply
    "message_response": seq(
        opt(recover(seq(Group("reasoning", seq(Tok("THINK_OPEN"), Text("reasoning"), "think_close")),
                        Text("outside"), opt(Tok("RESPONSE_OPEN"))), "think_when_off",
                    "think channel in an output whose prompt opened the response channel (thinking=False)")),
        "response_prefilled", Text("outside"), "after_response"),
    "think_prefilled": Group("reasoning", seq(
        Text("reasoning", ws_only=True),
        opt(recover(Tok("THINK_OPEN"), "redundant_think")),
        Text("reasoning"),
        "think_close")),
    # a response close in the think channel: the model skipped think and wrote its reply (already
    # streamed as reasoning when the tag comes); the tag closes the channel, warned
    "think_close": _closers("think channel", "think_unclosed",
                            ("RESPONSE_OPEN", "TOOLS_OPEN") + _ENDERS, "THINK_CLOSE",
                            recover(Tok("RESPONSE_CLOSE"), "reply_in_think",
                                    "think channel closed by a response close: the model skipped its think "
                                    "channel, the reasoning may be its reply")),
    "after_think": seq(
        opt(alt(seq("response", Text("outside")),
                recover(Ahead("TOOLS_OPEN"), "no_response", "tools channel without a response channel"))),
        "after_response"),
    "response": Group("response", seq(Tok("RESPONSE_OPEN"), Text("content"), "response_close")),
    "response_prefilled": Group("response", seq(Text("content"), "response_close")),
    "response_close": _closers("response channel", "response_unclosed", ("TOOLS_OPEN",) + _ENDERS,
                               "RESPONSE_CLOSE"),
    # the encoder writes one tools channel; calls in another are calls all the same, never content
    "after_response": seq(opt(seq("tools", Text("outside"))),
                          recover(star(seq("tools", Text("outside"))), "tools_reopened",
                                  "another tools channel: its calls continue the turn's"),
                          "message_end"),
    "tools": Group("tools", seq(Tok("TOOLS_OPEN"), Text("between"), star(seq("call", Text("between"))),
                                "tools_close")),
    "tools_close": _closers("tools channel", "tools_unclosed", _ENDERS, "TOOLS_CLOSE"),
    "call": Group("call", seq(
        Tok("CALL_OPEN"), Text("call_between"),
        alt(seq("json", Text("call_between")), star(seq("argument", Text("call_between")))),
        "call_close")),
    "call_close": _closers("call", "call_unclosed", ("CALL_OPEN", "TOOLS_CLOSE") + _ENDERS, "CALL_CLOSE"),
    "argument": Group("argument", seq(Tok("ARGUMENT_OPEN"), Text("value"), "argument_close")),
    "argument_close": _closers("argument element", "argument_unclosed",
                               ("ARGUMENT_OPEN", "CALL_CLOSE", "CALL_OPEN", "TOOLS_CLOSE") + _ENDERS,
                               "ARGUMENT_CLOSE"),
    "json": Group("json", seq(Tok("JSON_OPEN"), Text("json"), "json_close")),
    "json_close": _closers("json element", "json_unclosed",
                           ("CALL_CLOSE", "CALL_OPEN", "TOOLS_CLOSE") + _ENDERS, "JSON_CLOSE"),
    "message_end": alt(
        seq(Group("close", Tok("MESSAGE_CLOSE")), alt("end", Group("trailing", Rest("ignored")))),
        recover("end", "message_unclosed", "end of message without the message close tag"),
        recover(Group("end", seq(Tok("MESSAGE_OPEN"), Rest("ignored"))), "new_message",
                "the message was ended by the start of another message"),
        Eof(),
    ),
    "end": Group("end", seq(Tok("END_OF_MSG"), Rest("ignored"))),
}
"""The K3 output grammar, rule name -> expression."""

# K2's <|...|> markers (not its <think> tags: every K3 marker starts "<|", which keeps the lexer's scan of a
# long text a search for that two-character prefix; text with "<" alone is not even looked at)
_K2_SPELLINGS = [s for s in [m.text for m in M.MARKERS] + [M.TOOL_CALL_SECTION_BEGIN_SINGULAR.text,
                                                          M.TOOL_CALL_SECTION_END_SINGULAR.text]
                 if s not in M.K3_BY_TEXT and s[:2] == M.K3_OPEN.text[:2]]
AS_TEXT: Final[dict[str, str]] = {
    **{s: "a Kimi-K2 marker, no Kimi-K3 one: the output looks like a Kimi-K2 dialect's (parse it with that "
          "dialect: kimi-k2.6, kimi-k2.5, kimi-k2-thinking or kimi-k2-instruct)" for s in _K2_SPELLINGS},
    **reserved_hints({i: m.text for i, m in M.K3_BY_ID.items()}, M.NUM_BASE_TOKENS, M.K3_NUM_RESERVED_SPECIAL,
                     M.reserved_token_name),
}
"""Marker-shaped spellings that are no Kimi-K3 markers -> why: kept as text, with a warning."""

START_RULES: Final = ("message", "message_response")
"""Think channel pre-filled (thinking on, the default) / response channel pre-filled (thinking off)."""


def grammar_text() -> str:
    """The K3 grammar in PEG notation, one rule per line (notation as :func:`kimi_chat.output.peg.grammar_text`)."""
    return _grammar_text(GRAMMAR)


@lru_cache(maxsize=None)
def machine(start_rule: str = "message", *, think: bool = True) -> Machine:
    """The compiled state table of ``GRAMMAR[start_rule]`` (cached; ``think`` is accepted for the
    :class:`~kimi_chat.output.format.OutputFormat` interface: K3's tags are always markers)."""
    return compile_machine(GRAMMAR, TOKEN_CLASSES, start_rule, markers=M.K3_MARKERS)


K3: Final = OutputFormat(
    name="k3",
    token_classes=TOKEN_CLASSES,
    grammar=GRAMMAR,
    # "prefilled"/"reasoning": the think channel is open; "plain": thinking=False, response open
    start_rules={"reasoning": "message", "prefilled": "message", "plain": "message_response"},
    think_classes=(),
    end_of_turn_ids=END_OF_TURN_IDS,
    tool_call_id_prefix=M.TOOL_CALL_ID_PREFIX,
    fields=FIELDS,
    compile=machine,
    reader=reader,
    as_text=AS_TEXT,
    tags=TAGS,
)
"""The K3 family's output format."""

FORMAT: Final = K3
"""This family's format, under the name :func:`kimi_chat.output.format.format_for` looks up."""
