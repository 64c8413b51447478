"""Anchor Points: k-medoids on item-item correlations over source models (paper §3.5)."""

from __future__ import annotations

import kmedoids
import numpy as np

from app.core._validation import ResultsData
from app.core.selectors.base import Chosen, Selector

ESTIMATE_ON = ("confidence", "correct")
# Above this many candidates the full dissimilarity matrix is kept in float32 (half the memory
# and memory traffic; 4,000 puts the MMLU and MMLU-Pro seen halves, 5,306 and 6,012 items, in
# float32, GPQA's 224 and BBH's 2,880 stay in float64). Measured on SYNTHETIC 447 x 12,032
# (bench/RESULTS.md, issue 27): the same medoids at every paper size, ~0.35 CPU-s less per run.
FLOAT64_MAX_ITEMS = 4_000
CLARA_DRAWS = 5


def standardized_columns(x: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Columns of ``x`` centred and scaled so that ``Z' Z / m`` is their Pearson correlation.

    Constant columns (zero variance) become all-zero, i.e. correlation 0 with every other item;
    the second output flags them.
    """
    m = x.shape[0]
    xc = x - x.mean(axis=0)
    sd = np.sqrt(np.einsum("ij,ij->j", xc, xc) / m)
    constant = np.all(x == x[:1], axis=0)
    scale = np.where(constant, 0.0, 1.0 / np.where(constant, 1.0, sd) / np.sqrt(m))
    return (xc * scale).astype(dtype, copy=False), constant


def correlation_dissimilarity(x: np.ndarray, dtype=np.float64, *, out=None) -> np.ndarray:
    """``1 - R`` for the item-item Pearson correlation ``R`` of the columns of ``x``.

    Parameters
    ----------
    x : ndarray, shape (n_models, n_items)
    dtype : numpy dtype
        float64 (paper) or float32 (halves memory for large pools).
    out : ndarray, shape (n_items, n_items), optional
        A C-contiguous buffer of ``dtype`` to write the result into (its old contents are
        overwritten). Reusing one buffer across fits saves allocating and page-faulting a fresh
        N x N matrix every time (~0.3-0.4 s of kernel time at 6,012 items); the values are
        bit-identical to a fresh result.

    Returns
    -------
    ndarray, shape (n_items, n_items)
        Built in place (one N x N buffer: ``out`` when given). NaN policy: a constant item has
        correlation 0 with every other item and 1 with itself (so dissimilarity 1 to others, 0 on
        the diagonal).
    """
    z, _ = standardized_columns(x, dtype)
    n = z.shape[1]
    if out is not None and (
        out.shape != (n, n) or out.dtype != np.dtype(dtype) or not out.flags.c_contiguous
    ):
        raise ValueError(f"out: expected a C-contiguous ({n}, {n}) {np.dtype(dtype)} array")
    d = np.matmul(z.T, z, out=out)  # R (constant items: 0 everywhere); Z'Z by a symmetric update
    np.subtract(1.0, d, out=d)
    np.fill_diagonal(d, 0.0)
    np.clip(d, 0.0, 2.0, out=d)
    return d


def nearest_medoid(d: np.ndarray, medoids: np.ndarray, *, block: int = 64) -> np.ndarray:
    """``np.argmin(d[medoids], axis=0)`` without materialising the ``k x N`` copy.

    Parameters
    ----------
    d : ndarray, shape (N, N)
        Dissimilarities (C-ordered; no NaN).
    medoids : ndarray of int, shape (k,)
        Row positions of the medoids.
    block : int, default 64
        Medoid rows gathered at a time (one small reused buffer).

    Returns
    -------
    ndarray of int64, shape (N,)
        For every column, the position in ``medoids`` of the row with the smallest value; ties go
        to the first such medoid, as ``np.argmin`` does.

    Notes
    -----
    Blocks of medoid rows are scanned in order; within a block ``np.argmin`` returns the first
    minimum and a later block replaces the running label only where it is *strictly* smaller,
    so the result is exactly ``np.argmin(d[medoids], axis=0)`` (a test compares them). At
    k = 1,000 and N = 6,012 the full copy is 48 MB, whose fresh pages cost more kernel time than
    the scan itself.
    """
    medoids = np.asarray(medoids, dtype=np.int64)
    n_cols = d.shape[1]
    buf = np.empty((min(block, medoids.size), n_cols), dtype=d.dtype)
    labels = np.zeros(n_cols, dtype=np.int64)
    best = np.full(n_cols, np.inf, dtype=d.dtype)
    cols = np.arange(n_cols)
    for start in range(0, medoids.size, block):
        rows = medoids[start : start + block]
        part = np.take(d, rows, axis=0, out=buf[: rows.size])
        arg = np.argmin(part, axis=0)
        low = part[arg, cols]
        better = low < best if start else np.ones(n_cols, dtype=bool)
        labels[better] = arg[better] + start
        best[better] = low[better]
    return labels


def fasterpam(d: np.ndarray, n: int, *, max_iter: int, seed: int):
    """``kmedoids.fasterpam(d, n, init="random", random_state=seed, n_cpu=1)``, with fast reads.

    Parameters
    ----------
    d : ndarray, shape (N, N)
        Symmetric dissimilarities (C-ordered).
    n : int
        Number of medoids.
    max_iter : int
    seed : int
        Seeds both the random initial medoids and FasterPAM's random processing order.

    Returns
    -------
    kmedoids.KMedoidsResult

    Notes
    -----
    FasterPAM evaluates a candidate medoid ``j`` by reading ``d[o, j]`` for every ``o``: a
    *column*, i.e. one cache line per element of a C-ordered matrix. For a symmetric ``d`` the
    transpose ``d.T`` (a free, F-ordered view) is the same matrix whose columns are contiguous
    rows of ``d``, so handing it ``d.T`` gives bit-identical medoids, labels, loss and swap count
    while every read is sequential (4-5x faster at 6,000 items). ``d`` is symmetric exactly:
    :func:`correlation_dissimilarity` computes ``Z'Z`` with a symmetric rank-k update and
    only applies elementwise operations afterwards (a test pins this).
    """
    return kmedoids.fasterpam(d.T, n, max_iter=max_iter, init="random", random_state=seed, n_cpu=1)


class AnchorPointsSelector(Selector):
    """k-medoids (FasterPAM) on ``1 - R``; cluster-size weights on the medoids.

    Parameters
    ----------
    estimate_on : {"confidence", "correct"}, default "confidence"
        Signal the default estimator reads on the medoids: the gold-option probability
        (``"weighted_confidence"``, the paper's estimator, a weighted mean *confidence*) or 0/1
        correctness (``"weighted_mean"``). Without source confidences ``"confidence"`` falls back
        to ``"correct"``, recorded in ``Selection.estimate_on`` and ``fitted["estimate_on_fallback"]``.
    max_full_items : int, default 20000
        Above this many candidates no N x N matrix is built: CLARA-style sampling is used instead.
    max_iter : int, default 100
        FasterPAM iteration cap (kmedoids' default, as in the paper).

    Notes
    -----
    Fit (once): ``R`` = Pearson correlation over source models of the signal (confidence, or
    correctness as the recorded fallback) of the candidate items; ``D = 1 - R`` kept in float64
    up to 4,000 candidates and in float32 up to ``max_full_items`` (FasterPAM accepts both).
    Documented difference to the reference's float64 ``1 - corrcoef``: above 4,000 candidates
    ``D`` carries float32 rounding (~6e-8 relative), which can change FasterPAM's path only
    where two swaps' gains tie to within it; on SYNTHETIC MMLU-Pro-scale splits the medoids were
    the same at every paper size and the losses agreed to ~1e-8 relative (a test compares the two
    precisions' selections).
    Constant items, whose correlations are NaN in the reference, get correlation 0 with the
    others and 1 with themselves (the reference's predictor variant also sets NaN to 0).
    Refitting the same instance writes ``D`` into the previous fit's matrix when its size and
    dtype match (the same values as a fresh one; no selection holds a reference to it): the
    protocol refits one instance per method for every run, and a fresh 6,012^2 matrix per run
    cost ~0.4 s of kernel time in page faults.

    Select (per ``n``): ``kmedoids.fasterpam(D, n, init="random", random_state=s, n_cpu=1)`` with
    ``s`` drawn from the selection ``rng`` (single-threaded so the result is deterministic; run
    on the transposed view for contiguous reads, bit-identical: :func:`fasterpam`); each
    candidate goes to the medoid it is most correlated with (argmin of D; ties to the first
    medoid; :func:`nearest_medoid`); weight of medoid ``c`` = ``|cluster c| / N`` (empty clusters keep weight 0).

    Large pools (``N > max_full_items``), CLARA-style: ``CLARA_DRAWS`` = 5 uniform samples of
    ``min(N, max(40 + 2n, 2000))`` candidates each (always containing the previous best medoids),
    FasterPAM on each sample's float32 dissimilarities, then every candidate is assigned using
    only its correlations with the ``n`` medoids (an N x n product); the medoids with the lowest
    total dissimilarity over all candidates win. Memory O(N (m + n) + s^2).
    """

    name = "anchor_points"
    estimators = ("weighted_confidence", "weighted_mean")

    def __init__(
        self, *, estimate_on: str = "confidence", max_full_items: int = 20_000, max_iter: int = 100
    ) -> None:
        super().__init__(estimate_on=estimate_on, max_full_items=max_full_items, max_iter=max_iter)

    @property
    def estimate_on(self) -> str:
        data = getattr(self, "data_", None)
        if (
            self.params["estimate_on"] == "confidence"
            and data is not None
            and data.confidence is None
        ):
            return "correct"
        return self.params["estimate_on"]

    @property
    def default_estimator(self) -> str:
        return "weighted_confidence" if self.estimate_on == "confidence" else "weighted_mean"

    def _fit(self, data: ResultsData) -> None:
        if self.params["estimate_on"] not in ESTIMATE_ON:
            raise ValueError(
                f"estimate_on: expected one of {ESTIMATE_ON}, got {self.params['estimate_on']!r}"
            )
        limit = self.params["max_full_items"]
        if isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 1:
            raise ValueError("max_full_items: expected a positive integer")
        x = data.signal[:, data.candidates]
        n_cand = x.shape[1]
        self.clara_ = n_cand > limit
        if self.clara_:
            self.z_, self.constant_ = standardized_columns(x, np.float32)
            self.dissim_ = None
        else:
            dtype = np.float64 if n_cand <= FLOAT64_MAX_ITEMS else np.float32
            old = getattr(self, "dissim_", None)
            reuse = old is not None and old.shape == (n_cand, n_cand) and old.dtype == dtype
            # a refit of this instance overwrites its own previous matrix (same values as fresh)
            self.dissim_ = correlation_dissimilarity(x, dtype, out=old if reuse else None)
            self.constant_ = np.all(x == x[:1], axis=0)
            self.z_ = None

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        seed = int(rng.integers(0, 2**31 - 1))
        if self.clara_:
            medoids, labels = self._clara(n, seed)
        else:
            res = fasterpam(self.dissim_, n, max_iter=int(self.params["max_iter"]), seed=seed)
            medoids = np.asarray(res.medoids, dtype=np.int64)
            labels = nearest_medoid(self.dissim_, medoids)
        n_cand = data.candidates.shape[0]
        weights = np.bincount(labels, minlength=n) / n_cand
        fitted = {
            "kmedoids_seed": np.int64(seed),
            "estimate_on_fallback": np.bool_(
                self.params["estimate_on"] == "confidence" and data.confidence is None
            ),
            "constant_items": np.int64(self.constant_.sum()),
            "clara": np.bool_(self.clara_),
        }
        return Chosen(indices=data.candidates[medoids], weights=weights, fitted=fitted)

    def _clara(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        z = self.z_
        n_cand = z.shape[1]
        size = min(n_cand, max(40 + 2 * n, 2000))
        gen = np.random.default_rng(seed)
        best_cost, best = np.inf, None
        for _ in range(CLARA_DRAWS):  # a handful of CLARA draws, each fully vectorised
            if best is None:
                sample = np.sort(gen.choice(n_cand, size=size, replace=False))
            else:
                others = np.setdiff1d(np.arange(n_cand), best[0])
                extra = gen.choice(others, size=size - n, replace=False)
                sample = np.sort(np.concatenate([best[0], extra]))
            zs = z[:, sample]
            d = zs.T @ zs
            np.subtract(1.0, d, out=d)
            np.fill_diagonal(d, 0.0)
            np.clip(d, 0.0, 2.0, out=d)
            res = fasterpam(
                d,
                n,
                max_iter=int(self.params["max_iter"]),
                seed=int(gen.integers(0, 2**31 - 1)),
            )
            medoids = sample[np.asarray(res.medoids, dtype=np.int64)]
            dm = 1.0 - z[:, medoids].T @ z  # (n, N) dissimilarities to the medoids
            dm[np.arange(n), medoids] = 0.0
            labels = np.argmin(dm, axis=0)
            cost = float(np.sum(np.min(dm, axis=0)))
            if cost < best_cost:
                best_cost, best = cost, (medoids, labels)
        return best
