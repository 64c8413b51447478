"""One-sided session goals over HTTP (Postgres): ``noninferior`` and ``superior`` on real GPQA.

Oracle: the one-sided tests of :mod:`app.core.sequential.gating.one_sided` replayed offline on the same
values in the same (seeded) order: the service must decide at the same batch, the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.sequential.gating.one_sided import (
    goal_decision,
    goal_tests,
    one_sided_init,
    one_sided_update,
    uniform_record,
)
from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    s = seed_gpqa(db_session, n_models=12)
    db_session.commit()
    return s


def _pair(seeded: Seeded, sign: int) -> tuple[int, int]:
    acc = seeded.correct.mean(axis=1)
    gaps = sign * (acc[:, None] - acc[None, :])
    i, j = np.unravel_index(np.argmax(gaps), gaps.shape)
    return int(i), int(j)


def _run(client: TestClient, body: dict, truth: np.ndarray, ids: list[str]) -> dict:
    while body["state"] == "open":
        items = body["next_items"]
        payload = {
            "model": body["model"],
            "item_ids": [it["item_id"] for it in items],
            "correct": [float(truth[ids.index(it["item_id"])]) for it in items],
        }
        r = client.post(f"/v1/sessions/{body['id']}/results", json=payload)
        assert r.status_code == 200, r.text
        body = r.json()
    return body


def _offline(goal, a, b_mean, margin, seed, batch):
    """(decision, items) of the same tests on the same order, read after every batch."""
    n = a.size
    perm = np.random.default_rng(seed).permutation(n)[None, :]
    st = one_sided_init(n, *goal_tests(goal, b_mean, margin, 0.05))
    while st.t[0] < n:
        rec, live = uniform_record(np.zeros((1, n)), perm, st.t, batch)
        one_sided_update(st, rec, np.where(live, a[rec.items], 0.0), live=live, inplace=True)
        decision = goal_decision(st, goal)
        if decision != "undecided":
            return decision, int(st.t[0])
    return goal_decision(st, goal), n


@pytest.mark.parametrize(
    "goal, sign, margin, expected",
    [
        ("noninferior", 1, 0.02, "noninferior"),
        ("noninferior", -1, 0.02, "regressed"),
        ("superior", 1, None, "superior"),
    ],
)
def test_one_sided_goal_decides_as_the_offline_tests(
    client: TestClient, seeded: Seeded, goal, sign, margin, expected
) -> None:
    a, b = _pair(seeded, sign)
    truth_a, truth_b = seeded.correct[a].astype(float), seeded.correct[b].astype(float)
    body = {"model": seeded.names[a], "baseline": seeded.names[b], "goal": goal,
            "policy": "random", "batch_size": 20, "seed": 5}  # fmt: skip
    if margin is not None:
        body["margin"] = margin
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/sessions", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["goal"] == goal
    final = _run(client, r.json(), truth_a, seeded.item_ids)
    assert final["state"] == "decided" and final["decision"] == expected
    want = _offline(goal, truth_a, truth_b.mean(), margin, 5, 20)
    assert (final["decision"], final["items_used"]) == want
    again = client.get(f"/v1/sessions/{final['id']}").json()
    assert again["decision"] == expected
    bounds = again["one_sided"]
    threshold = -(margin or 0.0) if goal == "noninferior" else (margin or 0.0)
    assert bounds["threshold"] == pytest.approx(threshold)
    if expected in ("noninferior", "superior"):
        assert bounds["lower"] > threshold  # the reported bound agrees with the decision
    else:
        assert bounds["upper"] < threshold
    assert bounds["lower"] <= final["difference"]["value"] + 1e-9 <= bounds["upper"] + 2e-9
    page = client.get(f"/ui/sessions/{final['id']}")
    assert page.status_code == 200 and 'id="one-sided"' in page.text


@pytest.mark.parametrize(
    "body, field",
    [
        ({"goal": "noninferior"}, "margin"),
        ({"goal": "noninferior", "margin": 0.02, "baseline": None}, "baseline"),
        ({"goal": "superior", "margin": 1.5}, "margin"),
        ({"goal": "precision", "precision": 0.05, "margin": 0.02}, "margin"),
        ({"goal": "noninferior", "margin": 0.02, "estimand": "generalized"}, "estimand"),
    ],
)
def test_one_sided_goal_bad_input_names_the_field_and_creates_nothing(
    client: TestClient, seeded: Seeded, body, field
) -> None:
    base = {"model": seeded.names[0], "baseline": seeded.names[1], "policy": "random"}
    r = client.post(f"/v1/benchmarks/{seeded.version_id}/sessions", json={**base, **body})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert any(e["loc"][-1] == field for e in r.json()["errors"]), r.json()
    listed = client.get(f"/v1/benchmarks/{seeded.version_id}/sessions").json()
    assert listed["items"] == []
