"""The fitted multidimensional 2PL IRT model: prediction, ability scoring, person fit.

The model, its two logit forms and its priors are described in :mod:`app.core.irt.fit`, which also
holds the fit (:func:`app.core.irt.fit.fit_irt`) and re-exports every public name defined here. This
module is what a consumer of a fitted model needs: :class:`IRTModel` (logits, success
probabilities, predicted accuracies, the vectorised Newton ability scorer used by p-IRT / gp-IRT,
person fit) and :class:`AbilityEstimate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


# ---------------------------------------------------------------------------------------------
# numerically stable pieces
# ---------------------------------------------------------------------------------------------
def _softplus_and_sigmoid(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(log(1 + e^z), sigmoid(z))`` elementwise, stable for any ``z``."""
    e = np.exp(-np.abs(z))
    sp = np.maximum(z, 0.0)
    sp += np.log1p(e)
    sig = np.where(z >= 0, 1.0, e)
    sig /= 1.0 + e
    return sp, sig


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Stable logistic function (the same values as :func:`_softplus_and_sigmoid`'s second part,
    without its ``log1p``: the Laplace-EM step of an IRT fit calls it on the whole grid)."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(-np.abs(z))
    sig = np.where(z >= 0, 1.0, e)
    sig /= 1.0 + e
    return sig


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------
def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


def _model_rows(values, width: int, name: str) -> np.ndarray:
    """``values`` as a float (n_models, width) matrix (one row may be given as a vector)."""
    out = np.asarray(values, dtype=np.float64)
    if out.ndim == 1:
        out = out[None, :]
    if out.ndim != 2 or out.shape[1] != width:
        raise ValueError(f"{name}: expected shape (n_models, {width}), got {np.shape(values)}")
    return out


@dataclass(frozen=True)
class AbilityEstimate:
    """MAP abilities of scored models with their uncertainty.

    Unpacks as ``theta, se = model.score(...)``.

    Attributes
    ----------
    theta : ndarray, shape (n_models, D)
        MAP abilities.
    se : ndarray, shape (n_models, D)
        Per-dimension standard errors, ``sqrt(diag(H^-1))`` with ``H`` the observed information
        plus the prior precision at the MAP.
    cov : ndarray, shape (n_models, D, D)
        ``H^-1`` per model (Laplace approximation of the posterior covariance).
    n_iter : int
        Newton iterations used (shared by the batch).
    converged : bool
        Whether every model's gradient norm fell below the tolerance.
    """

    theta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    n_iter: int
    converged: bool

    def __iter__(self):
        yield self.theta
        yield self.se


@dataclass(frozen=True)
class IRTModel:
    """A fitted multidimensional 2PL model (immutable).

    Attributes
    ----------
    a : ndarray, shape (n_items, D)
        Discriminations.
    b : ndarray, shape (n_items,) or (n_items, D)
        Difficulties (scalar per item for ``form="scalar_difficulty"``).
    theta : ndarray, shape (n_subjects, D)
        MAP abilities of the models the fit was run on.
    form, prior : str
    dims : int
    hyper : dict
        Prior hyperparameters at the optimum: ``mu_a`` (D,), ``sd_a`` (D,), ``mu_b``, ``sd_b``
        (fixed values for ``prior="fixed"``).
    seed : int or None
        Seed of the initialisation (``None`` if a Generator was passed).
    converged : bool
    n_iter : int
    loss : float
        Negative log posterior at the optimum (up to constants).
    """

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    form: str
    prior: str
    dims: int
    hyper: dict = field(default_factory=dict)
    seed: int | None = None
    converged: bool = False
    n_iter: int = 0
    loss: float = float("nan")

    def __post_init__(self) -> None:
        for name in ("a", "b", "theta"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(
            self,
            "hyper",
            {k: (_frozen(v) if np.ndim(v) else float(v)) for k, v in self.hyper.items()},
        )

    @property
    def n_items(self) -> int:
        return int(self.a.shape[0])

    # -- item helpers -----------------------------------------------------------------------
    def _items(self, items) -> np.ndarray:
        if items is None:
            return np.arange(self.n_items)
        idx = np.asarray(items)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError("items: expected a 1-d array of integer item positions")
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_items):
            raise ValueError(f"items: positions must lie in [0, {self.n_items})")
        return idx.astype(np.int64)

    def item_offsets(self, items=None) -> np.ndarray:
        """Return ``c_i`` such that ``z_ij = a_i . theta_j - c_i`` for the chosen items."""
        idx = self._items(items)
        if self.form == "scalar_difficulty":
            return self.dims * self.b[idx]
        return np.einsum("id,id->i", self.a[idx], self.b[idx])

    def embeddings(self) -> np.ndarray:
        """Item embeddings ``[a_i, b_i]`` (tinyBenchmarks' clustering space), shape (n_items, D+1 or 2D)."""
        b = self.b[:, None] if self.b.ndim == 1 else self.b
        return np.hstack([self.a, b])

    # -- prediction -------------------------------------------------------------------------
    def logits(self, theta, items=None) -> np.ndarray:
        """Success logits, shape (n_models, n_chosen_items)."""
        idx = self._items(items)
        th = self._theta(theta)
        return th @ self.a[idx].T - self.item_offsets(idx)

    def predict_proba(self, theta, items=None) -> np.ndarray:
        """Success probabilities ``sigmoid(z)``, shape (n_models, n_chosen_items).

        Parameters
        ----------
        theta : array_like, shape (n_models, D) or (D,)
        items : array_like of int, optional
            Item positions (default all).
        """
        return sigmoid(self.logits(theta, items))

    def predict_accuracy(
        self, ability: AbilityEstimate, items=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Expected accuracy over ``items`` and its delta-method standard error.

        Parameters
        ----------
        ability : AbilityEstimate
            Output of :meth:`score`.
        items : array_like of int, optional

        Returns
        -------
        acc : ndarray, shape (n_models,)
            ``mean_i P(theta_hat, i)``.
        se : ndarray, shape (n_models,)
            ``sqrt(g' C g)`` with ``g = mean_i P_i (1 - P_i) a_i`` and ``C`` the ability covariance.

        Notes
        -----
        The delta method ignores the uncertainty of the item parameters (they are treated as known,
        as is usual for scoring against a calibrated item bank).
        """
        idx = self._items(items)
        p = self.predict_proba(ability.theta, idx)
        g = (p * (1.0 - p)) @ self.a[idx] / idx.size
        var = np.einsum("md,mde,me->m", g, ability.cov, g)
        return p.mean(axis=1), np.sqrt(np.maximum(var, 0.0))

    def _theta(self, theta) -> np.ndarray:
        return _model_rows(theta, self.dims, "theta")

    # -- scoring new models -----------------------------------------------------------------
    def score(
        self,
        responses,
        items=None,
        *,
        mask=None,
        prior: float = 1.0,
        max_iter: int = 50,
        tol: float = 1e-8,
    ) -> AbilityEstimate:
        """MAP abilities of new models from their responses on any subset of the items.

        A batched damped Newton method on the stacked per-model problems (each strictly convex):
        all models are updated at once with ``einsum``-built Hessians, and a per-model
        backtracking line search guarantees descent. There is no Python loop over models.

        Parameters
        ----------
        responses : array_like, shape (n_models, k)
            Correctness in [0, 1] on ``items``, in that order.
        items : array_like of int, shape (k,), optional
            Item positions the responses refer to (default all items, in order).
        mask : array_like of bool, shape (n_models, k), optional
            ``False`` marks a missing response.
        prior : float
            Ability prior standard deviation, ``theta ~ N(0, prior^2 I)``; 1.0 is the prior used in
            the fit.
        max_iter : int
        tol : float
            Convergence threshold on the largest absolute gradient entry.

        Returns
        -------
        AbilityEstimate
            Unpacks as ``(theta, se)``.
        """
        idx = self._items(items)
        y = _model_rows(responses, idx.size, "responses")
        if not np.all(np.isfinite(y)) or y.min(initial=0) < 0 or y.max(initial=0) > 1:
            raise ValueError("responses: values must be finite and in [0, 1]")
        if not (np.isfinite(prior) and prior > 0):
            raise ValueError("prior: must be a positive standard deviation")
        w = None
        if mask is not None:
            w = np.asarray(mask, dtype=np.float64)
            if w.shape != y.shape:
                raise ValueError(f"mask: shape {w.shape} does not match responses {y.shape}")
        return _score_newton(
            self.a[idx], self.item_offsets(idx), y, w, 1.0 / prior**2, max_iter, tol
        )

    # -- person fit -------------------------------------------------------------------------
    def person_fit(self, responses, theta, items=None) -> np.ndarray:
        """Standardised log-likelihood person-fit statistic ``l_z`` (Drasgow et al., 1985).

        Parameters
        ----------
        responses : array_like, shape (n_models, k)
        theta : array_like, shape (n_models, D)
        items : array_like of int, shape (k,), optional

        Returns
        -------
        ndarray, shape (n_models,)
            ``(l0 - E[l0]) / sqrt(Var[l0])``; large negative values flag models whose response
            pattern the item bank does not explain (e.g. a population shift).

        Notes
        -----
        ``l0 = sum_i y_i log P_i + (1 - y_i) log(1 - P_i)``,
        ``E[l0] = sum_i P_i log P_i + (1 - P_i) log(1 - P_i)``,
        ``Var[l0] = sum_i P_i (1 - P_i) logit(P_i)^2``.
        """
        idx = self._items(items)
        y = np.asarray(responses, dtype=np.float64)
        if y.ndim == 1:
            y = y[None, :]
        z = self.logits(theta, idx)
        sp, p = _softplus_and_sigmoid(z)
        log_p = z - sp  # log sigmoid(z)
        log_q = -sp  # log(1 - sigmoid(z))
        l0 = np.sum(y * log_p + (1 - y) * log_q, axis=1)
        e = np.sum(p * log_p + (1 - p) * log_q, axis=1)
        v = np.sum(p * (1 - p) * z**2, axis=1)
        return (l0 - e) / np.sqrt(np.maximum(v, 1e-300))


# ---------------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------------
def _score_objective(theta, a, c, y, w, prec):
    z = theta @ a.T - c
    sp, p = _softplus_and_sigmoid(z)
    ll = sp - y * z
    if w is not None:
        ll *= w
    return ll.sum(axis=1) + 0.5 * prec * np.einsum("md,md->m", theta, theta), p


_MAX_SCORE_STEP = 1.0


def _score_newton(a, c, y, w, prec, max_iter, tol) -> AbilityEstimate:
    m, d = y.shape[0], a.shape[1]
    theta = np.zeros((m, d))
    eye = np.eye(d)
    f, p = _score_objective(theta, a, c, y, w, prec)
    # Each model's problem is strictly convex: Newton converges in a handful of steps. Models are
    # retired individually (small gradient, or no further decrease possible at machine precision),
    # so one slow model never makes the others iterate or line-search again.
    done = np.zeros(m, dtype=bool)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - iterations, batched over models
        r = p - y
        h = p * (1.0 - p)
        if w is not None:
            r, h = r * w, h * w
        grad = r @ a + prec * theta
        done |= np.max(np.abs(grad), axis=1) < tol
        live = np.flatnonzero(~done)
        if live.size == 0:
            break
        hess = np.einsum("mi,id,ie->mde", h[live], a, a) + prec * eye
        step = np.linalg.solve(hess, grad[live][..., None])[..., 0]
        # Cap the step length (abilities live on an N(0, prior^2) scale): where the likelihood is
        # flat the raw Newton step is huge and the line search would halve it many times.
        norm = np.linalg.norm(step, axis=1)
        step *= np.minimum(1.0, _MAX_SCORE_STEP / np.maximum(norm, 1e-300))[:, None]
        slope = np.einsum("md,md->m", grad[live], step)
        # per-model backtracking (Armijo) line search, vectorised over the live models
        t = np.ones(live.size)
        pending = np.ones(live.size, dtype=bool)
        for _ in range(30):
            rows = live[pending]
            cand = theta[rows] - t[pending, None] * step[pending]
            fc, pc = _score_objective(cand, a, c, y[rows], None if w is None else w[rows], prec)
            ok = fc <= f[rows] - 1e-4 * t[pending] * slope[pending]
            theta[rows[ok]] = cand[ok]
            f[rows[ok]] = fc[ok]
            p[rows[ok]] = pc[ok]
            idx = np.flatnonzero(pending)
            pending[idx[ok]] = False
            if not pending.any():
                break
            t[pending] *= 0.5
        # no decrease after 30 halvings: the model sits at its optimum up to round-off
        done[live[pending]] = True
    r = p - y
    if w is not None:
        r = r * w
    converged = bool(np.max(np.abs(r @ a + prec * theta)) < max(tol * 10, 1e-6))
    h = p * (1.0 - p)
    if w is not None:
        h = h * w
    hess = np.einsum("mi,id,ie->mde", h, a, a) + prec * eye
    cov = np.linalg.inv(hess)
    se = np.sqrt(np.maximum(np.einsum("mdd->md", cov), 0.0))
    return AbilityEstimate(theta=theta, se=se, cov=cov, n_iter=n_iter, converged=converged)


__all__ = ["AbilityEstimate", "IRTModel", "sigmoid"]
