"""Release gates over HTTP (Postgres), issue 34: one decision for a suite of benchmarks.

Oracle: :func:`app.core.sequential.gating.gates.run_gates` (what ``benchslice gate --offline``
runs) on the same results, margins and seed: the service, one round per request, must come to
the same outcome with the same items, states and bounds on every benchmark.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.sequential.gating.gates import BENCH_STATES, OUTCOMES, run_gates
from app.db.models import AuditEvent, Gate
from tests.api._subset_data import Seeded, seed_gpqa
from tests.api._teams import auth_enabled, bearer, key, make_teams

PROBLEM = "application/problem+json"


@pytest.fixture
def suite(db_session: Session) -> list[Seeded]:
    """Two benchmarks: GPQA's 448 items, and the same models on a 300-item slice of it."""
    first = seed_gpqa(db_session, n_models=8, name="gpqa-gate-a")
    second = seed_gpqa(db_session, n_models=8, name="gpqa-gate-b", subtasks=False)
    db_session.commit()
    return [first, second]


def _pair(s: Seeded, gap: float) -> tuple[int, int]:
    """The (candidate, baseline) rows whose accuracy gap is closest to ``gap``."""
    acc = s.correct.mean(axis=1)
    diff = acc[:, None] - acc[None, :]
    np.fill_diagonal(diff, np.inf)
    i, j = np.unravel_index(np.argmin(np.abs(diff - gap)), diff.shape)
    return int(i), int(j)


def _drive(client: TestClient, gate: dict, truth: dict[str, np.ndarray], ids: dict) -> dict:
    while gate["state"] == "open":
        rnd = gate["next_round"]
        results = [
            {
                "benchmark": name,
                "item_ids": [it["item_id"] for it in items],
                "correct": [float(truth[name][ids[name][it["item_id"]]]) for it in items],
            }
            for name, items in rnd["items"].items()
        ]
        r = client.post(f"/v1/gates/{gate['id']}/results",
                        json={"round": rnd["round"], "results": results})  # fmt: skip
        assert r.status_code == 200, r.text
        gate = r.json()
    return gate


def _body(suite: list[Seeded], cand: int, base: int, **extra) -> dict:
    return {
        "model": suite[0].names[cand],
        "baseline": suite[0].names[base],
        "margin": 0.05,
        "benchmarks": [{"benchmark": str(s.version_id)} for s in suite],
        "batch_size": 40,
        "seed": 11,
        **extra,
    }


def _names(client: TestClient, suite: list[Seeded]) -> list[str]:
    return [client.get(f"/v1/benchmarks/{s.version_id}").json()["name"] for s in suite]


@pytest.mark.parametrize("gap, rule", [(0.0, "no_regression"), (-0.12, "no_regression"),
                                       (0.08, "no_regression_and_one_better")])  # fmt: skip
def test_gate_comes_to_the_offline_engines_outcome_round_by_round(
    client: TestClient, suite: list[Seeded], gap: float, rule: str
) -> None:
    cand, base = _pair(suite[0], gap)
    r = client.post("/v1/gates", json=_body(suite, cand, base, rule=rule))
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/v1/gates/{r.json()['id']}"
    gate = r.json()
    names = _names(client, suite)
    assert [b["benchmark"] for b in gate["benchmarks"]] == names
    assert gate["state"] == "open" and gate["round"] == 0
    assert set(gate["next_round"]["items"]) == set(names)
    truth = {n: s.correct[cand].astype(float) for n, s in zip(names, suite, strict=True)}
    ids = {n: {x: k for k, x in enumerate(s.item_ids)} for n, s in zip(names, suite, strict=True)}
    final = _drive(client, gate, truth, ids)
    run = run_gates([s.correct[cand].astype(float) for s in suite],
                    [s.correct[base].astype(float) for s in suite], [0.05, 0.05], rule=rule,
                    batch_size=40, seed=11, bounds=True)  # fmt: skip
    assert final["outcome"] == OUTCOMES[int(run.outcome[0])]
    assert final["state"] in ("decided", "exhausted") and final["next_round"] is None
    for j, row in enumerate(final["benchmarks"]):
        assert row["state"] == BENCH_STATES[int(run.codes[0, j])]
        assert row["items"] == int(run.items[0, j])
        assert row["bound"] == pytest.approx(float(run.bounds[0, j, 0]), abs=1e-12)
        assert row["upper"] == pytest.approx(float(run.bounds[0, j, 1]), abs=1e-12)
        assert row["estimand"] == "benchmark"
    assert final["items_used"] == int(run.items.sum())
    assert final["round"] == int(run.rounds[0]) == len(final["history"])
    if final["outcome"] == "fail":
        assert final["regressed"]
    again = client.get(f"/v1/gates/{final['id']}").json()
    assert again["outcome"] == final["outcome"] and again["benchmarks"] == final["benchmarks"]


def test_rounds_are_counted_exactly_once(client: TestClient, suite: list[Seeded]) -> None:
    cand, base = _pair(suite[0], 0.0)
    gate = client.post("/v1/gates", json=_body(suite, cand, base, margin=0.01)).json()
    names = _names(client, suite)
    rnd = gate["next_round"]
    truth = {n: dict(zip(s.item_ids, s.correct[base].tolist(), strict=True))
             for n, s in zip(names, suite, strict=True)}  # fmt: skip
    results = [  # the baseline's own answers: far from either decision after one round
        {"benchmark": n, "item_ids": [it["item_id"] for it in items],
         "correct": [float(truth[n][it["item_id"]]) for it in items]}
        for n, items in rnd["items"].items()
    ]  # fmt: skip
    ahead = client.post(f"/v1/gates/{gate['id']}/results", json={"round": 2, "results": results})
    assert ahead.status_code == 409 and ahead.json()["errors"][0]["loc"][-1] == "round"
    first = client.post(f"/v1/gates/{gate['id']}/results", json={"round": 1, "results": results})
    assert first.status_code == 200, first.text
    used = first.json()["items_used"]
    again = client.post(f"/v1/gates/{gate['id']}/results", json={"round": 1, "results": results})
    assert again.status_code == 200 and again.headers["idempotency-replayed"] == "true"
    assert again.json()["items_used"] == used and again.json()["round"] == 1
    results[0]["correct"][0] = 1.0 - results[0]["correct"][0]
    other = client.post(f"/v1/gates/{gate['id']}/results", json={"round": 1, "results": results})
    assert other.status_code == 409 and other.json()["errors"][0]["loc"][-1] == "results"
    # the open round with a wrong item set names the entry; nothing is applied
    nxt = first.json()["next_round"]
    wrong = [{"benchmark": names[0], "item_ids": ["nope"], "correct": [1.0]}]
    r = client.post(f"/v1/gates/{gate['id']}/results", json={"round": nxt["round"],
                                                             "results": wrong})  # fmt: skip
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM)
    assert client.get(f"/v1/gates/{gate['id']}").json()["items_used"] == used
    # abandon: closed, inconclusive, takes nothing more; a second abandon is a 409
    ab = client.post(f"/v1/gates/{gate['id']}/abandon")
    assert ab.status_code == 200 and ab.json()["state"] == "abandoned"
    assert ab.json()["outcome"] == "inconclusive" and ab.json()["next_round"] is None
    late = client.post(f"/v1/gates/{gate['id']}/results", json={"round": nxt["round"],
                                                                "results": results})  # fmt: skip
    assert late.status_code == 409 and late.json()["errors"][0]["loc"][-1] == "gate_id"
    assert client.post(f"/v1/gates/{gate['id']}/abandon").status_code == 409
    listed = client.get("/v1/gates", params={"model": gate["model"]}).json()
    assert [g["id"] for g in listed["items"]] == [gate["id"]]
    assert listed["items"][0]["outcome"] == "inconclusive"


@pytest.mark.parametrize(
    "change, loc",
    [
        (lambda b: b["benchmarks"].append({"benchmark": "no-such-benchmark"}),
         ["benchmarks", 2, "benchmark"]),
        (lambda b: b["benchmarks"].append(dict(b["benchmarks"][0])), ["benchmarks", 2, "benchmark"]),
        (lambda b: b["benchmarks"][1].update(baseline="nobody/at-all"), ["benchmarks", 1, "baseline"]),
        (lambda b: b.update(margin=1.0), ["margin"]),
        (lambda b: b["benchmarks"][0].update(margin=-0.1), ["benchmarks", 0, "margin"]),
        (lambda b: (b.pop("margin"), b["benchmarks"][0].update(margin=0.02)),
         ["benchmarks", 1, "margin"]),
        (lambda b: b.update(budget=10), ["budget"]),
        (lambda b: b.update(benchmarks=[]), ["benchmarks"]),
        (lambda b: b.update(rule="all_good"), ["rule"]),
        # combined needs an IRT fit, and these benchmarks have 8 models (fewer than 10)
        (lambda b: b.update(prediction="combined"), ["benchmarks", 0, "benchmark"]),
        (lambda b: b.update(prediction="combined"), ["prediction"]),
    ],
)  # fmt: skip
def test_bad_gate_input_names_the_field_and_entry_and_creates_nothing(
    client: TestClient, db_session: Session, suite: list[Seeded], change, loc
) -> None:
    body = _body(suite, 0, 1)
    change(body)
    before = db_session.scalar(select(func.count()).select_from(Gate))
    r = client.post("/v1/gates", json=body)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert any(e["loc"][1:] == loc or e["loc"] == loc for e in r.json()["errors"]), r.json()
    assert db_session.scalar(select(func.count()).select_from(Gate)) == before


def test_gate_roles_audit_and_hidden_benchmarks(
    app, client: TestClient, db_session: Session
) -> None:
    with auth_enabled(app):
        teams = make_teams(db_session)
        rows = np.random.default_rng(3).random((3, 60)) < 0.6
        made = []
        for who, name in ((teams.a_write, "gate-team-a"), (teams.b_write, "gate-team-b")):
            items = [{"id": f"{name}-{i}"} for i in range(60)]
            project = "team-a" if who is teams.a_write else "team-b"
            r = client.post("/v1/benchmarks", json={"name": name, "items": items,
                                                    "project": project}, headers=who)  # fmt: skip
            assert r.status_code == 201, r.text
            for m, row in enumerate(rows):
                up = client.post(f"/v1/benchmarks/{name}/results",
                                 json={"model": f"m{m}", "correct": row.astype(int).tolist()},
                                 headers=who)  # fmt: skip
                assert up.status_code in (200, 201), up.text
            made.append(name)
        body = {"model": "m0", "baseline": "m1", "margin": 0.05, "batch_size": 10,
                "benchmarks": [{"benchmark": made[0]}]}  # fmt: skip
        # a benchmark the key may not read: the same 422 as a missing one, nothing created
        hidden = {**body, "benchmarks": [{"benchmark": made[0]}, {"benchmark": made[1]}]}
        r = client.post("/v1/gates", json=hidden, headers=teams.a_write)
        assert r.status_code == 422
        assert r.json()["errors"][0]["loc"][1:] == ["benchmarks", 1, "benchmark"]
        missing = {**body, "benchmarks": [{"benchmark": made[0]}, {"benchmark": "gate-team-c"}]}
        r2 = client.post("/v1/gates", json=missing, headers=teams.a_write)
        assert (
            r2.json()["errors"][0]["message"].replace("gate-team-c", made[1])
            == r.json()["errors"][0]["message"]
        )
        # read on the gate's project is not write: 403 naming it
        mixed = bearer(key(db_session, "mixed", {"team-a": "read", "team-b": "write"}))
        r = client.post("/v1/gates", json=body, headers=mixed)
        assert r.status_code == 403 and "team-a" in r.json()["detail"]
        r = client.post("/v1/gates", json=body, headers=teams.a_write)
        assert r.status_code == 201, r.text
        gid = r.json()["id"]
        # another team neither reads nor writes it (a 404 like a missing gate)
        assert client.get(f"/v1/gates/{gid}", headers=teams.b_write).status_code == 404
        assert client.post(f"/v1/gates/{gid}/abandon", headers=teams.b_write).status_code in (
            403,
            404,
        )
        assert client.get("/v1/gates", headers=teams.b_write).json()["items"] == []
        assert client.get(f"/v1/gates/{gid}", headers=teams.a_read).status_code == 200
        assert client.post(f"/v1/gates/{gid}/abandon", headers=teams.a_read).status_code == 403
        assert client.post(f"/v1/gates/{gid}/abandon", headers=teams.a_write).status_code == 200
    # this test's gate only (other tests on this worker's database audit their own gates)
    events = db_session.scalars(select(AuditEvent).where(AuditEvent.action.like("gate.%")))
    actions = [e.action for e in events if e.target.get("gate") == gid]
    assert sorted(actions) == ["gate.abandon", "gate.create"]
