"""Exceptions of kimi_chat. Every error names where the problem is (message index, field, file)."""

from __future__ import annotations

__all__ = ["KimiChatError", "RenderError", "UnknownDialectError", "ReferenceDataError"]


class KimiChatError(Exception):
    """Base class of every kimi_chat error."""


class RenderError(KimiChatError, ValueError):
    """The official template cannot render this input (it would crash, or silently render something
    else than asked). ``message_index`` names the offending message when there is one."""

    def __init__(self, message: str, *, message_index: int | None = None, field: str | None = None):
        where = ""
        if message_index is not None:
            where = f"messages[{message_index}]"
            if field:
                where += f".{field}"
            where += ": "
        super().__init__(where + message)
        self.message_index = message_index
        self.field = field


class UnknownDialectError(KimiChatError, ValueError):
    """A dialect name that is neither a dialect nor an alias."""


class ReferenceDataError(KimiChatError, OSError):
    """A reference / model snapshot file is missing or corrupt (the message names the file)."""
