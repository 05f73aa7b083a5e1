"""kimi_chat: the Kimi-K2 chat format, right.

Public API (re-exported here): ``render``, dialects, message models, errors; parser, tokenizer and
tool declarations as they land.
"""

from __future__ import annotations

from .errors import KimiChatError, ReferenceDataError, RenderError, UnknownDialectError

__all__ = ["KimiChatError", "ReferenceDataError", "RenderError", "UnknownDialectError"]
__version__ = "0.1.0"
