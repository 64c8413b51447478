"""lighteval details: ``details/{model}/{date}/details_{task}_{date}.parquet``.

lighteval (``--save-details``) writes one parquet file per task and run, one row per document
with three struct columns: ``doc`` (``query``, ``choices``, ``gold_index``, ``task_name``, a
positional ``id``), ``metric`` (one field per sample-level metric) and ``model_response``. The
model is the path between ``details/`` and the date folder (lighteval's ``model_name``, which
may hold a ``/``); the task (one benchmark per task) is ``doc.task_name``, else the file name's,
with its few-shot suffix (``arith|0``) since a 5-shot run is another condition.

Items are keyed ``"{task}/{key}"`` where ``key`` is :func:`doc_key`, the first 16 hex digits of
the SHA-256 of the document's ``query``, ``choices`` and ``gold_index`` (as canonical JSON):
``doc.id`` is the document's position in the evaluated split, which changes when the dataset
is filtered, re-ordered or truncated (``--max-samples``), so it cannot tie one model's row to
another's. Two documents with the same query, choices and gold are indistinguishable and
refused.

The score is one named ``metric`` field (a comma-separated list: each file takes the first it
has; several fields in [0, 1] and none named: an error lists them). Booleans and 0/1 integers
are 0/1, other numbers graded scores; a missing, NaN, infinite or out-of-range value is refused
naming the file, the row and ``metric.<name>``. Non-numeric fields (corpus-level metrics keep
per-doc tuples for their corpus function) are never scores. lighteval's ``num_samples``
generations of a doc are already reduced to one value per metric (``maj@k``, ``pass@k``…) in the
details, so each row is one sample. ``model_response.input_tokens`` / ``output_tokens`` (token
ids), when filled, give the token cost (their lengths).

Several runs (date folders) of one model: the latest date is read and a note says so.
lighteval ships no light reader (its ``load_details_datasets`` goes through ``datasets``), so the
parquet is read with pyarrow, within :func:`app.ingest.archives.parquet_table`'s caps.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from app.ingest.archives import ArchiveRefused, parquet_table
from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    ItemCosts,
    LineError,
    ParsedResults,
    finalize_values,
)

DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
DETAILS_FILE = re.compile(rf"^details_(?P<task>.+)_(?P<date>{DATE})\.parquet$")
COLUMNS = ("doc", "metric", "model_response")
COST_SOURCE = "lighteval model_response input_tokens / output_tokens (token ids counted)"
KEY_DIGITS = 16


@dataclass(frozen=True)
class DetailsPath:
    """What a details file's path says: model (``None`` without a ``details/`` folder), run
    date and task (``None`` when the name is not lighteval's)."""

    model: str | None
    date: str | None
    task: str | None


def details_path(name: str | None) -> DetailsPath:
    """``out/details/org/model/2025-01-01T00-00-00.1/details_arith|0_2025-….parquet`` ->
    model ``org/model``, that date, task ``arith|0``."""
    parts = [p for p in (name or "").replace("\\", "/").split("/") if p]
    if not parts:
        return DetailsPath(None, None, None)
    m = DETAILS_FILE.match(parts[-1])
    task, date = (m.group("task"), m.group("date")) if m else (None, None)
    model = None
    anchors = [i for i, p in enumerate(parts[:-2]) if p == "details"]
    if anchors and re.fullmatch(DATE, parts[-2]) and anchors[-1] + 1 < len(parts) - 2:
        model = "/".join(parts[anchors[-1] + 1 : -2])
        date = parts[-2]
    return DetailsPath(model, date, task)


def is_lighteval_details(data: bytes, filename: str | None = None) -> bool:
    """A parquet file whose top-level columns are lighteval's ``doc``/``metric``/
    ``model_response`` structs; an unreadable one named ``details_{task}_{date}.parquet`` too
    (so it gets this parser's error)."""
    if data[:4] != b"PAR1":
        return False
    import pyarrow.parquet as pq

    try:
        names = set(pq.ParquetFile(io.BytesIO(data)).schema_arrow.names)
    except Exception:
        return details_path(filename).task is not None
    return set(COLUMNS) <= names


def doc_key(query: str, choices: Sequence[str] | None, gold_index: int | Sequence[int]) -> str:
    """The stable key of a lighteval document (see the module docstring)."""
    gold = [gold_index] if isinstance(gold_index, int) else list(gold_index)
    canon = orjson.dumps({"query": query, "choices": list(choices or []), "gold_index": gold})
    return hashlib.sha256(canon).hexdigest()[:KEY_DIGITS]


def select_details(
    names: Sequence[str | None], *, one_model: bool = False
) -> tuple[list[int], tuple[str, ...]]:
    """Which of the details files ``names`` to read: per model, those of its latest run date
    (0-based indices, in order) and a note per model whose older runs were left out. With
    ``one_model``, files of several models are an error naming the first file of another."""
    paths = [details_path(n) for n in names]
    models = list(dict.fromkeys(p.model for p in paths if p.model is not None))
    if one_model and len(models) > 1:
        k = next(i for i, p in enumerate(paths) if p.model == models[1])
        raise IngestError.single(
            f"details of several models ({', '.join(models)}): upload one model's details; "
            f"this file is of {models[1]!r}, the first of {models[0]!r}",
            field=f"{names[k]}:model",
        )
    latest: dict[str | None, str | None] = {}
    for p in paths:
        if p.date is not None and (latest.get(p.model) is None or p.date > latest[p.model]):
            latest[p.model] = p.date
    keep = [i for i, p in enumerate(paths) if p.date is None or p.date == latest[p.model]]
    notes = []
    for model, date in latest.items():
        older = sorted({p.date for p in paths if p.model == model and p.date != date})
        if older:
            notes.append(
                f"{model or 'lighteval'}: {len(older) + 1} runs; the latest ({date}) read, "
                f"{', '.join(o or '?' for o in older)} left out"
            )
    return keep, tuple(notes)


def _is_numeric(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def _column(table: Any, name: str, where: str) -> Any:
    import pyarrow as pa

    if name not in table.column_names:
        raise IngestError.single(
            f"no {name!r} column (columns: {', '.join(table.column_names)}): not lighteval "
            "details?",
            field=f"{where}:{name}",
        )
    column = table.column(name).combine_chunks()
    if not pa.types.is_struct(column.type):
        raise IngestError.single(
            f"expected a struct column, got {column.type}", field=f"{where}:{name}"
        )
    return column


def _score(raw: Any, name: str, row: int, where: str) -> float | LineError:
    field = f"{where}:metric.{name}"
    if raw is None:
        return LineError(f"no {name!r} value for this doc", line=row, field=field)
    v = float(raw)
    if not math.isfinite(v):
        return LineError(f"{name} = {raw!r} is NaN or infinite", line=row, field=field)
    if not 0.0 <= v <= 1.0:
        return LineError(f"{name} = {raw!r} is not in [0, 1]", line=row, field=field)
    return v


def _metric(metrics: Any, metric: str | None, where: str) -> tuple[str, tuple[str, ...]]:
    """The metric field to score with, and every field in [0, 1] (the choices)."""
    import pyarrow.compute as pc

    fields = [metrics.type.field(j) for j in range(metrics.type.num_fields)]
    numeric = [f.name for f in fields if _is_numeric(f.type)]
    scores = []
    for name in numeric:
        values = metrics.field(name).cast("float64")
        valid = values.drop_null()
        if (
            len(valid)
            and pc.all(pc.and_(pc.greater_equal(valid, 0.0), pc.less_equal(valid, 1.0))).as_py()
        ):
            scores.append(name)
    if metric is None:
        if len(scores) == 1:
            return scores[0], tuple(scores)
        if not scores:
            raise IngestError.single(
                f"no metric in [0, 1] to score with (metrics: {', '.join(f.name for f in fields)})",
                field="metric",
            )
        raise AmbiguousChoiceError({"metric": scores})
    wanted = [m.strip() for m in metric.split(",") if m.strip()]
    found = [m for m in wanted if m in {f.name for f in fields}]
    if not found:
        raise IngestError.single(
            f"no metric of {metric!r} in {where}; its metrics in [0, 1]: "
            f"{', '.join(scores) or '(none)'}",
            field="metric",
        )
    if found[0] not in numeric:
        kind = metrics.type.field(found[0]).type
        raise IngestError.single(
            f"metric {found[0]!r} holds {kind} per doc, not a score (a corpus-level metric?)",
            field=f"{where}:metric.{found[0]}",
        )
    return found[0], tuple(scores)


def _docs(docs: Any, where: str) -> tuple[list[str], list[str | None]]:
    """Each row's :func:`doc_key` and ``task_name``, checked field by field."""
    n = len(docs)

    def values(name: str) -> list[Any]:
        return docs.field(name).to_pylist() if docs.type.get_field_index(name) >= 0 else [None] * n

    queries, choices, golds = values("query"), values("choices"), values("gold_index")
    tasks = values("task_name")
    keys: list[str] = []
    errors: list[LineError] = []
    for i in range(n):
        q, c, g = queries[i], choices[i], golds[i]
        if not isinstance(q, str):
            errors.append(
                LineError(
                    "required: the doc's query (a string)", line=i + 1, field=f"{where}:doc.query"
                )
            )
        elif c is not None and not all(isinstance(x, str) for x in c):
            errors.append(
                LineError("expected a list of strings", line=i + 1, field=f"{where}:doc.choices")
            )
        elif not (
            (isinstance(g, int) and not isinstance(g, bool))
            or (isinstance(g, list) and all(isinstance(x, int) for x in g))
        ):
            errors.append(
                LineError(
                    f"expected an index or a list of indices, got {g!r}",
                    line=i + 1,
                    field=f"{where}:doc.gold_index",
                )
            )
        else:
            keys.append(doc_key(q, c, g))
    if errors:
        raise IngestError(errors)
    return keys, [t if isinstance(t, str) and t else None for t in tasks]


def _token_counts(responses: Any) -> ItemCosts | None:
    """Token costs from ``model_response`` (``None`` when no row reports any)."""
    index = responses.type.get_field_index
    cols: dict[str, np.ndarray] = {}
    for name, field in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        if index(field) < 0:
            continue
        counts = np.full(len(responses), np.nan)
        for i, value in enumerate(responses.field(field).to_pylist()):
            if not value:
                continue
            flat = sum(len(v) if isinstance(v, list) else 1 for v in value)
            counts[i] = flat if flat else np.nan
        if np.isfinite(counts).any():
            cols[name] = counts
    return ItemCosts(**cols, source=COST_SOURCE) if cols else None


def parse_lighteval_details(
    data: bytes,
    *,
    metric: str | None = None,
    filename: str | None = None,
    model: str | None = None,
) -> ParsedResults:
    """One lighteval details parquet (one task of one run) as one model's per-item results.

    ``filename`` (its path, ``details/{model}/{date}/details_{task}_{date}.parquet``) gives the
    model and task and names the file in errors; ``model`` is used when the path names none.
    """
    where = filename or "details.parquet"
    path = details_path(filename)
    try:
        table = parquet_table(data)
    except ArchiveRefused as exc:
        raise IngestError.single(f"{exc} (truncated or not parquet?)", field=where) from None
    if table.num_rows == 0:
        raise IngestError.single("no rows: the details hold no doc", field=where)
    docs = _column(table, "doc", where)
    metrics = _column(table, "metric", where)
    name, scores = _metric(metrics, metric, where)
    keys, doc_tasks = _docs(docs, where)
    named = set(filter(None, doc_tasks))
    if len(named) > 1:
        raise IngestError.single(
            f"docs of several tasks ({', '.join(sorted(named))}) in one details file",
            field=f"{where}:doc.task_name",
        )
    task = named.pop() if named else (path.task or "lighteval")
    raw = metrics.field(name).to_pylist()
    values = np.empty(len(raw))
    errors: list[LineError] = []
    first: dict[str, int] = {}
    for i, (key, v) in enumerate(zip(keys, raw, strict=True)):
        if key in first:
            errors.append(
                LineError(
                    f"the same doc (query, choices and gold) as row {first[key] + 1}: two "
                    "indistinguishable docs",
                    line=i + 1,
                    field=f"{where}:doc",
                )
            )
            continue
        first[key] = i
        s = _score(v, name, i + 1, where)
        if isinstance(s, LineError):
            errors.append(s)
        else:
            values[i] = s
    if errors:
        raise IngestError(errors)
    correct, _ = finalize_values(values, None, correct_field=f"{where}:metric.{name}")
    costs = None
    if "model_response" in table.column_names:
        responses = table.column("model_response").combine_chunks()
        import pyarrow as pa

        if pa.types.is_struct(responses.type):
            costs = _token_counts(responses)
    ids = np.array([f"{task}/{k}" for k in keys], dtype=object).astype(str)
    who = path.model or (model.strip() if isinstance(model, str) and model.strip() else None)
    return ParsedResults(
        item_ids=ids,
        correct=correct,
        source_format="lighteval",
        metric=name,
        metrics_seen=scores,
        task=task,
        subjects=np.full(ids.size, task),
        notes=(
            f"lighteval details of task {task!r}"
            + (f", run {path.date}" if path.date else "")
            + f", metric {name!r}",
        ),
        costs=costs,
        model=who,
    )
