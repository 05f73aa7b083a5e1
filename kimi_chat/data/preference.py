"""Preference pairs (DPO): one prompt's ids and two answers as generated after it.

``prompt_ids`` are the official ids of the prompt messages plus the generation prompt (the request), rendered
once, so both answers share them by construction; ``chosen_ids`` / ``rejected_ids`` are each answer as the model
generated it after that prompt (:func:`~kimi_chat.data.samples.generated_turn`: reasoning kept, through the end
marker). Given as whole conversations (TRL's conversational form: ``chosen`` and ``rejected`` each the prompt
plus the answer), the two prompts must render to the same ids, else a
:class:`~kimi_chat.errors.RenderError` says where they differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import KimiChatError, RenderError, UnsupportedOptionError
from ..tokens.rendered import render_tokens
from ..tokens.tokenizer import KimiTokenizer
from .findings import Finding
from .samples import InvalidRowError, generated_turn

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow

__all__ = ["PREFERENCE_COLUMNS", "preference_pair", "preference_batch", "PreferenceBatch"]

PREFERENCE_COLUMNS = ("prompt_ids", "chosen_ids", "rejected_ids", "sample_id")
"""The columns of :func:`preference_schema`, in order."""


def preference_schema() -> "pyarrow.Schema":
    """``prompt_ids``, ``chosen_ids``, ``rejected_ids`` (list<int32>), ``sample_id`` (string)."""
    from .batch import pyarrow_module

    pa = pyarrow_module()
    ids = pa.list_(pa.int32())
    return pa.schema([pa.field("prompt_ids", ids), pa.field("chosen_ids", ids), pa.field("rejected_ids", ids),
                      pa.field("sample_id", pa.string())])


def _split(answer: Any, what: str) -> tuple[list[Any] | None, Mapping[str, Any]]:
    """``(prompt messages or None, answer message)`` of an answer given as a message, a one-message list or a
    whole conversation."""
    if isinstance(answer, Mapping):
        msgs: list[Any] = [answer]
    elif isinstance(answer, Sequence) and not isinstance(answer, (str, bytes)) and answer:
        msgs = list(answer)
    else:
        raise InvalidRowError(f"{what} must be an assistant message or a list of messages ending with one, "
                              f"got {type(answer).__name__}")
    last = msgs[-1]
    if not isinstance(last, Mapping) or last.get("role", "assistant") != "assistant":
        raise InvalidRowError(f"{what}: the answer (its last message) must be an assistant message")
    return (msgs[:-1] or None), {**last, "role": "assistant"}


def preference_pair(
    prompt_messages: Sequence[Any] | None,
    chosen: Any,
    rejected: Any,
    *,
    dialect: str | Dialect,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    special_tokens: str = "text",
    **options: Any,
) -> dict[str, list[int]]:
    """``{"prompt_ids", "chosen_ids", "rejected_ids"}``: the official ids of ``prompt_messages`` plus the
    generation prompt, and each answer as generated after it (reasoning kept, through its end-of-turn marker).

    ``chosen`` / ``rejected``: an assistant message, or a list of messages ending with one; a longer list is the
    whole conversation, whose messages before the answer are the prompt (``prompt_messages`` may then be
    ``None``; when both are given they must agree). Raises :class:`~kimi_chat.errors.RenderError` when the two
    answers' prompts do not render to the same ids (naming the first differing position), and the
    :class:`~kimi_chat.errors.KimiChatError` of a message the dialect refuses."""
    d = get_dialect(dialect)
    prompts = []
    answers = []
    for what, answer in (("chosen", chosen), ("rejected", rejected)):
        own, message = _split(answer, what)
        prompt = own if own is not None else (list(prompt_messages) if prompt_messages is not None else None)
        if prompt is None:
            raise InvalidRowError(f"{what}: no prompt (give prompt_messages, or {what} as the whole conversation)")
        if own is not None and prompt_messages is not None and list(prompt_messages) != own:
            raise InvalidRowError(f"{what}: its messages before the answer are not prompt_messages")
        prompts.append(prompt)
        answers.append(message)
    ids = [render_tokens(p, tokenizer=tokenizer, tools=tools, dialect=d, add_generation_prompt=True,
                         special_tokens=special_tokens, **options).ids  # type: ignore[arg-type]
           for p in (prompts if prompts[0] != prompts[1] else prompts[:1])]
    if len(ids) == 2 and ids[0] != ids[1]:
        at = next((k for k, (a, b) in enumerate(zip(*ids)) if a != b), min(map(len, ids)))
        raise RenderError(f"chosen and rejected do not share the prompt: their prompt ids differ from position {at} "
                          f"({len(ids[0])} and {len(ids[1])} ids)")
    chosen_ids, rejected_ids = (
        generated_turn(m, dialect=d, tokenizer=tokenizer, special_tokens=special_tokens, index=len(prompts[k]),
                       **options)
        for k, m in enumerate(answers))
    return {"prompt_ids": ids[0], "chosen_ids": chosen_ids, "rejected_ids": rejected_ids}


def _parsed(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """``row`` with its ``prompt`` / ``chosen`` / ``rejected`` / ``tools`` given as JSON strings parsed (how Parquet
    columns store messages and tool schemas, as :func:`~kimi_chat.data.batch.row_conversation` reads ``tools``);
    a string that is not JSON is left for the checks to name."""
    import json

    out = dict(row)
    for key in ("prompt", "chosen", "rejected", "tools"):
        v = out.get(key)
        if isinstance(v, str) and v[:1] in ("[", "{"):
            try:
                out[key] = json.loads(v)
            except ValueError as e:
                raise InvalidRowError(f"'{key}' is a string that is not JSON: {e}") from e
    return out


class PreferenceBatch:
    """What :func:`preference_batch` returns: ``batch`` (:func:`preference_schema`), ``findings`` (bad rows),
    ``rows``, ``errors``."""

    __slots__ = ("batch", "findings", "rows", "errors")

    def __init__(self, batch: "pyarrow.RecordBatch", findings: list[Finding], rows: int, errors: int) -> None:
        self.batch, self.findings, self.rows, self.errors = batch, findings, rows, errors


def preference_batch(
    rows: Sequence[Mapping[str, Any]],
    *,
    dialect: str | Dialect,
    tokenizer: KimiTokenizer,
    on_error: str = "record",
    first_row: int = 0,
    options: Mapping[str, Any] | None = None,
) -> PreferenceBatch:
    """Rows ``{"prompt": [...], "chosen": ..., "rejected": ..., "tools": [...], "id": ...}`` (TRL's
    conversational preference form; ``prompt`` may be absent when ``chosen`` / ``rejected`` are whole
    conversations) as one record batch of :func:`preference_schema`, bad rows as ``bad_row`` findings
    (``on_error="record"``) or raised (``"raise"``), as :func:`~kimi_chat.data.conversations_to_batch`."""
    from .batch import _error_path, _list_array, _sample_id, pyarrow_module

    if on_error not in ("record", "raise"):
        raise UnsupportedOptionError(f"on_error={on_error!r}: choose 'record' or 'raise'", option="on_error")
    pa = pyarrow_module()
    d = get_dialect(dialect)
    out: list[tuple[str, dict[str, list[int]]]] = []
    found: list[Finding] = []
    for k, row in enumerate(rows):
        index = first_row + k
        sid = _sample_id(row, index)
        try:
            if not isinstance(row, Mapping) or "chosen" not in row or "rejected" not in row:
                raise InvalidRowError("a preference row is an object with 'chosen' and 'rejected' (and 'prompt')")
            row = _parsed(row)
            out.append((sid, preference_pair(row.get("prompt"), row["chosen"], row["rejected"], dialect=d,
                                             tokenizer=tokenizer, tools=row.get("tools") or None,
                                             **dict(options or {}))))
        except (KimiChatError, TypeError, ValueError) as e:
            if on_error == "raise":
                raise InvalidRowError(f"row {index} (sample_id {sid!r}): {type(e).__name__}: {e}") from e
            found.append(Finding("bad_row", index, sid, f"{type(e).__name__}: {e}", _error_path(e)))
    batch = pa.RecordBatch.from_arrays(
        [*(_list_array(pa, [p[c] for _, p in out], "i", pa.int32()) for c in PREFERENCE_COLUMNS[:3]),
         pa.array([sid for sid, _ in out], pa.string())], schema=preference_schema())
    return PreferenceBatch(batch, found, len(rows), len(found))
