"""``benchslice plan --pair`` for two models pushed with K samples per item (SYNTHETIC 0/1
samples, CSV with a samples column): the items x samples table, checked against the core."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.core.reliability.power import bernoulli_within, samples_plan
from tests.cli.conftest import CLI

pytestmark = pytest.mark.integration

N_ITEMS, K, GAP = 80, 4, 0.1


def test_plan_prints_items_x_samples_for_a_k_sample_pair(cli: CLI, tmp_path: Path) -> None:
    rng = np.random.default_rng(3531)
    base = rng.beta(1.5, 1.5, N_ITEMS)
    items = np.array([f"q{i:02d}" for i in range(N_ITEMS)])
    others = (rng.random((2, N_ITEMS)) < base).astype(np.uint8)  # two 0/1 models, K = 1
    path = tmp_path / "base.npz"
    np.savez(path, correct=others, models=np.array(["org/one-a", "org/one-b"]), item_ids=items)
    assert cli("push", "--create", "--benchmark", "reps80", str(path)).code == 0
    means = {}
    for name, shift in (("org/k-a", 0.1), ("org/k-b", -0.05)):
        p = np.clip(base + shift + rng.normal(0, 0.2, N_ITEMS), 0, 1)
        m = (rng.random((N_ITEMS, K)) < p[:, None]).mean(axis=1)
        csv = tmp_path / f"{name.split('/')[1]}.csv"
        csv.write_text(
            "item_id,correct,samples\n"
            + "".join(f"{i},{x:g},{K}\n" for i, x in zip(items, m, strict=True))
        )
        pushed = cli("push", "-b", "reps80", "--model", name, str(csv))
        assert pushed.code == 0, pushed
        means[name] = m
    args = ("plan", "-b", "reps80", "--gap", str(GAP), "--pair", "org/k-a", "org/k-b")
    run = cli(*args, "--json")
    assert run.code == 0, run
    block = run.json()["samples"]
    xa, xb = means["org/k-a"], means["org/k-b"]
    core = samples_plan(
        xa - xb,
        bernoulli_within(xa, K) + bernoulli_within(xb, K),
        K,
        GAP,
        n_population=N_ITEMS,
    )
    assert block["within_variance_source"] == "bernoulli"  # the CSV carried no variances
    assert [r["n_items"] for r in block["rows"]] == core.n.tolist()
    assert block["var_between"] == pytest.approx(core.var_between, rel=1e-5, abs=1e-9)
    assert block["within"] == pytest.approx(core.within, rel=1e-5)
    people = cli(*args)
    assert people.code == 0, people
    assert "samples/item" in people.stdout and "items x samples" in people.stdout
    assert block["explanation"] in " ".join(people.stdout.split())
    no_pair = cli("plan", "-b", "reps80", "--gap", str(GAP), "--pair", "org/one-a", "org/k-a")
    assert no_pair.code == 0 and "samples/item" not in no_pair.stdout
