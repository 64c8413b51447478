"""Session budgets (max_cost / max_tokens) and cost-aware draws over HTTP (Postgres).

SYNTHETIC costs on REAL GPQA correctness (GPQA has no per-item costs): item ``i`` costs
``round(10 * (1 + 9 * i / (N - 1)))`` output tokens x a per-model factor, 10x from the cheapest item to the
dearest.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.sequential.active import DrawRecord
from app.db.models import EvaluationSession, JobStatus
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results
from app.services.evaluation.sessions import unpack_state
from tests.api._subset_data import gpqa
from worker.runner import execute_job

N = 60
ITEM_COST = np.round(10 * (1 + 9 * np.arange(N) / (N - 1)))


@pytest.fixture
def costly(db_session: Session):
    data = gpqa()
    correct = data["correct"][:10, :N].astype(np.uint8)
    ids = [str(x) for x in data["item_ids"][:N]]
    version, _ = create_version(db_session, f"gpqa-cost-{uuid.uuid4().hex[:8]}", ids, ["g"] * N)
    names = [f"cost-m{i}" for i in range(10)]
    for i, name in enumerate(names):
        costs = None
        if i < 8:  # two models without costs: left out of the per-item median
            costs = {"output_tokens": np.round(ITEM_COST * (0.8 + 0.05 * i)).tolist()}
        parsed = parse_columnar(correct[i].tolist(), costs=costs)
        store_results(db_session, version.id, ModelCreate(name=name), parsed)
    db_session.commit()
    return version.id, names, correct, ids


@pytest.fixture
def factory(db_session: Session) -> sessionmaker[Session]:
    """Sessions inside the test's transaction (the worker's job runs in-process)."""
    return sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )


def _post(client, sid, body, truth, ids, tokens=None):
    items = [it["item_id"] for it in body["next_items"]]
    payload = {
        "model": body["model"],
        "item_ids": items,
        "correct": [float(truth[ids.index(i)]) for i in items],
    }
    if tokens is not None:
        payload["costs"] = {"output_tokens": [float(tokens[ids.index(i)]) for i in items]}
    r = client.post(f"/v1/sessions/{sid}/results", json=payload)
    assert r.status_code == 200, r.text
    return r.json()


def test_budget_stops_within_one_batch_and_labels_its_source(
    client: TestClient, db_session: Session, costly
) -> None:
    vid, names, correct, ids = costly
    a, b = 8, 9  # close enough not to decide within the budget
    budget = 600.0
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": names[a],
            "baseline": names[b],
            "policy": "random",
            "batch_size": 5,
            "seed": 4,
            "max_cost": budget,
            "cost_unit": "tokens",
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    sid = body["id"]
    (bud,) = body["budgets"]
    assert bud["unit"] == "tokens" and bud["limit"] == budget and bud["spent"] == 0
    assert not body["cost_aware"] and bud["predicted_per_item"] > 0
    # the candidate reports its own tokens on the first batch only: measured, then predicted
    own = np.round(ITEM_COST * 1.5)
    body = _post(client, sid, body, correct[a], ids, tokens=own)
    assert body["budgets"][0]["spent_source"] == "measured on this candidate"
    spent_first = body["budgets"][0]["spent"]
    while body["state"] == "open":
        body = _post(client, sid, body, correct[a], ids)
    bud = body["budgets"][0]
    assert body["state"] == "exhausted" and body["decision"] == "undecided"
    # a spent budget is INCONCLUSIVE, named as such, with the budget that ran out
    assert body["outcome"] == "inconclusive" and body["stopped_by"] == "budget"
    assert body["conclusion"].startswith("Inconclusive (the tokens budget ran out)")
    assert bud["exhausted"] and bud["spent"] >= budget
    assert bud["spent"] <= budget + np.sort(ITEM_COST * 1.2)[-5:].sum()  # one batch, worst case
    assert "measured on this candidate (5 items)" in bud["spent_source"]
    assert "predicted from stored models" in bud["spent_source"]
    assert body["items_used"] < N and spent_first > 0
    # the spending is the measured first batch plus the stored per-item medians of the rest
    row = db_session.get(EvaluationSession, uuid.UUID(sid))
    db_session.refresh(row)
    served = np.frombuffer(row.order, "<i4")[: body["items_used"]]
    median = np.median(np.round(ITEM_COST[None, :] * (0.8 + 0.05 * np.arange(8))[:, None]), 0)
    expect = own[served[:5]].sum() + median[served[5:]].sum()
    assert bud["spent"] == pytest.approx(expect, rel=1e-6)
    page = client.get(f"/ui/sessions/{sid}")
    assert page.status_code == 200 and "Cost (tokens)" in page.text and "used up" in page.text
    assert "INCONCLUSIVE</strong>: a cost budget ran out" in page.text


def test_cost_aware_draws_favour_cheap_items_and_replay(
    client: TestClient, db_session: Session, costly
) -> None:
    vid, names, _, _ = costly
    spec = {
        "model": names[0],
        "baseline": names[1],
        "policy": "random",
        "batch_size": 30,
        "seed": 11,
        "cost_aware": True,
        "cost_unit": "output_tokens",
        "max_tokens": 1e6,
    }
    one = client.post(f"/v1/benchmarks/{vid}/sessions", json=spec)
    two = client.post(f"/v1/benchmarks/{vid}/sessions", json=spec)
    assert one.status_code == 201, one.text
    b1, b2 = one.json(), two.json()
    assert b1["cost_aware"] and [len(x["budgets"]) for x in (b1, b2)] == [2, 2]
    assert [i["item_id"] for i in b1["next_items"]] == [i["item_id"] for i in b2["next_items"]]
    row = db_session.get(EvaluationSession, uuid.UUID(b1["id"]))
    rec = DrawRecord.from_dict(unpack_state(row.engine_state)["draws"])
    # pi of the first draw: (1 - 0.4) c^-1/2 / sum + 0.4 / N over the stored medians
    med = np.median(np.round(ITEM_COST[None, :] * (0.8 + 0.05 * np.arange(8))[:, None]), 0)
    w = med**-0.5
    pi = 0.6 * w / w.sum() + 0.4 / N
    assert rec.prob[0, 0] == pytest.approx(pi[rec.items[0, 0]], rel=1e-9)
    assert np.mean(rec.items[0] < N // 2) > 0.5  # cheaper half drawn more often
    # a cost-aware session needs stored costs in its unit
    bad = client.post(
        f"/v1/benchmarks/{vid}/sessions", json={**spec, "cost_unit": "usd", "max_tokens": None}
    )
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"][-1] == "cost_aware"


def test_plan_carries_the_expected_cost_of_its_size(client: TestClient, costly) -> None:
    vid, _, _, _ = costly
    r = client.get(f"/v1/benchmarks/{vid}/plan", params={"gap": 0.2})
    assert r.status_code == 200, r.text
    body = r.json()
    n = body["size"]
    assert n is not None
    (cost,) = body["cost"]
    med = np.median(np.round(ITEM_COST[None, :] * (0.8 + 0.05 * np.arange(8))[:, None]), 0)
    # brute-force oracle: the mean and sd of the total over many random n-subsets
    gen = np.random.default_rng(0)
    draws = gen.permuted(np.tile(np.arange(N), (20_000, 1)), axis=1)[:, :n]
    totals = med[draws].sum(axis=1)
    assert cost["unit"] == "output_tokens" and cost["expected"] == pytest.approx(n * med.mean())
    assert cost["sd"] == pytest.approx(totals.std(), rel=0.03)
    assert cost["source"].startswith("predicted from stored models (json cost arrays)")


def test_subset_export_carries_its_expected_cost(
    client: TestClient, costly, factory: sessionmaker[Session]
) -> None:
    vid, _, _, _ = costly
    r = client.post(
        f"/v1/benchmarks/{vid}/subsets", json={"method": "random", "size": 12, "seed": 3}
    )
    assert r.status_code == 202, r.text
    assert execute_job(factory, uuid.UUID(r.json()["id"])) is JobStatus.succeeded
    again = client.post(
        f"/v1/benchmarks/{vid}/subsets", json={"method": "random", "size": 12, "seed": 3}
    )
    sid = again.headers["location"].rsplit("/", 1)[-1]
    body = client.get(f"/v1/subsets/{sid}").json()
    pos = np.array([it["position"] for it in body["items"]])
    per_model = np.round(ITEM_COST[None, :] * (0.8 + 0.05 * np.arange(8))[:, None])
    totals = per_model[:, pos].sum(axis=1)  # the 8 models with costs
    (cost,) = body["cost"]
    assert cost["unit"] == "output_tokens"
    assert cost["expected"] == pytest.approx(totals.mean())
    assert cost["sd"] == pytest.approx(totals.std(ddof=1))
    assert cost["source"].startswith("predicted from 8 stored models")
