"""Inspect AI evaluation logs: ``.eval`` archives and ``--log-format json`` files.

One log is one task run by one model: the model is ``eval.model``, the task ``eval.task``, and
each item is keyed ``"{task}/{sample id}"`` (Inspect sample ids are unique within a task only).
Each epoch is one sample of its item: with ``epochs > 1`` the item's score is the mean of its
epochs (``ParsedResults.samples = K``, ``within_variance``, ``sample_counts``).

Score values are mapped as Inspect's own ``value_to_float()`` maps them: ``"C"`` 1, ``"P"``
0.5, ``"I"`` and ``"N"`` 0, booleans and numbers as floats, the strings ``yes``/``true`` 1 and
``no``/``false`` 0, numeric strings as their number. Where Inspect would warn and use 0 (a list,
a dict, any other string) this parser refuses the log instead: it never invents a 0. An
errored sample (``error``) or one halted by a limit (``limit``) is missing, never 0.

An ``.eval`` is read on its fast path: ``header.json`` (or ``_journal/start.json`` of a log
still running) and ``summaries.json`` (or the ``_journal/summaries/*.json`` journal), without
opening any per-sample member; only a log with no summaries at all is read sample by sample
(``samples/{id}_epoch_{n}.json``, or the chunked layout's ``…/sample.json`` shell). Inspect
ships no light reader (``inspect_ai.log`` needs the whole framework), so the archive is read
with :class:`~app.ingest.logs.archive.BoundedZip` (``zstandard``) and the JSON with orjson.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from app.ingest.logs.archive import BoundedZip, is_zip
from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    ItemCosts,
    LineError,
    ParsedResults,
    finalize_values,
)

HEADER = "header.json"
START = "_journal/start.json"
SUMMARIES = "summaries.json"
JOURNAL = re.compile(r"^_journal/summaries/(\d+)\.json$")
SAMPLE = re.compile(r"^samples/(.+)_epoch_(\d+)(?:\.json|/sample\.json)$")
COST_SOURCE = "inspect model_usage (every model of the sample, summed over epochs; errored too)"
_MAX_REPORTED = 50


@dataclass(frozen=True)
class _Record:
    """One sample (one epoch of one item) as the log states it, with its checked key."""

    where: str  # member (and index) for error messages, e.g. "summaries.json[3]"
    raw: Mapping[str, Any]
    key: tuple[str, int]  # (sample id as a string, epoch)


def _record(where: str, raw: Any) -> _Record:
    return _Record(where, raw, _key(where, raw))


def is_inspect_json(data: bytes) -> bool:
    """Whether ``data`` looks like an Inspect ``--log-format json`` log (cheap: the head only)."""
    head = data[:4096].lstrip()
    return (
        head.startswith(b"{")
        and b'"eval"' in head
        and re.search(rb'"version"\s*:\s*\d', head) is not None
        and re.search(rb'"status"\s*:', head) is not None
    )


def is_inspect_eval(data: bytes) -> bool:
    """Whether ``data`` is a zip holding an Inspect header or start journal."""
    if not is_zip(data):
        return False
    try:
        names = BoundedZip(data).names()
    except IngestError:
        return False
    return HEADER in names or START in names


def parse_inspect_log(
    data: bytes, *, metric: str | None = None, filename: str | None = None
) -> ParsedResults:
    """Parse one Inspect log (``.eval`` zip or JSON), choosing the scorer ``metric``.

    Raises ``IngestError`` naming the member (``summaries.json[3]``) and field at fault; an
    ``AmbiguousChoiceError`` on ``metric`` when several scorers scored the samples.
    """
    if data[:2] == b"PK":  # a zip (an empty one starts with its end record, PK\x05\x06)
        spec, status, records = _read_eval(data)
    else:
        spec, status, records = _read_json(data)
    return _results(spec, status, records, metric)


# --- reading ---------------------------------------------------------------------------------


def _json(raw: bytes, where: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise IngestError.single(f"invalid JSON: {exc}", field=where) from None


def _read_eval(data: bytes) -> tuple[Mapping[str, Any], str, list[_Record]]:
    archive = BoundedZip(data)
    names = archive.names()
    if HEADER in archive:
        header = _json(archive.read(HEADER), HEADER)
        where = HEADER
    elif START in archive:
        header = _json(archive.read(START), START)
        where = START
    else:
        raise IngestError.single(
            f"not an Inspect log: neither {HEADER} nor {START} is in the archive", field=HEADER
        )
    if not isinstance(header, dict):
        raise IngestError.single("expected a JSON object", field=where)
    spec = _spec(header.get("eval"), f"{where}:eval")
    status = str(header.get("status") or "started")
    if SUMMARIES in archive:
        rows = _json(archive.read(SUMMARIES), SUMMARIES)
        if not isinstance(rows, list):
            raise IngestError.single("expected a JSON array of sample summaries", field=SUMMARIES)
        records = [_record(f"{SUMMARIES}[{i}]", r) for i, r in enumerate(rows)]
        _no_duplicates(records)
        return spec, status, records
    journal = sorted((int(m.group(1)), n) for n in names if (m := JOURNAL.match(n)))
    if journal:
        latest: dict[tuple[str, int], _Record] = {}
        for _, name in journal:
            rows = _json(archive.read(name), name)
            if not isinstance(rows, list):
                raise IngestError.single("expected a JSON array of sample summaries", field=name)
            for i, r in enumerate(rows):
                rec = _record(f"{name}[{i}]", r)
                latest[rec.key] = rec  # a retried sample's later row wins, as in Inspect
        return spec, status, list(latest.values())
    samples = [n for n in names if SAMPLE.match(n)]
    records = []
    for name in samples:
        rec = _json(archive.read(name), name)
        records.append(_record(name, rec))
    _no_duplicates(records)
    return spec, status, records


def _read_json(data: bytes) -> tuple[Mapping[str, Any], str, list[_Record]]:
    log = _json(data, "file")
    if not isinstance(log, dict) or "eval" not in log:
        raise IngestError.single("not an Inspect log: no 'eval' object", field="eval")
    spec = _spec(log.get("eval"), "eval")
    samples = log.get("samples")
    if samples is None:
        raise IngestError.single(
            "the log holds no samples (was it written with --no-log-samples?)", field="samples"
        )
    if not isinstance(samples, list):
        raise IngestError.single("expected a JSON array", field="samples")
    records = [_record(f"samples[{i}]", r) for i, r in enumerate(samples)]
    _no_duplicates(records)
    return spec, str(log.get("status") or "started"), records


def _spec(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise IngestError.single("expected the eval spec object", field=where)
    for name in ("task", "model"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise IngestError.single("required: a non-empty string", field=f"{where}.{name}")
    return raw


def _key(where: str, raw: Any) -> tuple[str, int]:
    if not isinstance(raw, dict):
        raise IngestError.single("expected a sample object", field=where)
    sid = raw.get("id")
    if isinstance(sid, bool) or not isinstance(sid, str | int) or str(sid) == "":
        raise IngestError.single(
            f"sample id must be a string or integer, got {sid!r}", field=f"{where}.id"
        )
    epoch = raw.get("epoch", 1)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise IngestError.single(
            f"epoch must be an integer >= 1, got {epoch!r}", field=f"{where}.epoch"
        )
    return str(sid), epoch


def _no_duplicates(records: Sequence[_Record]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for rec in records:
        key = rec.key
        if key in seen:
            raise IngestError.single(
                f"sample id {key[0]!r} epoch {key[1]} appears twice (first at {seen[key]})",
                field=f"{rec.where}.id",
            )
        seen[key] = rec.where


# --- values ----------------------------------------------------------------------------------


def score_to_float(value: Any) -> float | None:
    """Inspect's ``value_to_float()`` mapping, except ``None`` where Inspect would warn and
    return 0 (a list, a dict, an unknown string): such a value is refused, never a 0."""
    if isinstance(value, str):
        if value == "C":
            return 1.0
        if value == "P":
            return 0.5
        if value in ("I", "N"):
            return 0.0
        low = value.lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            number = float(low)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    if isinstance(value, bool | int | float):
        return float(value)
    return None


def _obj(parent: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = parent.get(name)
    return value if isinstance(value, dict) else {}


def _halted(raw: Mapping[str, Any]) -> bool:
    return raw.get("error") not in (None, "", {}) or raw.get("limit") not in (None, "", {})


def _scorers_seen(spec: Mapping[str, Any], records: Iterable[_Record]) -> list[str]:
    seen: dict[str, None] = {}
    for s in spec.get("scorers") or ():
        if isinstance(s, dict) and isinstance(s.get("name"), str):
            seen[s["name"]] = None
    for rec in records:
        scores = rec.raw.get("scores")
        if isinstance(scores, dict):
            seen.update(dict.fromkeys(k for k in scores if isinstance(k, str)))
    return list(seen)


def _choose_scorer(seen: list[str], metric: str | None) -> str:
    """The scorer named by ``metric``; a comma-separated ``metric`` lets an upload of several
    logs name each log's scorer (``match,closeness``): each log takes the first listed scorer
    it carries."""
    if metric is not None:
        asked = [m.strip() for m in metric.split(",") if m.strip()]
        found = [m for m in asked if m in seen]
        if not found:
            raise IngestError.single(
                f"no scorer {', '.join(map(repr, asked))} in the log; its scorers: "
                f"{', '.join(seen) or '(none)'}",
                field="metric",
            )
        return found[0]
    if not seen:
        raise IngestError.single("no sample carries a score", field="scores")
    if len(seen) > 1:
        raise AmbiguousChoiceError({"metric": seen})  # the scorer is chosen with --metric
    return seen[0]


def _usage(raw: Mapping[str, Any], where: str) -> tuple[float, float, float]:
    """(input tokens, output tokens, usd) over every model of one sample; NaN when unknown."""
    usage = raw.get("model_usage")
    if usage is None:
        return math.nan, math.nan, math.nan
    if not isinstance(usage, dict):
        raise IngestError.single("expected an object of model usage", field=f"{where}.model_usage")
    tin = tout = usd = 0.0
    for model, u in usage.items():
        if not isinstance(u, dict):
            raise IngestError.single(
                "expected a usage object", field=f"{where}.model_usage.{model}"
            )
        values = []
        for name in ("input_tokens", "output_tokens", "total_cost"):
            v = u.get(name)
            if v is None:
                values.append(math.nan)
                continue
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(v)
                or v < 0
            ):
                raise IngestError.single(
                    f"expected a non-negative number, got {v!r}",
                    field=f"{where}.model_usage.{model}.{name}",
                )
            values.append(float(v))
        tin, tout, usd = tin + values[0], tout + values[1], usd + values[2]
    return tin, tout, usd


def _seconds(raw: Mapping[str, Any], where: str) -> float:
    v = raw.get("working_time")
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise IngestError.single(
            f"expected non-negative seconds, got {v!r}", field=f"{where}.working_time"
        )
    return float(v)


def _results(
    spec: Mapping[str, Any], status: str, records: list[_Record], metric: str | None
) -> ParsedResults:
    task, model = spec["task"].strip(), spec["model"].strip()
    if not records:
        raise IngestError.single("the log holds no samples", field="samples")
    keys = [r.key for r in records]
    seen_scorers = _scorers_seen(spec, records)
    scorer = _choose_scorer(seen_scorers, metric)
    declared = _obj(spec, "config").get("epochs")
    k = max(e for _, e in keys)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        late = next((r for r, (_, e) in zip(records, keys, strict=True) if e > declared), None)
        if late is not None:
            raise IngestError.single(
                f"epoch {late.raw['epoch']} is past the log's {declared} epoch(s)",
                field=f"{late.where}.epoch",
            )
        k = declared
    order: dict[str, int] = {}
    listed = _obj(spec, "dataset").get("sample_ids")
    for sid in listed if isinstance(listed, list) else ():
        order.setdefault(str(sid), len(order))
    for sid, _ in keys:
        order.setdefault(sid, len(order))
    n = len(order)
    values = np.full((n, k), np.nan)
    cost = np.zeros((n, 4))  # input, output, usd, seconds, summed over the item's samples
    errors: list[LineError] = []
    halted = 0
    for rec, (sid, epoch) in zip(records, keys, strict=True):
        i = order[sid]
        tin, tout, usd = _usage(rec.raw, rec.where)
        cost[i] += (tin, tout, usd, _seconds(rec.raw, rec.where))
        if _halted(rec.raw):
            halted += 1
            continue
        scores = rec.raw.get("scores")
        score = scores.get(scorer) if isinstance(scores, dict) else None
        field = f"{rec.where}.scores.{scorer}.value"
        if not isinstance(score, dict) or "value" not in score:
            errors.append(
                LineError(
                    f"sample {sid!r} epoch {epoch} has no {scorer!r} score (and neither an error "
                    "nor a limit)",
                    field=field,
                )
            )
            continue
        v = score_to_float(score["value"])
        if v is None or not math.isfinite(v):
            errors.append(
                LineError(
                    f"score {score['value']!r} cannot be read as a number (Inspect would warn and "
                    "use 0; benchslice refuses to invent a 0)",
                    field=field,
                )
            )
        elif not 0.0 <= v <= 1.0:
            errors.append(LineError(f"score {v!r} is outside [0, 1]", field=field))
        else:
            values[i, epoch - 1] = v
        if len(errors) >= _MAX_REPORTED:
            break
    if errors:
        raise IngestError(errors)
    counts = np.sum(~np.isnan(values), axis=1)
    keep = counts > 0
    if not keep.any():
        raise IngestError.single(
            "every sample errored or hit a limit: no score to store", field="samples"
        )
    ids = np.asarray([f"{task}/{sid}" for sid in order], dtype=object)[keep]
    values, counts, cost = values[keep], counts[keep], cost[keep]
    means = np.nanmean(values, axis=1)
    correct, _ = finalize_values(means, None)
    within = None
    if k > 1 and (counts >= 2).all():
        within = np.nanvar(values, axis=1, ddof=1).astype(np.float32)
    notes = [f"Inspect log of task {task!r}, model {model!r}, scorer {scorer!r} (status {status})"]
    if halted:
        notes.append(f"{halted} sample(s) errored or hit a limit: kept as missing, not 0")
    if (~keep).any():
        notes.append(f"{int((~keep).sum())} item(s) have no scored sample: missing")
    return ParsedResults(
        item_ids=ids.astype(str),
        correct=correct,
        source_format="inspect",
        metric=scorer,
        metrics_seen=tuple(seen_scorers),
        task=task,
        subjects=np.full(ids.size, task),
        notes=tuple(notes),
        samples=k if k > 1 else None,
        within_variance=within,
        sample_counts=counts.astype(np.int32) if k > 1 and (counts < k).any() else None,
        costs=_costs(cost),
        model=model,
    )


def _costs(cost: np.ndarray) -> ItemCosts | None:
    cols = [cost[:, j].astype(np.float64) for j in range(4)]
    out = [c if np.isfinite(c).any() else None for c in cols]
    if all(c is None for c in out):
        return None
    return ItemCosts(
        input_tokens=out[0], output_tokens=out[1], usd=out[2], seconds=out[3], source=COST_SOURCE
    )
