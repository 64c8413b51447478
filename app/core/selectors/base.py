"""Shared base class for micro-benchmark selectors (template method).

A selector is used in two steps, scikit-learn style, so that expensive fitting on the source models
(correlations, an IRT fit, PCA) happens once and serves every subset size:

>>> sel = make_selector("random").fit(correct_sources)          # doctest: +SKIP
>>> selection = sel.select(25, rng=0)                            # doctest: +SKIP
>>> estimates = sel.estimate(selection, target_correct[:, selection.indices])  # doctest: +SKIP

Subclasses override ``_fit`` (optional) and ``_select`` (required) only. ``fit`` validates inputs
once; ``select`` validates ``n``, normalises ``rng`` and wraps the hook's output in a frozen
:class:`~app.core.results.Selection` with its provenance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from app.core._validation import (
    ResultsData,
    SeedLike,
    normalize_rng,
    validate_results,
    validate_size,
)
from app.core.estimation.estimators import estimate as estimate_from_selection
from app.core.results import Selection


@dataclass
class Chosen:
    """What a ``_select`` hook returns: positions into the *full* item axis and linear weights."""

    indices: np.ndarray
    weights: np.ndarray
    fitted: dict[str, np.ndarray] = field(default_factory=dict)


class Selector(ABC):
    """Base class of every selector.

    Class attributes
    ----------------
    name : str
        Registry key.
    estimators : tuple of str
        Estimators this method supports; the first is the default.
    uses_sources : bool
        Whether the selection depends on the source models' results.
    randomized : bool
        Whether different seeds give different subsets (used by the contract test).
    protocol_params : Mapping
        Parameter overrides the meta-evaluation protocol applies. The protocol reads only the
        default estimator, so a selector may skip work that serves its other estimators; the
        overrides must not change which items are selected.
    """

    name: ClassVar[str]
    estimators: ClassVar[tuple[str, ...]] = ("mean",)
    uses_sources: ClassVar[bool] = True
    randomized: ClassVar[bool] = True
    protocol_params: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)

    # -- public API ---------------------------------------------------------------------------
    def fit(self, correct, *, confidence=None, subtasks=None, candidates=None) -> Selector:
        """Validate the source models' results and fit whatever the method needs.

        Parameters
        ----------
        correct : array_like, shape (n_sources, n_items)
            Source models' correctness in [0, 1].
        confidence : array_like, shape (n_sources, n_items), optional
            Source models' probability on the gold option. Methods that use it fall back to
            ``correct`` when it is absent and record so in ``Selection.signal``.
        subtasks : array_like of str, shape (n_items,), optional
        candidates : array_like of int, optional
            Item positions the subset may be drawn from (the paper's *seen* half).

        Returns
        -------
        self
        """
        return self.fit_data(
            validate_results(
                correct, confidence=confidence, subtasks=subtasks, candidates=candidates
            )
        )

    def fit_data(self, data: ResultsData) -> Selector:
        """Fit on results already validated by :func:`~app.core._validation.validate_results`.

        ``fit(correct, ...)`` is ``fit_data(validate_results(correct, ...))``. The protocol
        validates a run's source results once and fits every method on the same read-only
        :class:`~app.core._validation.ResultsData` (the copies and range checks of a 300 x 6,012
        matrix cost ~40 ms per method and run).

        Parameters
        ----------
        data : ResultsData

        Returns
        -------
        self
        """
        if not isinstance(data, ResultsData):
            raise TypeError(f"data: expected a ResultsData, got {type(data).__name__}")
        self.data_ = data
        self._fit(self.data_)
        return self

    def plan_sizes(self, sizes) -> Selector:
        """Announce the subset sizes that will be selected after this fit (optional).

        A selector may prepare work shared by every size once (the DPP computes one QR basis for
        the largest size and uses its leading columns for the smaller ones). The plan is part of
        the fit: it never depends on a selection seed, a selection records what it used in
        ``fitted``, and without a plan every size is computed on its own. Default: ignored.

        Parameters
        ----------
        sizes : sequence of int

        Returns
        -------
        self
        """
        self._require_fitted()
        self._plan(tuple(int(n) for n in sizes))
        return self

    def select(self, n: int, *, rng: SeedLike = None) -> Selection:
        """Choose a micro-benchmark of ``n`` items from the fitted candidate pool.

        Parameters
        ----------
        n : int
            Requested subset size, ``1 <= n <= n_candidates``.
        rng : int, numpy.random.Generator or None, keyword-only
            Source of randomness; an int seed is stored in the result.

        Returns
        -------
        Selection
        """
        data = self._require_fitted()
        n = validate_size(n, data.candidates.shape[0])
        generator, seed = normalize_rng(rng)
        chosen = self._select(data, n, generator)
        return Selection(
            method=self.name,
            indices=chosen.indices,
            weights=chosen.weights,
            estimator=self.default_estimator,
            estimate_on=self.estimate_on,
            signal=data.signal_name if self.uses_sources else "none",
            n_requested=n,
            n_candidates=int(data.candidates.shape[0]),
            seed=seed,
            params=self.params,
            fitted=chosen.fitted,
        )

    def estimate(
        self, selection: Selection, correct, confidence=None, *, estimator: str | None = None
    ):
        """Estimate full-benchmark scores of models known only on ``selection``'s items.

        Parameters
        ----------
        selection : Selection
        correct : array_like, shape (n_models, selection.size)
            The models' correctness on the selected items, in ``selection.indices`` order.
        confidence : array_like, shape (n_models, selection.size), optional
            Needed by estimators that read confidence (Anchor Points' paper estimator).
        estimator : str, optional
            One of ``self.estimators``; default the method's own.

        Returns
        -------
        ndarray of float64, shape (n_models,)
        """
        name = estimator or selection.estimator
        if name not in self.estimators:
            raise ValueError(
                f"estimator: {name!r} is not supported by {self.name} ({self.estimators})"
            )
        return estimate_from_selection(selection, correct, confidence, estimator=name)

    @property
    def default_estimator(self) -> str:
        return self.estimators[0]

    @property
    def estimate_on(self) -> str:
        return "correct"

    # -- hooks --------------------------------------------------------------------------------
    def _fit(self, data: ResultsData) -> None:  # noqa: B027 - optional hook
        """Fit state shared by every subset size (default: nothing)."""

    def _plan(self, sizes: tuple[int, ...]) -> None:  # noqa: B027 - optional hook
        """Prepare work shared by the announced sizes (default: nothing)."""

    @abstractmethod
    def _select(self, data: ResultsData, n: int, rng: np.random.Generator) -> Chosen:
        """Return the chosen item positions (into the full item axis) and linear weights."""

    # -- helpers ------------------------------------------------------------------------------
    def _require_fitted(self) -> ResultsData:
        data = getattr(self, "data_", None)
        if data is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")
        return data

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
