"""The Kimi-K3 family's dialect record (:data:`KIMI_K3`), registered by :mod:`kimi_chat.dialect_records`, which
asks each registered family for its records (:func:`kimi_chat.families.family_dialects`).

This module imports the record class and the spec only (no stage, not the family's record), so the registry
can load it while :mod:`kimi_chat.dialect_records` is still being imported.
"""

from __future__ import annotations

from ...dialect_records import DialectRecord, Status
from .spec import K3Spec

__all__ = ["KIMI_K3", "RECORDS"]

KIMI_K3 = DialectRecord(
    name="kimi-k3",
    status=Status.SINGLE_SOURCE,
    oracle="Kimi-K3/encoding_k3.py",
    summary="Kimi-K3 (July 2026): XTML markup of <|open|>/<|close|>/<|sep|>/<|end_of_msg|>, no Jinja template; "
    "encoded segment by segment; thinking_effort low/high/max (default max); tool results re-ordered by id",
    family="k3",
    spec=K3Spec(),
    model_names=("moonshotai/Kimi-K3",),
    options=("thinking", "thinking_effort", "tool_choice", "response_format", "response_schema", "image_prompts"),
)
"""The Kimi-K3 dialect (rendered by :mod:`kimi_chat.families.k3.render`)."""


RECORDS: tuple[DialectRecord, ...] = (KIMI_K3,)
"""The K3-family records, oldest first."""
