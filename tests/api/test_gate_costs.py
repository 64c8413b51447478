"""Cost budgets of release gates (max_cost / max_tokens) over HTTP (Postgres), issue 37.

SYNTHETIC costs on REAL GPQA correctness (GPQA has no per-item costs), as
``tests/api/test_session_costs.py``: item ``i`` of a benchmark costs ``round(10 * (1 + 9 * i /
(N - 1)))`` output tokens x a per-model factor. Two benchmarks on disjoint GPQA items (60 and 40),
ten models, eight of them with costs.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Gate
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results
from app.services.evaluation.sessions import unpack_state
from tests.api._subset_data import gpqa

SIZES = (60, 40)
FACTORS = 0.8 + 0.05 * np.arange(8)


def _item_cost(n: int) -> np.ndarray:
    return np.round(10 * (1 + 9 * np.arange(n) / (n - 1)))


def _median(n: int) -> np.ndarray:
    """The stored models' per-item median (what the gate predicts)."""
    return np.median(np.round(_item_cost(n)[None, :] * FACTORS[:, None]), 0)


@pytest.fixture
def costly(db_session: Session):
    data = gpqa()
    names = [f"gcost-m{i}" for i in range(10)]
    out = []
    start = 0
    for k, n in enumerate(SIZES):
        correct = data["correct"][:10, start : start + n].astype(np.uint8)
        ids = [str(x) for x in data["item_ids"][start : start + n]]
        start += n
        tag = uuid.uuid4().hex[:8]
        version, _ = create_version(db_session, f"gate-cost-{k}-{tag}", ids, ["g"] * n)
        for i, name in enumerate(names):
            costs = None
            if i < 8:  # two models without costs: left out of the per-item median
                costs = {"output_tokens": np.round(_item_cost(n) * FACTORS[i]).tolist()}
            parsed = parse_columnar(correct[i].tolist(), costs=costs)
            store_results(db_session, version.id, ModelCreate(name=name), parsed)
        out.append({"id": str(version.id), "correct": correct, "ids": ids})
    db_session.commit()
    return names, out


def _body(names, benches, **extra) -> dict:
    return {
        "model": names[8],
        "baseline": names[9],
        "margin": 0.01,
        "benchmarks": [{"benchmark": b["id"]} for b in benches],
        "batch_size": 5,
        "seed": 3,
        **extra,
    }


def _results(gate: dict, benches, cand: int = 8) -> list[dict]:
    by_id = {b["id"]: b for b in benches}
    keys = {b["benchmark"]: by_id[str(b["version_id"])] for b in gate["benchmarks"]}
    out = []
    for key, items in gate["next_round"]["items"].items():
        b = keys[key]
        item_ids = [it["item_id"] for it in items]
        truth = [float(b["correct"][cand][b["ids"].index(i)]) for i in item_ids]
        out.append({"benchmark": key, "item_ids": item_ids, "correct": truth})
    return out


def _post(client: TestClient, gate: dict, benches) -> dict:
    rnd = gate["next_round"]["round"]
    r = client.post(
        f"/v1/gates/{gate['id']}/results", json={"round": rnd, "results": _results(gate, benches)}
    )
    assert r.status_code == 200, r.text
    return r.json()


def _served_cost(gate: dict, served: dict[str, list[int]]) -> float:
    """The predicted cost of the items the gate's rounds served (positions per benchmark)."""
    sizes = {b["benchmark"]: n for b, n in zip(gate["benchmarks"], SIZES, strict=True)}
    return sum(float(_median(sizes[k])[np.asarray(p, dtype=int)].sum()) for k, p in served.items())


def test_budget_stops_inconclusive_within_one_round(
    client: TestClient, db_session: Session, costly
) -> None:
    names, benches = costly
    limit = 1500.0
    r = client.post("/v1/gates", json=_body(names, benches, max_tokens=limit))
    assert r.status_code == 201, r.text
    gate = r.json()
    (bud,) = gate["budgets"]
    assert bud["unit"] == "tokens" and bud["limit"] == limit and bud["spent"] == 0
    assert bud["spent_source"] == "nothing spent yet" and not bud["exhausted"]
    assert bud["predicted_per_item"] > 0
    served: dict[str, list[int]] = {}
    while gate["state"] == "open":
        before = gate["budgets"][0]["spent"]
        assert before < limit  # a round is served only while the budget lasts
        rnd = gate["next_round"]
        worst = 0.0  # this round's worst case: its counts' dearest predicted items
        for j, b in enumerate(gate["benchmarks"]):
            c = len(rnd["items"].get(b["benchmark"], []))
            worst += float(np.sort(_median(SIZES[j]))[::-1][:c].sum())
        for key, items in rnd["items"].items():
            served.setdefault(key, []).extend(it["position"] for it in items)
        gate = _post(client, gate, benches)
        assert gate["budgets"][0]["spent"] - before <= worst + 1e-9
    bud = gate["budgets"][0]
    assert gate["state"] == "exhausted" and gate["outcome"] == "inconclusive"
    assert gate["next_round"] is None and gate["regressed"] == []
    assert bud["exhausted"] and limit <= bud["spent"] and bud["predicted_per_item"] is None
    assert bud["spent_source"].startswith("predicted from stored models")
    assert gate["items_used"] < sum(SIZES)
    assert bud["spent"] == pytest.approx(_served_cost(gate, served))
    page = client.get(f"/ui/gates/{gate['id']}")
    assert page.status_code == 200
    assert "Cost (tokens): spent" in page.text and "used up" in page.text
    assert "a cost budget ran out" in page.text
    # the closed gate takes no more results
    again = client.post(f"/v1/gates/{gate['id']}/results", json={"round": gate["round"] + 1,
                                                                 "results": []})  # fmt: skip
    assert again.status_code == 409


def test_results_files_with_costs_count_measured(
    client: TestClient, db_session: Session, costly
) -> None:
    names, benches = costly
    r = client.post(
        "/v1/gates", json=_body(names, benches, max_cost=1e5, cost_unit="output_tokens")
    )
    assert r.status_code == 201, r.text
    gate = r.json()
    rows, spent = ["item_id,correct,output_tokens"], 0.0
    for res in _results(gate, benches):
        for i, (item, value) in enumerate(zip(res["item_ids"], res["correct"], strict=True)):
            rows.append(f"{item},{int(value)},{100 + i}")
            spent += 100 + i
    data = ("\n".join(rows) + "\n").encode()
    url = f"/v1/gates/{gate['id']}/results/files"
    files = [("file", ("round.csv", data, "text/csv"))]
    r = client.post(url, params={"round": 1}, files=files)
    assert r.status_code == 200, r.text
    gate = r.json()
    (bud,) = gate["budgets"]
    assert bud["unit"] == "output_tokens" and bud["spent"] == pytest.approx(spent)
    assert bud["spent_source"] == "measured on this candidate"
    # a resend of the answered round is a replay: nothing is paid twice
    again = client.post(url, params={"round": 1}, files=files)
    assert again.status_code == 200 and again.headers.get("Idempotency-Replayed") == "true"
    assert again.json()["budgets"][0]["spent"] == pytest.approx(spent)
    # a JSON round carries no costs: the prediction
    n_round = sum(len(v) for v in gate["next_round"]["items"].values())
    gate = _post(client, gate, benches)
    bud = gate["budgets"][0]
    assert bud["spent"] > spent
    assert bud["spent_source"] == (
        f"measured on this candidate ({len(rows) - 1} items); predicted from stored models "
        f"(per-item median over the models that report it) ({n_round} items)"
    )


def test_bad_cost_input_names_the_field_and_creates_nothing(
    client: TestClient, db_session: Session, costly
) -> None:
    names, benches = costly
    count = db_session.scalar(select(func.count()).select_from(Gate))
    cases = [
        ({"max_cost": 0}, "max_cost"),
        ({"max_cost": -1.0}, "max_cost"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_cost": 10.0, "cost_unit": "eur"}, "cost_unit"),
        ({"max_cost": 1e5, "cost_unit": "tokens", "max_tokens": 1e5}, "max_tokens"),
        ({"max_cost": 1.0, "cost_unit": "usd"}, "max_cost"),  # no stored usd anywhere
        ({"max_tokens": 50.0}, "max_tokens"),  # below one round's worst case
    ]
    for extra, field in cases:
        r = client.post("/v1/gates", json=_body(names, benches, **extra))
        assert r.status_code == 422, (extra, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        locs = [e["loc"][-1] for e in r.json()["errors"]]
        assert field in locs, (extra, r.json())
    usd = client.post("/v1/gates", json=_body(names, benches, max_cost=1.0)).json()
    assert "upload results with usd costs first" in usd["errors"][0]["message"]
    assert len(usd["errors"]) == 2  # one per benchmark
    low = client.post("/v1/gates", json=_body(names, benches, max_tokens=50.0)).json()
    worst = sum(float(np.sort(_median(n))[::-1][:5].sum()) for n in SIZES)
    assert f"{worst:.6g}" in low["detail"]
    ok = client.post("/v1/gates", json=_body(names, benches, max_tokens=worst))
    assert ok.status_code == 201, ok.text
    assert db_session.scalar(select(func.count()).select_from(Gate)) == count + 1


def test_a_gate_without_cost_fields_is_unchanged(
    client: TestClient, db_session: Session, costly
) -> None:
    names, benches = costly
    plain = client.post("/v1/gates", json=_body(names, benches, budget=40)).json()
    rich = client.post("/v1/gates", json=_body(names, benches, budget=40, max_tokens=1e9)).json()
    assert plain["budgets"] == [] and len(rich["budgets"]) == 1
    row = db_session.get(Gate, uuid.UUID(plain["id"]))
    assert row is not None and "cost" not in unpack_state(row.engine_state)
    # a budget that never runs out changes nothing: the same rounds, items and outcome
    while plain["state"] == "open":
        assert plain["next_round"]["items"] == rich["next_round"]["items"]
        plain, rich = _post(client, plain, benches), _post(client, rich, benches)
    skip = {"id", "budgets", "created_at", "updated_at", "history"}
    assert {k: v for k, v in plain.items() if k not in skip} == {
        k: v for k, v in rich.items() if k not in skip
    }
    assert rich["budgets"][0]["spent"] > 0 and not rich["budgets"][0]["exhausted"]
