"""The one typed result every parser returns, and the typed errors they raise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

MAX_REPORTED_ERRORS = 50


@dataclass(frozen=True)
class LineError:
    """One problem in an upload: where (1-based line or record, field) and what."""

    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def as_dict(self) -> dict[str, object]:
        return {"line": self.line, "field": self.field, "message": self.message}


class IngestError(ValueError):
    """An upload could not be parsed; ``errors`` lists every problem found (capped)."""

    def __init__(self, errors: Sequence[LineError]) -> None:
        self.errors: tuple[LineError, ...] = tuple(errors[:MAX_REPORTED_ERRORS])
        self.truncated = len(errors) > MAX_REPORTED_ERRORS
        self.total = len(errors)
        first = str(self.errors[0]) if self.errors else "invalid upload"
        more = len(errors) - 1
        super().__init__(first + (f" (and {more} more)" if more > 0 else ""))

    @classmethod
    def single(cls, message: str, *, line: int | None = None, field: str | None = None):
        return cls([LineError(message, line=line, field=field)])


class AmbiguousChoiceError(IngestError):
    """The file holds several metrics and/or filters and none was chosen."""

    def __init__(self, choices: Mapping[str, Sequence[str]]) -> None:
        self.choices = {k: list(v) for k, v in choices.items()}
        errors = [
            LineError(f"several {name}s present, choose one of: {', '.join(opts)}", field=name)
            for name, opts in self.choices.items()
        ]
        super().__init__(errors)


@dataclass(frozen=True)
class ItemCosts:
    """What evaluating each item cost one model (the seam between log parsers and cost features).

    Every array has shape (n,), aligned with :attr:`ParsedResults.correct`, float64; NaN means
    "not reported for this item". A field the upload never carries is ``None``.

    Attributes
    ----------
    input_tokens, output_tokens : ndarray or None
        Prompt and completion tokens, summed over the item's samples.
    seconds : ndarray or None
        Wall-clock (working) time spent on the item, in seconds.
    usd : ndarray or None
        Money spent on the item, in US dollars.
    source : str
        Where the figures came from (e.g. ``"inspect model_usage"``, ``"csv cost column"``).
    """

    input_tokens: np.ndarray | None = None
    output_tokens: np.ndarray | None = None
    seconds: np.ndarray | None = None
    usd: np.ndarray | None = None
    source: str = "upload"


@dataclass(frozen=True)
class ParsedResults:
    """One model's per-item results, as parsed from any supported upload format.

    Attributes
    ----------
    item_ids : ndarray of str, shape (n,), or None
        External item ids (lm-eval ``doc_hash`` …). ``None`` means the values are aligned to the
        benchmark's item order (columnar upload without ids).
    correct : ndarray, shape (n,)
        ``uint8`` 0/1 when every value is 0 or 1, else ``float32`` scores in [0, 1].
    confidence : ndarray of float32, shape (n,), or None
        Probability on the gold answer, in [0, 1].
    metric, filter : str or None
        The metric and lm-eval filter the values were taken from.
    metrics_seen, filters_seen : tuple of str
        Every metric / filter present in the file.
    task : str or None
        lm-eval task name (from the argument, the file name, or the records).
    subjects : ndarray of str, shape (n,), or None
        The doc's subject field per item (``subject`` / ``category``), when present.
    doc_ids : ndarray of int64, shape (n,), or None
        lm-eval ``doc_id`` per item (items are sorted by it).
    errors : tuple of LineError
        Problems in lines that were skipped (only non-empty with ``strict=False``).
    notes : tuple of str
        Non-fatal remarks (e.g. why no confidence could be derived).
    samples : int or None
        ``K``, the samples (generations) behind each item's score when ``K > 1``: ``correct``
        then holds the per-item mean ``x̄_i`` in [0, 1]. ``None`` means one sample per item.
    within_variance : ndarray of float32, shape (n,), or None
        Per-item sample variance ``s²_i`` (ddof 1) of the ``K`` samples, when known.
    eval_config : dict or None
        The evaluation configuration the upload carried (:mod:`app.ingest.lm_eval_config`).
    sample_counts : ndarray of int32, shape (n,), or None
        Samples actually behind each item's mean when they differ per item (e.g. an errored epoch
        is missing, never 0); ``None`` means every item has :attr:`k` samples.
    costs : ItemCosts or None
        Per-item cost (tokens, time, money) where the upload reports it.
    model : str or None
        The model the upload itself names (Inspect's ``eval.model``), when it names one.
    """

    item_ids: np.ndarray | None
    correct: np.ndarray
    confidence: np.ndarray | None = None
    source_format: str = "json"
    metric: str | None = None
    filter: str | None = None
    metrics_seen: tuple[str, ...] = ()
    filters_seen: tuple[str, ...] = ()
    task: str | None = None
    subjects: np.ndarray | None = None
    doc_ids: np.ndarray | None = None
    errors: tuple[LineError, ...] = ()
    notes: tuple[str, ...] = field(default=())
    samples: int | None = None
    within_variance: np.ndarray | None = None
    eval_config: dict | None = None
    sample_counts: np.ndarray | None = None
    costs: ItemCosts | None = None
    model: str | None = None

    @property
    def n_items(self) -> int:
        return int(self.correct.shape[0])

    @property
    def binary(self) -> bool:
        return self.correct.dtype == np.uint8

    @property
    def k(self) -> int:
        """Samples per item (1 unless the upload carried repeated samples)."""
        return self.samples or 1


def check_within_variance(
    means: np.ndarray, variance: np.ndarray, k: int, *, field: str = "within_variance"
) -> np.ndarray:
    """Validate per-item sample variances of ``k`` samples in [0, 1] with means ``means``.

    Finite, non-negative and at most ``k / (k - 1) x̄ (1 - x̄)`` (the largest ddof-1 variance
    of ``k`` values in [0, 1] with mean ``x̄``), with a 1e-6 tolerance. Returns float32.
    """
    if k < 2:
        raise IngestError.single("only meaningful with samples >= 2", field=field)
    if variance.shape != means.shape:
        raise IngestError.single(
            f"length {variance.size} differs from correct ({means.size})", field=field
        )
    bad = ~np.isfinite(variance)
    if bad.any():
        raise IngestError.single(f"{field}[{int(np.flatnonzero(bad)[0])}] is NaN", field=field)
    bound = k / (k - 1) * means * (1.0 - means) + 1e-6
    out = (variance < 0) | (variance > bound)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise IngestError.single(
            f"{field}[{i}] = {variance[i]!r} is impossible for {k} samples in [0, 1] with mean "
            f"{means[i]!r} (at most {bound[i] - 1e-6:.6g})",
            field=field,
        )
    return variance.astype(np.float32)


def check_samples(value: object, *, field: str = "samples") -> int:
    """``K`` as a positive int, else an ``IngestError`` naming ``field``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not np.isfinite(value)
        or int(value) != value
    ):
        raise IngestError.single(f"expected a whole number of samples, got {value!r}", field=field)
    if value < 1:
        raise IngestError.single(f"must be at least 1, got {value!r}", field=field)
    return int(value)


def finalize_values(
    correct: np.ndarray,
    confidence: np.ndarray | None,
    *,
    correct_field: str = "correct",
    confidence_field: str = "confidence",
) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate float vectors (finite, in [0, 1]) and narrow ``correct`` to uint8 when 0/1.

    Raises ``IngestError`` naming the field and the first offending position (0-based index).
    """
    out_conf = None
    errors: list[LineError] = []
    for name, arr in ((correct_field, correct), (confidence_field, confidence)):
        if arr is None:
            continue
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            errors.append(LineError(f"{name}[{i}] is NaN or infinite", field=name))
            continue
        out = (arr < 0.0) | (arr > 1.0)
        if out.any():
            i = int(np.flatnonzero(out)[0])
            errors.append(LineError(f"{name}[{i}] = {arr[i]!r} is outside [0, 1]", field=name))
    if errors:
        raise IngestError(errors)
    if np.all((correct == 0.0) | (correct == 1.0)):
        out_correct = correct.astype(np.uint8)
    else:
        out_correct = correct.astype(np.float32)
    if confidence is not None:
        out_conf = confidence.astype(np.float32)
    return out_correct, out_conf
