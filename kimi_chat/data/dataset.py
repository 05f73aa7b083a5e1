"""Training samples of a Hugging Face ``datasets.Dataset``: :func:`render_dataset`, the batch core
(:func:`kimi_chat.data.batch.conversations_to_batch`) run by ``Dataset.map(batched=True, num_proc=N)``, and
:func:`render_dataset_with_findings`, the same run with the data report's findings kept.

The map gets a deterministic ``new_fingerprint``: the input dataset's own fingerprint and
:meth:`~kimi_chat.data.options.RenderOptions.fingerprint` (the kimi_chat version, the dialect, the tokenizer
files' hash, the options), so a second run with the same inputs is served from the ``datasets`` cache, and any
change (another tokenizer file, another policy, a new kimi_chat) renders again. The mapped function carries the
tokenizer's files, not the tokenizer: each worker process loads it once (:class:`~.options.TokenizerSpec`).

The findings (a bad row, reasoning the official template drops, an overlong sample...) travel with the samples
through the map, cached with them: each batch's findings ride on one extra row of the mapped table (no ids,
``length`` 0, the findings as JSON), which the samples leave out (a ``filter`` on ``length``) and the findings
dataset is made of. A trainer gets a dataset of samples only (the columns of
:data:`kimi_chat.data.batch.SCHEMA`); the findings are a dataset of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .options import RenderOptions
from .sources import ROW_FIELDS, normalize_row, warn_struct_json_fields

if TYPE_CHECKING:
    import datasets

    from ..tokens.tokenizer import KimiTokenizer

__all__ = ["render_dataset", "render_dataset_with_findings", "RenderedDataset", "DatasetRenderer", "FINDING_COLUMNS"]

FINDINGS = "findings"
"""The column of the mapped table holding a batch's findings (JSON), on its extra row."""
FINDING_COLUMNS = ("kind", "row", "sample_id", "message", "path", "count")
"""The columns of :attr:`RenderedDataset.findings`: the fields of :class:`kimi_chat.data.findings.Finding`."""


def _mapped_schema() -> Any:
    import pyarrow as pa

    from .batch import SCHEMA

    return SCHEMA.append(pa.field(FINDINGS, pa.string()))


class DatasetRenderer:
    """The function ``Dataset.map`` calls on each batch (a ``pyarrow.Table`` of input rows, with their
    indices): the batch core's samples as a table, with one extra row holding the batch's findings (JSON) when
    it has any. Picklable and small (its tokenizer is loaded in the process that calls it)."""

    def __init__(self, options: RenderOptions) -> None:
        self.options = options

    def __call__(self, batch: Any, indices: list[int]) -> Any:
        import json

        import pyarrow as pa

        schema = _mapped_schema()
        rows = [normalize_row(r) for r in batch.to_pylist()]
        if not rows:
            return schema.empty_table()
        result = self.options.render(rows, first_row=indices[0] if indices else 0)
        b = result.batch
        samples = pa.Table.from_batches([b]).append_column(FINDINGS, pa.nulls(b.num_rows, pa.string()))
        if not result.findings:
            return samples.cast(schema)
        carrier = {name: [[]] if pa.types.is_list(schema.field(name).type) else [None] for name in schema.names}
        carrier.update(length=[0], sample_id=[""], **{FINDINGS: [json.dumps([f.to_dict() for f in result.findings],
                                                                           ensure_ascii=False)]})
        return pa.concat_tables([samples.cast(schema), pa.Table.from_pydict(carrier, schema=schema)])


def _is_sample(length: list[int]) -> list[bool]:
    return [n > 0 for n in length]


def _is_carrier(length: list[int]) -> list[bool]:
    return [n == 0 for n in length]


def _explode(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    import json

    out: dict[str, list[Any]] = {c: [] for c in FINDING_COLUMNS}
    for text in batch[FINDINGS]:
        for f in json.loads(text):
            for c in FINDING_COLUMNS:
                out[c].append(f.get(c))
    return out


@dataclass
class RenderedDataset:
    """What :func:`render_dataset_with_findings` gives: ``samples``, the training samples (the columns of
    :data:`kimi_chat.data.batch.SCHEMA`: what a trainer takes), and ``findings``, the data report's findings of
    every input row, in row order (columns :data:`FINDING_COLUMNS`: ``kind``, ``row``, ``sample_id``,
    ``message``, ``path``, ``count``; ``kimi_chat.data.KINDS`` says what each kind means)."""

    samples: "datasets.Dataset"
    findings: "datasets.Dataset"

    def totals(self) -> dict[str, int]:
        """How many of each kind (a finding's ``count`` is how many it stands for)."""
        from .report import totals_by_kind

        return totals_by_kind(self.findings.select_columns(["kind", "count"]).to_list())

    def bad_rows(self) -> "datasets.Dataset":
        """The findings of the rows that gave no sample because the dialect refuses them (``bad_row``)."""
        return self.findings.filter(lambda kind: [k == "bad_row" for k in kind], input_columns="kind",
                                    batched=True)


def render_dataset_with_findings(
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
) -> RenderedDataset:
    """:func:`render_dataset`, with the findings kept: a :class:`RenderedDataset` of the samples and the
    findings (both cached with the map, by the fingerprint described in this module)."""
    import datasets

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
    warn_struct_json_fields(inputs.data.schema, "render_dataset")
    fingerprint = options.fingerprint(f"dataset={dataset._fingerprint}", f"batch_size={batch_size}")
    mapped = inputs.with_format("arrow").map(
        DatasetRenderer(options),
        batched=True,
        batch_size=batch_size,
        with_indices=True,
        num_proc=num_proc,
        remove_columns=inputs.column_names,
        features=datasets.Features.from_arrow_schema(_mapped_schema()),
        new_fingerprint=fingerprint,
        load_from_cache_file=load_from_cache_file,
        desc=f"kimi_chat render ({options.dialect})",
    ).with_format(None)
    cache = {"load_from_cache_file": load_from_cache_file, "batched": True, "input_columns": "length"}
    samples = mapped.filter(_is_sample, new_fingerprint=f"{fingerprint}-samples", **cache).remove_columns(FINDINGS)
    carriers = mapped.filter(_is_carrier, new_fingerprint=f"{fingerprint}-carriers", **cache)
    features = datasets.Features({"kind": datasets.Value("string"), "row": datasets.Value("int64"),
                                  "sample_id": datasets.Value("string"), "message": datasets.Value("string"),
                                  "path": datasets.Value("string"), "count": datasets.Value("int64")})
    if carriers.num_rows == 0:  # no finding at all: map skips an empty dataset and would give no columns
        findings = datasets.Dataset.from_dict({c: [] for c in features}, features=features)
    else:
        findings = carriers.map(_explode, batched=True, remove_columns=carriers.column_names,
                                new_fingerprint=f"{fingerprint}-findings", load_from_cache_file=load_from_cache_file,
                                features=features)
    return RenderedDataset(samples, findings)


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
    """The training samples of ``dataset`` (rows ``{"messages", "tools", "id"}``, Kimi-K3 rows optionally with
    ``image_prompts``; ``messages`` / ``tools`` as lists of dicts or as JSON strings) rendered with ``dialect``
    as generated: a new ``Dataset`` with the columns of :data:`kimi_chat.data.batch.SCHEMA` (``input_ids``,
    ``labels``, ``assistant_masks``, ``length``, ``sample_id``, ``turns``), what a trainer takes.

    ``tokenizer``: ``None`` for the dialect's reference tokenizer (``$KIMI_CHAT_REFERENCE_DIR``).
    ``reasoning``, ``max_length``, ``overlong``: as :func:`~kimi_chat.data.batch.conversations_to_batch`. Rows
    the core cannot render give no sample: a ``UserWarning`` says how many; the findings themselves (each bad
    row with its index and the error naming the field, and the rest of the data report) are
    :func:`render_dataset_with_findings`'s. ``num_proc``: worker processes of ``Dataset.map``. The result is
    cached by the fingerprint described in this module; ``load_from_cache_file`` is passed to ``map`` as is."""
    import warnings

    out = render_dataset_with_findings(dataset, dialect=dialect, tokenizer=tokenizer, reasoning=reasoning,
                                       max_length=max_length, overlong=overlong, num_proc=num_proc,
                                       batch_size=batch_size, load_from_cache_file=load_from_cache_file)
    bad = out.totals().get("bad_row", 0)
    if bad:
        warnings.warn(f"render_dataset: {bad} row(s) of the dataset give no sample (the dialect refuses them); "
                      "render_dataset_with_findings(...).bad_rows() names each row and the field", stacklevel=2)
    return out.samples
