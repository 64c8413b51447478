"""Evaluation sessions over HTTP (Postgres): random policy end to end on real GPQA results.

Oracles: the full-benchmark accuracies and differences computed here from the stored matrix;
the confidence sequence for the model's mean replayed offline with
:func:`app.core.sequential.confidence_sequences.confidence_sequence` on the same values in the same
order (the ``random`` policy's CS; the service must give the same intervals, and the difference's
is it minus the baseline's known mean).
"""

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
from tests.api._subset_data import Seeded, gpqa, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    s = seed_gpqa(db_session, n_models=40)
    db_session.commit()
    return s


def _far_pair(seeded: Seeded, min_gap: float = 0.15) -> tuple[int, int]:
    acc = seeded.correct.mean(axis=1)
    gaps = acc[:, None] - acc[None, :]
    i, j = np.unravel_index(np.argmax(gaps), gaps.shape)
    assert gaps[i, j] >= min_gap
    return int(i), int(j)


def _answer(client: TestClient, sid: str, body: dict, truth: np.ndarray, ids: list[str], **kw):
    items = body["next_items"]
    payload = {
        "model": body["model"],
        "item_ids": [it["item_id"] for it in items],
        "correct": [float(truth[ids.index(it["item_id"])]) for it in items],
    }
    return client.post(f"/v1/sessions/{sid}/results", json=payload, **kw)


def _run(client: TestClient, sid: str, body: dict, truth: np.ndarray, ids: list[str]) -> list:
    bodies = [body]
    while body["state"] == "open":
        r = _answer(client, sid, body, truth, ids)
        assert r.status_code == 200, r.text
        body = r.json()
        bodies.append(body)
    return bodies


def test_random_session_decides_a_far_apart_pair(client: TestClient, seeded: Seeded) -> None:
    a, b = _far_pair(seeded)
    truth_a, truth_b = seeded.correct[a].astype(float), seeded.correct[b].astype(float)
    delta = truth_a.mean() - truth_b.mean()
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={
            "model": seeded.names[a],
            "baseline": seeded.names[b],
            "policy": "random",
            "estimand": "benchmark",  # the finite-population CS (generalized: test_estimand)
            "batch_size": 20,
            "seed": 3,
        },
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["Location"] == f"/v1/sessions/{body['id']}"
    assert body["state"] == "open" and body["items_used"] == 0 and len(body["next_items"]) == 20
    # the order is the seeded permutation, and samples is the same batch in lm-eval form
    perm = np.random.default_rng(3).permutation(448)
    assert [it["position"] for it in body["next_items"]] == perm[:20].tolist()
    docs = {}
    for it in body["next_items"]:
        docs.setdefault(it["subtask"], []).append(it["doc_id"])
    assert body["samples"] == {k: sorted(v) for k, v in docs.items()}
    bodies = _run(client, body["id"], body, truth_a, seeded.item_ids)
    final = bodies[-1]
    assert final["state"] == "decided"
    assert final["decision"] == ("better" if delta > 0 else "worse")
    assert final["items_used"] < 448 and final["items_used"] % 20 == 0
    assert final["next_items"] == [] and final["samples"] == {}
    # history: one row per batch; the intervals are the offline confidence sequence's
    hist = client.get(f"/v1/sessions/{body['id']}").json()["history"]
    assert [h["items_used"] for h in hist] == list(range(20, final["items_used"] + 1, 20))
    assert [h["step"] for h in hist] == list(range(1, len(hist) + 1))
    seen = perm[: final["items_used"]]
    cols = np.arange(19, final["items_used"], 20)
    acc_path = confidence_sequence(truth_a[seen], n_items=448)
    np.testing.assert_allclose([h["estimate"]["lower"] for h in hist], acc_path.lower[0, cols])
    np.testing.assert_allclose([h["estimate"]["upper"] for h in hist], acc_path.upper[0, cols])
    # the baseline's mean is known: the difference's interval is the mean's minus it
    np.testing.assert_allclose(
        [h["difference"]["lower"] for h in hist], acc_path.lower[0, cols] - truth_b.mean()
    )
    np.testing.assert_allclose(
        [h["difference"]["upper"] for h in hist], acc_path.upper[0, cols] - truth_b.mean()
    )
    np.testing.assert_allclose(
        [h["estimate"]["value"] for h in hist], [truth_a[perm[: c + 1]].mean() for c in cols]
    )
    assert all(h["difference"]["basis"] == "design" for h in hist)
    assert hist[-1]["difference"]["lower"] > 0 or hist[-1]["difference"]["upper"] < 0
    assert final["history"] == hist


@pytest.fixture
def small(db_session: Session) -> tuple[uuid.UUID, list[str], np.ndarray, list[str]]:
    data = gpqa()
    correct = data["correct"][:3, :30].astype(np.uint8)
    ids = [str(x) for x in data["item_ids"][:30]]
    version, _ = create_version(db_session, f"small-{uuid.uuid4().hex[:8]}", ids, ["t"] * 30)
    names = ["s-a", "s-b", "s-partial"]
    for i in range(2):
        store_results(
            db_session, version.id, ModelCreate(name=names[i]), parse_columnar(correct[i].tolist())
        )
    store_results(
        db_session,
        version.id,
        ModelCreate(name=names[2]),
        parse_columnar(correct[2, :10].tolist(), item_ids=ids[:10]),
    )
    db_session.commit()
    return version.id, names, correct.astype(float), ids


def test_interval_at_exhaustion_is_the_exact_value(client: TestClient, small) -> None:
    vid, names, correct, ids = small
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": "fresh-model",
            "baseline": names[1],
            "policy": "random",
            "estimand": "benchmark",
            "goal": "precision",
            "precision": 1e-6,
            "batch_size": 7,
            "seed": 5,
            "store_results": True,
        },
    )
    assert r.status_code == 201, r.text
    bodies = _run(client, r.json()["id"], r.json(), correct[0], ids)
    final = bodies[-1]
    assert final["items_used"] == 30 and final["state"] == "decided"
    assert final["decision"] == "precise"
    exact = correct[0].mean()
    assert final["estimate"]["lower"] == pytest.approx(exact, abs=1e-12)
    assert final["estimate"]["upper"] == pytest.approx(exact, abs=1e-12)
    exact_d = exact - correct[1].mean()
    assert final["difference"]["lower"] == pytest.approx(exact_d, abs=1e-12)
    assert final["difference"]["upper"] == pytest.approx(exact_d, abs=1e-12)
    assert [len(b["next_items"]) for b in bodies[:-1]] == [7, 7, 7, 7, 2]
    assert final["stored_result"] == "created"
    models = client.get(f"/v1/benchmarks/{vid}/models").json()["items"]
    stored = next(m for m in models if m["model"]["name"] == "fresh-model")
    assert stored["coverage"] == 1.0 and stored["accuracy"] == pytest.approx(exact)


def test_max_items_ends_exhausted(client: TestClient, small) -> None:
    vid, names, correct, ids = small
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": "partial-model",
            "baseline": names[1],
            "policy": "random",
            "batch_size": 4,
            "max_items": 10,
            "store_results": True,
        },
    )
    assert r.status_code == 201, r.text
    bodies = _run(client, r.json()["id"], r.json(), correct[0], ids)
    # the closed session's results are stored with a coverage mask (10 of 30 items)
    assert bodies[-1]["stored_result"] == "created"
    models = client.get(f"/v1/benchmarks/{vid}/models").json()["items"]
    stored = next(m for m in models if m["model"]["name"] == "partial-model")
    seen = [p for b in bodies[:-1] for p in (it["position"] for it in b["next_items"])]
    assert stored["n_items"] == 10 and stored["coverage"] == pytest.approx(10 / 30)
    assert stored["accuracy"] == pytest.approx(correct[0][seen].mean())
    sizes = [b["items_used"] for b in bodies]
    if bodies[-1]["state"] == "exhausted":
        assert sizes == [0, 4, 8, 10]
        assert bodies[-1]["decision"] == "undecided"
        assert bodies[-1]["outcome"] == "inconclusive" and bodies[-1]["stopped_by"] == "max_items"
        assert bodies[-1]["conclusion"].startswith("Inconclusive (max_items = 10 reached)")
    else:
        assert bodies[-1]["outcome"] == "decided" and bodies[-1]["stopped_by"] == "decision"
    assert bodies[0]["outcome"] == "open" and bodies[0]["stopped_by"] is None
    # the seed was drawn and stored: the order is reproducible from it
    seed = bodies[0]["seed"]
    perm = np.random.default_rng(seed).permutation(30)
    assert [it["position"] for it in bodies[0]["next_items"]] == perm[:4].tolist()


def test_idempotent_replay_and_retry_apply_once(client: TestClient, seeded: Seeded) -> None:
    a, b = _far_pair(seeded)
    truth = seeded.correct[a].astype(float)
    body = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={"model": seeded.names[a], "baseline": seeded.names[b], "policy": "random", "seed": 1},
    ).json()
    sid = body["id"]
    r1 = _answer(client, sid, body, truth, seeded.item_ids, headers={"Idempotency-Key": "k-1"})
    r2 = _answer(client, sid, body, truth, seeded.item_ids, headers={"Idempotency-Key": "k-1"})
    assert r1.status_code == r2.status_code == 200
    assert r2.headers.get("Idempotency-Replayed") == "true"
    assert r2.json() == r1.json() and r1.json()["step"] == 1 and r1.json()["items_used"] == 10
    # a retry without a key (a CI job re-running the same batch) is not applied twice
    r3 = _answer(client, sid, body, truth, seeded.item_ids)
    assert r3.status_code == 200 and r3.json()["step"] == 1 and r3.json()["items_used"] == 10
    assert r3.json()["next_items"] == r1.json()["next_items"]
    assert len(client.get(f"/v1/sessions/{sid}").json()["history"]) == 1


def _fields(r) -> set[str]:
    assert r.headers["content-type"].startswith(PROBLEM), r.text
    return {e["loc"][-1] for e in r.json().get("errors") or []}


def test_bad_results_name_the_field_and_change_nothing(client: TestClient, seeded: Seeded) -> None:
    a, b = _far_pair(seeded)
    body = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={
            "model": seeded.names[a],
            "baseline": seeded.names[b],
            "policy": "random",
            "batch_size": 5,
            "seed": 2,
        },
    ).json()
    sid = body["id"]
    batch = [it["item_id"] for it in body["next_items"]]
    other = next(i for i in seeded.item_ids if i not in batch)
    model = body["model"]
    cases = [
        ({"model": model, "item_ids": [*batch[:4], other], "correct": [1] * 5}, 422, "item_ids"),
        ({"model": model, "item_ids": [*batch[:4], batch[0]], "correct": [1] * 5}, 422, "item_ids"),
        ({"model": model, "item_ids": batch[:4], "correct": [1] * 4}, 422, "item_ids"),
        ({"model": model, "item_ids": ["nope", *batch[1:]], "correct": [1] * 5}, 422, "item_ids"),
        ({"model": model, "item_ids": batch, "correct": [1, 0, 1, 0, 1.5]}, 422, "correct"),
        ({"model": model, "correct": [1, 0, 1]}, 422, "batch"),  # id-less: must name its batch
        ({"model": "someone-else", "item_ids": batch, "correct": [1] * 5}, 422, "model"),
    ]
    before = client.get(f"/v1/sessions/{sid}").json()
    for payload, code, field in cases:
        r = client.post(f"/v1/sessions/{sid}/results", json=payload)
        assert r.status_code == code, (payload, r.text)
        assert field in _fields(r), (payload, r.json())
    # NaN (non-standard JSON, as some clients send it)
    r = client.post(
        f"/v1/sessions/{sid}/results",
        content=b'{"model": "%s", "item_ids": %s, "correct": [NaN, 1, 1, 1, 1]}'
        % (model.encode(), str(batch).replace("'", '"').encode()),
        headers={"Content-Type": "application/json"},
    )
    assert 400 <= r.status_code < 500, r.text
    assert client.get(f"/v1/sessions/{sid}").json() == before
    r = client.post(f"/v1/sessions/{uuid.uuid4()}/results", json={"model": model, "correct": [1]})
    assert r.status_code == 404


def test_closed_session_takes_no_results(client: TestClient, small) -> None:
    vid, names, correct, ids = small
    body = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": names[0],
            "baseline": names[1],
            "policy": "random",
            "batch_size": 10,
            "max_items": 10,
        },
    ).json()
    final = _run(client, body["id"], body, correct[0], ids)[-1]
    assert final["state"] in ("decided", "exhausted")
    r = client.post(
        f"/v1/sessions/{body['id']}/results",
        json={"model": names[0], "item_ids": ids[:1], "correct": [1]},
    )
    assert r.status_code in (409, 422)
    if r.status_code == 409:
        assert "session_id" in _fields(r)
    assert client.get(f"/v1/sessions/{body['id']}").json() == final


def test_bad_creation_names_the_field(client: TestClient, small) -> None:
    vid, names, _, _ = small
    url = f"/v1/benchmarks/{vid}/sessions"
    base = {"model": "m", "baseline": names[0]}
    cases = [
        ({**base, "baseline": "unknown"}, "baseline"),
        ({**base, "baseline": names[2]}, "baseline"),  # partial coverage
        ({"model": "m"}, "baseline"),  # decide needs a baseline
        ({**base, "baseline": "m", "model": "m"}, "baseline"),
        ({**base, "goal": "precision"}, "precision"),
        ({**base, "margin": 0.02, "goal": "precision", "precision": 0.1}, "margin"),
        ({**base, "max_items": 31}, "max_items"),
        ({**base, "max_items": 5, "batch_size": 6}, "batch_size"),
        ({**base, "alpha": 0}, "alpha"),
        ({**base, "alpha": 0.9}, "alpha"),
        ({**base, "policy": "greedy"}, "policy"),
        ({**base, "goal": "win"}, "goal"),
        ({**base, "batch_size": 0}, "batch_size"),
        ({**base, "seed": -1}, "seed"),
        ({**base, "margin": -0.1}, "margin"),
    ]
    for payload, field in cases:
        r = client.post(url, json=payload)
        assert r.status_code == 422, (payload, r.text)
        assert field in _fields(r), (payload, r.json())
    assert client.post("/v1/benchmarks/no-such-bench/sessions", json=base).status_code == 404
    # an unknown baseline suggests the closest names (issue 28)
    r = client.post(url, json={**base, "baseline": "S-A"})
    assert r.status_code == 422 and "did you mean 's-a'" in r.json()["detail"], r.text


def test_racing_retries_are_applied_once(committed_sessionmaker, cleanup) -> None:
    """Two requests with the same batch at the same time (a CI retry racing the original, no
    Idempotency-Key), on Postgres with real commits: one applies it, the other waits for the
    row lock and answers the state it finds, marked as a replay."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import select

    from app.db.models import Benchmark, BenchmarkVersion, LanguageModel
    from app.ingest import ParsedResults
    from app.schemas.sessions import SessionCreate
    from app.services.catalog.benchmarks import get_version
    from app.services.evaluation import sessions as service
    from tests.api._subset_data import committed

    seeded = committed(committed_sessionmaker, n_models=12)
    with committed_sessionmaker() as s:
        cleanup(Benchmark, s.get(BenchmarkVersion, seeded.version_id).benchmark_id)
        for mid in s.scalars(select(LanguageModel.id).where(LanguageModel.name.in_(seeded.names))):
            cleanup(LanguageModel, mid)
        body = SessionCreate(
            model="racer", baseline=seeded.names[0], policy="random", seed=1, batch_size=10
        )
        row, _, _ = service.create_session(s, get_version(s, seeded.version_id), body)
        s.commit()
        sid, batch = row.id, service.open_batch(row)
    truth = gpqa()["correct"][300].astype(np.uint8)
    parsed = ParsedResults(item_ids=np.asarray(seeded.item_ids)[batch], correct=truth[batch])
    barrier = threading.Barrier(2)

    def post(delay: float):
        with committed_sessionmaker() as s:
            barrier.wait()
            time.sleep(delay)
            pub, replayed = service.post_results(s, sid, "racer", parsed)
            time.sleep(0.3)  # hold the row lock: the other request queues behind it
            s.commit()
            return pub.step, pub.items_used, replayed

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(post, [0.0, 0.1]), key=lambda o: o[2])
    assert outcomes == [(1, 10, False), (1, 10, True)]
    with committed_sessionmaker() as s:
        pub = service.get_session_public(s, sid)
    assert pub.step == 1 and len(pub.history) == 1 and pub.items_used == 10


def test_a_session_created_before_issue_23_keeps_its_paired_engine(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    """An open session whose engine state predates issue 23 (parts ``acc`` / ``diff``) goes on
    with the paired confidence sequence it started with."""
    from app.core.sequential.confidence_sequences import cs_init, paired_values
    from app.db.models import EvaluationSession
    from app.services.evaluation.sessions import pack_state

    a, b = _far_pair(seeded)
    truth_a, truth_b = seeded.correct[a].astype(float), seeded.correct[b].astype(float)
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={
            "model": seeded.names[a],
            "baseline": seeded.names[b],
            "policy": "random",
            "batch_size": 20,
            "seed": 3,
        },
    )
    body = r.json()
    row = db_session.get(EvaluationSession, uuid.UUID(body["id"]))
    perm = np.random.default_rng(3).permutation(448)
    row.order = perm.astype("<i4").tobytes()
    row.engine_state = pack_state(
        {"acc": cs_init(448).to_dict(), "diff": cs_init(448, paired=True).to_dict()}
    )
    db_session.commit()
    final = _run(client, body["id"], body, truth_a, seeded.item_ids)[-1]
    assert final["decision"] == ("better" if truth_a.mean() > truth_b.mean() else "worse")
    hist = final["history"]
    seen = perm[: final["items_used"]]
    path = confidence_sequence(
        paired_values(truth_a[seen], truth_b[seen]), n_items=448, paired=True
    )
    cols = np.arange(19, final["items_used"], 20)
    np.testing.assert_allclose(
        [h["difference"]["lower"] for h in hist], 2 * path.lower[0, cols] - 1
    )


def test_item_means_of_repeated_samples_move_the_sequence_to_the_fine_grid(
    client: TestClient, small
) -> None:
    """Repeated samples arrive as item means: the first fractional value rebuilds the confidence
    sequence on the fine grid from every stored value (the offline sequence on that grid)."""
    vid, names, correct, ids = small
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={
            "model": "sampled-model",
            "baseline": names[1],
            "policy": "random",
            "estimand": "benchmark",
            "goal": "precision",
            "precision": 1e-6,
            "batch_size": 6,
            "seed": 8,
        },
    )
    assert r.status_code == 201, r.text
    truth = correct[0].copy()
    truth[10:20] = np.arange(1, 11) % 8 / 8  # K = 8 samples: means 1/8, 2/8, ... (exact floats)
    bodies = _run(client, r.json()["id"], r.json(), truth, ids)
    final = bodies[-1]
    assert final["items_used"] == 30
    assert final["estimate"]["lower"] == pytest.approx(truth.mean(), abs=1e-12)
    served = [ids.index(it["item_id"]) for b in bodies[:-1] for it in b["next_items"]]
    path = confidence_sequence(truth[served], n_items=30, binary=False)
    lows = [h["estimate"]["lower"] for h in final["history"]]
    np.testing.assert_allclose(lows, path.lower[0, 5::6], atol=1e-12)
    base = correct[1].mean()
    np.testing.assert_allclose(
        [h["difference"]["upper"] for h in final["history"]], path.upper[0, 5::6] - base
    )


def test_default_policy_is_assisted_when_an_irt_fit_is_possible(
    client: TestClient, seeded: Seeded, small
) -> None:
    """No ``policy``: ``assisted`` (IRT predictions; 202 with the fit job first) on a benchmark
    with enough models with full results, ``random`` on one with too few (here 2). With a
    baseline and no estimand the session is generalized, which draws uniformly: ``random``."""
    a, b = _far_pair(seeded)
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={"model": seeded.names[a], "baseline": seeded.names[b], "seed": 1},
    )
    assert r.status_code == 201 and r.json()["policy"] == "random", r.text
    assert r.json()["estimand"] == "generalized", r.text
    r = client.post(
        f"/v1/benchmarks/{seeded.version_id}/sessions",
        json={
            "model": seeded.names[a],
            "baseline": seeded.names[b],
            "estimand": "benchmark",
            "seed": 1,
        },
    )
    assert r.status_code == 202 and r.json()["kind"] == "irt_fit", r.text
    vid, names, _, _ = small
    r = client.post(f"/v1/benchmarks/{vid}/sessions", json={"model": "m-new", "baseline": names[1]})
    assert r.status_code == 201 and r.json()["policy"] == "random", r.text
    r = client.post(
        f"/v1/benchmarks/{vid}/sessions",
        json={"model": "m-new", "baseline": names[1], "policy": "assisted"},
    )
    assert r.status_code == 422 and "policy" in _fields(r), r.text
