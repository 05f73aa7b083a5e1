"""The Arrow batch core: rows of conversations -> one ``pyarrow.RecordBatch`` of samples as generated, plus
the findings the data report needs. What ``datasets.map``, the ``prepare`` command and Ray Data's
``map_batches`` run, one tokenizer per worker.

pyarrow is imported when first needed (``pip install -e '.[data]' (in the checkout)``): :data:`SCHEMA` is built on first
access.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import KimiChatError, UnsupportedOptionError
from ..tokens.tokenizer import KimiTokenizer
from .findings import Finding, conversation_findings
from .image_prompts import row_image_prompts
from .samples import IGNORE_INDEX, InvalidRowError, Sample, conversation_samples, reasoning_options

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow

__all__ = ["SCHEMA", "COLUMNS", "BatchResult", "conversations_to_batch", "samples_to_batch", "pyarrow_module",
           "row_conversation"]

COLUMNS = ("input_ids", "labels", "assistant_masks", "length", "sample_id", "turns")
"""The columns of :data:`SCHEMA`, in order."""

OVERLONG = ("drop", "truncate")
ON_ERROR = ("record", "raise")


def pyarrow_module() -> Any:
    """``pyarrow``, or an ImportError that says which extra installs it."""
    try:
        import pyarrow
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("kimi_chat.data needs pyarrow: pip install -e '.[data]' (in the checkout)") from e
    return pyarrow


def _schema() -> "pyarrow.Schema":
    pa = pyarrow_module()
    return pa.schema([
        pa.field("input_ids", pa.list_(pa.int32())),
        pa.field("labels", pa.list_(pa.int32())),
        pa.field("assistant_masks", pa.list_(pa.int8())),
        pa.field("length", pa.int32()),
        pa.field("sample_id", pa.string()),
        pa.field("turns", pa.list_(pa.int32())),
    ])


def __getattr__(name: str) -> Any:  # SCHEMA, built when first asked for (pyarrow imported then)
    if name == "SCHEMA":
        schema = _schema()
        globals()["SCHEMA"] = schema
        return schema
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class BatchResult:
    """What :func:`conversations_to_batch` returns: ``batch`` (:data:`SCHEMA`, the samples of every good
    row, in row order), ``findings`` (everything the data report must say about these rows), ``rows`` (rows
    read) and ``errors`` (rows refused, each a ``bad_row`` finding)."""

    batch: "pyarrow.RecordBatch"
    findings: list[Finding] = field(default_factory=list)
    rows: int = 0
    errors: int = 0


def _offsets(pa: Any, lengths: Sequence[int]) -> Any:
    """The int32 offsets array of lists of ``lengths``."""
    offsets = array("i", [0])
    total = 0
    for n in lengths:
        total += n
        offsets.append(total)
    return pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)])


def _flat(pa: Any, lists: Sequence[Sequence[int]], typecode: str, value_type: Any) -> Any:
    """The values of ``lists`` back to back, as one array of ``value_type`` (no per-element Python objects
    through pyarrow)."""
    flat: list[int] = []
    for x in lists:
        flat += x  # pointers copied; the ints converted once below, from a list (array's fast path)
    values = array(typecode, flat)
    return pa.Array.from_buffers(value_type, len(values), [None, pa.py_buffer(values)])


def _list_array(pa: Any, lists: Sequence[Sequence[int]], typecode: str, value_type: Any) -> Any:
    """A ``list<value_type>`` array of ``lists``, built from flat buffers."""
    return pa.ListArray.from_arrays(_offsets(pa, [len(x) for x in lists]), _flat(pa, lists, typecode, value_type))


def samples_to_batch(samples: Sequence[tuple[str, Sample]]) -> "pyarrow.RecordBatch":
    """``(sample_id, sample)`` pairs as one record batch of :data:`SCHEMA`. The id columns share one offsets
    array; ``assistant_masks`` is computed from the labels' values by pyarrow (``labels != -100``)."""
    pa = pyarrow_module()
    import pyarrow.compute as pc

    schema = globals().get("SCHEMA") or __getattr__("SCHEMA")
    ss = [s for _, s in samples]
    lengths = [len(s.input_ids) for s in ss]
    offsets = _offsets(pa, lengths)
    labels = _flat(pa, [s.labels for s in ss], "i", pa.int32())
    masks = pc.not_equal(labels, pa.scalar(IGNORE_INDEX, pa.int32())).cast(pa.int8())
    return pa.RecordBatch.from_arrays([
        pa.ListArray.from_arrays(offsets, _flat(pa, [s.input_ids for s in ss], "i", pa.int32())),
        pa.ListArray.from_arrays(offsets, labels),
        pa.ListArray.from_arrays(offsets, masks),
        pa.array(lengths, pa.int32()),
        pa.array([sid for sid, _ in samples], pa.string()),
        _list_array(pa, [s.turns for s in ss], "i", pa.int32()),
    ], schema=schema)


def row_conversation(row: Any) -> tuple[list[Any], list[Any] | None]:
    """``(messages, tools)`` of an input row ``{"messages": [...], "tools": [...], "id": ...}``; ``tools``
    may be a JSON string (as some datasets store them). Raises :class:`~kimi_chat.data.sample.InvalidRowError`
    naming the field."""
    if not isinstance(row, Mapping):
        raise InvalidRowError(f"a row must be an object with a 'messages' list, got {type(row).__name__}")
    if "messages" not in row:
        raise InvalidRowError("the row has no 'messages' field (a row is {\"messages\": [...], \"tools\": [...], "
                              "\"id\": ...})")
    messages = row["messages"]
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidRowError(f"'messages' must be a list of messages, got {type(messages).__name__}")
    if not messages:
        raise InvalidRowError("'messages' is empty")
    tools = row.get("tools")
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError as e:
            raise InvalidRowError(f"'tools' is a string that is not JSON: {e}") from e
    if tools is not None and (isinstance(tools, (bytes, Mapping)) or not isinstance(tools, Sequence)):
        raise InvalidRowError(f"'tools' must be a list of tools, got {type(tools).__name__}")
    return list(messages), (list(tools) if tools else None)


def _error_path(e: Exception) -> str | None:
    """The field a refusal names (``messages[3].content``, ``tools[0]``), when it names one."""
    errors = getattr(e, "errors", None)
    if isinstance(e, KimiChatError) and isinstance(errors, list) and errors and isinstance(errors[0], tuple):
        i, f, _ = errors[0]  # InvalidMessagesError: (index, field, problem), the first one
        where = getattr(e, "what", "messages") + ("" if i is None else f"[{i}]")
        return where + ("" if not f else f if f.startswith("[") else f".{f}")
    i = getattr(e, "message_index", None)
    if isinstance(i, int):
        f = getattr(e, "field", None)
        return f"messages[{i}]" + (f".{f}" if f else "")
    if isinstance(getattr(e, "tool_index", None), int):
        return f"tools[{e.tool_index}]"  # type: ignore[attr-defined]
    m = re.match(r"(messages\[\d+\](?:\.\w+)*):", str(e))
    return m.group(1) if m else None


def _sample_id(row: Any, index: int) -> str:
    if isinstance(row, Mapping) and row.get("id") is not None:
        return str(row["id"])
    return str(index)


def conversations_to_batch(
    rows: Sequence[Mapping[str, Any]],
    *,
    dialect: str | Dialect,
    tokenizer: KimiTokenizer,
    reasoning: str = "as-sampled",
    max_length: int | None = None,
    overlong: str = "drop",
    on_error: str = "record",
    first_row: int = 0,
    options: Mapping[str, Any] | None = None,
    findings: bool = True,
) -> BatchResult:
    """The samples of ``rows`` (conversations ``{"messages": [...], "tools": [...], "id": ...}``) as one
    record batch of :data:`SCHEMA`, with the findings of the data report.

    ``sample_id`` is ``str(row["id"])`` when given, else the row's 0-based index in the input
    (``first_row`` + its position). ``reasoning``: the policy of :func:`~kimi_chat.data.conversation_samples`.
    A sample longer than ``max_length`` ids is dropped (``overlong="drop"``) or cut after the last trained
    turn that fits (``"truncate"``: a turn boundary, dropped when even its first turn does not fit), with an
    ``over_max_length`` finding either way. A row that is not a conversation the dialect renders is a
    ``bad_row`` finding naming the row, sample id and error (``on_error="record"``), or raises
    :class:`~kimi_chat.data.sample.InvalidRowError` naming them, from the
    :class:`~kimi_chat.errors.KimiChatError` (``on_error="raise"``). ``options``: the dialect's render
    options; ``findings=False`` skips the per-conversation checks (bad rows and length are still reported).
    """
    if overlong not in OVERLONG:
        raise UnsupportedOptionError(f"overlong={overlong!r}: choose 'drop' or 'truncate'", option="overlong")
    if on_error not in ON_ERROR:
        raise UnsupportedOptionError(f"on_error={on_error!r}: choose 'record' or 'raise'", option="on_error")
    if max_length is not None and (type(max_length) is not int or max_length < 1):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
    d = get_dialect(dialect)
    opts = dict(options or {})
    reasoning_options(d, reasoning, opts, tokenizer=tokenizer)  # refuse a policy the dialect cannot, once
    out: list[tuple[str, Sample]] = []
    found: list[Finding] = []
    errors = 0
    for k, row in enumerate(rows):
        index = first_row + k
        sid = _sample_id(row, index)
        try:
            messages, tools = row_conversation(row)
            messages, images = row_image_prompts(row, d, messages, tools)  # K3: the row's image_prompts
            result = conversation_samples(messages, dialect=d, tokenizer=tokenizer, tools=tools,
                                          reasoning=reasoning, warn=False, **opts)  # type: ignore[arg-type]
            if images is not None:
                result.samples = images.apply(result.samples, tokenizer)
            row_findings = (conversation_findings(messages, dialect=d, tools=tools, row=index, sample_id=sid, **opts)
                            if findings else [])
        except (KimiChatError, TypeError, ValueError) as e:
            if on_error == "raise":
                raise InvalidRowError(f"row {index} (sample_id {sid!r}): {type(e).__name__}: {e}") from e
            errors += 1
            found.append(Finding("bad_row", index, sid, f"{type(e).__name__}: {e}", _error_path(e)))
            continue
        found += row_findings
        if result.reasoning_dropped:
            found.append(Finding(
                "reasoning_dropped", index, sid,
                f"the official {d.name} rendering of this conversation drops the reasoning of "
                f"{result.reasoning_dropped} assistant turn(s)"
                + (" (kept in these samples)" if reasoning != "official" else
                   " (dropped in this sample: reasoning='official')"),
                count=result.reasoning_dropped))
        if not result.samples:
            found.append(Finding("no_trained_turn", index, sid, "no assistant message to train: no sample"))
        for s in result.samples:
            if max_length is not None and len(s) > max_length:
                cut = s.truncated(max_length) if overlong == "truncate" else None
                if cut is None:
                    what = (f"dropped (truncate: even its first trained turn, messages[{s.turns[0]}], ends past "
                            f"{max_length})" if overlong == "truncate" else "dropped")
                else:
                    what = (f"truncated to {len(cut)} ids after messages[{cut.turns[-1]}] (turns "
                            f"{s.turns[len(cut.turns):]} not trained)")
                found.append(Finding("over_max_length", index, sid,
                                     f"sample of {len(s)} ids (turns {s.turns}) over max_length {max_length}: {what}"))
                if cut is None:
                    continue
                s = cut
            out.append((sid, s))
    return BatchResult(samples_to_batch(out), found, len(rows), errors)
