"""Pair verdicts (exact for random), plans, and verdicts for a fixed subset — against the engine."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.reliability.exact import exact_agreement, pair_probability, smallest_n
from app.core.reliability.planning import plan as core_plan
from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog import matrices
from app.services.catalog.results import store_results
from app.services.selection import subsets as subset_service
from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"
FIELDS = {
    "estimand",  # issue 38: which accuracy each answer is about
    "subset_estimand",
    "estimand_text",
    "model_a",
    "model_b",
    "full_accuracy_a",
    "full_accuracy_b",
    "gap",
    "method",
    "size",
    "p_same_order",
    "p_tie",
    "p_reversed",
    "ci",
    "mdad_at_size",
    "distinguishable",
    "size_needed",
    "paired",
    "warnings",
    "benchmark",
    "threshold",
    "basis",
    "basis_note",
    "full_benchmark_differs",
    "full_benchmark_alpha",
    "headline",
    "answers",
    "next_step",
}


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=40)
    db_session.commit()  # a later failing request rolls back to here, not before the data
    return seeded


def _pair_with_gap(seeded: Seeded, target: float) -> tuple[int, int]:
    acc = seeded.correct.mean(axis=1)
    d = np.abs(acc[:, None] - acc[None, :] - target)
    a, b = np.unravel_index(np.argmin(d), d.shape)
    return int(a), int(b)


def test_random_verdict_equals_the_exact_engine(client: TestClient, seeded: Seeded) -> None:
    a, b = _pair_with_gap(seeded, 0.02)
    r = client.get(
        f"/v1/benchmarks/{seeded.version_id}/verdict",
        params={"model_a": seeded.names[a], "model_b": seeded.names[b], "size": 25},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == FIELDS
    probs = pair_probability(seeded.correct, a, b, 25)
    assert body["p_same_order"] == pytest.approx(float(probs.p_greater), abs=1e-12)
    assert body["p_tie"] == pytest.approx(float(probs.p_equal), abs=1e-12)
    assert body["ci"] == [body["p_same_order"], body["p_same_order"]]
    assert body["mdad_at_size"] == exact_agreement(seeded.correct, 25).mdad
    assert body["size_needed"] == smallest_n(seeded.correct, a, b, 0.8)
    assert body["gap"] == pytest.approx(seeded.correct[a].mean() - seeded.correct[b].mean())
    assert body["distinguishable"] is False  # ~2 points apart at 25 items

    far_a, far_b = _pair_with_gap(seeded, 0.15)
    far = client.get(
        f"/v1/benchmarks/{seeded.version_id}/verdict",
        params={"model_a": seeded.names[far_a], "model_b": seeded.names[far_b], "size": 25},
    ).json()
    assert far["distinguishable"] is True and far["p_same_order"] >= 0.8

    strict = client.get(
        f"/v1/benchmarks/{seeded.version_id}/verdict",
        params={
            "model_a": seeded.names[far_a],
            "model_b": seeded.names[far_b],
            "size": 25,
            "threshold": 0.99,
        },
    ).json()
    assert strict["distinguishable"] == (strict["p_same_order"] >= 0.99)


def test_verdict_errors_are_problems(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    url = f"/v1/benchmarks/{seeded.version_id}/verdict"
    a = seeded.names[0]
    r = client.get(url, params={"model_a": a, "model_b": "ghost"})
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    assert r.json()["errors"][0]["field"] == "query.model_b"
    store_results(
        db_session,
        seeded.version_id,
        ModelCreate(name="partial"),
        parse_columnar([1, 0, 1], item_ids=seeded.item_ids[:3]),
    )
    db_session.commit()
    r = client.get(url, params={"model_a": a, "model_b": "partial"})
    assert r.status_code == 409 and "partial coverage" in r.json()["detail"]
    assert client.get(url, params={"model_a": a, "model_b": a}).status_code == 422
    assert (
        client.get(url, params={"model_a": a, "model_b": seeded.names[1], "size": 449}).status_code
        == 422
    )
    assert (
        client.get(
            url, params={"model_a": a, "model_b": seeded.names[1], "method": "x"}
        ).status_code
        == 422
    )
    r = client.get(f"/v1/benchmarks/{uuid.uuid4()}/verdict", params={"model_a": a, "model_b": "b"})
    assert r.status_code == 404


def test_non_random_method_without_analysis_is_409_naming_it(
    client: TestClient, seeded: Seeded
) -> None:
    r = client.get(
        f"/v1/benchmarks/{seeded.version_id}/verdict",
        params={"model_a": seeded.names[0], "model_b": seeded.names[1], "method": "dpp"},
    )
    assert r.status_code == 409 and r.headers["content-type"] == PROBLEM
    detail = r.json()["detail"]
    assert "benchslice analyze --benchmark " in detail and "--methods dpp" in detail
    assert "/analyses" in detail and '{"methods"' not in detail  # the API call, no raw recipe
    r = client.get(
        f"/v1/benchmarks/{seeded.version_id}/plan", params={"gap": 0.05, "method": "dpp"}
    )
    assert r.status_code == 409


def test_random_plan_equals_the_engine_on_exact_curves(client: TestClient, seeded: Seeded) -> None:
    """The plan's size is the engine's exact answer (grid, then bisection on the integers with
    exact curves), and its evidence holds the answer's row and the size just below it."""
    r = client.get(f"/v1/benchmarks/{seeded.version_id}/plan", params={"gap": 0.1})
    assert r.status_code == 200, r.text
    body = r.json()
    expected = core_plan(0.1, "random", 0.8, correct=seeded.correct)
    assert body["size"] == expected.n and body["basis"] == "exact"
    rows = dict(zip(body["evidence"]["sizes"], body["evidence"]["mdads"], strict=True))
    for n, mdad in rows.items():
        assert mdad == exact_agreement(seeded.correct, n, threshold=0.8).mdad
    n = body["size"]
    assert rows[n] is not None and rows[n] <= 0.1
    if n > 1:
        assert rows[n - 1] is None or rows[n - 1] > 0.1
    for gap in (0.03, 0.3, 0.9):  # small, large, unreachable-at-small-n gaps
        got = client.get(f"/v1/benchmarks/{seeded.version_id}/plan", params={"gap": gap}).json()
        assert got["size"] == core_plan(gap, "random", 0.8, correct=seeded.correct).n, gap
    bad = client.get(f"/v1/benchmarks/{seeded.version_id}/plan", params={"gap": 0})
    assert bad.status_code == 422


def test_verdict_answers_in_order(client: TestClient, seeded: Seeded) -> None:
    """Full benchmark (exact McNemar, discordant counts), then this subset, then what next;
    a pair the full benchmark does not separate is told "no subset can"."""
    from app.core.estimation.stats import paired_outcomes

    url = f"/v1/benchmarks/{seeded.version_id}/verdict"
    for target in (0.0, 0.02, 0.15):
        a, b = _pair_with_gap(seeded, target)
        if a == b:
            continue
        v = client.get(
            url, params={"model_a": seeded.names[a], "model_b": seeded.names[b], "size": 25}
        ).json()
        po = paired_outcomes(seeded.correct[a], seeded.correct[b])
        assert len(v["answers"]) == 3 and v["answers"][2].startswith("Next: ")
        assert f"only A right on {po.n10} items, only B on {po.n01}" in v["answers"][0]
        step = v["next_step"]
        if po.n10 + po.n01 >= 10 and po.mcnemar_p < 0.05:
            assert v["full_benchmark_differs"] is True
            assert step["kind"] in ("none", "larger_subset", "evaluate")
            if step["kind"] == "larger_subset":
                assert step["size"] == v["size_needed"]
                assert f"--size {v['size_needed']}" in step["command"]
        else:
            assert step["kind"] == "no_subset"
            assert "the full benchmark does not separate them" in step["text"]
            assert ("no subset can" in step["text"]) == (not v["distinguishable"])
        assert (step["kind"] == "none") == (v["distinguishable"] and step["kind"] != "no_subset")


def test_a_subset_that_copies_a_chance_order_is_not_told_no_subset_can(
    client: TestClient, seeded: Seeded
) -> None:
    """When P(same order) reaches the threshold but the full benchmark's own order is within
    chance, the headline and the next step say so instead of contradicting each other."""
    from app.core.estimation.stats import paired_outcomes
    from app.schemas.subsets import VerdictPublic
    from app.services.reliability.verdict_story import tell

    a, b = next(
        (i, j)
        for i in range(len(seeded.names))
        for j in range(i + 1, len(seeded.names))
        if (po := paired_outcomes(seeded.correct[i], seeded.correct[j])).n10 + po.n01 >= 10
        and po.mcnemar_p >= 0.05
    )
    url = f"/v1/benchmarks/{seeded.version_id}/verdict"
    body = client.get(
        url, params={"model_a": seeded.names[a], "model_b": seeded.names[b], "size": 25}
    ).json()
    assert body["full_benchmark_differs"] is False
    forced = VerdictPublic.model_validate({**body, "distinguishable": True})
    told = tell(forced, "gpqa", seeded.correct.shape[1])
    assert "within chance" in told.headline and told.headline.startswith("DISTINGUISHABLE")
    assert told.next_step.kind == "no_subset"
    assert "no subset can" not in told.next_step.text
    assert "copies its order" in told.next_step.text


def test_subset_verdict_says_whether_this_subset_keeps_the_order(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 25, {}, 4, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    idx = np.frombuffer(subset.indices, dtype="<i8")
    a, b = _pair_with_gap(seeded, 0.05)
    r = client.get(
        f"/v1/subsets/{subset.id}/verdict",
        params={"model_a": seeded.names[a], "model_b": seeded.names[b]},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    d_sub = seeded.correct[a, idx].mean() - seeded.correct[b, idx].mean()
    gap = seeded.correct[a].mean() - seeded.correct[b].mean()
    assert body["subset_gap"] == pytest.approx(d_sub)
    assert body["same_order"] == bool(np.sign(d_sub) == np.sign(gap) and d_sub != 0)
    fresh = body["fresh_draw"]
    assert fresh["p_same_order"] == pytest.approx(
        float(pair_probability(seeded.correct, a, b, 25).p_greater)
    )


def test_curve_method_verdict_and_plan_read_the_latest_analysis(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    from sqlalchemy.orm import sessionmaker

    from app.core.reliability.planning import curve_probability
    from app.db.models import JobStatus
    from app.services.reliability.analyses import latest_analysis
    from worker.runner import execute_job

    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/analyses",
        json={
            "methods": ["dpp"],
            "sizes": [10, 25, 50],
            "runs": 4,
            "n_sources": 25,
            "n_targets": 10,
            "seed": 3,
        },
    )
    assert r.status_code == 202, r.text
    factory = sessionmaker(
        bind=db_session.connection(),
        join_transaction_mode="create_savepoint",
        expire_on_commit=False,
    )
    assert execute_job(factory, uuid.UUID(r.json()["job_id"])) is JobStatus.succeeded
    stored = latest_analysis(db_session, seeded.version_id, ["dpp"])
    assert stored is not None
    cells = [stored.cell("dpp", n, "seen") for n in stored.sizes]

    a, b = _pair_with_gap(seeded, 0.08)
    v = client.get(
        f"/v1/benchmarks/{seeded.version_id}/verdict",
        params={
            "model_a": seeded.names[a],
            "model_b": seeded.names[b],
            "size": 25,
            "method": "dpp",
        },
    )
    assert v.status_code == 200, v.text
    body = v.json()
    p_same, p_tie, _, lo, hi = curve_probability(cells, body["gap"], 25)
    assert body["p_same_order"] == pytest.approx(p_same)
    assert body["p_tie"] == pytest.approx(p_tie)
    assert body["ci"] == pytest.approx([lo, hi])
    assert body["mdad_at_size"] == cells[1].mdad

    p = client.get(
        f"/v1/benchmarks/{seeded.version_id}/plan", params={"gap": 0.1, "method": "dpp"}
    ).json()
    assert p["basis"] == "robust_curve" and p["evidence"]["analysis_id"] == str(stored.id)
    assert p["size"] == core_plan(0.1, "dpp", 0.8, results=cells).n


def test_cached_verdict_follows_results_changes(
    client: TestClient, db_session: Session, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.services.reliability import verdicts

    a, b = seeded.names[0], seeded.names[1]
    url = f"/v1/benchmarks/{seeded.version_id}/verdict"
    # a wide grace window while the cache is read back: a loaded machine (the suite runs on
    # two xdist workers) can take longer than the default second between the two calls
    monkeypatch.setattr(matrices, "STAMP_TTL_SECONDS", 600.0)
    first = client.get(url, params={"model_a": a, "model_b": b, "size": 30}).json()
    cached = verdicts.cached_verdict(seeded.version_id, a, b, size=30)
    assert cached is not None and cached.model_dump() == first
    flipped = (1 - seeded.correct[0]).tolist()
    store_results(
        db_session, seeded.version_id, ModelCreate(name=a), parse_columnar(flipped), replace=True
    )
    db_session.commit()
    monkeypatch.setattr(matrices, "STAMP_TTL_SECONDS", 0.0)  # no grace window: re-check now
    assert verdicts.cached_verdict(seeded.version_id, a, b, size=30) is None
    after = client.get(url, params={"model_a": a, "model_b": b, "size": 30}).json()
    assert after["full_accuracy_a"] == pytest.approx(1 - seeded.correct[0].mean())
