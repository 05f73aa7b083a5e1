"""kimi_chat: the Kimi chat formats, right: the K2 family (Kimi-K2-Instruct, -0905, -Thinking, K2.5, K2.6,
K2.7-Code) and the K3 family (Kimi-K3's XTML), one package each under :mod:`kimi_chat.families`.

Public API, re-exported here (``dir(kimi_chat)`` lists exactly it):

* the handle: :func:`get_dialect` takes a dialect name, an alias or a published model name
  (``"moonshotai/Kimi-K2.6"``) and returns the :class:`Dialect`, whose methods render, tokenize, parse,
  stream, constrain and lint in that dialect (:func:`register_dialect` adds a record);
* formatter: :func:`render`, :func:`render_segments`, dialects (:func:`get_dialect`, :data:`DIALECTS`),
  message models and their errors, :func:`tools_to_typescript` (K2.5, K2.6), :func:`template_path`;
* parser: :func:`parse`, :class:`StreamParser` and their results;
* tokens: :class:`KimiTokenizer`, :func:`render_tokens`, :func:`extend_tokens`;
* checks: :func:`identify`, :func:`verify`, :func:`inspect_path`, :func:`lint`,
  :func:`normalize_tool_call_ids`;
* validation: :class:`Validator` (a dialect and a :class:`Mode`: ``parity``, ``strict`` or ``api``), the one
  validator whose findings ``render(strict=True)``, ``parse``, ``lint`` and the server's 400s report.

The native runtime (:mod:`kimi_chat.engines.native`), GBNF export (:mod:`kimi_chat.grammar`), the official
rendering (:mod:`kimi_chat.reference.oracle`) and the server plugins (:mod:`kimi_chat.servers`) are imported
from their modules: they need optional extras.
"""

from .dialects import (DIALECTS, Dialect, Status, dialect_for_model, dialect_names, get_dialect, register_dialect,
                       unregister_dialect)
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
from .validation import Mode, Validator

# checks (after the formatter: they build on it)
from .checks.inspection import InspectError, Inspection, inspect_path  # noqa: E402
from .checks.lint import LintWarning, lint, normalize_tool_call_ids  # noqa: E402
from .checks.verification import Identification, TemplateCompileError, VerifyReport, identify, verify  # noqa: E402
from .dialects import bind_stages as _bind_stages  # noqa: E402


def _constraint(*args: object, **kwargs: object) -> object:
    from .grammar.request import constraint  # needs llguidance (the constraints extra): imported on first use

    return constraint(*args, **kwargs)  # type: ignore[arg-type]


_bind_stages(render=render, render_segments=render_segments, render_tokens=render_tokens, parse=parse,
             stream=StreamParser, lint=lint, constraint=_constraint, tokenizer=KimiTokenizer.from_reference)

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
    "Mode",
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
    "Validator",
    "VerifyReport",
    "dialect_for_model",
    "dialect_names",
    "extend_tokens",
    "get_dialect",
    "identify",
    "inspect_path",
    "lint",
    "normalize_tool_call_ids",
    "parse",
    "register_dialect",
    "render",
    "render_segments",
    "render_tokens",
    "template_path",
    "template_text",
    "tools_to_typescript",
    "unregister_dialect",
    "verify",
]
__version__ = "0.1.0"


def __dir__() -> list[str]:
    """The public API (what ``__all__`` names, and ``__version__``): no submodule, helper or ``__future__`` name."""
    return sorted([*__all__, "__version__"])
