"""Incremental parser of Kimi assistant output: reasoning, content and tool calls, whole or streamed.

``parse(text)`` is ``StreamParser().feed(text)`` + ``finish()``: for any split of a text into
chunks the merged deltas equal ``parse(text).to_openai()`` (by default only ``ok`` calls are handed out
as tool calls, the others reported as ``invalid_tool_calls``; with ``include_invalid=True`` every call
as written: ``parse(text)`` exactly), and ``StreamParser.message`` after ``finish()`` equals
``parse(text)`` (warnings included).

The package, along the seams a second format family needs (the format itself is data, in
:mod:`kimi_chat.output.format`; this package names no family's markers):

* :mod:`~kimi_chat.output.types`: the result types (:class:`ParsedMessage`, :class:`Delta`, ...);
* :mod:`~kimi_chat.output.lexer`: :class:`MarkerLexer`, markers out of text chunks, with hold-back;
* :mod:`~kimi_chat.output.tools`: :func:`normalise_tools`, the one reading of ``tools`` every family shares;
* :mod:`~kimi_chat.families.k2.calls`: K2's call headers, name inference;
* :mod:`~kimi_chat.output.buffers`: the text fields, the delta buffer, what either family's calls share;
* :mod:`~kimi_chat.output.arguments`: arguments written as JSON text, read alike by every family;
* :mod:`~kimi_chat.families.k3.tags` / :mod:`~kimi_chat.families.k3.calls`: K3's tags and their tool calls;
* :mod:`~kimi_chat.output.fields`: where each field's text and each group's events go, per family;
* :mod:`~kimi_chat.output.ids`: token ids make markers certain (``feed(text, token_ids)``);
* :mod:`~kimi_chat.output.stream`: :class:`StreamParser` and :func:`parse`, driving the state table.

See ``docs/formats.md`` for the format, the grammar and every rule with an example.
"""

from __future__ import annotations

from .lexer import MarkerLexer
from .stream import StreamParser, parse
from .tools import normalise_tools
from .types import Delta, ParsedMessage, ParsedToolCall, ParseWarning, StopReason, ToolCallDelta, ToolCallStatus

__all__ = [
    "StopReason",
    "ToolCallStatus",
    "ParseWarning",
    "ParsedToolCall",
    "ParsedMessage",
    "ToolCallDelta",
    "Delta",
    "StreamParser",
    "parse",
    "MarkerLexer",
    "normalise_tools",
]
