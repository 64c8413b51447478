"""Evaluation sessions end to end over HTTP on Postgres with a real worker: an IRT policy
(``fluid``) before the benchmark's IRT fit exists answers 202 with the fit job (single flight),
the worker fits and stores it, then the session runs to its decision with the design-based
confidence sequence (every answer ``basis: "design"``, the intervals those of the engine replayed
offline from the seed, the values and the stored fit); the default ``assisted`` and ``random`` run
beside it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.core.sequential.fluid import ItemBank
from app.core.sequential.policies import (
    policy_draw,
    policy_init,
    policy_interval,
    policy_update,
)
from app.db.models import EvaluationSession, IrtFit, Job
from app.services.catalog.irt_fits import IRT_DIMS
from app.services.evaluation.sessions import unpack_state
from tests.api._subset_data import committed_with_cleanup, gpqa
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]
NEW_ROW = 210  # a GPQA model that is not stored: the one being evaluated


@pytest.fixture
def stored(committed_sessionmaker: sessionmaker[Session], cleanup: Cleanup):
    return committed_with_cleanup(committed_sessionmaker, cleanup, n_models=30)


def _answer_all(client: TestClient, body: dict, truth: np.ndarray, ids: list[str]) -> dict:
    while body["state"] == "open":
        items = body["next_items"]
        r = client.post(
            f"/v1/sessions/{body['id']}/results",
            json={
                "model": body["model"],
                "results": {it["item_id"]: float(truth[ids.index(it["item_id"])]) for it in items},
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
    return body


def test_irt_and_random_sessions_end_to_end(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
    stored,
) -> None:
    truth = gpqa()["correct"][NEW_ROW].astype(float)
    acc = stored.correct.mean(axis=1)
    b = int(np.argmax(np.abs(truth.mean() - acc)))
    delta = truth.mean() - acc[b]
    assert abs(delta) >= 0.15
    url = f"/v1/benchmarks/{stored.version_id}/sessions"
    req = {"model": "new/model", "baseline": stored.names[b], "policy": "fluid", "batch_size": 10}
    r = committed_client.post(url, json=req)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    cleanup(Job, uuid.UUID(job_id))
    assert r.json()["kind"] == "irt_fit" and r.headers["Location"] == f"/v1/jobs/{job_id}"
    again = committed_client.post(url, json=req)
    if again.status_code == 202:  # still queued/running: the same job, not a second one
        assert again.json()["id"] == job_id
    done = wait_for_job(lambda: committed_client.get(f"/v1/jobs/{job_id}").json(), timeout=120)
    assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    assert done["result"]["n_models"] == 30 and done["result"]["dims"] == IRT_DIMS
    with committed_sessionmaker() as s:
        fit = s.get(IrtFit, stored.version_id)
        assert fit is not None and fit.job_id == uuid.UUID(job_id)
        a = np.frombuffer(fit.a, dtype="<f8").reshape(-1, fit.dims)
        assert a.shape == (448, IRT_DIMS) and np.all(np.isfinite(a))
        bank = ItemBank.from_arrays(a, np.frombuffer(fit.offset, dtype="<f8"))
    r = committed_client.post(url, json={**req, "seed": 11})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["estimate"]["basis"] == "design" and len(body["next_items"]) == 10
    final = _answer_all(committed_client, body, truth, stored.item_ids)
    hist = committed_client.get(f"/v1/sessions/{body['id']}").json()["history"]
    assert all(h["estimate"]["basis"] == h["difference"]["basis"] == "design" for h in hist)
    assert len({p for h in hist for p in h.get("items", [])}) == 0  # item positions stay private
    assert [h["items_used"] for h in hist] == list(range(10, final["items_used"] + 1, 10))
    assert final["state"] in ("decided", "exhausted")
    if final["state"] == "decided":
        assert final["decision"] == ("better" if delta > 0 else "worse")
    # the offline engine, replayed from the seed, the values and the stored fit, gives the same
    # draws and the same intervals (batch j draws with default_rng([seed, j]))
    st = policy_init("fluid", 448, bank=bank)
    pos = {iid: k for k, iid in enumerate(stored.item_ids)}
    served = [pos[it["item_id"]] for it in body["next_items"]]
    used, thetas = 0, []
    for j, h in enumerate(hist):
        k, used = h["items_used"] - used, h["items_used"]
        thetas.append(st.theta[0].copy())
        rec = policy_draw(st, bank, k, np.random.default_rng([11, j]).random((1, k)))
        if j == 0:
            assert rec.items[0].tolist() == served
        policy_update(st, bank, rec, truth[rec.items], inplace=True)
        lo, hi = policy_interval(st)
        assert h["estimate"]["lower"] == pytest.approx(lo[0], abs=1e-12)
        assert h["difference"]["upper"] == pytest.approx(hi[0] - acc[b], abs=1e-12)
    # the stored prediction inputs (the ability behind each batch) are the replay's
    with committed_sessionmaker() as s:
        row = s.get(EvaluationSession, uuid.UUID(body["id"]))
        stored_theta = unpack_state(row.engine_state)["inputs"]["theta"]
    np.testing.assert_allclose(stored_theta[: len(thetas)], np.array(thetas), atol=1e-10)
    # the default policy for benchmark accuracy (assisted: uniform draws, IRT predictions) and
    # random beside it (with a baseline and no estimand a session is generalized, policy random)
    default = {**{k: v for k, v in req.items() if k != "policy"}, "estimand": "benchmark"}
    for spec in (default, {**default, "policy": "random"}):
        r = committed_client.post(url, json={**spec, "seed": 4})
        assert r.status_code == 201, r.text
        assert r.json()["policy"] == spec.get("policy", "assisted")
        final_r = _answer_all(committed_client, r.json(), truth, stored.item_ids)
        assert final_r["state"] == "decided" and final_r["difference"]["basis"] == "design"
        assert final_r["decision"] == ("better" if delta > 0 else "worse")
