"""Figures of a stored analysis (matplotlib, Agg backend, no pyplot state: safe in threads)."""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from typing import Literal

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from app.errors import InvalidInput
from app.services.reliability.analyses import StoredAnalysis

PlotFormat = Literal["svg", "png"]
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}
_DPI = 120


@dataclass(frozen=True)
class Look:
    """Sizes of a figure's frame and text, in points (an SVG's user units).

    ``NARROW`` is for phones: a page shows the figure at the width of a 360-px screen (about
    340 px), so a 4.4-inch (317-pt) figure is drawn at 1.07 px per pt and 11-pt text stays
    at least 11 px; long titles and axis labels are wrapped to fit.
    """

    width: float
    height: float
    title: float
    text: float  # axis labels and tick labels
    small: float  # legends and notes on the axes
    wrap: int | None = None

    def wrapped(self, text: str) -> str:
        if self.wrap is None:
            return text
        return "\n".join(
            textwrap.fill(part, self.wrap, break_on_hyphens=False) for part in text.split("\n")
        )

    def frame(self, fig: Figure, title: str, xlabel: str) -> None:
        """Margins that fit the (wrapped) title and x label: fixed per figure, no second draw."""
        lines = title.count("\n") + 1
        top = 1 - (lines * self.title * 1.25 + 8) / (self.height * 72)
        below = (xlabel.count("\n") + 1) * self.text * 1.25 + self.text * 1.6 + 6
        left = (self.text * 4.2) / (self.width * 72)
        fig.subplots_adjust(left=left, right=0.97, bottom=below / (self.height * 72), top=top)

    def style(self, ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
        """Title and axis labels (wrapped when narrow) at this look's sizes."""
        title, xlabel = self.wrapped(title), self.wrapped(xlabel)
        ax.set_title(title, fontsize=self.title)
        ax.set_xlabel(xlabel, fontsize=self.text)
        ax.set_ylabel(self.wrapped(ylabel) if self.wrap else ylabel, fontsize=self.text)
        ax.tick_params(labelsize=self.text)
        self.frame(ax.figure, title, xlabel)  # type: ignore[arg-type]


WIDE = Look(width=7.5, height=4.8, title=10, text=10, small=8)
NARROW = Look(width=4.4, height=3.9, title=11, text=11, small=11, wrap=40)


def _figure(look: Look = WIDE) -> tuple[Figure, Axes]:
    """A figure whose margins are set from its labels (:meth:`Look.frame`): cheaper than
    ``bbox_inches="tight"``, which draws every figure twice (the analysis page's first view
    renders two of them)."""
    fig = Figure(figsize=(look.width, look.height))
    return fig, fig.subplots()


def _render(fig: Figure, fmt: PlotFormat) -> bytes:
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {}
    fig.savefig(buf, format=fmt, dpi=_DPI, metadata=metadata)
    return buf.getvalue()


def mdad_plot(
    analysis: StoredAnalysis,
    benchmark_name: str,
    fmt: PlotFormat,
    split: str = "seen",
    look: Look = WIDE,
) -> bytes:
    """MDAD (accuracy points) against subset size (log x), one line per method with its CI band.

    Sizes where a method never reaches the agreement threshold are left out of its line and
    marked with a triangle at the top of the axes.
    """
    fig, ax = _figure(look)
    sizes = np.asarray(analysis.sizes, dtype=np.float64)
    top = 0.0
    colors: dict[str, str] = {}
    for method in analysis.methods:
        cells = [analysis.cell(method, n, split) for n in analysis.sizes]
        mdad = 100 * analysis.mdads(method, split)
        lo = 100 * np.array([np.nan if c.ci_low is None else c.ci_low for c in cells])
        hi = 100 * np.array(
            [c.max_gap if c.ci_high is None else c.ci_high for c in cells], dtype=np.float64
        )
        hi = np.where(np.isnan(mdad), np.nan, hi)
        top = max(top, float(np.nanmax(np.append(hi, mdad), initial=0.0)))
        (line,) = ax.plot(sizes, mdad, marker="o", label=method, gid=f"series-{method}")
        colors[method] = line.get_color()
        ax.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
    ax.axhline(100 * analysis.gap, color="0.4", linestyle="--", linewidth=1)
    ymax = max(top, 100 * analysis.gap) * 1.12 or 1.0
    ax.set_ylim(0, ymax)
    for method, color in colors.items():
        missing = np.isnan(analysis.mdads(method, split))
        if missing.any():
            ax.plot(
                sizes[missing],
                np.full(int(missing.sum()), 0.97 * ymax),
                marker="^",
                linestyle="none",
                color=color,
            )
    ax.text(
        sizes[0],
        100 * analysis.gap,
        f" requested gap {100 * analysis.gap:g} pts",
        va="bottom",
        ha="left",
        fontsize=look.small,
        color="0.3",
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(int(n)) for n in sizes])
    look.style(
        ax,
        f"{benchmark_name}: MDAD vs subset size\n"
        f"{analysis.mode} mode, {analysis.runs} runs, P(same order) >= {analysis.threshold:g}, "
        f"{split} split; bands: 95% CI; triangles: not reached",
        "subset size n (items, log scale)",
        "MDAD (accuracy points)",
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="method", fontsize=look.small, title_fontsize=look.small)
    return _render(fig, fmt)


def agreement_plot(
    analysis: StoredAnalysis,
    benchmark_name: str,
    fmt: PlotFormat,
    *,
    method: str | None = None,
    n: int | None = None,
    split: str = "seen",
) -> bytes:
    """P(same order) against the full-benchmark gap (accuracy points) with the threshold line.

    One (method, n) curve when ``n`` is given, else one curve per evaluated size. Robust mode
    draws the isotonic fit with its band over the raw per-bin proportions; P(tie) dashed.
    """
    method = method or analysis.methods[0]
    if method not in analysis.methods:
        raise InvalidInput(
            f"method {method!r} is not in this analysis",
            field="method",
            message=f"choose from {list(analysis.methods)}",
        )
    if n is not None and n not in analysis.sizes:
        raise InvalidInput(
            f"size {n} is not in this analysis",
            field="n",
            message=f"choose from {list(analysis.sizes)}",
        )
    sizes = [n] if n is not None else list(analysis.sizes)
    fig, ax = _figure()
    for size in sizes:
        c = analysis.cell(method, size, split)
        curve = c.curve
        assert curve is not None
        # the last bin runs to the largest observed gap, not to its nominal upper edge
        upper = np.minimum(curve.gap_upper, max(curve.max_gap, float(curve.gaps[-1])))
        mid = 100 * (curve.gaps + upper) / 2
        edges = 100 * np.append(curve.gaps, upper[-1])
        label = f"n={size}"

        def closed(v: np.ndarray) -> np.ndarray:
            return np.append(v, v[-1])

        if curve.fitted is not None:
            (line,) = ax.step(
                edges, closed(curve.fitted), where="post", label=f"{label} (isotonic fit)"
            )
            if curve.band_low is not None and curve.band_high is not None:
                ax.fill_between(
                    edges,
                    closed(curve.band_low),
                    closed(curve.band_high),
                    step="post",
                    color=line.get_color(),
                    alpha=0.15,
                    linewidth=0,
                )
            ax.plot(mid, curve.p_same, ".", color=line.get_color(), alpha=0.6, markersize=4)
        else:
            (line,) = ax.plot(mid, curve.p_same, marker=".", label=f"{label} P(same order)")
        if len(sizes) == 1:
            ax.plot(mid, curve.p_tie, "--", color="0.5", linewidth=1, label="P(tie)")
            if c.reached and c.mdad is not None:
                ax.axvline(100 * c.mdad, color=line.get_color(), linestyle=":", linewidth=1)
                ax.text(
                    100 * c.mdad,
                    0.02,
                    f" MDAD {100 * c.mdad:.1f} pts",
                    fontsize=8,
                    color=line.get_color(),
                )
    ax.axhline(analysis.threshold, color="tab:red", linestyle="--", linewidth=1)
    ax.text(
        0,
        analysis.threshold,
        f" threshold {analysis.threshold:g}",
        va="bottom",
        fontsize=8,
        color="tab:red",
    )
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    which = f"n={n}" if n is not None else "all sizes"
    WIDE.style(
        ax,
        f"{benchmark_name}: agreement vs gap, {method}, {which}\n"
        f"{analysis.mode} mode, {analysis.runs} runs, {split} split",
        "|full-benchmark accuracy gap| between the two models (accuracy points)",
        "P(subset orders the pair as the full benchmark)",
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _render(fig, fmt)


# The benchmark page's accuracy histogram: drawn by the page on a first view, or beforehand by the
# worker's precompute after an upload (app.services.ranking.precompute). PAGE_WIDE is a little
# flatter than the API's WIDE.
PAGE_WIDE = Look(width=7.5, height=4.2, title=10, text=10, small=8)
HISTOGRAM_LOOKS = {"wide": PAGE_WIDE, "narrow": NARROW}


def accuracy_histogram(accuracy: np.ndarray, benchmark_name: str, look: Look = PAGE_WIDE) -> bytes:
    """Histogram of the models' full-benchmark accuracies (points), median marked (SVG)."""
    fig, ax = _figure(look)
    acc = 100 * np.asarray(accuracy, dtype=np.float64)
    bins = np.linspace(np.floor(acc.min()), np.ceil(acc.max()) + 1e-9, 26) if acc.size else 10
    ax.hist(acc, bins=bins, color="#3b6ea5", edgecolor="white")
    if acc.size:
        med = float(np.median(acc))
        ax.axvline(med, color="0.25", linestyle="--", linewidth=1)
        ax.text(
            med,
            0.97,
            f" median {med:.1f}",
            transform=ax.get_xaxis_transform(),
            va="top",
            fontsize=look.small if look.wrap else None,
        )
    look.style(
        ax,
        f"{benchmark_name}: accuracy of {acc.size} models",
        "full-benchmark accuracy (%)",
        "models",
    )
    ax.grid(True, axis="y", alpha=0.3)
    return _render(fig, "svg")


def accuracy_histograms(accuracy: np.ndarray, benchmark_name: str) -> dict[str, bytes]:
    """The histogram in every look the page shows (``wide``, ``narrow``)."""
    return {
        name: accuracy_histogram(accuracy, benchmark_name, look)
        for name, look in HISTOGRAM_LOOKS.items()
    }
