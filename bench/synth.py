"""Seeded generator of realistic SYNTHETIC results matrices (correct + confidence + subtasks).

Every matrix produced here is **synthetic**: it comes from a 2PL IRT model, not from any model's
real answers. The npz files carry ``synthetic=True`` and a ``source`` string saying so.

Model
-----
Item parameters and abilities are drawn from the distributions of a one-dimensional 2PL fitted to
the real GPQA matrix (``shared/data/gpqa.npz``, 420 models x 448 items) with
``app.core.irt.fit.fit_irt(dims=1, form="scalar_difficulty", prior="hierarchical", rng=0)``; the
quantile tables below are the 21 quantiles (0%, 5%, ..., 100%) of the fitted ``theta``, ``a`` and
``b`` (sign-aligned so that the median discrimination is positive) and are sampled by inverse-CDF
linear interpolation. :func:`reference_quantiles` recomputes them.

* ``z_ij = a_i (theta_j + tau * eta_{j, s(i)}) - b_i`` where ``eta ~ N(0, 1)`` is a per
  (model, subtask) ability deviation (``subtask_effect`` = tau) that makes items of a subtask
  correlate more than items of different subtasks.
* A logistic latent ``l_ij = z_ij + e_ij``, ``e ~ Logistic(0, 1)``; ``correct = 1{l_ij > 0}``, so
  ``P(correct) = sigmoid(z_ij)`` exactly (the 2PL).
* Gold-option probability ``confidence = sigmoid(kappa * l_ij + logit(c0) + 0.3 * n_ij)`` with
  ``n ~ N(0, 1)``: monotone in the same latent that decides correctness (correct answers have
  confidence above ~c0 = 0.4 up to the small noise), which is how confidence and correctness
  co-vary in real multiple-choice log-likelihood data.
* Subtasks are consecutive blocks (MMLU-Pro's 14 subtask sizes when ``n_items == 12032``).

CLI::

    python bench/synth.py --models 447 --items 12032 --seed 0 -o out.npz
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOURCE = (
    "SYNTHETIC: 2PL IRT simulation (bench/synth.py) with ability/discrimination/difficulty "
    "distributions fitted to the real GPQA matrix (Open LLM Leaderboard v2); not real model results"
)

# Quantiles 0, 5, ..., 100 % of the D = 1 fit on gpqa.npz (see reference_quantiles()).
THETA_Q = np.array([
    -4.2081, -2.535, -1.3086, -0.7412, -0.5295, -0.2291, -0.0837, 0.0076, 0.0673, 0.1189, 0.1763,
    0.2145, 0.2659, 0.3319, 0.3766, 0.4196, 0.4683, 0.543, 0.6009, 0.752, 1.2391,
])  # fmt: skip
A_Q = np.array([
    -3.3998, -2.3496, -1.9109, -1.4947, -0.9783, 0.0961, 0.2988, 0.4265, 0.519, 0.5902, 0.6491,
    0.7042, 0.7937, 0.8736, 0.9573, 1.0439, 1.1369, 1.2885, 1.4767, 1.7874, 2.6832,
])  # fmt: skip
B_Q = np.array([
    -4.2834, -0.3684, -0.0281, 0.1995, 0.3204, 0.5113, 0.626, 0.7564, 0.8809, 1.0156, 1.1372,
    1.2757, 1.3841, 1.5066, 1.5956, 1.7706, 1.886, 2.0095, 2.1527, 2.4465, 4.692,
])  # fmt: skip
QUANTILE_LEVELS = np.linspace(0.0, 1.0, 21)

MMLU_PRO_SUBTASKS = (
    ("philosophy", 499), ("law", 1101), ("engineering", 969), ("chemistry", 1132),
    ("business", 789), ("psychology", 798), ("health", 818), ("biology", 717), ("history", 381),
    ("other", 924), ("economics", 844), ("physics", 1299), ("computer science", 410), ("math", 1351),
)  # fmt: skip

MAX_MODELS, MAX_ITEMS = 20_000, 20_000


@dataclass(frozen=True)
class SyntheticResults:
    """A synthetic results matrix and the parameters it was drawn from.

    Attributes
    ----------
    correct : ndarray of uint8, shape (n_models, n_items)
    confidence : ndarray of float32, shape (n_models, n_items)
        Probability on the gold option.
    subtasks : ndarray of str, shape (n_items,)
    theta, a, b : ndarray
        True abilities (n_models,), discriminations and difficulties (n_items,).
    expected_accuracy : ndarray, shape (n_models,)
        ``mean_i sigmoid(z_ij)``, the model's expected accuracy under the generator.
    seed : int
    synthetic : bool
        Always True.
    source : str
    """

    correct: np.ndarray
    confidence: np.ndarray
    subtasks: np.ndarray
    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    expected_accuracy: np.ndarray
    seed: int
    synthetic: bool = True
    source: str = SOURCE

    def save(self, path: str | Path) -> None:
        """Write an npz (``synthetic=True`` and ``source`` included; no pickles)."""
        np.savez_compressed(
            path,
            correct=self.correct,
            confidence=self.confidence,
            subtasks=self.subtasks,
            theta=self.theta,
            a=self.a,
            b=self.b,
            expected_accuracy=self.expected_accuracy,
            seed=np.int64(self.seed),
            synthetic=np.bool_(True),
            source=np.str_(self.source),
        )


def _sample_quantiles(rng: np.random.Generator, table: np.ndarray, size: int) -> np.ndarray:
    return np.interp(rng.random(size), QUANTILE_LEVELS, table)


def _subtask_labels(n_items: int, subtask_sizes) -> np.ndarray:
    if subtask_sizes is None:
        if n_items == sum(s for _, s in MMLU_PRO_SUBTASKS):
            names = [name for name, _ in MMLU_PRO_SUBTASKS]
            sizes = [s for _, s in MMLU_PRO_SUBTASKS]
        else:
            names, sizes = ["all"], [n_items]
    elif isinstance(subtask_sizes, dict):
        names, sizes = list(subtask_sizes), list(subtask_sizes.values())
    else:
        sizes = [int(s) for s in subtask_sizes]
        names = [f"subtask_{k:02d}" for k in range(len(sizes))]
    if any(s <= 0 for s in sizes) or sum(sizes) != n_items:
        raise ValueError(
            f"subtask_sizes: must be positive and sum to n_items={n_items}, got {sizes}"
        )
    return np.repeat(np.array(names, dtype=str), sizes)


def make_synthetic(
    n_models: int,
    n_items: int,
    *,
    seed: int,
    subtask_sizes=None,
    subtask_effect: float = 0.5,
    confidence_slope: float = 1.5,
    confidence_at_boundary: float = 0.4,
    discrimination: str = "gpqa",
) -> SyntheticResults:
    """Draw a synthetic results matrix from a GPQA-calibrated 2PL model.

    Parameters
    ----------
    n_models : int
        At most 500.
    n_items : int
        At most 20,000.
    seed : int
        Seeds everything; same seed and arguments give the same matrix.
    subtask_sizes : sequence of int or dict name -> size, optional
        Consecutive subtask blocks summing to ``n_items``. Default: MMLU-Pro's 14 subtasks when
        ``n_items == 12032``, else a single subtask ``"all"``.
    subtask_effect : float
        Standard deviation of the per (model, subtask) ability deviation.
    confidence_slope, confidence_at_boundary : float
        ``kappa`` and ``c0`` of the confidence link (module docstring).
    discrimination : {"gpqa", "positive"}
        ``"gpqa"`` draws ``a`` from GPQA's fitted quantiles, a quarter of them negative (down to
        -3.4: items strong models get wrong more often); ``"positive"`` uses ``|a|`` (every item
        discriminates the usual way, as on MMLU-Pro-like benchmarks). A DPP over-samples the
        negative items (40-44 % of its subsets against 25 %), which makes its plain mean rank
        models against their order on ``"gpqa"`` matrices (bench/dpp_ranking.py).

    Returns
    -------
    SyntheticResults
        Labelled synthetic (``synthetic=True``, ``source``).
    """
    if not 1 <= n_models <= MAX_MODELS:
        raise ValueError(f"n_models: must be in [1, {MAX_MODELS}]")
    if not 1 <= n_items <= MAX_ITEMS:
        raise ValueError(f"n_items: must be in [1, {MAX_ITEMS}]")
    if discrimination not in ("gpqa", "positive"):
        raise ValueError(f"discrimination: expected 'gpqa' or 'positive', got {discrimination!r}")
    rng = np.random.default_rng(seed)
    subtasks = _subtask_labels(n_items, subtask_sizes)
    _, block = np.unique(subtasks, return_inverse=True)
    theta = _sample_quantiles(rng, THETA_Q, n_models)
    a = _sample_quantiles(rng, A_Q, n_items)
    if discrimination == "positive":
        a = np.abs(a)
    b = _sample_quantiles(rng, B_Q, n_items)
    eta = subtask_effect * rng.standard_normal((n_models, int(block.max()) + 1))
    z = a * (theta[:, None] + eta[:, block]) - b
    expected = np.mean(0.5 * (1.0 + np.tanh(0.5 * z)), axis=1)
    u = rng.random(z.shape)
    latent = z + (np.log(u) - np.log1p(-u))  # logistic noise
    correct = (latent > 0).astype(np.uint8)
    c0 = np.log(confidence_at_boundary / (1.0 - confidence_at_boundary))
    conf_logit = confidence_slope * latent + c0 + 0.3 * rng.standard_normal(z.shape)
    confidence = (0.5 * (1.0 + np.tanh(0.5 * conf_logit))).astype(np.float32)
    np.clip(confidence, 1e-6, 1 - 1e-6, out=confidence)
    return SyntheticResults(
        correct=correct,
        confidence=confidence,
        subtasks=subtasks,
        theta=theta,
        a=a,
        b=b,
        expected_accuracy=expected,
        seed=int(seed),
    )


def reference_quantiles(path: str | Path = "/work/shared/data/gpqa.npz") -> dict[str, np.ndarray]:
    """Recompute the quantile tables from a D = 1 fit on the real GPQA matrix."""
    from app.core.irt.fit import fit_irt

    correct = np.load(path)["correct"].astype(np.float64)
    model = fit_irt(
        correct,
        dims=1,
        form="scalar_difficulty",
        prior="hierarchical",
        rng=0,
        tol=1e-9,
        max_iter=2000,
    )
    sign = np.sign(np.median(model.a[:, 0])) or 1.0
    return {
        "theta": np.quantile(sign * model.theta[:, 0], QUANTILE_LEVELS),
        "a": np.quantile(sign * model.a[:, 0], QUANTILE_LEVELS),
        "b": np.quantile(model.b, QUANTILE_LEVELS),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=447)
    parser.add_argument("--items", type=int, default=12032)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--subtask-sizes", type=str, default=None, help="comma-separated block sizes"
    )
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    sizes = None if args.subtask_sizes is None else [int(s) for s in args.subtask_sizes.split(",")]
    data = make_synthetic(args.models, args.items, seed=args.seed, subtask_sizes=sizes)
    data.save(args.output)
    acc = data.correct.mean(axis=1)
    print(
        f"SYNTHETIC {data.correct.shape} -> {args.output} "
        f"(accuracy min/median/max {acc.min():.3f}/{np.median(acc):.3f}/{acc.max():.3f})"
    )


if __name__ == "__main__":
    main()
