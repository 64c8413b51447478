"""HELM run directories: ``per_instance_stats.json`` with the run's ``run_spec.json``.

One run is one scenario run by one model: the model is ``run_spec.adapter_spec.model``, the
task the run's name without its ``model=``/``model_deployment=`` arguments, each item
``"{task}/{instance_id}"``. The score is the mean of one named stat (``metric``; several stats
in [0, 1] and none named: an error lists them). Train trials (``train_trial_index``) are the
item's ``K`` samples. Perturbed copies of an instance are kept apart as their own items,
``"{task}/{instance_id}@{perturbation name}"``; HELM tags every stat of such an entry with the
entry's perturbation, so an entry's stats are those whose perturbation is the entry's own (none
for an original instance). ``num_prompt_tokens`` / ``num_output_tokens``
/ ``inference_runtime`` are the cost. HELM ships no light reader (``crfm-helm`` pulls torch and
spaCy), so the JSON is read with orjson and checked field by field.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import orjson

from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    ItemCosts,
    ParsedResults,
    finalize_values,
)

STATS = "per_instance_stats.json"
RUN_SPEC = "run_spec.json"
SPLITS = ("test", "valid")
COST_STATS = ("num_prompt_tokens", "num_output_tokens", "inference_runtime")
# counts, sizes, times and log-probabilities: never a score, even when they fall in [0, 1]
NOT_SCORES = re.compile(r"^(num_|batch_size$|logprob$|inference_|training_)")
COST_SOURCE = "helm num_prompt_tokens / num_output_tokens / inference_runtime (over trials)"


def is_helm_stats(data: bytes) -> bool:
    head = data[:4096].lstrip()
    return head.startswith(b"[") and b'"instance_id"' in head and b'"stats"' in head


def is_helm_run_spec(data: bytes) -> bool:
    head = data[:65536]
    return (
        head.lstrip().startswith(b"{") and b'"adapter_spec"' in head and b'"scenario_spec"' in head
    )


def _load(data: bytes, where: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise IngestError.single(f"invalid JSON: {exc}", field=where) from None


def task_name(run_name: str) -> str:
    """``mmlu:subject=anatomy,model=openai_gpt-4`` -> ``mmlu:subject=anatomy``."""
    scenario, _, args = run_name.partition(":")
    kept = [a for a in args.split(",") if a and not re.match(r"model(_deployment)?=", a)]
    return scenario + (":" + ",".join(kept) if kept else "")


def _stat_means(entry: dict, where: str) -> dict[str, float]:
    stats, own = entry.get("stats"), entry.get("perturbation")
    if not isinstance(stats, list):
        raise IngestError.single("expected a list of stats", field=f"{where}.stats")
    out: dict[str, float] = {}
    for j, st in enumerate(stats):
        name = st.get("name") if isinstance(st, dict) else None
        if not isinstance(name, dict) or not isinstance(name.get("name"), str):
            raise IngestError.single("expected a stat name", field=f"{where}.stats[{j}].name")
        if name.get("split", "test") not in SPLITS or name.get("perturbation") != own:
            continue  # a perturbed instance's stats carry its perturbation (HELM's context)
        count, total = st.get("count"), st.get("sum")
        if count == 0:
            continue  # a stat with no value for this instance (HELM writes count 0, no mean)
        mean = st.get("mean")
        if mean is None and isinstance(count, int | float) and count:
            mean = total / count if isinstance(total, int | float) else None
        if isinstance(mean, bool) or not isinstance(mean, int | float):
            raise IngestError.single(
                f"stat {name['name']!r} has no numeric mean", field=f"{where}.stats[{j}].mean"
            )
        out.setdefault(name["name"], float(mean))
    return out


def parse_helm_run(
    stats: bytes, run_spec: bytes | None, *, metric: str | None = None
) -> ParsedResults:
    """One HELM run: ``per_instance_stats.json`` (+ ``run_spec.json`` for model and task)."""
    spec = _load(run_spec, RUN_SPEC) if run_spec is not None else {}
    if not isinstance(spec, dict):
        raise IngestError.single("expected a JSON object", field=RUN_SPEC)
    adapter = spec.get("adapter_spec") if isinstance(spec.get("adapter_spec"), dict) else {}
    model = adapter.get("model") or adapter.get("model_deployment")
    if run_spec is not None and (not isinstance(model, str) or not model.strip()):
        raise IngestError.single("required: the model", field=f"{RUN_SPEC}:adapter_spec.model")
    run_name = spec.get("name") if isinstance(spec.get("name"), str) else "helm"
    task = task_name(run_name)
    entries = _load(stats, STATS)
    if not isinstance(entries, list) or not entries:
        raise IngestError.single("expected a non-empty JSON array", field=STATS)
    rows: list[tuple[str, int, dict[str, float]]] = []
    for i, entry in enumerate(entries):
        where = f"{STATS}[{i}]"
        if not isinstance(entry, dict):
            raise IngestError.single("expected an object", field=where)
        iid = entry.get("instance_id")
        if not isinstance(iid, str) or not iid:
            raise IngestError.single("required: a string", field=f"{where}.instance_id")
        trial = entry.get("train_trial_index", 0)
        if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
            raise IngestError.single(
                f"expected an integer >= 0, got {trial!r}", field=f"{where}.train_trial_index"
            )
        key = f"{task}/{iid}"
        pert = entry.get("perturbation")
        if pert is not None:
            name = pert.get("name") if isinstance(pert, dict) else None
            if not isinstance(name, str) or not name:
                raise IngestError.single("required: a name", field=f"{where}.perturbation.name")
            key += f"@{name}"
        rows.append((key, trial, _stat_means(entry, where)))
    names = list(dict.fromkeys(n for _, _, m in rows for n in m))
    scores = [
        n
        for n in names
        if not NOT_SCORES.match(n) and all(0.0 <= m[n] <= 1.0 for _, _, m in rows if n in m)
    ]
    if metric is None:
        if len(scores) != 1:
            if not scores:
                raise IngestError.single("no stat in [0, 1] to score with", field="metric")
            raise AmbiguousChoiceError({"metric": scores})
        metric = scores[0]
    else:  # a comma-separated list: each run takes the first listed stat it has
        found = [m for m in (x.strip() for x in metric.split(",")) if m in names]
        if not found:
            raise IngestError.single(
                f"no stat of {metric!r} in the run; stats in [0, 1]: {', '.join(scores)}",
                field="metric",
            )
        metric = found[0]
    order = {k: j for j, k in enumerate(dict.fromkeys(k for k, _, _ in rows))}
    k = max(t for _, t, _ in rows) + 1
    values = np.full((len(order), k), np.nan)
    cost = np.zeros((len(order), 3))
    for n, (key, trial, means) in enumerate(rows):
        i = order[key]
        if not math.isnan(values[i, trial]):
            raise IngestError.single(
                f"instance {key!r} trial {trial} appears twice", field=f"{STATS}[{n}].instance_id"
            )
        v = means.get(metric)
        if v is None:
            raise IngestError.single(
                f"no {metric!r} stat for this instance", field=f"{STATS}[{n}].stats"
            )
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise IngestError.single(
                f"{metric} = {v!r} is not in [0, 1]", field=f"{STATS}[{n}].stats"
            )
        values[i, trial] = v
        cost[i] += [means.get(c, math.nan) for c in COST_STATS]
    counts = np.sum(~np.isnan(values), axis=1)
    correct, _ = finalize_values(np.nanmean(values, axis=1), None)
    within = None
    if k > 1 and (counts >= 2).all():
        within = np.nanvar(values, axis=1, ddof=1).astype(np.float32)
    cols = [c if np.isfinite(c).any() else None for c in cost.T]
    costs = None
    if any(c is not None for c in cols):
        costs = ItemCosts(
            input_tokens=cols[0], output_tokens=cols[1], seconds=cols[2], source=COST_SOURCE
        )
    ids = np.array(list(order), dtype=object).astype(str)
    return ParsedResults(
        item_ids=ids,
        correct=correct,
        source_format="helm",
        metric=metric,
        metrics_seen=tuple(scores),
        task=task,
        subjects=np.full(ids.size, task),
        notes=(f"HELM run {run_name!r}, stat {metric!r}",),
        samples=k if k > 1 else None,
        within_variance=within,
        sample_counts=counts.astype(np.int32) if k > 1 and (counts < k).any() else None,
        costs=costs,
        model=model.strip() if isinstance(model, str) else None,
    )
