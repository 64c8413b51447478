"""Plain uploads: CSV (item_id, correct[, confidence]), JSON keyed by item id, columnar JSON."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.ingest.costs import COST_ALIASES, COST_FIELDS, check_cost_arrays, cost_value
from app.ingest.types import (
    IngestError,
    ItemCosts,
    LineError,
    ParsedResults,
    check_samples,
    check_within_variance,
    finalize_values,
)

CSV_COLUMNS = ("item_id", "correct", "confidence")
# Header-only columns: K samples behind each row's mean score, and their sample variance.
CSV_REPEAT_COLUMNS = ("samples", "within_variance")


def _text(data: bytes | str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError.single(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _number(value: Any) -> float | None:
    """A JSON/CSV scalar as float; None when it is not a number (bools count as 0/1)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _check_value(v: float | None, raw: Any, *, line: int | None, field: str) -> LineError | None:
    if v is None:
        return LineError(f"not a number: {raw!r}", line=line, field=field)
    if not math.isfinite(v):
        return LineError(f"NaN or infinite value {raw!r}", line=line, field=field)
    if not 0.0 <= v <= 1.0:
        return LineError(f"value {v!r} is outside [0, 1]", line=line, field=field)
    return None


def _raise_if(errors: list[LineError]) -> None:
    if errors:
        raise IngestError(errors)


def repeated(
    means: np.ndarray, samples: Any, within: Any, *, where: str = ""
) -> tuple[int | None, np.ndarray | None]:
    """``K`` and the per-item variances of a per-item-fraction upload (``None`` when K = 1)."""
    if samples is None:
        if within is not None:
            raise IngestError.single("needs samples (K >= 2)", field=f"{where}within_variance")
        return None, None
    k = check_samples(samples, field=f"{where}samples")
    if within is None:
        return (k if k > 1 else None), None
    var = check_within_variance(
        means.astype(np.float64),
        _vector(within, "within_variance"),
        k,
        field=f"{where}within_variance",
    )
    return k, var


def parse_csv(data: bytes | str) -> ParsedResults:
    """Parse ``item_id,correct[,confidence]`` rows; the header row is optional.

    With a header the columns may come in any order (``item_id`` and ``correct`` required) and
    may add ``samples`` (``K``, the same on every row: ``correct`` is then the mean of ``K``
    samples) and ``within_variance``; without one they are positional. Errors carry the CSV
    line number.
    """
    # newline="": a bare "\r" ends a line (as the csv module expects) instead of reaching the
    # reader inside a line, which raised csv.Error (a 500 found by schemathesis)
    reader = csv.reader(io.StringIO(_text(data), newline=""))
    try:
        rows = [(reader.line_num, row) for row in reader if row and any(c.strip() for c in row)]
    except csv.Error as exc:
        raise IngestError.single(f"unreadable CSV: {exc}", line=reader.line_num) from None
    if not rows:
        raise IngestError.single("empty upload: no rows")
    first_line, first = rows[0]
    header = [c.strip().lower() for c in first]
    cost_cols: dict[str, tuple[str, int]] = {}  # field -> (header name, column)
    if "item_id" in header or "correct" in header:
        for j, name in enumerate(header):
            kind = COST_ALIASES.get(name)
            if kind is None:
                continue
            if kind in cost_cols:
                raise IngestError.single(
                    f"columns {cost_cols[kind][0]!r} and {name!r} both give {kind}",
                    line=first_line,
                    field=name,
                )
            cost_cols[kind] = (name, j)
        missing = [c for c in ("item_id", "correct") if c not in header]
        if missing:
            raise IngestError.single(
                f"header lacks column(s) {', '.join(missing)}", line=first_line, field=missing[0]
            )
        cols = {
            name: header.index(name) for name in CSV_COLUMNS + CSV_REPEAT_COLUMNS if name in header
        }
        rows = rows[1:]
    else:
        cols = {name: i for i, name in enumerate(CSV_COLUMNS[: len(first)])}
        if "correct" not in cols:
            raise IngestError.single(
                "expected at least two columns: item_id, correct", line=first_line
            )
    if not rows:
        raise IngestError.single("empty upload: header only")
    has_conf = "confidence" in cols
    width = max([*cols.values(), *(j for _, j in cost_cols.values())]) + 1
    cost_vals: dict[str, list[float]] = {kind: [] for kind in cost_cols}
    ids: list[str] = []
    correct = np.empty(len(rows), dtype=np.float64)
    conf = np.empty(len(rows), dtype=np.float64) if has_conf else None
    errors: list[LineError] = []
    seen: dict[str, int] = {}
    for k, (line, row) in enumerate(rows):
        if len(row) < width:
            errors.append(LineError(f"expected {width} columns, got {len(row)}", line=line))
            continue
        item = row[cols["item_id"]].strip()
        if not item:
            errors.append(LineError("empty item id", line=line, field="item_id"))
        elif item in seen:
            errors.append(
                LineError(
                    f"duplicate item id {item!r} (first on line {seen[item]})",
                    line=line,
                    field="item_id",
                )
            )
        else:
            seen[item] = line
        ids.append(item)
        raw = row[cols["correct"]]
        v = _number(raw)
        if err := _check_value(v, raw, line=line, field="correct"):
            errors.append(err)
        else:
            correct[k] = v
        if conf is not None:
            raw = row[cols["confidence"]]
            v = _number(raw)
            if err := _check_value(v, raw, line=line, field="confidence"):
                errors.append(err)
            else:
                conf[k] = v
        for kind, (name, j) in cost_cols.items():
            cv = cost_value(row[j], kind=kind, field=name, line=line)
            if isinstance(cv, LineError):
                errors.append(cv)
            else:
                cost_vals[kind].append(cv)
    k, within = _csv_repeats(rows, cols, errors)
    _raise_if(errors)
    costs = None
    if cost_vals and any(not np.isnan(v).all() for v in map(np.asarray, cost_vals.values())):
        costs = ItemCosts(
            **{kind: np.asarray(v, dtype=np.float64) for kind, v in cost_vals.items()},
            source="csv cost columns",
        )
    c, cf = finalize_values(correct, conf)
    if k is not None and within is not None:
        within = check_within_variance(correct, within, k)
    return ParsedResults(
        item_ids=np.array(ids, dtype=str),
        correct=c,
        confidence=cf,
        source_format="csv",
        samples=k if k is not None and k > 1 else None,
        within_variance=within,
        costs=costs,
    )


def _csv_repeats(
    rows: list[tuple[int, list[str]]], cols: dict[str, int], errors: list[LineError]
) -> tuple[int | None, np.ndarray | None]:
    """The ``samples`` column's one ``K`` (errors on a row that differs) and the variances."""
    if "samples" not in cols:
        if "within_variance" in cols:
            errors.append(LineError("needs a samples column", field="within_variance"))
        return None, None
    k: int | None = None
    for line, row in rows:
        if len(row) <= cols["samples"]:
            continue
        raw = row[cols["samples"]].strip()
        try:
            value = check_samples(_number(raw) if raw else raw)
        except IngestError as exc:
            errors.append(LineError(exc.errors[0].message, line=line, field="samples"))
            continue
        if k is None:
            k = value
        elif value != k:
            errors.append(
                LineError(f"{value} samples, but earlier rows have {k}", line=line, field="samples")
            )
    within = None
    if "within_variance" in cols and k is not None:
        if k < 2:
            errors.append(LineError("only meaningful with samples >= 2", field="within_variance"))
            return k, None
        within = np.zeros(len(rows))
        for j, (line, row) in enumerate(rows):
            if len(row) <= cols["within_variance"]:
                continue
            raw = row[cols["within_variance"]]
            v = _number(raw)
            if v is None or not math.isfinite(v) or v < 0:
                errors.append(
                    LineError(f"not a variance: {raw!r}", line=line, field="within_variance")
                )
            else:
                within[j] = v
    return k, within


def parse_keyed(
    results: Mapping[str, Any], *, field: str = "results", samples: Any = None
) -> ParsedResults:
    """Parse ``{item_id: correct}`` or ``{item_id: {"correct": x, "confidence": p}}``.

    Confidence must be given for every item or for none. ``samples`` (``K``): each value is the
    mean of ``K`` samples. An item object may add cost fields (:data:`app.ingest.costs.COST_FIELDS`).
    """
    if not isinstance(results, Mapping):
        raise IngestError.single("expected an object keyed by item id", field=field)
    if not results:
        raise IngestError.single("empty upload: no items", field=field)
    n = len(results)
    ids = list(results.keys())
    correct = np.empty(n, dtype=np.float64)
    conf = np.empty(n, dtype=np.float64)
    n_conf = 0
    errors: list[LineError] = []
    cost = np.full((len(COST_FIELDS), n), np.nan)
    for k, (item, value) in enumerate(results.items()):
        where = f"{field}[{item!r}]"
        if isinstance(value, Mapping):
            for j, kind in enumerate(COST_FIELDS):
                cv = cost_value(value.get(kind), kind=kind, field=f"{where}.{kind}")
                if isinstance(cv, LineError):
                    errors.append(cv)
                else:
                    cost[j, k] = cv
            unknown = set(value) - {"correct", "confidence", *COST_FIELDS}
            if unknown:
                errors.append(LineError(f"unknown key(s) {sorted(unknown)}", field=where))
            if "correct" not in value:
                errors.append(LineError("missing 'correct'", field=where))
                continue
            raw = value["correct"]
            if value.get("confidence") is not None:
                cv = _number(value["confidence"])
                if err := _check_value(
                    cv, value["confidence"], line=None, field=f"{where}.confidence"
                ):
                    errors.append(err)
                else:
                    conf[k] = cv
                    n_conf += 1
            fname = f"{where}.correct"
        else:
            raw, fname = value, where
        v = _number(raw) if not isinstance(raw, str) else None
        if err := _check_value(v, raw, line=None, field=fname):
            errors.append(err)
        else:
            correct[k] = v
        if not item:
            errors.append(LineError("empty item id", field=where))
    if 0 < n_conf < n:
        errors.append(
            LineError(
                f"confidence given for {n_conf} of {n} items: give it for all or none",
                field="confidence",
            )
        )
    _raise_if(errors)
    k, _ = repeated(correct, samples, None)
    c, cf = finalize_values(correct, conf if n_conf else None)
    given = ~np.isnan(cost).all(axis=1)
    costs = None
    if given.any():
        costs = ItemCosts(
            **{kind: cost[j] for j, kind in enumerate(COST_FIELDS) if given[j]},
            source="json cost fields",
        )
    return ParsedResults(
        item_ids=np.array(ids, dtype=str),
        correct=c,
        confidence=cf,
        source_format="json",
        samples=k,
        costs=costs,
    )


def _vector(values: Any, name: str) -> np.ndarray:
    if not isinstance(values, Sequence) or isinstance(values, str | bytes):
        raise IngestError.single("expected an array of numbers", field=name)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(
            (i for i, v in enumerate(values) if isinstance(v, str) or _number(v) is None), None
        )
        raise IngestError.single(
            f"{name}[{bad}] = {values[bad]!r} is not a number"
            if bad is not None
            else "not an array of numbers",
            field=name,
        ) from None
    if arr.ndim != 1:
        raise IngestError.single(f"expected a flat array, got shape {arr.shape}", field=name)
    return arr


def parse_columnar(
    correct: Any,
    confidence: Any = None,
    item_ids: Any = None,
    *,
    samples: Any = None,
    within_variance: Any = None,
    costs: Mapping[str, Any] | None = None,
) -> ParsedResults:
    """Parse aligned arrays; without ``item_ids`` they follow the benchmark's item order.

    ``samples`` (``K``): each ``correct`` value is the mean of ``K`` samples in [0, 1];
    ``within_variance`` their per-item sample variance (ddof 1), optional. ``costs``: arrays of
    :data:`app.ingest.costs.COST_FIELDS` aligned with ``correct`` (``None`` = not reported).
    """
    c = _vector(correct, "correct")
    if c.size == 0:
        raise IngestError.single("empty upload: no items", field="correct")
    errors: list[LineError] = []
    cf = None
    if confidence is not None:
        cf = _vector(confidence, "confidence")
        if cf.shape != c.shape:
            errors.append(
                LineError(f"length {cf.size} differs from correct ({c.size})", field="confidence")
            )
    ids = None
    if item_ids is not None:
        if not isinstance(item_ids, Sequence) or not all(
            isinstance(i, str) and i for i in item_ids
        ):
            errors.append(LineError("expected an array of non-empty strings", field="item_ids"))
        elif len(item_ids) != c.size:
            errors.append(
                LineError(
                    f"length {len(item_ids)} differs from correct ({c.size})", field="item_ids"
                )
            )
        else:
            ids = np.array(item_ids, dtype=str)
            uniq, counts = np.unique(ids, return_counts=True)
            if (counts > 1).any():
                dup = uniq[counts > 1][0]
                errors.append(LineError(f"duplicate item id {str(dup)!r}", field="item_ids"))
    _raise_if(errors)
    c8, cf32 = finalize_values(c, cf)
    k, within = repeated(c, samples, within_variance)
    item_costs = check_cost_arrays(dict(costs or {}), c.size, source="json cost arrays")
    return ParsedResults(
        item_ids=ids,
        correct=c8,
        confidence=cf32,
        source_format="columnar",
        samples=k,
        within_variance=within,
        costs=item_costs,
    )
