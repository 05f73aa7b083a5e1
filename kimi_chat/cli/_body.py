"""The request-body fields besides ``messages`` / ``tools`` that can change the prompt, as template
options of the dialect the request is rendered with: the one reading of them, shared with the server's
request contract (:func:`kimi_chat.servers.contract.body_options`, whose doc lists the rules).

A field the dialect's template does not read is reported (a warning on stderr) instead of dropped
silently; ``tool_choice: "auto"`` and ``response_format: {"type": "text"}`` are the defaults and say
nothing. A bad field, or the same option given by the body field and by ``chat_template_kwargs`` with
different values, is refused (exit 2: :class:`~kimi_chat.errors.RequestError`), naming the field.
"""

from __future__ import annotations

from ..servers.contract import PROMPT_FIELDS, body_options

__all__ = ["PROMPT_FIELDS", "body_options"]
