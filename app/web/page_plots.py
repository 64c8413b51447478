"""Figures of the browser view that the API's plots do not draw (matplotlib, Agg, no pyplot).

Each data series carries a ``gid`` (``series-<name>``) so a page (and its tests) can find the
line of one method, model or interval in the SVG.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.figure import Figure

from app.core.results import AgreementCurve
from app.schemas.sessions import HistoryRow
from app.services.reliability.analyses import StoredAnalysis
from app.services.reliability.plots import NARROW as PLOTS_NARROW
from app.services.reliability.plots import PAGE_WIDE, Look

# Page figures are a little flatter than the API's; NARROW is the phone variant (text >= 11 px
# on a 360-px screen, see app.services.reliability.plots.Look). The accuracy histogram is drawn
# in app.services.reliability.plots (the worker precomputes it).
WIDE = PAGE_WIDE
NARROW = PLOTS_NARROW


def _axes(look: Look = WIDE):
    fig = Figure(figsize=(look.width, look.height))
    return fig, fig.subplots()


def svg(fig: Figure) -> bytes:
    """The figure as SVG without a date (stable bytes for the same figure)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def warm_up() -> None:
    """Draw a small figure with every kind of element the pages use (fonts loaded, caches built)."""
    fig, ax = _axes()
    ax.plot([0.0, 1.0], [0.0, 1.0], marker="o", label="x")
    ax.hist([0.1, 0.2, 0.2], bins=3)
    ax.set_title("warm-up 0123456789 (%)")
    ax.set_xlabel("x")
    ax.legend()
    svg(fig)


def _curve_xy(curve: AgreementCurve) -> tuple[np.ndarray, np.ndarray]:
    """Bin midpoints (points) and the curve's value (isotonic fit when present)."""
    upper = np.minimum(curve.gap_upper, max(curve.max_gap, float(curve.gaps[-1])))
    mid = 100 * (curve.gaps + upper) / 2
    y = curve.fitted if curve.fitted is not None else curve.p_same
    return mid, np.asarray(y, dtype=np.float64)


def agreement_by_method(
    analysis: StoredAnalysis, benchmark_name: str, n: int, split: str = "seen", look: Look = WIDE
) -> bytes:
    """P(same order) against the full-benchmark gap at size ``n``: one line per method."""
    fig, ax = _axes(look)
    for method in analysis.methods:
        cell = analysis.cell(method, n, split)
        if cell.curve is None:
            continue
        x, y = _curve_xy(cell.curve)
        (line,) = ax.plot(x, y, marker=".", label=method, gid=f"series-{method}")
        if cell.reached and cell.mdad is not None:
            ax.axvline(100 * cell.mdad, color=line.get_color(), linestyle=":", linewidth=1)
    ax.axhline(analysis.threshold, color="tab:red", linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    look.style(
        ax,
        f"{benchmark_name}: agreement curves at n={n} ({analysis.mode} mode, {split} split);"
        f"\ndotted: each method's MDAD, dashed: threshold {analysis.threshold:g}",
        "|full-benchmark gap| between two models (accuracy points)",
        "P(same order)" if look.wrap else "P(same order as the full benchmark)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(title="method", fontsize=look.small, title_fontsize=look.small, loc="lower right")
    return svg(fig)


def pair_on_curve(
    curve: AgreementCurve,
    gap: float,
    p_same: float,
    size: int,
    threshold: float,
    look: Look = WIDE,
) -> bytes:
    """The exact agreement curve of random ``size``-subsets, with the pair marked on it."""
    fig, ax = _axes(look)
    x, y = _curve_xy(curve)
    ax.plot(x, y, color="#3b6ea5", label=f"random, n={size} (exact)", gid="series-curve")
    ax.plot(
        [100 * abs(gap)],
        [p_same],
        marker="o",
        markersize=9,
        color="tab:orange",
        linestyle="none",
        label="this pair",
        gid="series-pair",
    )
    ax.axhline(threshold, color="tab:red", linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    look.style(
        ax,
        f"where the pair sits on the exact agreement curve (n={size}); "
        f"dashed: threshold {threshold:g}",
        "|full-benchmark gap| (accuracy points)",
        "P(same order)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=look.small, loc="lower right")
    return svg(fig)


def session_narrowing(
    history: Sequence[HistoryRow], *, difference: bool, look: Look = WIDE
) -> bytes:
    """The session's interval after each batch (items used on x): the accuracy's, or the
    difference with the baseline's when there is one."""
    fig, ax = _axes(look)
    items = np.array([h.items_used for h in history], dtype=np.float64)
    rows = [
        h.difference if difference and h.difference is not None else h.estimate for h in history
    ]
    lo = 100 * np.array([r.lower for r in rows], dtype=np.float64)
    hi = 100 * np.array([r.upper for r in rows], dtype=np.float64)
    val = 100 * np.array([np.nan if r.value is None else r.value for r in rows], dtype=np.float64)
    ax.fill_between(items, lo, hi, step="post", color="#3b6ea5", alpha=0.2, linewidth=0)
    ax.step(items, lo, where="post", color="#3b6ea5", gid="series-lower")
    ax.step(items, hi, where="post", color="#3b6ea5", gid="series-upper")
    ax.plot(items, val, marker="o", color="0.2", gid="series-estimate")
    if difference:
        ax.axhline(0.0, color="tab:red", linestyle="--", linewidth=1)
    look.style(
        ax,
        "interval after each batch",
        "items evaluated",
        ("difference (points)" if look.wrap else "difference with the baseline (points)")
        if difference
        else "accuracy (points)",
    )
    ax.grid(True, alpha=0.3)
    return svg(fig)
