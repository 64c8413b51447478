"""The IRT fit's objective: the negative log posterior of a 2PL model and its gradient.

Two precisions of one function (:func:`make_objective`, float64; :func:`make_objective_mixed`,
the ``m x n`` elementwise work in float32), on the flat parameter vector laid out by
:class:`Layout`, with the Gaussian item priors of :class:`Hyper`. The optimiser, the
initialisation and the Laplace-EM hyperparameter step live in :mod:`app.core.irt.fit`, which
re-exports these names; the model and the priors are described there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Layout:
    """Where ``theta`` (m x d), ``a`` (n x d) and ``b`` (n or n x d) sit in the flat vector."""

    m: int
    n: int
    d: int
    per_dim: bool

    @property
    def nb(self) -> int:
        return self.n * self.d if self.per_dim else self.n

    @property
    def size(self) -> int:
        return self.m * self.d + self.n * self.d + self.nb

    def unpack(self, x: np.ndarray):
        m, n, d = self.m, self.n, self.d
        theta = x[: m * d].reshape(m, d)
        a = x[m * d : (m + n) * d].reshape(n, d)
        b = x[(m + n) * d :].reshape((n, d) if self.per_dim else (n,))
        return theta, a, b


@dataclass
class Hyper:
    """Gaussian item priors: ``a_id ~ N(mu_a_d, sd_a_d^2)``, ``b ~ N(mu_b, sd_b^2)``."""

    mu_a: np.ndarray
    sd_a: np.ndarray
    mu_b: float
    sd_b: float


def _item_offsets_and_priors(f, col, theta, a, b, gt, ga, gb, lay: Layout, hyp: Hyper, ia2, ib2):
    """Finish an objective evaluation in float64 (shared by both precisions).

    Adds the offsets' share of the item gradients (``col``: the column sums of the residuals
    ``G``) to ``ga, gb`` and the Gaussian priors of ``theta, a, b`` to the gradients (in place);
    returns ``f`` with the prior terms added, in the same order as a single inline pass.
    """
    if lay.per_dim:
        ga -= col[:, None] * b
        gb[...] = -col[:, None] * a
    else:
        gb[...] = -lay.d * col
    f += 0.5 * np.einsum("md,md->", theta, theta)
    gt += theta
    da = a - hyp.mu_a
    f += 0.5 * np.sum(da * da * ia2)
    ga += da * ia2
    db = b - hyp.mu_b
    f += 0.5 * ib2 * float(np.sum(db * db))
    gb += ib2 * db
    return f


def make_objective(y: np.ndarray, w: np.ndarray | None, lay: Layout, hyp: Hyper):
    """Negative log posterior and its gradient on the flat parameter vector.

    Uses ``sum_ij y_ij z_ij = sum(theta * (Y a)) - sum_i c_i colsum(Y)_i`` (matrix products instead
    of an elementwise pass) and ``log(1 + e^z) = max(z, 0) + log1p(e^{-|z|})``,
    ``sigmoid(z) = (1 + tanh(z / 2)) / 2`` (stable everywhere).
    """
    d, m = lay.d, lay.m
    yw = y if w is None else y * w
    y_col = yw.sum(axis=0)
    # G = w (sigmoid(z) - y) = 0.5 w tanh(z / 2) - (w y - 0.5 w)
    shift = yw - 0.5 if w is None else yw - 0.5 * w
    ia2 = 1.0 / hyp.sd_a**2
    ib2 = 1.0 / hyp.sd_b**2
    buf = np.empty((lay.m, lay.n))
    buf2 = np.empty((lay.m, lay.n))

    def fun(x):
        theta, a, b = lay.unpack(x)
        c = np.einsum("id,id->i", a, b) if lay.per_dim else d * b
        half_theta = 0.5 * theta
        zh = np.matmul(half_theta, a.T, out=buf)  # z / 2
        zh -= 0.5 * c
        t = np.abs(zh, out=buf2)
        # sum max(z, 0) = (sum z + sum |z|) / 2 = sum z/2 + sum |z/2|
        if w is None:
            f = half_theta.sum(axis=0) @ a.sum(axis=0) - 0.5 * m * c.sum() + t.sum()
        else:
            f = np.einsum("ij,ij->", w, zh) + np.einsum("ij,ij->", w, t)
        t *= -2.0
        np.exp(t, out=t)
        np.log1p(t, out=t)
        f += t.sum() if w is None else np.einsum("ij,ij->", w, t)
        ya = yw @ a
        f -= np.einsum("md,md->", theta, ya) - np.einsum("i,i->", c, y_col)
        g_z = np.tanh(zh, out=zh)
        g_z *= 0.5
        if w is not None:
            g_z *= w
        g_z -= shift
        g = np.empty_like(x)
        gt, ga, gb = lay.unpack(g)
        np.matmul(g_z, a, out=gt)
        np.matmul(g_z.T, theta, out=ga)
        col = g_z.sum(axis=0)
        f = _item_offsets_and_priors(f, col, theta, a, b, gt, ga, gb, lay, hyp, ia2, ib2)
        return f, g

    return fun


def make_objective_mixed(y: np.ndarray, w: np.ndarray | None, lay: Layout, hyp: Hyper):
    """:func:`make_objective` with the ``m x n`` elementwise work in float32 (``precision="mixed"``).

    The parameters, the L-BFGS state, the priors and every accumulation over the ``m x n`` grid
    stay in float64; only the logits, their transcendental functions and the three matrix
    products with the ``m x n`` residuals run in float32 (``exp`` is SIMD-vectorised, and
    every array moves half the bytes; 2-2.5x faster per evaluation at 300 x 6,000).
    Unmasked, one ``e = exp(-|z|)`` serves both the softplus and the residuals: the
    ``log(1 + e)`` terms are summed as the logs of block products (:func:`_sum_log`; float32
    ``log1p`` is not vectorised and cost about half of a fit) and ``tanh(z / 2)`` is
    ``sign(z) (2 / (1 + e) - 1)``; this halved the fit's CPU at 300 x 6,012 (4.4 -> 2.1 CPU-s,
    bench/RESULTS.md, issue 27). The masked path keeps ``log1p`` and ``tanh``.
    The offsets ``c`` ride in the logit product as an extra column (``[theta / 2, -1/2] @ [a';
    c']``) and the column sums of the residuals in the ``G' theta`` product (``[theta, 1]``).

    Accuracy: each elementwise term carries a relative error of ~6e-8 (float32 rounding); sums
    are pairwise within rows and float64 across rows, so the objective is accurate to ~1e-7
    relative and the gradient entries to ~1e-6 relative (measured: 8e-5 absolute on entries up to 89 at
    a converged 300 x 6,000 fit). The fit stops on a relative decrease of
    ``tol`` (2e-5 by default, 10x looser in the intermediate EM rounds) or a gradient max-norm of
    ``tol * max(m, n)``: both two or more orders of magnitude above these errors, so the fit
    converges to the same optimum, to within the optimiser's own tolerance (the difference to a
    float64 fit is of the size of the difference between two float64 fits at tolerances 2e-5 and
    1e-6; ``tests/core/test_fast_paths.py`` compares the two paths).
    """
    d, m, n = lay.d, lay.m, lay.n
    f32 = np.float32
    yw = y if w is None else y * w
    y_col = yw.sum(axis=0)
    y32 = np.ascontiguousarray(yw, dtype=f32)
    shift32 = np.ascontiguousarray(yw - 0.5 if w is None else yw - 0.5 * w, dtype=f32)
    w32 = None if w is None else np.ascontiguousarray(w, dtype=f32)
    ia2 = 1.0 / hyp.sd_a**2
    ib2 = 1.0 / hyp.sd_b**2
    buf = np.empty((m, n), f32)
    buf2 = np.empty((m, n), f32)
    lhs = np.empty((m, d + 1), f32)  # [theta / 2, -1/2]
    lhs[:, d] = -0.5
    rhs = np.empty((d + 1, n), f32)  # [a'; c']
    th1 = np.empty((m, d + 1), f32)  # [theta, 1]
    th1[:, d] = 1.0

    def wsum(v: np.ndarray) -> float:
        if w32 is None:
            return float(v.sum(axis=1).sum(dtype=np.float64))
        return float(np.einsum("ij,ij->i", w32, v).sum(dtype=np.float64))

    def fun(x):
        theta, a, b = lay.unpack(x)
        c = np.einsum("id,id->i", a, b) if lay.per_dim else d * b
        lhs[:, :d] = 0.5 * theta
        rhs[:d] = a.T
        rhs[d] = c
        zh = np.matmul(lhs, rhs, out=buf)  # z / 2
        t = np.abs(zh, out=buf2)
        # sum max(z, 0) = sum z/2 + sum |z/2|
        if w is None:
            f = 0.5 * (theta.sum(axis=0) @ a.sum(axis=0) - m * c.sum())
        else:
            f = wsum(zh)
        f += wsum(t)
        t *= f32(-2.0)
        np.exp(t, out=t)  # e = exp(-|z|)
        if w32 is None:
            t += f32(1.0)  # u = 1 + e, in (1, 2]
            f += _sum_log(t)
            # tanh(z / 2) = sign(z) (1 - e) / (1 + e) = sign(z) (2 / u - 1), from the same e
            np.divide(f32(2.0), t, out=t)
            t -= f32(1.0)
            g_z = np.copysign(t, zh, out=zh)
        else:
            np.log1p(t, out=t)
            f += wsum(t)
            g_z = np.tanh(zh, out=zh)
        a32 = rhs[:d].T
        f -= np.einsum("md,md->", theta, y32 @ a32) - c @ y_col
        g_z *= f32(0.5)
        if w32 is not None:
            g_z *= w32
        g_z -= shift32
        g = np.empty_like(x)
        gt, ga, gb = lay.unpack(g)
        gt[...] = g_z @ a32
        th1[:, :d] = theta
        gac = g_z.T @ th1
        ga[...] = gac[:, :d]
        col = gac[:, d].astype(np.float64)
        f = _item_offsets_and_priors(f, col, theta, a, b, gt, ga, gb, lay, hyp, ia2, ib2)
        return float(f), g

    return fun


# Rows of ``u = 1 + e^{-|z|}`` multiplied together before one float64 log (:func:`_sum_log`):
# every factor lies in (1, 2], so a product of 120 rows stays below 2^120 < float32's 2^128.
_LOG_PRODUCT_ROWS = 120


def _sum_log(u: np.ndarray) -> float:
    """``sum(log(u))`` of a float32 ``m x n`` array with entries in [1, 2], as logs of products.

    ``log(prod_i u_ij) = sum_i log(u_ij)``: the column products of blocks of
    ``_LOG_PRODUCT_ROWS`` rows (elementwise SIMD multiplications) take one float64 log per block
    column, so the ``m x n`` grid costs a multiplication per entry instead of a ``log1p``
    (float32 ``log1p`` is not vectorised: ~15 ns per entry, the largest single cost of an IRT
    fit at 300 x 6,000). Accuracy: each product carries ~sqrt(120) float32 roundings (~7e-7
    relative, i.e. absolute on its log), summed over ``n m / 120`` blocks with random signs:
    measured 3e-5 absolute on a sum of 7e5, where float32 ``log1p`` with row sums was 2e-4.
    """
    total = 0.0
    for start in range(0, u.shape[0], _LOG_PRODUCT_ROWS):  # m / 120 blocks, not rows
        block = np.multiply.reduce(u[start : start + _LOG_PRODUCT_ROWS], axis=0)
        total += float(np.log(block.astype(np.float64)).sum())
    return total
