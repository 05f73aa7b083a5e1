"""What kimi_chat's tools need of the Kimi-K2 family: ``inspect``'s markers, the
tokenizer of a model snapshot (the family record's hooks of the checks and the CLI)."""

from __future__ import annotations

from pathlib import Path

from ... import markers as M
from ...dialect_records import DialectRecord as Dialect
from ...tokens.tokenizer import KimiTokenizer

__all__ = ["K2_MARKERS", "K25_MARKERS", "inspected_markers", "reference_tokenizer",
           "snapshot_tokenizer"]

K2_MARKERS = (M.BOS, M.EOS, M.IM_END, M.IM_USER, M.IM_ASSISTANT, M.START_HEADER_ID, M.END_HEADER_ID, M.EOT,
              M.IM_SYSTEM, M.TOOL_CALLS_SECTION_BEGIN, M.TOOL_CALLS_SECTION_END, M.TOOL_CALL_BEGIN,
              M.TOOL_CALL_ARGUMENT_BEGIN, M.TOOL_CALL_END, M.IM_MIDDLE, M.UNK, M.PAD)
"""Markers of the July-2025 official tokenizer_config.json (every K2 model)."""
K25_MARKERS = (M.MEDIA_BEGIN, M.MEDIA_CONTENT, M.MEDIA_END, M.MEDIA_PAD, M.THINK_BEGIN, M.THINK_END)
"""Markers added by the K2.5/K2.6 line (checked for the dialects with K2.5 media, K2.5 and K2.6)."""


def inspected_markers(d: Dialect) -> tuple[M.Marker, ...]:
    """The markers a model of dialect ``d`` has at their official ids (:data:`K2_MARKERS`, and
    :data:`K25_MARKERS` for the K2.5 line)."""
    return K2_MARKERS + (K25_MARKERS if d.spec.media == "typed_media" else ())


def reference_tokenizer(d: Dialect) -> str:
    """The reference config that tokenizes ``d``: the K2.6-derived one for the reasoning dialects (their
    ``<think>`` tokens), the July-2025 K2-Instruct one otherwise."""
    return "k2.6" if d.reasoning else "k2"


def snapshot_tokenizer(directory: Path, config: str | None) -> KimiTokenizer:
    """The tokenizer of a K2 model snapshot (``tiktoken.model`` and ``tokenizer_config.json``, or ``config``)."""
    return KimiTokenizer.from_dir(directory, config=config)
