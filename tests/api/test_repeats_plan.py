"""A plan for a pair scored with K samples per item: items x samples from the split of Var(d_i)
into data and prediction noise (issue 35 item 3; SYNTHETIC 0/1 samples)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.reliability.power import bernoulli_within, paired_sample_size, samples_plan

N_ITEMS, K, GAP = 200, 4, 0.1


def _samples(seed: int) -> dict[str, np.ndarray]:
    """Three models, K 0/1 samples on each item: per-item means and sample variances."""
    rng = np.random.default_rng(seed)
    base = rng.beta(1.5, 1.5, N_ITEMS)
    out = {}
    for name, shift in (("org/rep-a", 0.1), ("org/rep-b", 0.0), ("org/rep-c", -0.1)):
        p = np.clip(base + shift + rng.normal(0, 0.2, N_ITEMS), 0, 1)  # item-specific part
        draws = rng.random((N_ITEMS, K)) < p[:, None]
        out[name] = draws
    return out


@pytest.fixture()
def bench(client: TestClient) -> tuple[str, dict[str, np.ndarray]]:
    items = [{"id": f"q{i}"} for i in range(N_ITEMS)]
    r = client.post("/v1/benchmarks", json={"name": "rep-plan", "items": items})
    assert r.status_code == 201, r.text
    vid = r.json()["id"]
    draws = _samples(3503)
    for name, x in draws.items():
        body = {"model": name, "correct": x.mean(axis=1).tolist(), "samples": K}
        if name != "org/rep-c":  # c uploads no within-item variances
            body["within_variance"] = x.var(axis=1, ddof=1).tolist()
        up = client.post(f"/v1/benchmarks/{vid}/results", json=body)
        assert up.status_code == 201, up.text
        assert up.json()["samples_per_item"] == K
    return vid, draws


def _expected(a: np.ndarray, b: np.ndarray, uploaded: bool):
    xa = a.mean(axis=1).astype(np.float32).astype(np.float64)
    xb = b.mean(axis=1).astype(np.float32).astype(np.float64)
    if uploaded:
        wa, wb = (x.var(axis=1, ddof=1).astype(np.float32).astype(np.float64) for x in (a, b))
    else:
        wa, wb = bernoulli_within(xa, K), bernoulli_within(xb, K)
    return samples_plan(xa - xb, wa + wb, K, GAP, n_population=N_ITEMS)


@pytest.mark.parametrize(("other", "uploaded"), [("org/rep-b", True), ("org/rep-c", False)])
def test_plan_carries_items_x_samples(
    client: TestClient, bench: tuple[str, dict[str, np.ndarray]], other: str, uploaded: bool
) -> None:
    vid, draws = bench
    params = {"gap": GAP, "model_a": "org/rep-a", "model_b": other}
    r = client.get(f"/v1/benchmarks/{vid}/plan", params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    block = body["samples"]
    core = _expected(draws["org/rep-a"], draws[other], uploaded)
    assert block["k"] == K
    assert block["within_variance_source"] == ("uploaded" if uploaded else "bernoulli")
    assert block["observed"] == pytest.approx(core.observed, rel=1e-6)
    assert block["var_between"] == pytest.approx(core.var_between, rel=1e-6, abs=1e-9)
    assert block["within"] == pytest.approx(core.within, rel=1e-6)
    assert block["within_term"] == pytest.approx(core.within / K, rel=1e-6)
    assert block["limit_k"] == core.limit_k and block["floored"] == core.floored
    assert [row["k"] for row in block["rows"]] == [1, 2, 4, 8, 16]
    assert [row["n_items"] for row in block["rows"]] == core.n.tolist()
    assert [row["samples"] for row in block["rows"]] == (core.n * core.ks).tolist()
    assert [row["omega2"] for row in block["rows"]] == pytest.approx(core.omega2.tolist())
    # n counts items: at the stored K it is the significance answer's item count, never N * K
    assert not block["floored"] and block["limit_k"] is not None
    at_k = block["rows"][2]
    assert at_k["n_items"] == body["significance"]["n"] <= N_ITEMS
    floor = int(paired_sample_size(GAP, core.var_between, n_population=N_ITEMS))
    assert f"no number of samples gets below {floor} items" in block["explanation"]


def test_no_samples_block_without_a_k_sample_pair(
    client: TestClient, bench: tuple[str, dict[str, np.ndarray]]
) -> None:
    vid, draws = bench
    single = np.asarray(draws["org/rep-b"][:, 0], dtype=int).tolist()
    up = client.post(f"/v1/benchmarks/{vid}/results", json={"model": "org/one", "correct": single})
    assert up.status_code == 201, up.text
    url = f"/v1/benchmarks/{vid}/plan"
    pair = client.get(url, params={"gap": GAP, "model_a": "org/rep-a", "model_b": "org/one"})
    assert pair.status_code == 200, pair.text
    assert "samples" not in pair.json()
    assert "samples" not in client.get(url, params={"gap": GAP}).json()
