"""Estimation: a full-benchmark score from a subset's items, and its interval.

The estimator registry (:mod:`.estimators`; IRT-based ones in :mod:`.irt_estimates`), design-based
weighted means (:mod:`.weighted`), interval constructions (:mod:`.intervals`), one estimator's batch
of estimates (:mod:`.estimate_batch`) and paired comparison statistics (:mod:`.stats`). Selectors
build on this room; a new estimator or interval goes here.
"""
