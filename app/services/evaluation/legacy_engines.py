"""Engines of sessions created before issue 23, kept so that such sessions continue unchanged.

* ``random`` (parts ``acc`` and ``diff``): a confidence sequence on the model's values and a second
  one on the paired values ``x = (y_model - y_baseline + 1) / 2`` for ``Delta``
  (:mod:`app.core.sequential.confidence_sequences`), in the seeded order stored with the session.
* ``fluid`` (part ``fluid``): the model-based estimate ``+- z SE`` of
  :mod:`app.core.sequential.fluid` (``basis: "model"``; its error rate is not controlled).

A confidence sequence starts on the exact 0/1 lattice; the first fractional value rebuilds it on
the fine grid from every stored value (the sequence is a deterministic function of the values in
serving order). New sessions use :mod:`app.services.evaluation.session_policies`.
"""

from __future__ import annotations

import numpy as np

from app.core.sequential.confidence_sequences import (
    CSState,
    cs_init,
    cs_interval,
    cs_update,
    difference_interval,
    paired_values,
)
from app.core.sequential.fluid import (
    FluidState,
    ItemBank,
    fluid_estimate,
    fluid_next,
    fluid_update,
    normal_interval,
)

Triple = tuple[float | None, float, float]


def is_legacy(parts: dict) -> bool:
    """The engine state predates issue 23 (no ``policy`` part)."""
    return "policy" not in parts


def on_lattice(x: np.ndarray, paired: bool = False) -> bool:
    scaled = x * (2.0 if paired else 1.0)
    return bool(np.all(scaled == np.round(scaled)))


def _feed(state: CSState, prev: np.ndarray, x: np.ndarray, paired: bool) -> CSState:
    """Update with ``x``; leave the exact lattice (rebuild from ``prev``) at the first fraction."""
    if state.exact_grid and not on_lattice(x, paired):
        state = cs_init(state.n_items, alpha=state.alpha, paired=paired, binary=False)
        x = np.concatenate([prev, x])
    return cs_update(state, x, inplace=True) if x.size else state


def intervals(
    policy: str, parts: dict, *, base: np.ndarray | None, bank: ItemBank | None, alpha: float
) -> tuple[Triple, Triple | None, str]:
    """``(accuracy, difference or None, basis)``, each ``(value, lower, upper)``."""
    if policy == "random":
        acc = CSState.from_dict(parts["acc"])
        lo, hi = cs_interval(acc)
        t = int(acc.t[0])
        est = (acc.total[0] / t if t else None, float(lo[0]), float(hi[0]))
        if base is None:
            return est, None, "design"
        dif = CSState.from_dict(parts["diff"])
        dlo, dhi = difference_interval(*cs_interval(dif))
        dval = 2.0 * dif.total[0] / t - 1.0 if t else None
        return est, (dval, float(dlo[0]), float(dhi[0])), "design"
    st = FluidState.from_dict(parts["fluid"])
    value, se = fluid_estimate(bank, st)  # type: ignore[arg-type]
    lo, hi = normal_interval(value, se, alpha)
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    est = (float(value[0]), float(lo[0]), float(hi[0]))
    if base is None:
        return est, None, "model"
    acc_b = float(base.mean())
    return est, (est[0] - acc_b, est[1] - acc_b, est[2] - acc_b), "model"


def feed(
    policy: str,
    parts: dict,
    *,
    x: np.ndarray,
    prev: np.ndarray,
    seen_before: np.ndarray,
    batch: np.ndarray,
    base: np.ndarray | None,
    bank: ItemBank | None,
) -> tuple[dict, FluidState | None]:
    """Apply the open batch ``x`` (serving order); returns the parts and the fluid state."""
    if policy == "random":
        parts["acc"] = _feed(CSState.from_dict(parts["acc"]), prev, x, False).to_dict()
        if base is not None:
            prev_d, xd = paired_values(prev, base[seen_before]), paired_values(x, base[batch])
            parts["diff"] = _feed(CSState.from_dict(parts["diff"]), prev_d, xd, True).to_dict()
        return parts, None
    st = fluid_update(bank, FluidState.from_dict(parts["fluid"]), batch, x, inplace=True)  # type: ignore[arg-type]
    parts["fluid"] = st.to_dict()
    return parts, st


def next_items(bank: ItemBank, state: FluidState, k: int) -> np.ndarray:
    """The next ``fluid`` batch (the ``k`` most informative unused items)."""
    return fluid_next(bank, state, k)[0]


__all__ = ["feed", "intervals", "is_legacy", "next_items", "on_lattice"]
