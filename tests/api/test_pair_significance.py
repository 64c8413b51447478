"""Verdict's paired outcome and the plan's significance answer, against scipy / closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats as st
from sqlalchemy.orm import Session

from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=30)
    db_session.commit()
    return seeded


def _n(delta: float, omega2: float, big_n: int, alpha: float = 0.05, power: float = 0.8) -> int:
    z = st.norm.ppf(1 - alpha / 2) + st.norm.ppf(power)
    n = z * z * omega2 / delta**2
    n = min(n / (1 + (n - 1) / big_n), big_n)
    return max(1, math.ceil(n - 1e-9))


def test_verdict_paired_outcome(client: TestClient, seeded: Seeded) -> None:
    a, b = 3, 17
    ya, yb = seeded.correct[a].astype(bool), seeded.correct[b].astype(bool)
    url = f"/v1/benchmarks/{seeded.version_id}/verdict"
    params = {"model_a": seeded.names[a], "model_b": seeded.names[b], "size": 25}
    r = client.get(url, params=params)
    assert r.status_code == 200, r.text
    p = r.json()["paired"]
    n10, n01 = int((ya & ~yb).sum()), int((~ya & yb).sum())
    assert (p["n11"], p["n10"], p["n01"], p["n00"]) == (
        int((ya & yb).sum()),
        n10,
        n01,
        int((~ya & ~yb).sum()),
    )
    assert p["mcnemar_p"] == pytest.approx(st.binomtest(n10, n10 + n01, 0.5).pvalue, rel=1e-9)
    # Dirichlet(1 + cells): P(p10 > p01) = P(Beta(1 + n10, 1 + n01) > 1/2) (conditional split)
    assert p["p_a_better"] == pytest.approx(st.beta.sf(0.5, 1 + n10, 1 + n01), rel=1e-9)
    # Monte Carlo check of the same posterior (200k draws: SE < 0.0012)
    draws = np.random.default_rng(0).dirichlet(
        [1 + p["n11"], 1 + n10, 1 + n01, 1 + p["n00"]], size=200_000
    )
    assert p["p_a_better"] == pytest.approx(np.mean(draws[:, 1] > draws[:, 2]), abs=0.005)
    assert p["min_discordant"] == 10 and p["status"] == "decidable"
    high = client.get(url, params={**params, "min_discordant": n10 + n01 + 1}).json()["paired"]
    assert high["status"] == "undecidable" and high["n10"] == n10
    exact = client.get(url, params={**params, "min_discordant": n10 + n01}).json()["paired"]
    assert exact["status"] == "decidable"
    bad = client.get(url, params={**params, "min_discordant": -1})
    assert bad.status_code == 422 and bad.headers["content-type"] == PROBLEM
    assert ["query", "min_discordant"] in [e["loc"] for e in bad.json()["errors"]]


def test_plan_significance_from_pair_and_benchmark(client: TestClient, seeded: Seeded) -> None:
    url = f"/v1/benchmarks/{seeded.version_id}/plan"
    r = client.get(url, params={"gap": 0.05})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["kind"] == "mdad" and body["size"] is not None
    sig = body["significance"]
    y = seeded.correct.astype(float)
    pairs = [
        (i, j) for i in range(y.shape[0]) for j in range(i + 1, y.shape[0])
    ]  # brute force over the 435 pairs
    w2 = [
        np.mean(y[i] * (1 - y[j]))
        + np.mean((1 - y[i]) * y[j])
        - (np.mean(y[i] * (1 - y[j])) - np.mean((1 - y[i]) * y[j])) ** 2
        for i, j in pairs
    ]
    assert sig["kind"] == "paired_significance" and sig["source"] == "benchmark_typical"
    assert sig["omega2"] == pytest.approx(float(np.median(w2)), rel=1e-6)
    assert sig["n"] == _n(0.05, sig["omega2"], 448)
    assert (sig["alpha"], sig["power"], sig["delta"]) == (0.05, 0.8, 0.05)

    a, b = 2, 11
    pair = client.get(
        url,
        params={
            "gap": 0.03,
            "model_a": seeded.names[a],
            "model_b": seeded.names[b],
            "alpha": 0.01,
            "power": 0.9,
        },
    ).json()["significance"]
    p10 = float(np.mean(y[a] * (1 - y[b])))
    p01 = float(np.mean((1 - y[a]) * y[b]))
    omega2 = p10 + p01 - (p10 - p01) ** 2
    assert pair["source"] == "pair" and pair["omega2"] == pytest.approx(omega2, rel=1e-12)
    assert pair["n"] == _n(0.03, omega2, 448, alpha=0.01, power=0.9)

    one = client.get(url, params={"gap": 0.03, "model_a": seeded.names[a]})
    assert one.status_code == 422 and one.json()["errors"][0]["loc"][-1] == "model_b"
    ghost = client.get(url, params={"gap": 0.03, "model_a": seeded.names[a], "model_b": "ghost"})
    assert ghost.status_code == 404
    tiny = client.get(url, params={"gap": 5e-324}).json()["significance"]
    assert tiny["n"] == 448  # an undetectable gap needs every item, never a garbage count
    bad = client.get(url, params={"gap": 0.03, "alpha": 5e-324})
    assert bad.status_code == 422 and ["query", "alpha"] in [e["loc"] for e in bad.json()["errors"]]
    bad = client.get(url, params={"gap": 0.03, "power": 1.5})
    assert bad.status_code == 422 and ["query", "power"] in [e["loc"] for e in bad.json()["errors"]]
