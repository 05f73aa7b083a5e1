"""One finding about a request: what :func:`kimi_chat.lint` returns, what ``strict=True`` refuses
(:class:`~kimi_chat.errors.StrictModeError` carries them) and what the server's 400s name.

It imports nothing from kimi_chat, so the error classes and every stage can name it without an import cycle
(:mod:`kimi_chat.checks.lint` runs the rules and re-exports both names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LintWarning", "ERROR_CODES"]

ERROR_CODES = frozenset({
    "unknown-role", "developer-role", "missing-content", "missing-tool-call-id", "unknown-field",
    "invalid-field", "unread-kwarg", "unread-thinking-kwarg", "unread-preserve-thinking", "non-bool-option",
    "tool-without-function",
})
"""The codes of severity ``"error"``: what ``strict=True`` refuses (see :mod:`kimi_chat.checks.lint`)."""


@dataclass(frozen=True)
class LintWarning:
    """One finding. ``message_index`` is the message it is about (``None``: the whole request),
    ``field`` the field within it (``tool_calls[0].id``) or the template kwarg (``enable_thinking``)."""

    code: str
    message_index: int | None
    text: str
    field: str | None = None

    @property
    def severity(self) -> str:
        """``"error"`` (refused under ``strict=True``, see :data:`ERROR_CODES`) or ``"warning"``."""
        return "error" if self.code in ERROR_CODES else "warning"

    def __str__(self) -> str:
        if self.message_index is not None:
            where = f"messages[{self.message_index}]" + (f".{self.field}" if self.field else "") + ": "
        else:
            where = f"{self.field}: " if self.field else ""
        return f"{self.code}: {where}{self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message_index": self.message_index, "field": self.field,
                "severity": self.severity, "text": self.text}
