"""Coverage study: do a subset's 95 % intervals contain held-out models' full accuracy?

Repeat ``R`` times: split the models into sources and held-out targets (duplicate result vectors
dropped among the targets), fit every selector on the sources and draw a subset of each size,
score every target from its results on the subset only through the scoring function (default
:func:`app.core.scoring.score_models.score_models`, the one the service uses) and record whether its full
accuracy lies in each interval. Statistics-next §5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from app.core.scoring.crossfit import crossfit_applies, with_out_of_fold
from app.core.scoring.score_models import EstimateBatch, score_models
from app.core.selectors import make_selector

#: ``scorer(selection, target_results (m, k), n_population, reference_correct (r, N))``.
Scorer = Callable[..., list[EstimateBatch]]
TAIL_SHARE = 0.2


def default_scorer(selection, y, n_population, reference_correct):
    """:func:`app.core.scoring.score_models.score_models` with the source models as references."""
    return score_models(selection, y, n_population, reference_correct=reference_correct)


@dataclass(frozen=True)
class CoverageRow:
    """One selector x estimator x interval x size cell (``_low``/``_high``: the 20 % tails;
    ``mean_abs_error_raw``: of the estimator's own number, before any bias correction)."""

    method: str
    estimator: str
    interval: str | None
    basis: str
    n: int
    cases: int
    coverage: float
    coverage_se: float
    mean_width: float
    bias: float
    mean_abs_error: float
    coverage_low: float
    coverage_high: float
    mean_width_low: float
    mean_width_high: float
    bias_low: float
    bias_high: float
    unavailable: int = 0
    mean_abs_error_raw: float = float("nan")


@dataclass(frozen=True)
class CoverageTable:
    """The study's result: rows plus the parameters that reproduce it."""

    rows: tuple[CoverageRow, ...]
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"params": self.params, "rows": [asdict(r) for r in self.rows]}

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def to_markdown(self) -> str:
        head = (
            "| method | estimator | interval | basis | n | coverage (SE) | low 20 % | high 20 % "
            "| width | bias | abs err |\n|---|---|---|---|---|---|---|---|---|---|---|"
        )
        lines = [head]
        for r in self.rows:
            lines.append(
                f"| {r.method} | {r.estimator} | {r.interval} | {r.basis} | {r.n} | "
                f"{r.coverage:.3f} ({r.coverage_se:.3f}) | {r.coverage_low:.3f} | "
                f"{r.coverage_high:.3f} | {r.mean_width:.4f} | {r.bias:+.4f} | "
                f"{r.mean_abs_error:.4f} |"
            )
        return "\n".join(lines)

    def failing(self, threshold: float) -> list[CoverageRow]:
        """Cells whose overall or tail coverage is below ``threshold``."""
        return [
            r for r in self.rows if min(r.coverage, r.coverage_low, r.coverage_high) < threshold
        ]


def split_models(
    correct: np.ndarray, n_sources: int, n_targets: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random sources and held-out targets; targets with a duplicate result vector are dropped
    (the first occurrence kept). Returns row indices ``(sources, targets)``."""
    m = correct.shape[0]
    if n_sources < 1 or n_targets < 1 or n_sources + n_targets > m:
        raise ValueError(f"n_sources: {n_sources} + {n_targets} targets exceed {m} models")
    perm = rng.permutation(m)
    sources, targets = perm[:n_sources], perm[n_sources : n_sources + n_targets]
    _, first = np.unique(correct[targets], axis=0, return_index=True)
    return np.sort(sources), targets[np.sort(first)]


SPLITS = ("random", "weak_to_strong", "strong_to_weak")


def extrapolation_split(
    correct: np.ndarray, split: str, target_share: float = 0.2
) -> tuple[np.ndarray, np.ndarray]:
    """Sources and targets of an *extrapolation split* (statistics-next §10).

    ``weak_to_strong``: fit on the weakest ``1 - target_share`` of the models (by full-benchmark
    accuracy), score the strongest ``target_share`` (targets tied with the strongest source are
    dropped: every target is stronger than every source); ``strong_to_weak``: the mirror.
    Targets with a duplicate result vector are dropped. Returns row indices ``(sources,
    targets)``.
    """
    if split not in SPLITS[1:]:
        raise ValueError(f"split: expected one of {SPLITS[1:]}, got {split!r}")
    if not (0.0 < target_share < 1.0):
        raise ValueError("target_share: must lie in (0, 1)")
    acc = np.asarray(correct, dtype=np.float64).mean(axis=1)
    order = np.argsort(acc if split == "weak_to_strong" else -acc, kind="stable")
    k = round(order.size * (1.0 - target_share))
    sources, targets = order[:k], order[k:]
    edge = acc[sources].max() if split == "weak_to_strong" else acc[sources].min()
    targets = targets[acc[targets] != edge]  # strictly beyond every source
    _, first = np.unique(np.asarray(correct)[targets], axis=0, return_index=True)
    return np.sort(sources), targets[np.sort(first)]


def _cluster_se(hits: np.ndarray, counts: np.ndarray) -> float:
    """SE of a ratio ``sum hits / sum counts`` with repeats as clusters."""
    r = hits.shape[0]
    tot = counts.sum()
    if r < 2 or tot == 0:
        return float("nan")
    p = hits.sum() / tot
    return float(np.sqrt(r / (r - 1) * np.sum((hits - p * counts) ** 2)) / tot)


def coverage_study(
    correct,
    methods: Sequence[str] | dict[str, dict],
    sizes: Sequence[int],
    *,
    repeats: int = 20,
    n_sources: int = 300,
    n_targets: int = 120,
    subtasks=None,
    seed: int = 0,
    scorer: Scorer | None = None,
    crossfit: bool = True,
    split: str = "random",
) -> CoverageTable:
    """Empirical coverage of every interval a subset's scoring returns.

    Parameters
    ----------
    correct : array_like, shape (n_models, N)
        Full per-item results of every model (0/1 or [0, 1]).
    methods : sequence of str or dict name -> selector params
        Selectors (registry names).
    sizes : sequence of int
        Subset sizes ``n``.
    repeats : int
        Source/target splits; each split draws its own subset per method and size.
    n_sources, n_targets : int
    subtasks : array_like of str, shape (N,), optional
    seed : int
        Split ``r`` uses ``default_rng([seed, r])``; subsets use seeds drawn from it.
    scorer : callable, optional
        ``scorer(selection, y_targets, N, reference_correct) -> list[EstimateBatch]``; default
        :func:`default_scorer`.
    crossfit : bool
        Store out-of-fold values in every non-probability subset, as the service's subset job
        does (:func:`app.core.scoring.crossfit.with_out_of_fold`, seeded with the subset's seed; the
        ``K`` fold fits are shared by the sizes of a repeat), so its intervals are the
        cross-fitted ones. ``False`` measures the in-sample calibration.
    split : {"random", "weak_to_strong", "strong_to_weak"}
        ``random``: :func:`split_models` per repeat; the others: :func:`extrapolation_split`
        (the same models every repeat, ``n_sources``/``n_targets`` unused; repeats differ in the
        subsets drawn).

    Returns
    -------
    CoverageTable
        Per method x estimator x interval x n: coverage over (target, repeat) cases with its
        standard error clustered by repeat (targets in a repeat share a subset), mean width,
        bias ``mean(value - truth)``, mean ``|value - truth|``, and the same restricted to the
        targets whose accuracy is in the lowest / highest 20 % of the repeat's targets.

    Notes
    -----
    Truth is the target's accuracy over all ``N`` items. Scoring is vectorised over targets (one
    scorer call per repeat x method x size).
    """
    c = np.asarray(correct, dtype=np.float64)
    specs = {m: {} for m in methods} if not isinstance(methods, dict) else dict(methods)
    scorer = scorer or default_scorer
    big_n = c.shape[1]
    # acc[(method, estimator, interval, basis, n)] -> per-repeat stat arrays
    acc: dict[tuple, dict[str, list]] = {}
    fixed: dict[str, tuple] = {}
    for r in range(repeats):  # repeats of the study (each fits every selector)
        rng = np.random.default_rng([seed, r])
        if split == "random":
            src, tgt = split_models(c, n_sources, n_targets, rng)
        else:
            src, tgt = extrapolation_split(c, split)
        truth = c[tgt].mean(axis=1)
        q_lo, q_hi = np.quantile(truth, [TAIL_SHARE, 1.0 - TAIL_SHARE])
        low, high = truth <= q_lo, truth >= q_hi
        for name, params in specs.items():  # a handful of selectors
            if split == "random" or name not in fixed:
                sel = make_selector(name, **params).fit(c[src], subtasks=subtasks)
                fixed[name] = (sel, {})
            sel, folds = fixed[name]  # a fixed split fits each selector (and its folds) once
            folds = folds if split != "random" else {}
            for n in sizes:  # a few sizes
                selection = sel.select(int(n), rng=int(rng.integers(0, 2**31 - 1)))
                if crossfit and crossfit_applies(name, src.size):
                    selection = with_out_of_fold(
                        selection,
                        c[src],
                        seed=int(selection.seed or 0),
                        subtasks=subtasks,
                        fold_selectors=folds,
                    )
                batches = scorer(selection, c[np.ix_(tgt, selection.indices)], big_n, c[src])
                for b in batches:  # a handful of estimators
                    key = (name, b.estimator, b.interval, b.basis, int(n))
                    slot = acc.setdefault(key, {})
                    _record(slot, b, truth, low, high)
    rows = [_row(key, slot) for key, slot in acc.items()]
    return CoverageTable(
        rows=tuple(rows),
        params={
            "methods": specs,
            "sizes": [int(s) for s in sizes],
            "repeats": repeats,
            "n_sources": n_sources,
            "n_targets": n_targets,
            "seed": seed,
            "crossfit": crossfit,
            "split": split,
            "n_models": int(c.shape[0]),
            "n_items": big_n,
        },
    )


def _record(slot, b: EstimateBatch, truth, low, high) -> None:
    ok = np.isfinite(b.ci_low) & np.isfinite(b.ci_high) & np.isfinite(b.value)
    cover = (b.ci_low <= truth + 1e-12) & (truth - 1e-12 <= b.ci_high) & ok
    width = np.where(ok, b.ci_high - b.ci_low, 0.0)
    err = np.where(ok, b.value - truth, 0.0)
    for tag, mask in (("", np.ones_like(ok)), ("_low", low), ("_high", high)):
        mk = mask & ok
        slot.setdefault("n" + tag, []).append(mk.sum())
        slot.setdefault("hit" + tag, []).append((cover & mk).sum())
        slot.setdefault("width" + tag, []).append(width[mk].sum())
        slot.setdefault("err" + tag, []).append(err[mk].sum())
        slot.setdefault("abs" + tag, []).append(np.abs(err[mk]).sum())
    slot.setdefault("unavailable", []).append((~ok).sum())
    raw_err = np.where(ok & np.isfinite(b.raw_value), np.abs(b.raw_value - truth), 0.0)
    slot.setdefault("abs_raw", []).append(raw_err.sum())


def _row(key, slot) -> CoverageRow:
    a = {k: np.asarray(v, dtype=np.float64) for k, v in slot.items()}

    def ratio(num, den):
        d = a[den].sum()
        return float(a[num].sum() / d) if d > 0 else float("nan")

    method, estimator, interval, basis, n = key
    return CoverageRow(
        method=method,
        estimator=estimator,
        interval=interval,
        basis=basis,
        n=n,
        cases=int(a["n"].sum()),
        coverage=ratio("hit", "n"),
        coverage_se=_cluster_se(a["hit"], a["n"]),
        mean_width=ratio("width", "n"),
        bias=ratio("err", "n"),
        mean_abs_error=ratio("abs", "n"),
        coverage_low=ratio("hit_low", "n_low"),
        coverage_high=ratio("hit_high", "n_high"),
        mean_width_low=ratio("width_low", "n_low"),
        mean_width_high=ratio("width_high", "n_high"),
        bias_low=ratio("err_low", "n_low"),
        bias_high=ratio("err_high", "n_high"),
        unavailable=int(a["unavailable"].sum()),
        mean_abs_error_raw=ratio("abs_raw", "n"),
    )


__all__ = [
    "SPLITS",
    "CoverageRow",
    "CoverageTable",
    "Scorer",
    "coverage_study",
    "default_scorer",
    "extrapolation_split",
    "split_models",
]
