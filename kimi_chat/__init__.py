"""kimi_chat: the Kimi-K2 chat format, right.

Public API (re-exported here): ``render``, dialects, message models, errors; parser, tokenizer and
tool declarations as they land.
"""

from __future__ import annotations

from .dialects import DIALECTS, Dialect, Status, dialect_names, get_dialect
from .errors import KimiChatError, ReferenceDataError, RenderError, ToolSchemaError, UnknownDialectError
from .messages import InvalidMessagesError, InvalidToolsError, Message, Tool
from .parse import (
    Delta,
    ParsedMessage,
    ParsedToolCall,
    ParseWarning,
    StopReason,
    StreamParser,
    ToolCallDelta,
    ToolCallStatus,
    parse,
)
from .render import Segment, render, render_segments
from .templates import template_path, template_text
from .tokenizer import KimiTokenizer
from .tokens import RenderedTokens, Span, extend_tokens, render_tokens
from .inspect import InspectError, Inspection, inspect_path
from .lint import LintWarning, lint, normalize_tool_call_ids
from .verify import Identification, TemplateCompileError, VerifyReport, identify, verify
from .tools_ts import tools_to_typescript

__all__ = [
    "DIALECTS",
    "Identification",
    "KimiTokenizer",
    "RenderedTokens",
    "Span",
    "extend_tokens",
    "render_tokens",
    "InspectError",
    "Inspection",
    "LintWarning",
    "TemplateCompileError",
    "VerifyReport",
    "identify",
    "inspect_path",
    "lint",
    "normalize_tool_call_ids",
    "verify",
    "Delta",
    "ParseWarning",
    "ParsedMessage",
    "ParsedToolCall",
    "StopReason",
    "StreamParser",
    "ToolCallDelta",
    "ToolCallStatus",
    "parse",
    "Dialect",
    "InvalidMessagesError",
    "InvalidToolsError",
    "KimiChatError",
    "Message",
    "ReferenceDataError",
    "RenderError",
    "Segment",
    "Status",
    "Tool",
    "ToolSchemaError",
    "UnknownDialectError",
    "dialect_names",
    "get_dialect",
    "render",
    "render_segments",
    "template_path",
    "template_text",
    "tools_to_typescript",
]
__version__ = "0.1.0"
