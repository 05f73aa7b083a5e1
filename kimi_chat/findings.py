"""One finding about a request: what :func:`kimi_chat.lint` returns, what ``strict=True`` refuses
(:class:`~kimi_chat.errors.StrictModeError` carries them), what an invalid input's error carries
(:attr:`InvalidMessagesError.findings <kimi_chat.messages.InvalidMessagesError.findings>`) and what the
server's 400s name (:attr:`RequestError.finding <kimi_chat.errors.RequestError.finding>`). The validator
that makes them is :mod:`kimi_chat.validation`.

It imports nothing from kimi_chat, so the error classes and every stage can name it without an import cycle.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "LintWarning", "ERROR_CODES", "REFUSAL_CODES", "OPTION_CODES"]

ERROR_CODES = frozenset({
    "unknown-role", "developer-role", "missing-content", "missing-tool-call-id", "unknown-field",
    "invalid-field", "unread-kwarg", "unread-thinking-kwarg", "unread-preserve-thinking", "non-bool-option",
    "tool-without-function",
})
"""The lint codes of severity ``"error"``: what ``strict=True`` refuses (see :mod:`kimi_chat.checks.lint`)."""

REFUSAL_CODES = frozenset({"missing-field", "invalid-tool", "duplicate-tool-name", "invalid-parameter", "unrenderable"})
"""Codes lint never returns, of inputs refused outright (severity ``"error"``): a message field the render
schema requires (``missing-field``; a value of the wrong type is ``invalid-field``), a tool entry of the wrong
shape (``invalid-tool``), two tools of one name (``duplicate-tool-name``), input the official renderer cannot
render (``unrenderable``: a :class:`~kimi_chat.errors.RenderError`, e.g. arguments that are not JSON), and (the
API contract) a body parameter out of its range or type (``invalid-parameter``)."""

OPTION_CODES = ("unread-kwarg", "unread-thinking-kwarg", "unread-preserve-thinking", "non-bool-option")
"""The codes of a template option's findings (``field`` is the option's name; a server reads the options from
``chat_template_kwargs``)."""


@dataclass(frozen=True)
class Finding:
    """One finding. ``message_index`` is the message it is about (``None``: the whole request, a tool or an
    option), ``field`` the field within it (``tool_calls[0].id``), the tool's field (``tools[0].function``)
    or the template kwarg (``enable_thinking``); :attr:`path` joins them. ``api_code`` is the OpenAI error
    ``code`` a server answers it with (``missing_field``...; ``None``: ``invalid_value``); it is not part of
    the finding's identity."""

    code: str
    message_index: int | None
    text: str
    field: str | None = None
    api_code: str | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def severity(self) -> str:
        """``"error"`` (refused under ``strict=True``, see :data:`ERROR_CODES` and :data:`REFUSAL_CODES`) or
        ``"warning"``."""
        return "error" if self.code in ERROR_CODES or self.code in REFUSAL_CODES else "warning"

    @property
    def path(self) -> str:
        """Where the finding is: ``messages[2].tool_call_id``, ``tools[0].function``, ``thinking`` (a
        template option), ``""`` (the whole request)."""
        if self.message_index is None:
            return self.field or ""
        where = f"messages[{self.message_index}]"
        if self.field:
            where += self.field if self.field.startswith("[") else "." + self.field
        return where

    @property
    def message(self) -> str:
        """What is wrong and what the template or the API does with it (:attr:`text`)."""
        return self.text

    def __str__(self) -> str:
        path = self.path
        return f"{self.code}: {path}: {self.text}" if path else f"{self.code}: {self.text}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message_index": self.message_index, "field": self.field,
                "severity": self.severity, "text": self.text}


LintWarning = Finding
"""The name :func:`kimi_chat.lint`'s findings have always had: a :class:`Finding`."""
