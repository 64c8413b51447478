"""Diversity sampling with a projection DPP on PCA features of the source models (paper §3.4)."""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA

from app.core._validation import ResultsData
from app.core.selectors.base import Chosen, Selector

MAX_COMPONENTS = 4
TRIM_QUANTILES = (0.01, 0.99)
SCALE = 0.99
WEIGHTINGS = ("mean", "sampler")


class DPPSelector(Selector):
    """One exact ``n``-point sample of a discrete orthogonal-polynomial projection DPP.

    Parameters
    ----------
    weighting : {"mean", "sampler"}, default "mean"
        ``"mean"``: plain mean over the selected items (the paper's estimator, ``"mean"``).
        ``"sampler"``: the sampler's importance weights ``(1 / N_kept) / K_ii``, normalised to
        sum to one, as the linear weights (estimator ``"weighted_mean"``); the paper computes
        them but does not use them.
    pca_seed : int, default 0
        ``random_state`` of the randomized PCA fitted once in :meth:`fit`. The reference leaves it
        unseeded; we fix it so fits are reproducible. It does not depend on the selection seed.

    Notes
    -----
    Fit (once, on the source models):

    1. features ``X`` = candidate items x source models signal matrix (confidence, or
       correctness as the recorded fallback);
    2. ``PCA(n_components=d, svd_solver="randomized")`` with ``d = min(N, |S|, 4)`` (``"full"``
       when ``d = min(N, |S|)``);
    3. keep items whose every component lies in that component's [1 %, 99 %] quantiles
       (NumPy linear interpolation); the others can never be selected;
    4. rescale each component over the kept items to [-0.99, 0.99]:
       ``x <- 0.99 (2 (x - min) / (max - min) - 1)`` (a constant component maps to 0).

    Select (per ``n``, cached for the last ``n``): multi-index ordering (:func:`multi_indices`),
    Vandermonde ``V[i, j] = prod_r x_{i,r}^{alpha_{j,r}}``, economic QR ``V = QR``, and one sample
    of the rank-``n`` projection DPP with kernel ``K = Q Q^T`` by :func:`sample_projection_dpp`.
    ``n`` larger than the number of kept items raises ``ValueError`` naming ``n``.

    Cost: fit is one randomized PCA, O(N |S|); select is O(N_kept n^2) (QR and sampler).
    """

    name = "dpp"
    estimators = ("mean", "weighted_mean")

    def __init__(self, *, weighting: str = "mean", pca_seed: int = 0) -> None:
        super().__init__(weighting=weighting, pca_seed=pca_seed)

    @property
    def default_estimator(self) -> str:
        return "weighted_mean" if self.params["weighting"] == "sampler" else "mean"

    def _fit(self, data: ResultsData) -> None:
        if self.params["weighting"] not in WEIGHTINGS:
            raise ValueError(
                f"weighting: expected one of {WEIGHTINGS}, got {self.params['weighting']!r}"
            )
        seed = self.params["pca_seed"]
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"pca_seed: expected a non-negative int, got {seed!r}")
        features = data.signal[:, data.candidates].T
        self.kept_, self.features_ = dpp_features(features, seed=int(seed))
        self._cache: tuple[int, np.ndarray] | None = None

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        n_kept = self.kept_.shape[0]
        if n > n_kept:
            raise ValueError(
                f"n: {n} exceeds the {n_kept} candidates left after the DPP's 1%/99% trimming"
            )
        if self._cache is None or self._cache[0] != n:
            self._cache = (n, projection_basis(self.features_, n))
        q = self._cache[1]
        picked = sample_projection_dpp(q, rng)
        if self.params["weighting"] == "sampler":
            k_ii = np.einsum("ij,ij->i", q[picked], q[picked])
            w = (1.0 / n_kept) / k_ii
            weights = w / w.sum()
        else:
            weights = np.full(n, 1.0 / n)
        return Chosen(indices=data.candidates[self.kept_[picked]], weights=weights)


def dpp_features(features: np.ndarray, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """PCA, quantile trimming and rescaling of item features (paper §3.4 steps 2-4).

    Parameters
    ----------
    features : ndarray, shape (N, n_sources)
        One row per candidate item.
    seed : int, default 0
        ``random_state`` of the randomized PCA.

    Returns
    -------
    kept : ndarray of int64, shape (N_kept,)
        Rows of ``features`` that survive trimming.
    x : ndarray of float64, shape (N_kept, d)
        Their components, each rescaled to [-0.99, 0.99].
    """
    n_items, n_sources = features.shape
    full_rank = min(n_items, n_sources)
    d = min(full_rank, MAX_COMPONENTS)
    solver = "full" if d == full_rank else "randomized"
    z = PCA(n_components=d, svd_solver=solver, random_state=seed).fit_transform(features)
    lo, hi = np.quantile(z, TRIM_QUANTILES, axis=0)
    keep = np.all((z >= lo) & (z <= hi), axis=1)
    kept = np.flatnonzero(keep).astype(np.int64)
    x = z[kept]
    zmin, zmax = x.min(axis=0), x.max(axis=0)
    span = zmax - zmin
    safe = np.where(span > 0, span, 1.0)
    x = np.where(span > 0, SCALE * (2.0 * (x - zmin) / safe - 1.0), 0.0)
    return kept, x


def multi_indices(n: int, d: int) -> np.ndarray:
    """First ``n`` multi-indices of the graded ordering used by the reference (paper §3.4).

    Parameters
    ----------
    n : int
        Number of polynomials.
    d : int
        Number of variables.

    Returns
    -------
    ndarray of int64, shape (n, d)
        Layers ``k = 0, 1, ...`` concatenated; layer ``k`` lists, in lexicographic
        (``itertools.product``) order, every tuple in ``{0..k}^d`` whose maximum entry is ``k``.
    """
    layers = []
    total = 0
    k = 0
    while total < n:
        grid = np.indices((k + 1,) * d).reshape(d, -1).T
        layer = grid[grid.max(axis=1) == k]
        layers.append(layer)
        total += layer.shape[0]
        k += 1
    return np.concatenate(layers)[:n].astype(np.int64)


def projection_basis(x: np.ndarray, n: int) -> np.ndarray:
    """Orthonormal basis ``Q`` of the span of the first ``n`` monomials evaluated at ``x``.

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Points in [-1, 1]^d.
    n : int
        Rank, ``n <= N``.

    Returns
    -------
    ndarray of float64, shape (N, n)
        ``Q`` from the economic QR of the Vandermonde matrix
        ``V[i, j] = prod_r x[i, r] ** alpha[j, r]`` with ``alpha = multi_indices(n, d)``.
    """
    alpha = multi_indices(n, x.shape[1])
    vander = np.ones((x.shape[0], n))
    for r in range(x.shape[1]):
        vander *= x[:, r : r + 1] ** alpha[:, r]
    q, _ = np.linalg.qr(vander, mode="reduced")
    return q


def sample_projection_dpp(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exact sample of the projection DPP with kernel ``K = Q Q^T`` (chain rule, Gram-Schmidt).

    Parameters
    ----------
    q : ndarray, shape (N, r)
        Orthonormal columns (``Q^T Q = I_r``).
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64, shape (r,)
        ``r`` distinct row positions, in the order they were drawn.

    Notes
    -----
    Step ``t = 0..r-1`` draws item ``i`` with probability ``||q_i^{(t)}||^2 / (r - t)``, where
    ``q_i^{(t)}`` is row ``i`` projected orthogonally to the rows already drawn; the squared
    norms sum to ``r - t``. The projections are tracked through Gram-Schmidt coefficients
    ``C`` (N x r): after drawing ``j``,
    ``C[:, t] = (K[:, j] - C[:, :t] C[j, :t]^T) / sqrt(norm2_j)`` and
    ``norm2 <- norm2 - C[:, t]^2``. Each step costs O(N r), the whole sample O(N r^2).
    The marginal inclusion probability of item ``i`` is ``K_ii``.

    References
    ----------
    Hough, Krishnapur, Peres, Virag (2006), "Determinantal processes and independence";
    Gautier, Polito, Bardenet, Valko (2019), DPPy (``proj_dpp_sampler_kernel_GS``).
    """
    n_items, rank = q.shape
    norm2 = np.einsum("ij,ij->i", q, q)
    coef = np.zeros((n_items, rank))
    picked = np.empty(rank, dtype=np.int64)
    uniforms = rng.random(rank)
    for t in range(rank):
        p = np.clip(norm2, 0.0, None)
        p[picked[:t]] = 0.0
        cdf = np.cumsum(p)
        j = int(np.searchsorted(cdf, uniforms[t] * cdf[-1], side="right"))
        j = min(j, n_items - 1)
        picked[t] = j
        k_col = q @ q[j]
        coef[:, t] = (k_col - coef[:, :t] @ coef[j, :t]) / np.sqrt(norm2[j])
        norm2 = norm2 - coef[:, t] ** 2
    return picked
