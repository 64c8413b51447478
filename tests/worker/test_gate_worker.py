"""A ``combined`` release gate end to end over HTTP on Postgres with a real worker (issue 34
item 3): before the benchmarks' IRT fits exist the creation answers 202 with a fit job and
creates nothing; the worker fits; the same request then creates the gate, which runs to the
outcome the offline engine gives on the same results, seed and stored item banks."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.sequential.fluid import ItemBank
from app.core.sequential.gating.gates import BENCH_STATES, OUTCOMES, run_gates
from app.db.models import AuditEvent, Gate, IrtFit, Job
from tests.api._subset_data import committed_with_cleanup, gpqa
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]
NEW_ROW = 210  # a GPQA model that is not stored: the candidate


def _bank(factory: sessionmaker[Session], version_id) -> ItemBank:
    with factory() as s:
        fit = s.get(IrtFit, version_id)
        assert fit is not None
        a = np.frombuffer(fit.a, dtype="<f8").reshape(-1, fit.dims)
        return ItemBank.from_arrays(a, np.frombuffer(fit.offset, dtype="<f8"))


def test_combined_gate_waits_for_the_fits_then_matches_the_offline_engine(
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
) -> None:
    suite = [
        committed_with_cleanup(committed_sessionmaker, cleanup, n_models=30, name=f"gate-irt-{k}")
        for k in (uuid.uuid4().hex[:6], uuid.uuid4().hex[:6])
    ]
    truth = gpqa()["correct"][NEW_ROW].astype(float)
    base = 3
    body = {
        "model": "new/gated",
        "baseline": suite[0].names[base],
        "margin": 0.05,
        "benchmarks": [{"benchmark": str(s.version_id)} for s in suite],
        "prediction": "combined",
        "batch_size": 30,
        "seed": 21,
    }
    with committed_sessionmaker() as s:
        gates_before = s.scalar(select(func.count()).select_from(Gate))
    created, seen = None, []

    def new_jobs(s: Session) -> set:
        versions = {str(x.version_id) for x in suite}
        rows = s.scalars(select(Job).where(Job.kind == "irt_fit"))
        return {str(j.id) for j in rows if j.params.get("version_id") in versions}

    for _ in range(4):  # one 202 per benchmark without a fit at most
        r = committed_client.post("/v1/gates", json=body)
        if r.status_code == 201:
            created = r.json()
            break
        assert r.status_code == 202, r.text
        job = r.json()
        cleanup(Job, uuid.UUID(job["id"]))
        assert job["kind"] == "irt_fit" and r.headers["Location"] == f"/v1/jobs/{job['id']}"
        with committed_sessionmaker() as s:  # a 202 creates no gate; the fit jobs it wrote
            assert s.scalar(select(func.count()).select_from(Gate)) == gates_before
            audited = s.scalars(select(AuditEvent).where(AuditEvent.action == "gate.create"))
            jobs = {e.target.get("irt_fit_job") for e in audited}
            if len(seen) == 0:  # the first 202 wrote (and audited) a fit job per benchmark
                assert job["id"] in jobs and len(jobs & new_jobs(s)) == len(suite), jobs
                for other in new_jobs(s) - {job["id"]}:
                    cleanup(Job, uuid.UUID(other))
        seen.append(job["id"])
        done = wait_for_job(lambda j=job: committed_client.get(f"/v1/jobs/{j['id']}").json(), 120)
        assert done["status"] == "succeeded", (done, celery_worker_process.log[-3000:])
    assert created is not None and created["prediction"] == "combined"
    cleanup(Gate, uuid.UUID(created["id"]))
    ids = [{iid: k for k, iid in enumerate(s.item_ids)} for s in suite]
    gate = created
    while gate["state"] == "open":
        rnd = gate["next_round"]
        results = [
            {
                "benchmark": name,
                "item_ids": [it["item_id"] for it in items],
                "correct": [float(truth[ids[0][it["item_id"]]]) for it in items],
            }
            for name, items in rnd["items"].items()
        ]
        r = committed_client.post(
            f"/v1/gates/{gate['id']}/results", json={"round": rnd["round"], "results": results}
        )
        assert r.status_code == 200, r.text
        gate = r.json()
    banks = [_bank(committed_sessionmaker, s.version_id) for s in suite]
    ref = run_gates(
        [truth, truth],
        [s.correct[base].astype(float) for s in suite],
        [0.05, 0.05],
        batch_size=30,
        seed=21,
        prediction="combined",
        banks=banks,
        bounds=True,
    )
    assert gate["outcome"] == OUTCOMES[int(ref.outcome[0])]
    got = {b["benchmark"]: b for b in gate["benchmarks"]}
    for j, b in enumerate(gate["benchmarks"]):
        assert b["items"] == int(ref.items[0, j])
        assert b["state"] == BENCH_STATES[int(ref.codes[0, j])]
        assert b["bound"] == pytest.approx(float(ref.bounds[0, j, 0]), abs=1e-12)
    assert len(got) == 2
