"""Incremental parser of Kimi assistant output: reasoning, content and tool calls, whole or streamed.

``parse(text)`` is ``StreamParser().feed(text)`` + ``finish()``: for any split of a text into
chunks the merged deltas equal ``parse(text).to_openai()`` (by default only ``ok`` calls are handed out
as tool calls, the others reported as ``invalid_tool_calls``; with ``include_invalid=True`` every call
as written: ``parse(text)`` exactly), and ``StreamParser.message`` after ``finish()`` equals
``parse(text)`` (warnings included).

The package, along the seams a second format family needs (the format itself is data, in
:mod:`kimi_chat.formats`; this package names no family's markers):

* :mod:`~kimi_chat.parse.types`: the result types (:class:`ParsedMessage`, :class:`Delta`, ...);
* :mod:`~kimi_chat.parse.lexer`: :class:`MarkerLexer`, markers out of text chunks, with hold-back;
* :mod:`~kimi_chat.parse.toolcalls`: :func:`normalise_tools` (the one reading of ``tools``), call
  headers, name inference, arguments;
* :mod:`~kimi_chat.parse.output`: the text fields and the delta buffer;
* :mod:`~kimi_chat.parse.tags` / :mod:`~kimi_chat.parse.tagcalls`: K3's tags and their tool calls;
* :mod:`~kimi_chat.parse.fields`: where each field's text and each group's events go, per family;
* :mod:`~kimi_chat.parse.ids`: token ids make markers certain (``feed(text, token_ids)``);
* :mod:`~kimi_chat.parse.stream`: :class:`StreamParser` and :func:`parse`, driving the state table.

See ``docs/format.md`` for the format, the grammar and every rule with an example.
"""

from __future__ import annotations

from .lexer import MarkerLexer
from .stream import StreamParser, parse
from .toolcalls import normalise_tools
from .types import (
    Delta,
    ParsedMessage,
    ParsedToolCall,
    ParseWarning,
    StopReason,
    ToolCallDelta,
    ToolCallStatus,
)

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
