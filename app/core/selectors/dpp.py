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

    Select (per ``n``, cached for the last basis): multi-index ordering (:func:`multi_indices`),
    Vandermonde ``V[i, j] = prod_r x_{i,r}^{alpha_{j,r}}``, economic QR ``V = QR``, and one sample
    of the rank-``n`` projection DPP with kernel ``K = Q Q^T`` by :func:`sample_projection_dpp`.
    ``n`` larger than the number of kept items raises ``ValueError`` naming ``n``.

    Nested sizes (:meth:`plan_sizes`, used by the protocol): the monomials are nested (the first
    ``n`` of the ordering are the first ``n`` of any longer prefix) and Householder QR
    orthonormalises columns left to right, so the first ``n`` columns of ``Q`` for the largest
    planned size ``W`` span exactly the first ``n`` monomials: one QR of width ``W`` serves every
    planned ``n <= W`` (its leading ``n`` columns; the same kernel, equal to the per-``n`` QR up
    to rounding, ~1e-12 at ``N`` = 5,600, ``W`` = 1,000). ``fitted["basis_width"]`` records the
    width used (``n`` without a plan).

    Cost: fit is one randomized PCA, O(N |S|); select is O(N_kept n^2) (QR and sampler), the QR
    once per fit for planned sizes.
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
        self.basis_width_: int | None = None

    def _plan(self, sizes: tuple[int, ...]) -> None:
        fits = [n for n in sizes if 1 <= n <= self.kept_.shape[0]]
        self.basis_width_ = max(fits) if fits else None

    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        n_kept = self.kept_.shape[0]
        if n > n_kept:
            raise ValueError(
                f"n: {n} exceeds the {n_kept} candidates left after the DPP's 1%/99% trimming"
            )
        width = n if self.basis_width_ is None or n > self.basis_width_ else self.basis_width_
        if self._cache is None or self._cache[0] != width:
            self._cache = (width, projection_basis(self.features_, width))
        q = self._cache[1] if width == n else np.ascontiguousarray(self._cache[1][:, :n])
        picked = sample_projection_dpp(q, rng)
        if self.params["weighting"] == "sampler":
            k_ii = np.einsum("ij,ij->i", q[picked], q[picked])
            w = (1.0 / n_kept) / k_ii
            weights = w / w.sum()
        else:
            weights = np.full(n, 1.0 / n)
        return Chosen(
            indices=data.candidates[self.kept_[picked]],
            weights=weights,
            fitted={"basis_width": np.int64(width)},
        )


def guaranteed_size(n_candidates: int) -> int:
    """The largest subset size the DPP draws on any data with ``n_candidates`` items.

    The trimming of :func:`dpp_features` drops, per component, the items below the 1 % and
    above the 99 % quantile: at most ``floor(0.01 (N - 1)) + 1`` on each side (linear
    interpolation between order statistics), on at most :data:`MAX_COMPONENTS` components. A
    size up to ``N`` minus that many always fits, so a request can be checked before any fit
    (issue 39: larger sizes were accepted and the job failed).

    Parameters
    ----------
    n_candidates : int
        Items the selector may choose from.

    Returns
    -------
    int
        ``max(0, N - 2 * MAX_COMPONENTS * (floor(0.01 (N - 1)) + 1))``.
    """
    n = int(n_candidates)
    if n <= 0:
        return 0
    per_side = int(np.floor(TRIM_QUANTILES[0] * (n - 1) + 1e-9)) + 1  # never below numpy's
    return max(0, n - 2 * MAX_COMPONENTS * per_side)


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
    powers = np.arange(int(alpha.max()) + 1)
    vander = np.empty((x.shape[0], n))
    factor = np.empty_like(vander)
    for r in range(x.shape[1]):
        # the table x_r ** k (k = 0..max degree), gathered by column: the same np.power values as
        # x_r ** alpha[:, r] evaluated entry by entry, with N * (degree + 1) instead of N * n pows;
        # gathered into one reused buffer (a fresh N x n temporary per variable cost page faults),
        # and the first factor taken as is (1.0 * v == v exactly)
        table = x[:, r : r + 1] ** powers
        np.take(table, alpha[:, r], axis=1, out=vander if r == 0 else factor)
        if r:
            vander *= factor
    q, _ = np.linalg.qr(vander, mode="reduced")
    return q


PHASED_MIN_RANK = 128


def sample_projection_dpp(
    q: np.ndarray, rng: np.random.Generator, *, method: str = "auto"
) -> np.ndarray:
    """Exact sample of the projection DPP with kernel ``K = Q Q^T`` (chain rule, Gram-Schmidt).

    Parameters
    ----------
    q : ndarray, shape (N, r)
        Orthonormal columns (``Q^T Q = I_r``).
    rng : numpy.random.Generator
    method : {"auto", "chain", "phased"}, default "auto"
        ``"chain"``: the textbook chain rule, all ``N`` residual norms updated at every step
        (one matrix-vector product, O(N r) per step). ``"phased"``: the same distribution by
        phased rejection sampling (below), faster for large ``r``. ``"auto"``: ``"phased"`` when
        ``r >= 128``.

    Returns
    -------
    ndarray of int64, shape (r,)
        ``r`` distinct row positions, in the order they were drawn.

    Notes
    -----
    Chain rule: step ``t = 0..r-1`` draws item ``i`` with probability
    ``||P_t q_i||^2 / (r - t)``, where ``q_i`` is row ``i`` of ``Q`` and ``P_t`` projects (in
    ``R^r``) orthogonally to the rows already drawn; the squared residual norms sum to ``r - t``.
    The marginal inclusion probability of item ``i`` is ``K_ii``, the pair inclusion probability
    ``K_ii K_jj - K_ij^2``.

    ``"chain"`` keeps an orthonormal Gram-Schmidt basis ``u_1..u_t`` of the drawn rows in
    ``R^r`` and updates ``norm2 <- norm2 - (Q u_t)^2`` after each draw.

    ``"phased"`` avoids updating all ``N`` residual norms at every step (``N r`` memory traffic
    per step) by running in phases. A phase starts from the residual rows ``b_i`` in
    ``R^{r'}``, ``r'`` the remaining rank (coordinates of the rows of ``Q`` in an orthonormal
    basis of the complement of everything drawn in earlier phases; ``sum ||b_i||^2 = r'``)
    and draws ``ceil(r'/2)`` items by exact rejection sampling: propose
    ``i`` with probability ``||b_i||^2 / r'``, accept with probability
    ``||P b_i||^2 / ||b_i||^2`` where ``P`` projects orthogonally to the items drawn in this
    phase (an orthonormal Gram-Schmidt basis ``U``). Accepted items are then distributed
    exactly as in the chain rule, and the acceptance rate stays >= 1/2. Proposals are
    evaluated in small batches (the first acceptance in a batch is the sequential outcome).
    Between phases the rows are re-expressed in the complement of ``span(U)``, ``B <- B W``
    with ``W`` (r' x (r' - t)) the trailing columns of a complete QR of ``U^T``, so the next
    phase works in dimension ``r' - t``. Total cost about ``(2/3) N r^2`` flops in
    matrix-matrix products plus O(r^3) for the rejection steps and the small QRs.

    References
    ----------
    Hough, Krishnapur, Peres, Virag (2006), "Determinantal processes and independence";
    Gautier, Polito, Bardenet, Valko (2019), DPPy (``proj_dpp_sampler_kernel_GS``).
    """
    q = np.asarray(q, dtype=np.float64)
    n_items, rank = q.shape
    if method not in ("auto", "chain", "phased"):
        raise ValueError(f"method: expected 'auto', 'chain' or 'phased', got {method!r}")
    if method == "chain" or (method == "auto" and rank < PHASED_MIN_RANK):
        return _sample_chain(q, rng)
    picked = np.empty(rank, dtype=np.int64)
    taken = np.zeros(n_items, dtype=bool)
    basis = q
    n_picked = 0
    while n_picked < rank:
        remaining = rank - n_picked
        norms = np.einsum("ij,ij->i", basis, basis)
        norms[taken] = 0.0
        np.clip(norms, 0.0, None, out=norms)
        cdf = np.cumsum(norms)
        goal = (remaining + 1) // 2
        u_basis = np.empty((goal, remaining))
        t = 0
        failures = 0
        while t < goal:
            batch = int(np.ceil(2.0 * remaining / (remaining - t))) + 2
            props = np.searchsorted(cdf, rng.random(batch) * cdf[-1], side="right")
            props = np.minimum(props, n_items - 1)
            rows = basis[props]
            proj = rows @ u_basis[:t].T
            resid = norms[props] - np.einsum("ij,ij->i", proj, proj)
            ok = (rng.random(batch) * norms[props] < resid) & ~taken[props]
            if not ok.any():
                failures += 1
                if failures <= 100:
                    continue
                # proposals numerically exhausted (never seen in practice): one exact step
                j, v = _exact_step(basis, u_basis[:t], taken, rng)
            else:
                k = int(np.argmax(ok))
                j, v = int(props[k]), rows[k] - proj[k] @ u_basis[:t]
            v = v - (v @ u_basis[:t].T) @ u_basis[:t]  # re-orthogonalise once
            u_basis[t] = v / np.linalg.norm(v)
            picked[n_picked] = j
            taken[j] = True
            n_picked += 1
            t += 1
            failures = 0
        if n_picked < rank:
            # orthonormal basis of span(U)^perp in R^remaining: the last columns of a full QR
            full, _ = np.linalg.qr(u_basis[:t].T, mode="complete")
            basis = basis @ full[:, t:]
    return picked


def _sample_chain(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Textbook chain rule: every residual norm updated after every draw."""
    n_items, rank = q.shape
    norm2 = np.einsum("ij,ij->i", q, q)
    u_basis = np.empty((rank, rank))
    picked = np.empty(rank, dtype=np.int64)
    uniforms = rng.random(rank)
    for t in range(rank):
        p = np.clip(norm2, 0.0, None)
        p[picked[:t]] = 0.0
        cdf = np.cumsum(p)
        j = min(int(np.searchsorted(cdf, uniforms[t] * cdf[-1], side="right")), n_items - 1)
        picked[t] = j
        v = q[j] - (q[j] @ u_basis[:t].T) @ u_basis[:t]
        v = v - (v @ u_basis[:t].T) @ u_basis[:t]  # re-orthogonalise once
        u_basis[t] = v / np.linalg.norm(v)
        norm2 = norm2 - (q @ u_basis[t]) ** 2
    return picked


def _exact_step(
    basis: np.ndarray, u_basis: np.ndarray, taken: np.ndarray, rng: np.random.Generator
) -> tuple[int, np.ndarray]:
    """One chain-rule step with every residual computed explicitly (O(N r t))."""
    resid_vecs = basis - (basis @ u_basis.T) @ u_basis
    resid = np.einsum("ij,ij->i", resid_vecs, resid_vecs)
    resid[taken] = 0.0
    cdf = np.cumsum(np.clip(resid, 0.0, None))
    j = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    j = min(j, basis.shape[0] - 1)
    return j, resid_vecs[j]
