"""Loop-written oracles of the reference calibration, shared by the core mutation tests."""

from __future__ import annotations

import numpy as np
from scipy import stats


def calibration_oracle(
    r_est, truth, level, inflation, bandwidth=None, step=0.001, min_nb=30, clip_beyond=True
):
    """Bias, spread and Student quantile of the reference calibration on its grid, written with
    a loop over grid points (independent of the vectorised ``calibrate_references``).
    ``clip_beyond=False``: the kernel bias before the clip beyond the references' range."""
    r = truth.size
    h = bandwidth
    if h is None:
        h = max(0.01, 1.06 * np.std(truth, ddof=1) * r ** (-0.2))
    grid = np.append(np.arange(int(np.ceil(1.0 / step - 1e-9))) * step, 1.0)  # ..., then 1
    err = r_est - truth
    kth = min(min_nb, r)
    bias, spread, n_effs = [], [], []
    for a in grid:
        d = np.abs(a - truth)
        hg = max(h, np.sort(d)[kth - 1])
        kk = np.exp(-0.5 * (d / hg) ** 2)
        b = np.sum(kk * err) / np.sum(kk)
        n_eff = np.sum(kk) ** 2 / np.sum(kk**2)
        s2 = np.sum(kk * (err - b) ** 2) / np.sum(kk) * n_eff / max(n_eff - 1, 1e-9)
        if clip_beyond and (a > truth.max() or a < truth.min()):  # a possible error only
            b = min(max(b, -a), 1.0 - a)
        bias.append(b)
        spread.append(np.sqrt(max(s2, 1e-12)))
        n_effs.append(max(n_eff - 1, 1))
    quant = stats.t.ppf(1 - (1 - level) / 2, np.array(n_effs)) * inflation
    return grid, np.array(bias), np.array(spread), quant


def apply_oracle(est, grid, b, s, q, step):
    """Value, bounds and SE of calibrated estimates, one estimate at a time."""
    out = []
    for x in np.ravel(est):
        dev = (x - grid - b) / s
        inside = np.flatnonzero(np.abs(dev) <= q).tolist()
        best = int(np.argmin(np.abs(dev)))
        first, last = (inside[0], inside[-1]) if inside else (best, best)
        out.append((grid[best], max(grid[first] - step, 0.0), min(grid[last] + step, 1.0), s[best]))
    return tuple(np.array(col) for col in zip(*out, strict=True))
