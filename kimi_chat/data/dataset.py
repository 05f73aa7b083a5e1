"""Training samples of a Hugging Face ``datasets.Dataset``: :func:`render_dataset`, the batch core
(:func:`kimi_chat.data.batch.conversations_to_batch`) run by ``Dataset.map(batched=True, num_proc=N)``.

The map gets a deterministic ``new_fingerprint``: the input dataset's own fingerprint and
:meth:`~kimi_chat.data.options.RenderOptions.fingerprint` (the kimi_chat version, the dialect, the tokenizer
files' hash, the options), so a second run with the same inputs is served from the ``datasets`` cache, and any
change (another tokenizer file, another policy, a new kimi_chat) renders again. The mapped function carries the
tokenizer's files, not the tokenizer: each worker process loads it once (:class:`~.options.TokenizerSpec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import RenderOptions
from .sources import ROW_FIELDS, normalize_row

if TYPE_CHECKING:
    import datasets

    from ..tokens.tokenizer import KimiTokenizer

__all__ = ["render_dataset", "DatasetRenderer"]


class DatasetRenderer:
    """The function ``Dataset.map`` calls on each batch (a ``pyarrow.Table`` of input rows, with their
    indices): the batch core's ``RecordBatch`` as a table. Picklable and small (its tokenizer is loaded in
    the process that calls it). The batch core's findings are dropped here: ``kimi-chat prepare`` reports them."""

    def __init__(self, options: RenderOptions) -> None:
        self.options = options

    def __call__(self, batch: Any, indices: list[int]) -> Any:
        import pyarrow as pa

        from .batch import SCHEMA

        rows = [normalize_row(r) for r in batch.to_pylist()]
        if not rows:
            return SCHEMA.empty_table()
        result = self.options.render(rows, first_row=indices[0] if indices else 0)
        return pa.Table.from_batches([result.batch], schema=SCHEMA)


def render_dataset(
    dataset: "datasets.Dataset",
    *,
    dialect: Any,
    tokenizer: "KimiTokenizer | None" = None,
    reasoning: str = "as-sampled",
    max_length: int | None = None,
    overlong: str = "drop",
    num_proc: int | None = None,
    batch_size: int = 256,
    load_from_cache_file: bool | None = None,
) -> "datasets.Dataset":
    """The training samples of ``dataset`` (rows ``{"messages", "tools", "id"}``; ``messages`` / ``tools`` as
    lists of dicts or as JSON strings) rendered with ``dialect`` as generated: a new ``Dataset`` with the columns
    of :data:`kimi_chat.data.batch.SCHEMA` (``input_ids``, ``labels``, ``assistant_masks``, ``length``,
    ``sample_id``, ``turns``).

    ``tokenizer``: ``None`` for the dialect's reference tokenizer (``$KIMI_CHAT_REFERENCE_DIR``).
    ``reasoning``, ``max_length``, ``overlong``: as :func:`~kimi_chat.data.batch.conversations_to_batch`; rows
    the core cannot render are left out (``kimi-chat prepare`` lists them in its report; here the core's
    findings are not kept). ``num_proc``: worker processes of ``Dataset.map``. The result is cached by the
    fingerprint described in this module; ``load_from_cache_file`` is passed to ``map`` as is."""
    import datasets

    from .batch import SCHEMA

    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(f"render_dataset takes a datasets.Dataset, got {type(dataset).__name__} "
                        "(for a DatasetDict, render each split: dd.map over its values, or dd['train'])")
    if "messages" not in dataset.column_names:
        raise ValueError(f"the dataset has no 'messages' column (columns: {', '.join(dataset.column_names)}); "
                         "each row needs messages, optionally tools and id")
    options = RenderOptions.make(dialect, tokenizer, reasoning=reasoning, max_length=max_length, overlong=overlong,
                                 on_error="record")
    options.render([], first_row=0)  # the core's refusals (a policy the dialect cannot do) here, not in a worker
    inputs = dataset.select_columns([c for c in ROW_FIELDS if c in dataset.column_names])
    fingerprint = options.fingerprint(f"dataset={dataset._fingerprint}", f"batch_size={batch_size}")
    out = inputs.with_format("arrow").map(
        DatasetRenderer(options),
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=inputs.column_names,
        features=datasets.Features.from_arrow_schema(SCHEMA),
        new_fingerprint=fingerprint,
        load_from_cache_file=load_from_cache_file,
        desc=f"kimi_chat render ({options.dialect})",
    )
    return out.with_format(None)

