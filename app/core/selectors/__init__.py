"""Selector registry: name -> class. One file per selector; all share :class:`Selector`."""

from __future__ import annotations

from typing import Any

from app.core.selectors.anchor_points import AnchorPointsSelector
from app.core.selectors.base import Chosen, Selector
from app.core.selectors.confidence_stratified import ConfidenceStratifiedSelector
from app.core.selectors.dpp import DPPSelector
from app.core.selectors.random import RandomSelector
from app.core.selectors.subtask_stratified import SubtaskStratifiedSelector
from app.core.selectors.tiny_benchmarks import TinyBenchmarksSelector

SELECTORS: dict[str, type[Selector]] = {
    cls.name: cls
    for cls in (
        RandomSelector,
        SubtaskStratifiedSelector,
        ConfidenceStratifiedSelector,
        DPPSelector,
        AnchorPointsSelector,
        TinyBenchmarksSelector,
    )
}


def make_selector(name: str, **params: Any) -> Selector:
    """Instantiate a registered selector by name (``ValueError`` naming ``method`` otherwise)."""
    try:
        cls = SELECTORS[name]
    except KeyError:
        raise ValueError(
            f"method: unknown selector {name!r}; choose from {sorted(SELECTORS)}"
        ) from None
    return cls(**params)


__all__ = ["SELECTORS", "Chosen", "Selector", "make_selector"]
