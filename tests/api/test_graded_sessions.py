"""Evaluation sessions on a benchmark of graded scores (issue 35, SYNTHETIC quarters): the
session answers with its default policy, and its intervals are the offline confidence sequence's
on the graded values (the CS takes any [0, 1] values)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.sequential.confidence_sequences import confidence_sequence
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results

N_MODELS, N_ITEMS = 30, 40


@pytest.fixture
def graded(db_session: Session):
    rng = np.random.default_rng(351)
    ability = np.linspace(-0.35, 0.35, N_MODELS)[:, None]
    scores = np.round(np.clip(rng.beta(0.7, 0.7, (N_MODELS, N_ITEMS)) + ability, 0, 1) * 4) / 4
    ids = [f"q{i:02d}" for i in range(N_ITEMS)]
    version, _ = create_version(db_session, f"graded-{uuid.uuid4().hex[:8]}", ids, ["t"] * N_ITEMS)
    names = [f"g-{m:02d}" for m in range(N_MODELS)]
    for name, row in zip(names, scores, strict=True):
        store_results(db_session, version.id, ModelCreate(name=name), parse_columnar(row.tolist()))
    db_session.commit()
    return version.id, names, scores, ids


def test_a_session_between_graded_models_runs_to_the_end(client: TestClient, graded) -> None:
    vid, names, scores, ids = graded
    a, b = N_MODELS - 1, 0
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={"model": names[a], "baseline": names[b], "batch_size": 10, "seed": 2},
    )
    # the default answers on graded scores (201: a session; 202: the IRT fit it needs first,
    # fitted on the fractional scores)
    assert r.status_code in (201, 202), r.text
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": names[a],
            "baseline": names[b],
            "policy": "random",
            "estimand": "benchmark",
            "batch_size": 10,
            "seed": 2,
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    sid = body["id"]
    order = []
    while body["state"] == "open":
        items = body["next_items"]
        order += [ids.index(it["item_id"]) for it in items]
        payload = {
            "model": names[a],
            "item_ids": [it["item_id"] for it in items],
            "correct": [float(scores[a, ids.index(it["item_id"])]) for it in items],
        }
        r = client.post(f"/v1/sessions/{sid}/results", json=payload)
        assert r.status_code == 200, r.text
        body = r.json()
    delta = scores[a].mean() - scores[b].mean()
    hist = client.get(f"/v1/sessions/{sid}").json()["history"]
    last = hist[-1]["difference"]
    assert last["lower"] - 1e-9 <= delta <= last["upper"] + 1e-9
    if body["state"] == "decided":
        assert body["decision"] == ("better" if delta > 0 else "worse")
    path = confidence_sequence(scores[a][order], n_items=N_ITEMS)
    cols = np.arange(9, len(order), 10)
    np.testing.assert_allclose([h["estimate"]["lower"] for h in hist], path.lower[0, cols])
    np.testing.assert_allclose([h["estimate"]["upper"] for h in hist], path.upper[0, cols])


def test_pages_of_a_graded_benchmark_answer(client: TestClient, graded) -> None:
    vid, names, _, _ = graded
    assert client.get(f"/ui/benchmarks/{vid}").status_code == 200
    r = client.get(
        f"/ui/benchmarks/{vid}/pair",
        params={"model_a": names[-1], "model_b": names[0], "size": "20"},
    )
    assert r.status_code == 200, r.text[:500]
    assert "sign-flip" in r.text and names[-1] in r.text


def test_per_item_sample_counts_are_stored_and_drive_pass_at_k(db_session: Session) -> None:
    from dataclasses import replace

    from sqlalchemy import select

    from app.core.estimation.bounded import pass_at_k
    from app.db.models.model_result import ModelResult
    from app.services.selection.repeats import pass_at_k_block

    ids = [f"i{i}" for i in range(6)]
    version, _ = create_version(db_session, f"k-{uuid.uuid4().hex[:8]}", ids, ["t"] * 6)
    counts = np.array([4, 3, 4, 4, 2, 4], dtype=np.int32)
    correct = np.array([2, 1, 4, 0, 1, 3]) / counts
    base = parse_columnar(correct.tolist(), samples=4)
    parsed = replace(base, sample_counts=counts)
    store_results(db_session, version.id, ModelCreate(name="k-model"), parsed)
    db_session.flush()
    row = db_session.scalars(
        select(ModelResult).where(ModelResult.benchmark_version_id == version.id)
    ).one()
    assert row.samples_per_item == 4 and row.n_items == 6  # 6 items, not 21 samples
    np.testing.assert_array_equal(np.frombuffer(row.sample_counts, "<i4"), counts)
    block = pass_at_k_block(correct, counts.astype(float))
    assert [e.k for e in block] == [1, 2]  # up to the fewest samples of an item
    c = np.round(correct * counts)
    for e in block:
        assert e.value == pytest.approx(pass_at_k(counts, c, e.k).mean())
    assert pass_at_k_block(np.array([0.3, 0.5]), np.array([4.0, 4.0])) == []  # not 0/1 samples
