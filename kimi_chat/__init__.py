"""kimi_chat: the Kimi chat formats, right: the K2 family (Kimi-K2-Instruct, -0905, -Thinking, K2.5, K2.6)
and the K3 family (Kimi-K3's XTML), one package each under :mod:`kimi_chat.families`.

Public API, re-exported here:

* formatter: :func:`render`, :func:`render_segments`, dialects (:func:`get_dialect`, :data:`DIALECTS`),
  message models and their errors, :func:`tools_to_typescript` (K2.5, K2.6), :func:`template_path`;
* parser: :func:`parse`, :class:`StreamParser` and their results;
* tokens: :class:`KimiTokenizer`, :func:`render_tokens`, :func:`extend_tokens`;
* checks: :func:`identify`, :func:`verify`, :func:`inspect_path`, :func:`lint`,
  :func:`normalize_tool_call_ids`.

The native runtime (:mod:`kimi_chat.engines.native`, also ``kimi_chat.runtime``), GBNF export
(:mod:`kimi_chat.grammar`), the official rendering (:mod:`kimi_chat.reference.oracle`, also
``kimi_chat.oracle``) and the server plugins (:mod:`kimi_chat.servers`, also ``kimi_chat.integrations``)
are imported from their modules: they need optional extras.
"""

from __future__ import annotations

from . import _moved, compiled

compiled.install()  # the import hook of the mypyc-compiled modules, before any of them is imported

from .dialects import DIALECTS, Dialect, Status, dialect_names, get_dialect
from .errors import (KimiChatError, ReferenceDataError, RenderError, StrictModeError, ToolSchemaError, UnknownDialectError,
                     UnsupportedOptionError)
from .messages import InvalidMessagesError, InvalidToolsError, Message, Tool
from .output import (
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
from .prompt import Segment, render, render_segments
from .templates import template_path, template_text
from .tokens.tokenizer import KimiTokenizer
from .tokens.rendered import RenderedTokens, Span, extend_tokens, render_tokens
from .families.k2.tools_ts import tools_to_typescript

# checks (after the formatter: they build on it)
from .checks.inspection import InspectError, Inspection, inspect_path  # noqa: E402
from .checks.lint import LintWarning, lint, normalize_tool_call_ids  # noqa: E402
from .checks.verification import Identification, TemplateCompileError, VerifyReport, identify, verify  # noqa: E402

__all__ = [
    "Delta",
    "Dialect",
    "DIALECTS",
    "Identification",
    "InspectError",
    "Inspection",
    "InvalidMessagesError",
    "InvalidToolsError",
    "KimiChatError",
    "KimiTokenizer",
    "LintWarning",
    "Message",
    "ParsedMessage",
    "ParsedToolCall",
    "ParseWarning",
    "ReferenceDataError",
    "RenderedTokens",
    "RenderError",
    "StrictModeError",
    "Segment",
    "Span",
    "Status",
    "StopReason",
    "StreamParser",
    "TemplateCompileError",
    "Tool",
    "ToolCallDelta",
    "ToolCallStatus",
    "ToolSchemaError",
    "UnknownDialectError",
    "UnsupportedOptionError",
    "VerifyReport",
    "dialect_names",
    "extend_tokens",
    "get_dialect",
    "identify",
    "inspect_path",
    "lint",
    "normalize_tool_call_ids",
    "parse",
    "render",
    "render_segments",
    "render_tokens",
    "template_path",
    "template_text",
    "tools_to_typescript",
    "verify",
]
__version__ = "0.1.0"

_moved.install()  # old module paths (kimi_chat.runtime, kimi_chat.integrations, ...) stay importable
