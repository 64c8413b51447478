"""Whether an IRT policy's predictions help (issue 38 item 2): ``predictions`` on a session.

REAL GPQA (40 stored models and their IRT fit); the candidates: a REAL GPQA model that is not
stored (the predictions help), and a SYNTHETIC one right exactly on the items most stored models
miss (unlike every stored model: the predictions add noise, and the session says so)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.sequential.policies import MIN_GAIN_ITEMS, prediction_gain
from tests.api._subset_data import Seeded, gpqa, seed_gpqa, store_irt_fit

NEW_ROW = 210  # a GPQA model that is not stored


@pytest.fixture
def fitted(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=40)
    store_irt_fit(db_session, seeded)
    db_session.commit()
    return seeded


def _run(client: TestClient, s: Seeded, truth: np.ndarray, batches: int) -> list[dict]:
    r = client.post(
        f"/v1/benchmarks/{s.version_id}/sessions",
        json={"model": "cand/x", "baseline": s.names[0], "estimand": "benchmark",
              "policy": "assisted", "batch_size": 15, "seed": 3},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    body, out = r.json(), [r.json()]
    pos = {iid: k for k, iid in enumerate(s.item_ids)}
    for _ in range(batches):
        if body["state"] != "open":
            break
        items = body["next_items"]
        r = client.post(
            f"/v1/sessions/{body['id']}/results",
            json={"model": "cand/x",
                  "results": {it["item_id"]: float(truth[pos[it["item_id"]]]) for it in items}},
        )  # fmt: skip
        assert r.status_code == 200, r.text
        body = r.json()
        out.append(body)
    return out


def test_predictions_report_whether_they_help(client: TestClient, fitted: Seeded) -> None:
    real = gpqa()["correct"][NEW_ROW].astype(float)
    steps = _run(client, fitted, real, 4)
    assert steps[0]["predictions"] is None and steps[1]["predictions"] is None  # < 20 answered
    rep = steps[-1]["predictions"]
    assert rep["items"] >= 30 and rep["recent_items"] == min(50, rep["items"])
    assert rep["helping"] and rep["ratio"] < 1 and "help" in rep["text"]
    # unlike every stored model: right exactly where most of them are wrong
    hard = (fitted.correct.mean(axis=0) < np.median(fitted.correct.mean(axis=0))).astype(float)
    last = _run(client, fitted, hard, 4)[-1]
    rep = last["predictions"]
    assert rep["items"] >= 30 and not rep["helping"] and rep["ratio"] > 1
    assert "not helping" in rep["text"] and "stays valid" in rep["text"]
    page = client.get(f"/ui/sessions/{last['id']}")  # the page says the same
    assert page.status_code == 200 and 'id="predictions"' in page.text
    assert "not helping" in page.text


def test_prediction_gain_against_its_definition() -> None:
    rng = np.random.default_rng(1)
    y = (rng.random(80) < 0.5).astype(float)
    f = np.clip(y * 0.6 + 0.2 + rng.normal(0, 0.05, 80), 0, 1)
    g = prediction_gain(y, f, recent=30)
    assert g["ratio"] == pytest.approx(np.var(y - f) / np.var(y), rel=1e-12)
    assert g["recent_ratio"] == pytest.approx(np.var(y[-30:] - f[-30:]) / np.var(y[-30:]))
    assert g["helping"] and g["items"] == 80 and g["recent_items"] == 30
    # help that stopped: good predictions first, then predictions that are the opposite
    f2 = np.concatenate([f[:50], 1 - f[50:]])
    g2 = prediction_gain(y, f2, recent=30)
    assert g2["recent_ratio"] > 1 and not g2["helping"]
    assert prediction_gain(y[: MIN_GAIN_ITEMS - 1], f[: MIN_GAIN_ITEMS - 1]) is None
