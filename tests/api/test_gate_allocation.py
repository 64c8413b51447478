"""Cost-aware allocation of a release gate's rounds (``allocation="cost"``) over HTTP (Postgres),
issue 37 item 4.

SYNTHETIC costs on REAL GPQA correctness, as ``tests/api/test_gate_costs.py``: three benchmarks on
disjoint GPQA items (60, 40 and 30), ten models; on the first two eight models report output
tokens, ten times as many per item on the second; the third has no costs at all.
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

SIZES = (60, 40, 30)
SCALE = (1.0, 10.0, None)  # tokens per item x this; None: no stored costs
FACTORS = 0.8 + 0.05 * np.arange(8)


def _item_cost(n: int, scale: float) -> np.ndarray:
    return np.round(scale * 10 * (1 + np.arange(n) % 5))


def _mean_median(n: int, scale: float) -> float:
    """The mean over items of the stored models' per-item median (the gate's c_k)."""
    return float(np.median(np.round(_item_cost(n, scale)[None] * FACTORS[:, None]), 0).mean())


@pytest.fixture
def suite(db_session: Session):
    data = gpqa()
    names = [f"galloc-m{i}" for i in range(10)]
    out, start = [], 0
    for k, (n, scale) in enumerate(zip(SIZES, SCALE, strict=True)):
        correct = data["correct"][:10, start : start + n].astype(np.uint8)
        ids = [str(x) for x in data["item_ids"][start : start + n]]
        start += n
        version, _ = create_version(
            db_session, f"gate-alloc-{k}-{uuid.uuid4().hex[:8]}", ids, ["g"] * n
        )
        for i, name in enumerate(names):
            costs = None
            if scale is not None and i < 8:
                costs = {"output_tokens": np.round(_item_cost(n, scale) * FACTORS[i]).tolist()}
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
        "batch_size": 6,
        "seed": 3,
        "cost_unit": "output_tokens",
        **extra,
    }


def _post(client: TestClient, gate: dict, benches) -> dict:
    by_id = {b["id"]: b for b in benches}
    keys = {b["benchmark"]: by_id[str(b["version_id"])] for b in gate["benchmarks"]}
    results = []
    for key, items in gate["next_round"]["items"].items():
        b = keys[key]
        ids = [it["item_id"] for it in items]
        results.append(
            {
                "benchmark": key,
                "item_ids": ids,
                "correct": [float(b["correct"][8][b["ids"].index(i)]) for i in ids],
            }
        )
    rnd = gate["next_round"]["round"]
    r = client.post(f"/v1/gates/{gate['id']}/results", json={"round": rnd, "results": results})
    assert r.status_code == 200, r.text
    return r.json()


def _counts(gate: dict) -> list[int]:
    items = gate["next_round"]["items"]
    return [len(items.get(b["benchmark"], [])) for b in gate["benchmarks"]]


def test_cost_allocation_is_accepted_shown_and_favours_the_cheap_benchmark(
    client: TestClient, db_session: Session, suite
) -> None:
    names, benches = suite
    two = benches[:2]
    plain = client.post("/v1/gates", json=_body(names, two)).json()
    assert plain["allocation"] == "progress" and plain["allocation_unit"] is None
    assert [b["predicted_cost_per_item"] for b in plain["benchmarks"]] == [None, None]
    assert _counts(plain) == [6, 6]
    r = client.post("/v1/gates", json=_body(names, two, allocation="cost"))
    assert r.status_code == 201, r.text
    gate = r.json()
    assert gate["allocation"] == "cost" and gate["allocation_unit"] == "output_tokens"
    got = [b["predicted_cost_per_item"] for b in gate["benchmarks"]]
    want = [_mean_median(n, s) for n, s in zip(SIZES[:2], SCALE[:2], strict=True)]
    assert got == pytest.approx(want)
    cheap, dear = _counts(gate)
    assert cheap + dear == 12 and cheap > dear >= 1
    page = client.get(f"/ui/gates/{gate['id']}")
    assert page.status_code == 200 and "allocation cost" in page.text
    # the allocation and its costs are stored with the gate and kept round after round
    row = db_session.get(Gate, uuid.UUID(gate["id"]))
    assert row is not None
    parts = unpack_state(row.engine_state)
    assert str(parts["allocation"]["unit"]) == "output_tokens"
    assert str(parts["gate"]["allocation"]) == "cost"
    for _ in range(3):
        if gate["state"] != "open":
            break
        gate = _post(client, gate, two)
        assert gate["allocation"] == "cost"
        assert [b["predicted_cost_per_item"] for b in gate["benchmarks"]] == pytest.approx(want)
    assert "cost" not in unpack_state(db_session.get(Gate, uuid.UUID(plain["id"])).engine_state)


def test_bad_allocation_names_the_field_and_creates_nothing(
    client: TestClient, db_session: Session, suite
) -> None:
    names, benches = suite
    count = db_session.scalar(select(func.count()).select_from(Gate))
    cases = [
        (benches[:2], {"allocation": "cheapest"}),
        (benches[:2], {"allocation": "cost", "cost_unit": "usd"}),  # no stored usd anywhere
        (benches, {"allocation": "cost"}),  # the third benchmark has no stored costs
    ]
    replies = []
    for bs, extra in cases:
        r = client.post("/v1/gates", json=_body(names, bs, **extra))
        assert r.status_code == 422, (extra, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "allocation" in [e["loc"][-1] for e in r.json()["errors"]], r.json()
        replies.append(r.json())
    assert len(replies[1]["errors"]) == 2  # one per benchmark without usd
    assert "upload results with usd costs first" in replies[1]["errors"][0]["message"]
    (only,) = replies[2]["errors"]  # only the benchmark without costs
    assert "output_tokens" in only["message"]
    assert db_session.scalar(select(func.count()).select_from(Gate)) == count
