"""The SYNTHETIC benchmark families the coverage study runs besides GPQA (issue 24)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.synth_families import FAMILIES, make_family


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_matrix_other_seed_other_matrix(family) -> None:
    a = make_family(family, 60, 80, seed=3)
    b = make_family(family, 60, 80, seed=3)
    c = make_family(family, 60, 80, seed=4)
    np.testing.assert_array_equal(a.correct, b.correct)
    assert not np.array_equal(a.correct, c.correct)
    assert a.synthetic and "SYNTHETIC" in a.source and family in a.source


def test_the_shapes_gpqa_lacks() -> None:
    weak = make_family("weak", seed=0)
    acc = weak.correct.mean(axis=1)
    assert np.mean(acc <= 0.06) > 0.3  # many weak models
    assert np.sum(acc == 0) >= 5  # all-wrong rows
    strong = make_family("strong", seed=0).correct.mean(axis=1)
    assert np.mean(strong >= 0.94) > 0.2 and np.sum(strong == 1.0) >= 1
    wide = make_family("wide", seed=0).correct.mean(axis=1)
    assert wide.min() < 0.02 and wide.max() > 0.98
    # items discriminate: the median item-rest correlation is far above GPQA's 0.04
    c = weak.correct.astype(float)
    rest = c.sum(axis=1, keepdims=True) - c
    r = [np.corrcoef(c[:, j], rest[:, j])[0, 1] for j in range(0, c.shape[1], 8)]
    assert np.nanmedian(r) > 0.4


def test_duplicates_copy_their_original_and_subtasks_are_blocks() -> None:
    fam = make_family("wide", 100, 64, seed=1, n_subtasks=4, duplicate_share=0.1)
    dup = np.flatnonzero(fam.duplicate_of >= 0)
    assert dup.size == 10
    np.testing.assert_array_equal(fam.correct[dup], fam.correct[fam.duplicate_of[dup]])
    assert list(np.unique(fam.subtasks, return_counts=True)[1]) == [16, 16, 16, 16]
    with pytest.raises(ValueError, match="family"):
        make_family("gpqa", seed=0)
