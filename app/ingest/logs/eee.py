"""Every Eval Ever instance-level sidecars (``instance_level_eval`` JSONL, schema 0.2.x).

One JSON object per line: ``model_id``, ``evaluation_name``, ``sample_id`` (and
``sample_hash``), ``evaluation.score``, optional ``evaluation_result_id`` (schema 0.3: which
of the evaluation's results the score belongs to, e.g. ``match:accuracy``), ``token_usage``,
``performance`` and ``error``. Each item is keyed ``"{evaluation_name}/{sample_id}"`` (sample
ids repeat across evaluations). Lines of several ``evaluation_result_id`` are several metrics:
``metric`` names one (else an error lists them). Several lines of one item and result are its
``K`` samples: the item's score is their mean; no within-item variance is claimed, because
every_eval_ever 0.3.0's Inspect converter writes each epoch's line with the epoch-reduced score
(their spread is not the samples'). A line with an ``error`` is missing, never 0. Every line
must name the same ``model_id``.
The schema's package (``every_eval_ever``) needs Python 3.12 and a dozen heavy dependencies, so
the lines are read here with orjson and checked field by field.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson

from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    ItemCosts,
    LineError,
    ParsedResults,
    finalize_values,
)

REQUIRED = ("schema_version", "evaluation_id", "model_id", "evaluation_name", "sample_id")
COST_SOURCE = "every eval ever token_usage / performance.latency_ms (summed over samples)"
_MAX_REPORTED = 50


def is_eee_instances(data: bytes) -> bool:
    """Whether the first line looks like an Every Eval Ever instance-level record."""
    first = data.lstrip()[:65536].split(b"\n", 1)[0]
    return first.startswith(b"{") and all(
        f'"{k}"'.encode() in first for k in ("schema_version", "evaluation_id", "sample_id")
    )


def _number(rec: dict, path: tuple[str, ...]) -> float | None:
    node: Any = rec
    for p in path:
        if not isinstance(node, dict):
            return None
        node = node.get(p)
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, int | float):
        raise ValueError(f"expected a number, got {node!r}")
    return float(node)


def _results_seen(data: bytes) -> list[str]:
    seen: dict[str, None] = {}
    for line in data.splitlines():
        if line.strip():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("evaluation_result_id"), str):
                seen[rec["evaluation_result_id"]] = None
    return list(seen)


def _choose_result(seen: list[str], metric: str | None) -> str | None:
    if metric is not None:
        asked = [m.strip() for m in metric.split(",") if m.strip()]
        found = [m for m in asked if m in seen]  # the first listed one the file has
        if not found:
            raise IngestError.single(
                f"no evaluation_result_id of {', '.join(map(repr, asked))} in the file; "
                f"its results: {', '.join(seen) or '(none)'}",
                field="metric",
            )
        return found[0]
    if len(seen) > 1:
        raise AmbiguousChoiceError({"metric": seen})
    return seen[0] if seen else None


def parse_eee_instances(
    data: bytes, *, metric: str | None = None, filename: str | None = None
) -> ParsedResults:
    """Parse one model's Every Eval Ever instance-level JSONL; errors name line and field.

    ``metric`` names the ``evaluation_result_id`` when the lines carry several."""
    seen_results = _results_seen(data)
    chosen = _choose_result(seen_results, metric)
    errors: list[LineError] = []
    rows: list[tuple[int, str, float | None, tuple[float, float, float]]] = []
    model: str | None = None
    hashes: dict[str, tuple[str | None, int]] = {}
    task_of: dict[str, str] = {}
    for line_no, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        if len(errors) >= _MAX_REPORTED:
            break
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            errors.append(LineError(f"invalid JSON: {exc}", line=line_no))
            continue
        if not isinstance(rec, dict):
            errors.append(LineError("expected a JSON object", line=line_no))
            continue
        missing = [k for k in REQUIRED if not isinstance(rec.get(k), str) or not rec[k].strip()]
        if missing:
            errors.append(LineError("required: a non-empty string", line=line_no, field=missing[0]))
            continue
        if chosen is not None and rec.get("evaluation_result_id") != chosen:
            continue  # another metric's line
        if model is None:
            model = rec["model_id"]
        elif rec["model_id"] != model:
            errors.append(
                LineError(
                    f"model {rec['model_id']!r} differs from {model!r} (one model per upload)",
                    line=line_no,
                    field="model_id",
                )
            )
            continue
        key = f"{rec['evaluation_name']}/{rec['sample_id']}"
        task_of.setdefault(key, rec["evaluation_name"])
        sample_hash = rec.get("sample_hash")
        seen = hashes.setdefault(key, (sample_hash, line_no))
        if seen[0] != sample_hash:
            errors.append(
                LineError(
                    f"sample {key!r} has another sample_hash than on line {seen[1]} (another "
                    "input under the same id)",
                    line=line_no,
                    field="sample_hash",
                )
            )
            continue
        try:
            usage = tuple(
                math.nan if v is None else v
                for v in (
                    _number(rec, ("token_usage", "input_tokens")),
                    _number(rec, ("token_usage", "output_tokens")),
                    _number(rec, ("performance", "latency_ms")),
                )
            )
        except ValueError as exc:
            errors.append(LineError(str(exc), line=line_no, field="token_usage"))
            continue
        if any(v < 0 for v in usage if not math.isnan(v)):
            errors.append(LineError("negative usage", line=line_no, field="token_usage"))
            continue
        if rec.get("error") not in (None, ""):
            rows.append((line_no, key, None, usage))  # errored: missing, never 0
            continue
        evaluation = rec.get("evaluation")
        score = evaluation.get("score") if isinstance(evaluation, dict) else None
        if isinstance(score, bool) or not isinstance(score, int | float):
            errors.append(
                LineError(
                    f"expected a number, got {score!r}", line=line_no, field="evaluation.score"
                )
            )
            continue
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            errors.append(
                LineError(
                    f"score {score!r} is not in [0, 1]", line=line_no, field="evaluation.score"
                )
            )
            continue
        rows.append((line_no, key, float(score), usage))
    if errors:
        raise IngestError(errors)
    if not rows:
        raise IngestError.single("empty upload: no instance records")
    order = {key: i for i, key in enumerate(dict.fromkeys(r[1] for r in rows))}
    n = len(order)
    per_item: list[list[float]] = [[] for _ in range(n)]
    cost = np.zeros((n, 3))
    for _, key, score, usage in rows:
        i = order[key]
        cost[i] += usage
        if score is not None:
            per_item[i].append(score)
    counts = np.array([len(v) for v in per_item], dtype=np.int32)
    keep = counts > 0
    if not keep.any():
        raise IngestError.single("every record has an error: no score to store", field="error")
    k = int(counts.max())
    means = np.array([np.mean(v) if v else np.nan for v in per_item])[keep]
    correct, _ = finalize_values(means, None)
    ids = np.array(list(order), dtype=object)[keep].astype(str)
    tasks = np.array([task_of[i] for i in ids])
    cost = cost[keep]
    cols = [c if np.isfinite(c).any() else None for c in (cost[:, 0], cost[:, 1], cost[:, 2])]
    costs = None
    if any(c is not None for c in cols):
        costs = ItemCosts(
            input_tokens=cols[0],
            output_tokens=cols[1],
            seconds=None if cols[2] is None else cols[2] / 1000.0,
            source=COST_SOURCE,
        )
    notes = [f"Every Eval Ever instances of model {model!r}"]
    if (~keep).any() or (k > 1 and (counts[keep] < k).any()):
        notes.append("records with an error are missing, not 0")
    return ParsedResults(
        item_ids=ids,
        correct=correct,
        source_format="every-eval-ever",
        metric=chosen or "evaluation.score",
        metrics_seen=tuple(seen_results) or ("evaluation.score",),
        task=str(tasks[0]) if len(set(tasks.tolist())) == 1 else None,
        subjects=tasks,
        notes=tuple(notes),
        samples=k if k > 1 else None,
        sample_counts=counts[keep] if k > 1 and (counts[keep] < k).any() else None,
        costs=costs,
        model=model,
    )
