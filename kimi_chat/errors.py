"""Exceptions of kimi_chat. Every error names where the problem is (message index, field, file)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .findings import Finding, LintWarning

__all__ = [
    "KimiChatError",
    "RenderError",
    "UnknownDialectError",
    "ReferenceDataError",
    "ToolSchemaError",
    "StrictModeError",
    "UnsupportedOptionError",
    "NativeUnavailable",
    "MissingExtraError",
    "import_extra",
    "LoneSurrogateWarning",
    "RequestError",
]


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
        self.reason = message

    @property
    def finding(self) -> Finding:
        """This error as the validator's finding (:mod:`kimi_chat.validation`): code ``unrenderable``, refused
        in every mode, at ``messages[i].FIELD`` (``""``: the whole request)."""
        from .findings import Finding

        return Finding("unrenderable", self.message_index, self.reason, self.field)


class UnknownDialectError(KimiChatError, ValueError):
    """A dialect name that is neither a dialect nor an alias."""


class ReferenceDataError(KimiChatError, OSError):
    """A reference / model snapshot file is missing or corrupt (the message names the file)."""


class ToolSchemaError(KimiChatError, ValueError):
    """A tool declaration that the official K2.5 TypeScript tool encoder cannot encode.

    ``tool_name`` is the function name (``None`` when the tool entry has none), ``path`` a JSON
    pointer into the tool entry (``tools[i]``), e.g. ``/function/parameters/properties/unit/enum/1``;
    ``""`` is the tool entry itself. ``tool_index`` is ``i`` (``None`` for the ``tools`` list itself).
    """

    def __init__(
        self,
        message: str,
        *,
        tool_name: str | None = None,
        path: str = "",
        tool_index: int | None = None,
    ):
        where = "tools" if tool_index is None else f"tools[{tool_index}]"
        if tool_name is not None:
            where += f" (function {tool_name!r})"
        where += f" at {path!r}" if path else ""
        super().__init__(f"{where}: {message}")
        self.tool_name = tool_name
        self.path = path
        self.tool_index = tool_index
        self.reason = message


class StrictModeError(KimiChatError, ValueError):
    """``strict=True`` refused a request the official template renders: ``problems`` are the
    :func:`kimi_chat.lint` findings of severity ``"error"`` (each with its code, message index and
    field); the text lists them, e.g. ``unknown-role: messages[0].role: ...``."""

    def __init__(self, problems: Sequence[LintWarning]) -> None:
        self.problems: list[LintWarning] = list(problems)
        super().__init__("strict mode refuses this request: " + "; ".join(str(p) for p in self.problems))


class UnsupportedOptionError(KimiChatError, TypeError):
    """An ``apply_chat_template`` argument that asks for something other than the prompt text
    (``tokenize=True``, ``return_dict=True``, ``return_assistant_tokens_mask=True``) given to a function
    that returns text: ``option`` names it. Token ids, spans and the assistant mask come from
    :func:`kimi_chat.render_tokens`."""

    def __init__(self, message: str, *, option: str):
        super().__init__(message)
        self.option = option


class NativeUnavailable(KimiChatError, ImportError):
    """A native engine's binding (llama-cpp-python, ik-llama-cpp-python) is not installed or does not load
    (:mod:`kimi_chat.engines.native`, :mod:`kimi_chat.engines.ik`); the message says what to install."""


class MissingExtraError(KimiChatError, ModuleNotFoundError):
    """An optional dependency of the feature used is not installed; the message names the extra that
    brings it (``pip install -e '.[tokenizer]' (in the checkout)``). A ``ModuleNotFoundError``, as the import was."""


def import_extra(module: str, extra: str, what: str) -> Any:
    """``import module`` (of the optional ``extra``), or :class:`MissingExtraError` saying ``what`` needs it and
    how to install it (``pip install -e '.[extra]' (in the checkout)``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise MissingExtraError(f"{what} needs {module}: pip install -e '.[{extra}]' (in the kimi_chat checkout) "
                                f"({e})", name=e.name) from e


class LoneSurrogateWarning(UnicodeWarning):
    """Token-level rendering met a lone surrogate (U+D800..U+DFFF, e.g. a JSON ``\\ud800`` escape without
    its pair) in the prompt text. Such a string is not Unicode text: the official tokenizer (tiktoken)
    encodes it as U+FFFD, and so do the ids kimi_chat returns (official parity), so decoding them
    does not give back the rendered text. ``message_index`` and ``field`` name where it is
    (``message_index`` ``None``: not in a message, e.g. ``tools``)."""

    def __init__(self, message: str, *, message_index: int | None = None, field: str | None = None):
        where = f"messages[{message_index}]" if message_index is not None else ""
        if field:
            where += f".{field}" if where else field
        super().__init__(f"{where}: {message}" if where else message)
        self.message_index = message_index
        self.field = field


class RequestError(KimiChatError, ValueError):
    """A request an endpoint refuses (:mod:`kimi_chat.servers.contract`). ``status`` is the HTTP status
    (400 for a bad body; a server also raises it with 401, 404, 413, 429, 503...), ``param`` the field
    (``messages[2].tool_call_id``; ``None``: the whole body), ``code`` a short machine-readable reason
    (``invalid_value``, ``missing_field``...). ``finding`` is the validator's finding it refuses
    (:mod:`kimi_chat.validation`: the code and path ``lint`` and ``render(strict=True)`` give the same input;
    ``None`` for a refusal that is not about the request's content: an engine's limit, a status)."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = "invalid_value",
                 status: int = 400, type: str = "invalid_request_error", finding: Finding | None = None) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.finding = finding
        self.message = message
        self.param = param
        self.code = code
        self.status = status
        self.type = type

    def body(self) -> dict[str, object]:
        """The OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": str(self), "type": self.type, "param": self.param, "code": self.code}}
