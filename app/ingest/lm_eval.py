"""lm-evaluation-harness ``--log_samples`` JSONL and Open LLM Leaderboard v2 details rows.

One record per (doc, filter): ``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``,
``filtered_resps``, ``doc_hash``, ``prompt_hash``, ``target_hash``, one key per metric
(``acc``, ``acc_norm``, ``exact_match`` …) and, in newer versions, ``filter`` and ``metrics``.
The Open LLM Leaderboard exports the same fields (string-encoded in places) as JSONL or parquet.
This module reads the files and assembles the results; reading one record's fields (decoding,
log-likelihoods, gold choice, confidence) is :mod:`app.ingest.lm_eval_fields`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from app.ingest.archives import ArchiveRefused, parquet_table
from app.ingest.corpus_metrics import corpus_metric_reason, refuse_corpus_metric
from app.ingest.lm_eval_fields import (
    as_float,
    gold_indices,
    loglikelihoods,
    maybe_decode,
    softmax_at_gold,
)
from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    LineError,
    ParsedResults,
    finalize_values,
)

RESERVED_KEYS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "doc_hash",
        "prompt_hash",
        "target_hash",
        "filter",
        "metrics",
        "task",
        "task_name",
    }
)
SUBJECT_FIELDS = ("subject", "category")
# Open LLM Leaderboard v2: the metric its scores use, by task-name fragment (first match wins).
LEADERBOARD_METRICS: tuple[tuple[str, str], ...] = (
    ("mmlu_pro", "acc"),
    ("bbh", "acc_norm"),
    ("gpqa", "acc_norm"),
    ("musr", "acc_norm"),
    ("math", "exact_match"),
)
_SAMPLES_NAME = re.compile(
    r"^samples_(?P<task>.+?)_(?P<ts>\d{4}-\d{2}-\d{2}T[\d\-:.]+)\.(jsonl|parquet)$"
)


def task_from_filename(filename: str | None) -> str | None:
    """``samples_leaderboard_bbh_navigate_2024-06-26T12-00-00.123.jsonl`` → task name."""
    if not filename:
        return None
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    m = _SAMPLES_NAME.match(base)
    return m.group("task") if m else None


def leaderboard_metric(task: str | None) -> str | None:
    """The Open LLM Leaderboard v2 metric for ``task`` (``None`` when not a leaderboard task)."""
    if not task:
        return None
    low = task.lower()
    for fragment, metric in LEADERBOARD_METRICS:
        if fragment in low:
            return metric
    return None


def _metric_keys(rec: Mapping[str, Any], cache: dict[tuple[str, ...], list[str]]) -> list[str]:
    declared = rec.get("metrics")
    if isinstance(declared, list):
        key = tuple(declared)
        hit = cache.get(key)
        if hit is None:
            hit = [m for m in declared if isinstance(m, str)]
            cache[key] = hit
        return [m for m in hit if m in rec]
    return [
        k for k, v in rec.items() if k not in RESERVED_KEYS and isinstance(v, int | float | bool)
    ]


def _ordered_union(seqs: Iterable[Iterable[str]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for s in seqs:
        for x in s:
            seen.setdefault(x, None)
    return tuple(seen)


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic GC while decoding: tens of thousands of fresh dicts otherwise trigger
    repeated collections that cost as much as the decoding itself (refcounting still frees)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class _Row:
    line: int
    rec: dict[str, Any]
    filter: str | None


def iter_jsonl(data: bytes | str) -> tuple[list[tuple[int, Any]], list[LineError]]:
    """Split JSON Lines into ``(line_number, value)``; blank lines skipped, bad JSON reported.

    orjson does the decoding; a line it rejects is retried with the standard library, which
    also accepts the ``NaN``/``Infinity`` literals Python's ``json.dumps`` writes.
    """
    if isinstance(data, str):
        data = data.encode()
    out: list[tuple[int, Any]] = []
    errors: list[LineError] = []
    fast = orjson.loads
    for n, raw in enumerate(data.split(b"\n"), start=1):
        try:
            out.append((n, fast(raw)))
            continue
        except orjson.JSONDecodeError:
            if not raw.strip():
                continue
        try:
            out.append((n, json.loads(raw)))
        except RecursionError:  # orjson stops at 1024 levels; the standard library recurses
            errors.append(LineError("malformed JSON: nested too deeply", line=n))
        except ValueError as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            col = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            errors.append(LineError(f"malformed JSON: {msg}{col}", line=n))
    return out, errors


def read_parquet_records(data: bytes) -> list[tuple[int, Any]]:
    """Rows of a details parquet file as ``(row_number, dict)`` (1-based, like lines)."""
    try:  # measured from its footer before it is inflated
        table = parquet_table(data)
        rows = table.to_pylist()
    except ArchiveRefused as exc:
        raise IngestError.single(str(exc)) from None
    except UnicodeDecodeError as exc:  # a string column that is not UTF-8
        raise IngestError.single(f"unreadable parquet file: {exc}") from None
    return list(enumerate(rows, start=1))


def parse_lm_eval_samples(
    data: bytes | str | Sequence[tuple[int, Any]],
    *,
    metric: str | None = None,
    filter: str | None = None,
    task: str | None = None,
    filename: str | None = None,
    item_key: str = "doc_hash",
    subject_field: str | None = None,
    strict: bool = True,
    source_format: str = "lm-eval",
) -> ParsedResults:
    """Parse an lm-eval ``--log_samples`` file (or leaderboard details rows) for one task.

    Parameters
    ----------
    data : bytes, str or sequence of (line, record)
        JSON Lines text, or records already decoded (e.g. parquet rows).
    metric, filter : str, optional
        Which per-metric key gives correctness and which filter's records to use. Required when
        the file holds several; otherwise the only one present is used. For Open LLM Leaderboard
        tasks the leaderboard's metric is the default.
    task : str, optional
        Task name; defaults to the one in ``filename`` (``samples_<task>_<timestamp>.jsonl``).
    item_key : {"doc_hash", "doc_id"}
        Which field identifies an item.
    subject_field : str, optional
        The ``doc`` field giving each item's subject; by default ``subject`` or ``category`` when
        present.
    strict : bool
        Raise ``IngestError`` on any bad record (default); otherwise skip it and report it in
        ``errors``.

    Returns
    -------
    ParsedResults
        Items sorted by ``doc_id``; confidence is the softmax of the per-choice log-likelihoods in
        ``filtered_resps`` at the gold index, when every record has them.
    """
    with _gc_paused():
        return _parse_samples(
            data,
            metric=metric,
            filter=filter,
            task=task,
            filename=filename,
            item_key=item_key,
            subject_field=subject_field,
            strict=strict,
            source_format=source_format,
        )


def _parse_samples(
    data: bytes | str | Sequence[tuple[int, Any]],
    *,
    metric: str | None,
    filter: str | None,
    task: str | None,
    filename: str | None,
    item_key: str,
    subject_field: str | None,
    strict: bool,
    source_format: str,
) -> ParsedResults:
    if item_key not in ("doc_hash", "doc_id"):
        raise IngestError.single("must be 'doc_hash' or 'doc_id'", field="item_key")
    if isinstance(data, bytes | str):
        records, errors = iter_jsonl(data)
    else:
        records, errors = list(data), []
    task = task or task_from_filename(filename)

    rows: list[_Row] = []
    metric_sets: list[list[str]] = []
    metric_cache: dict[tuple[str, ...], list[str]] = {}
    for line, rec in records:
        if not isinstance(rec, dict):
            errors.append(LineError("expected a JSON object", line=line))
            continue
        flt = rec.get("filter")
        if flt is not None and not isinstance(flt, str):
            errors.append(LineError("expected a string", line=line, field="filter"))
            continue
        rows.append(_Row(line, rec, flt))
        metric_sets.append(_metric_keys(rec, metric_cache))
        if task is None:
            t = rec.get("task") or rec.get("task_name")
            task = t if isinstance(t, str) else None
    if strict and errors:
        raise IngestError(errors)
    if not rows:
        raise IngestError(errors or [LineError("empty upload: no records")])

    filters_seen = _ordered_union([[r.filter] for r in rows if r.filter is not None])
    metrics_seen = _ordered_union(metric_sets)
    # a corpus-level metric is logged as the (reference, prediction) its aggregation needs,
    # not a number: name it instead of reporting no metric (issue 35)
    corpus = [k for k in rows[0].rec if corpus_metric_reason(k)] if rows else []
    if corpus and (metric in corpus or (metric is None and not metrics_seen)):
        refuse_corpus_metric(metric or corpus[0])
    ambiguous: dict[str, tuple[str, ...]] = {}
    if filter is None and len(filters_seen) > 1:
        ambiguous["filter"] = filters_seen
    elif filter is not None and filter not in filters_seen:
        raise IngestError.single(
            f"unknown filter {filter!r}; present: {', '.join(filters_seen) or '(none)'}",
            field="filter",
        )
    chosen_filter = filter if filter is not None else (filters_seen[0] if filters_seen else None)
    if metric is None:
        default = leaderboard_metric(task)
        if len(metrics_seen) == 1:
            metric = metrics_seen[0]
        elif default in metrics_seen:
            metric = default
        else:
            ambiguous["metric"] = metrics_seen
    elif metric not in metrics_seen:
        raise IngestError.single(
            f"unknown metric {metric!r}; present: {', '.join(metrics_seen) or '(none)'}",
            field="metric",
        )
    if ambiguous:
        raise AmbiguousChoiceError(ambiguous)
    if metric is None:
        raise IngestError.single("no per-item metric found in the records", field="metric")
    refuse_corpus_metric(metric)

    rows = [r for r in rows if r.filter == chosen_filter]
    n = len(rows)
    ids: list[str] = []
    doc_ids = np.empty(n, dtype=np.int64)
    have_doc_ids = True
    correct = np.empty(n, dtype=np.float64)
    keep = np.ones(n, dtype=bool)
    subjects: list[str | None] = []
    flat_ll: list[float] = []
    lengths = np.zeros(n, dtype=np.int64)
    gold_rows: list[int] = []
    gold_cols: list[int] = []
    no_conf = 0
    no_gold = 0
    seen: dict[str, int] = {}  # item key -> row of its first record
    sample_values: dict[int, list[float]] = {}  # first row -> every sample's score
    sample_lines: dict[int, list[int]] = {}
    declared: dict[int, int] = {}  # `repeats` value -> first line declaring it
    subj_key = subject_field
    for k, r in enumerate(rows):
        rec, line = r.rec, r.line
        bad = False
        did = rec.get("doc_id")
        if isinstance(did, int) and not isinstance(did, bool):
            doc_ids[k] = did
        else:
            have_doc_ids = False
        if item_key == "doc_hash":
            key = rec.get("doc_hash")
            if not isinstance(key, str) or not key:
                errors.append(LineError("missing or empty", line=line, field="doc_hash"))
                bad = True
        else:
            key = str(did) if did is not None else None
            if key is None:
                errors.append(LineError("missing", line=line, field="doc_id"))
                bad = True
        values, err = _sample_values(rec.get(metric), line, metric)
        if err is not None:
            errors.append(err)
            bad = True
        rep = rec.get("repeats")
        if rep is not None:
            if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
                errors.append(
                    LineError(
                        f"expected a positive integer, got {rep!r}", line=line, field="repeats"
                    )
                )
                bad = True
            else:
                declared.setdefault(rep, line)
        if bad:
            keep[k] = False
            ids.append("")
            subjects.append(None)
            continue
        first = seen.get(key)
        if first is not None:  # another sample of an item seen before
            sample_values[first].extend(values)
            sample_lines[first].append(line)
            keep[k] = False
            ids.append("")
            subjects.append(None)
            continue
        seen[key] = k
        sample_values[k] = list(values)
        sample_lines[k] = [line]
        ids.append(key)
        doc = maybe_decode(rec.get("doc"))
        if subj_key is None and isinstance(doc, Mapping):
            subj_key = next((f for f in SUBJECT_FIELDS if isinstance(doc.get(f), str)), None)
        s = doc.get(subj_key) if (subj_key and isinstance(doc, Mapping)) else None
        subjects.append(s if isinstance(s, str) else None)
        lls = loglikelihoods(rec.get("filtered_resps"))
        if lls is None:
            no_conf += 1
            continue
        gold = gold_indices(rec.get("target"), doc, rec.get("arguments"), len(lls))
        if gold is None:
            no_gold += 1
            continue
        lengths[k] = len(lls)
        flat_ll.extend(lls)
        gold_rows.extend([k] * len(gold))
        gold_cols.extend(gold)

    k_samples, within = _repeated(
        sample_values, sample_lines, declared, ids, correct, keep, item_key, errors
    )
    if errors and strict:
        raise IngestError(errors)
    notes: list[str] = []
    confidence = None
    n_kept = int(keep.sum())
    if k_samples > 1:
        notes.append(f"{k_samples} samples per item: no confidence")
    elif no_conf == 0 and no_gold == 0 and n_kept:
        confidence = softmax_at_gold(flat_ll, lengths, gold_rows, gold_cols)
    if 0 < no_conf < n_kept:
        notes.append(f"{no_conf} record(s) lack per-choice log-likelihoods: no confidence")
    if no_gold:
        notes.append(f"gold choice not found for {no_gold} record(s): no confidence")
    idx = np.flatnonzero(keep)
    if have_doc_ids:
        idx = idx[np.argsort(doc_ids[idx], kind="stable")]
    if idx.size == 0:
        raise IngestError(errors or [LineError("empty upload: no usable records")])
    c, cf = finalize_values(
        correct[idx], None if confidence is None else confidence[idx], correct_field=metric
    )
    id_arr = np.array(ids, dtype=object)[idx].astype(str)
    subj = None
    if subj_key and all(subjects[i] is not None for i in idx):
        subj = np.array([subjects[i] for i in idx], dtype=str)
    return ParsedResults(
        item_ids=id_arr,
        correct=c,
        confidence=cf,
        source_format=source_format,
        metric=metric,
        filter=chosen_filter,
        metrics_seen=metrics_seen,
        filters_seen=filters_seen,
        task=task,
        subjects=subj,
        doc_ids=doc_ids[idx] if have_doc_ids else None,
        errors=tuple(errors),
        notes=tuple(notes),
        samples=k_samples if k_samples > 1 else None,
        within_variance=None if within is None else within[idx].astype(np.float32),
    )


def _sample_values(raw: Any, line: int, metric: str) -> tuple[list[float], LineError | None]:
    """A record's score(s) for ``metric``: a number, or a list of per-sample numbers."""
    if raw is None:
        return [], LineError("missing", line=line, field=metric)
    many = isinstance(raw, list)
    out: list[float] = []
    for item in raw if many else [raw]:
        v = float(item) if isinstance(item, bool) else None
        if v is None and not isinstance(item, str):
            v = as_float(item)
        if v is None:
            return [], LineError(f"not a per-item score: {item!r}", line=line, field=metric)
        if not math.isfinite(v):
            return [], LineError("NaN or infinite", line=line, field=metric)
        if not 0.0 <= v <= 1.0:
            return [], LineError(f"value {v!r} is outside [0, 1]", line=line, field=metric)
        out.append(v)
    if not out:
        return [], LineError("empty list of sample scores", line=line, field=metric)
    return out, None


def _repeated(
    sample_values: dict[int, list[float]],
    sample_lines: dict[int, list[int]],
    declared: dict[int, int],
    ids: list[str],
    correct: np.ndarray,
    keep: np.ndarray,
    item_key: str,
    errors: list[LineError],
) -> tuple[int, np.ndarray | None]:
    """Fill ``correct`` with per-item means (``keep`` False for items with a wrong count); return ``K`` and the per-item variances (K > 1).

    ``K`` is the declared ``repeats`` when records carry it, else the most common number of
    samples per item (ties: the smaller). Items with another count are errors: extra records of
    a one-sample file are duplicates (field ``item_key``), otherwise a ``repeats`` mismatch.
    """
    if not sample_values:
        return 1, None
    rows = np.fromiter(sample_values.keys(), dtype=np.int64, count=len(sample_values))
    counts = np.fromiter((len(v) for v in sample_values.values()), dtype=np.int64, count=rows.size)
    if len(declared) > 1:
        values = sorted(declared)
        errors.append(
            LineError(
                f"records declare different repeats {values}",
                line=declared[values[1]],
                field="repeats",
            )
        )
        keep[rows] = False
        return 1, None
    if declared:
        k = next(iter(declared))
    else:
        uniq, freq = np.unique(counts, return_counts=True)
        k = int(uniq[np.argmax(freq)])
    for row, c in zip(rows.tolist(), counts.tolist(), strict=True):
        if c == k:
            continue
        lines = sample_lines[row]
        if k == 1:
            errors.extend(
                LineError(
                    f"duplicate item {ids[row]!r} (first on line {lines[0]})",
                    line=ln,
                    field=item_key,
                )
                for ln in lines[1:]
            )
        else:
            errors.append(
                LineError(
                    f"item {ids[row]!r} has {c} sample(s), expected repeats = {k}",
                    line=lines[0],
                    field="repeats",
                )
            )
    ok = counts == k
    keep[rows[~ok]] = False
    within = np.zeros(correct.shape[0], dtype=np.float64) if k > 1 else None
    if ok.any():
        vals = np.array([sample_values[r] for r in rows[ok].tolist()], dtype=np.float64)
        correct[rows[ok]] = vals.mean(axis=1)
        if within is not None:
            within[rows[ok]] = vals.var(axis=1, ddof=1)
    return k, within


def parse_leaderboard_details(
    data: bytes | str,
    *,
    fmt: str = "jsonl",
    metric: str | None = None,
    filter: str | None = None,
    task: str | None = None,
    filename: str | None = None,
    item_key: str = "doc_hash",
    subject_field: str | None = None,
) -> ParsedResults:
    """Open LLM Leaderboard v2 details rows (JSONL or parquet); the metric defaults by task.

    ``acc`` for MMLU-Pro, ``acc_norm`` for BBH/GPQA/MuSR, ``exact_match`` for MATH.
    """
    task = task or task_from_filename(filename)
    if metric is None:
        metric_default = leaderboard_metric(task)
    else:
        metric_default = metric
    if fmt == "parquet":
        if isinstance(data, str):
            raise IngestError.single("parquet data must be bytes")
        records: bytes | str | list[tuple[int, Any]] = read_parquet_records(data)
    elif fmt == "jsonl":
        records = data
    else:
        raise IngestError.single(f"unknown format {fmt!r}", field="format")
    try:
        return parse_lm_eval_samples(
            records,
            metric=metric_default,
            filter=filter,
            task=task,
            item_key=item_key,
            subject_field=subject_field,
            source_format=f"leaderboard-{fmt}",
        )
    except IngestError as exc:
        # the leaderboard default may be absent from an unusual file: fall back to explicit choice
        if (
            metric is None
            and metric_default is not None
            and any(e.field == "metric" and "unknown metric" in e.message for e in exc.errors)
        ):
            return parse_lm_eval_samples(
                records,
                metric=None,
                filter=filter,
                task=task,
                item_key=item_key,
                subject_field=subject_field,
                source_format=f"leaderboard-{fmt}",
            )
        raise
