"""Repeated samples through the API, the evaluation-config drift guard and the few-source warning."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import ModelResult
from app.ingest import config_fingerprint, parse_columnar, parse_lm_eval_config
from app.schemas.results import ModelCreate
from app.services.catalog.results import store_results
from app.services.selection import subsets as subset_service
from app.services.selection.drift import MIN_SOURCE_MODELS
from tests.api._subset_data import Seeded, gpqa, seed_gpqa

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
ARC = FIX / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
RESULTS = FIX / "results_2024-05-01T10-00-00.123456.json"
NDJSON = "application/x-ndjson"


def _count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(ModelResult))


def _arc_bench(client: TestClient) -> dict:
    r = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": "arc-drift"},
        files=[("file", (ARC.name, ARC.read_bytes(), NDJSON))],
    )
    assert r.status_code == 201, r.text
    return r.json()


def _results_json(n_shot: int = 0) -> bytes:
    obj = json.loads(RESULTS.read_text())
    obj["n-shot"]["arc_easy"] = n_shot
    return json.dumps(obj).encode()


def test_repeated_samples_round_trip_and_bad_k_writes_nothing(
    client: TestClient, db_session: Session
) -> None:
    bench = _arc_bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    means = [0.2, 0.6, 1.0, 0.0, 0.4]
    var = [0.2, 0.3, 0.0, 0.0, 0.3]
    r = client.post(
        url, json={"model": "rep", "correct": means, "samples": 5, "within_variance": var}
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["samples_per_item"] == 5 and not body["binary"]
    assert body["accuracy"] == pytest.approx(np.mean(np.float32(means)), rel=1e-6)
    row = db_session.scalars(select(ModelResult)).one()
    assert row.samples_per_item == 5
    np.testing.assert_array_equal(np.frombuffer(row.within_variance, "<f4"), np.float32(var))
    np.testing.assert_array_equal(np.frombuffer(row.correct, "<f4"), np.float32(means))
    # same upload: unchanged; another K: different content
    assert (
        client.post(
            url, json={"model": "rep", "correct": means, "samples": 5, "within_variance": var}
        ).json()["status"]
        == "unchanged"
    )
    other = client.post(url, json={"model": "rep", "correct": means, "samples": 10})
    assert other.status_code == 409

    before = _count(db_session)
    for payload, loc in (
        ({"model": "bad", "correct": means, "samples": 0}, ["body", "samples"]),
        ({"model": "bad", "correct": [0.2, 0.6, 1.5, 0.0, 0.4], "samples": 5}, ["body", "correct"]),
        (
            {"model": "bad", "correct": means, "samples": 5, "within_variance": [9, 0, 0, 0, 0]},
            ["body", "within_variance"],
        ),
    ):
        bad = client.post(url, json=payload)
        assert bad.status_code == 422, bad.text
        assert bad.json()["errors"][0]["loc"] == loc, bad.json()
    # an lm-eval log where doc 1 has 2 samples and the others 3
    recs = [json.loads(x) for x in ARC.read_text().splitlines() if x.strip()]
    lines = []
    for s in range(3):
        for rec in recs:
            if rec["doc_id"] == 1 and s == 2:
                continue
            lines.append(json.dumps(rec))
    bad = client.post(
        url,
        params={"model": "bad", "metric": "acc"},
        content="\n".join(lines).encode(),
        headers={"content-type": NDJSON},
    )
    assert bad.status_code == 422, bad.text
    err = bad.json()["errors"][0]
    assert err["loc"][-1] == "repeats" and "expected repeats = 3" in json.dumps(err)
    assert _count(db_session) == before


def test_fingerprint_stored_and_equal_for_equal_configs(
    client: TestClient, db_session: Session
) -> None:
    bench = _arc_bench(client)
    url = f"/v1/benchmarks/{bench['id']}/results"
    fps = {}
    for model, shots in (("org/a", 0), ("org/b", 0), ("org/c", 5)):
        r = client.post(
            url,
            params={"model": model, "metric": "acc"},
            files=[
                ("file", (ARC.name, ARC.read_bytes(), NDJSON)),
                ("file", (RESULTS.name, _results_json(shots), "application/json")),
            ],
        )
        assert r.status_code == 201, r.text
        fps[model] = r.json()["config_fingerprint"]
        assert r.json()["eval_config"]["num_fewshot"] == shots
        assert r.json()["eval_config"]["metric"] == "acc"
        assert r.json()["eval_config"]["filter"] == "none"
    expected = config_fingerprint(  # the sample log's records say filter "none"
        parse_lm_eval_config(_results_json(0), tasks=["arc_easy"], metric="acc", filter="none")
    )
    assert fps["org/a"] == fps["org/b"] == expected and fps["org/c"] != expected
    stored = db_session.scalars(select(ModelResult.config_fingerprint)).all()
    assert sorted(stored) == sorted(fps.values())
    verdict = client.get(
        f"/v1/benchmarks/{bench['id']}/verdict",
        params={"model_a": "org/a", "model_b": "org/c", "size": 3},
    )
    assert verdict.status_code == 200, verdict.text
    (w,) = verdict.json()["warnings"]
    assert (w["code"], w["field"], w["model"], w["value"]) == (
        "config_mismatch",
        "num_fewshot",
        "org/c",
        5,
    )
    assert w["sources"] == {"0": 1}
    same = client.get(
        f"/v1/benchmarks/{bench['id']}/verdict",
        params={"model_a": "org/a", "model_b": "org/b", "size": 3},
    )
    assert same.json()["warnings"] == []
    # a results JSON alone carries no per-item results
    alone = client.post(
        url,
        params={"model": "x"},
        files=[("file", (RESULTS.name, _results_json(0), "application/json"))],
    )
    assert alone.status_code == 422 and alone.json()["errors"][0]["loc"][-1] == "file"


def _config(shots: int) -> dict:
    return parse_lm_eval_config(_results_json(shots), tasks=["arc_easy"], metric="acc")


@pytest.fixture
def gpqa_configs(db_session: Session) -> Seeded:
    """30 GPQA models; the first 28 run 0-shot, the last 2 with 5 shots."""
    seeded = seed_gpqa(db_session, n_models=30)
    c = gpqa()["correct"][:30]
    names = [f"m{i:03d}-{gpqa()['models'][i]}"[:200] for i in range(30)]
    for i, name in enumerate(names):
        parsed = replace(parse_columnar(c[i].tolist()), eval_config=_config(5 if i >= 28 else 0))
        store_results(db_session, seeded.version_id, ModelCreate(name=name), parsed, replace=True)
    db_session.commit()
    return seeded


def _subset(db_session: Session, seeded: Seeded, method: str, size: int, sources=None):
    req = subset_service.resolve_request(
        db_session, seeded.version_id, method, size, {}, 3, sources
    )
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    return subset, np.frombuffer(subset.indices, dtype="<i8")


def test_score_warns_per_config_field_and_repeated_se_is_the_closed_form(
    client: TestClient, db_session: Session, gpqa_configs: Seeded
) -> None:
    seeded = gpqa_configs
    subset, idx = _subset(db_session, seeded, "random", 60)
    rng = np.random.default_rng(5)
    k = 4
    p_true = gpqa()["correct"][200].astype(float)[idx] * 0.7 + 0.15
    draws = rng.random((idx.size, k)) < p_true[:, None]
    means = draws.mean(axis=1)
    csv = "item_id,correct,samples\n" + "".join(
        f"{seeded.item_ids[p]},{m},{k}\n" for p, m in zip(idx, means, strict=True)
    )
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        params={"model": "new-5shot"},
        files=[
            ("file", ("s.csv", csv.encode(), "text/csv")),
            ("file", (RESULTS.name, _results_json(5), "application/json")),
        ],
    )
    assert r.status_code == 201, r.text
    body = r.json()
    # drift: value 5 against 28 zero-shot and 2 five-shot reference models
    (w,) = [w for w in body["warnings"] if w["code"] == "config_mismatch"]
    assert (w["field"], w["model"], w["value"]) == ("num_fewshot", "new-5shot", 5)
    assert w["sources"] == {"0": 28, "5": 2}
    assert body["population_shift"]["flagged"]
    assert body["population_shift"]["details"]["config_mismatch_fields"] == ["num_fewshot"]
    # repeated samples: closed form with the Bernoulli within-item variance K/(K-1) x(1-x)
    n, big_n = idx.size, 448
    x = means
    s2 = k / (k - 1) * x * (1 - x)
    var_items = max(0.0, x.var(ddof=1) - s2.mean() / k)
    se = np.sqrt((1 - n / big_n) * var_items / n + s2.mean() / (k * n))
    rep = body["repeated_samples"]
    assert rep["k"] == k and rep["n"] == n and rep["within_variance_source"] == "bernoulli"
    assert rep["value"] == pytest.approx(x.mean(), rel=1e-6)
    assert rep["se"] == pytest.approx(se, rel=1e-5)
    assert rep["var_items"] == pytest.approx(var_items, rel=1e-5)
    assert rep["within_term"] == pytest.approx(s2.mean() / k, rel=1e-5)
    assert rep["variance_per_item"] == pytest.approx(var_items + s2.mean() / k, rel=1e-5)
    (est,) = [e for e in body["estimates"] if e["estimator"] == "repeated_samples"]
    assert est["se"] == pytest.approx(se, rel=1e-5) and est["basis"] == "design"
    assert est["ci_low"] == pytest.approx(max(0.0, x.mean() - 1.959963984540054 * se), rel=1e-5)

    # the same upload with the sources' own config: no warning
    same = client.post(
        f"/v1/subsets/{subset.id}/scores",
        params={"model": "new-0shot"},
        files=[
            ("file", ("s.csv", csv.encode(), "text/csv")),
            ("file", (RESULTS.name, _results_json(0), "application/json")),
        ],
    )
    (w0,) = same.json()["warnings"]
    assert w0["sources"] == {"0": 28, "5": 2} and w0["value"] == 0  # 2 sources differ


def test_few_source_warning_below_the_threshold_only(
    client: TestClient, db_session: Session
) -> None:
    assert MIN_SOURCE_MODELS == 100
    seeded = seed_gpqa(db_session, n_models=MIN_SOURCE_MODELS + 1, subtasks=False)
    db_session.commit()
    few, _ = _subset(db_session, seeded, "anchor_points", 30, seeded.names[:99])
    enough, _ = _subset(db_session, seeded, "anchor_points", 30, seeded.names[:100])
    rand, _ = _subset(db_session, seeded, "random", 30)
    body = client.get(f"/v1/subsets/{few.id}").json()
    (w,) = body["warnings"]
    assert w["code"] == "few_source_models"
    assert w["details"] == {"n_source_models": 99, "threshold": 100}
    assert client.get(f"/v1/subsets/{enough.id}").json()["warnings"] == []
    assert client.get(f"/v1/subsets/{rand.id}").json()["warnings"] == []
    y = gpqa()["correct"][300].astype(int)
    for sub, expect in ((few, ["few_source_models"]), (enough, [])):
        sidx = np.frombuffer(sub.indices, dtype="<i8")
        r = client.post(
            f"/v1/subsets/{sub.id}/scores",
            json={"model": "t", "results": {seeded.item_ids[p]: int(y[p]) for p in sidx}},
        )
        assert r.status_code == 201, r.text
        assert [x["code"] for x in r.json()["warnings"]] == expect
        v = client.get(
            f"/v1/subsets/{sub.id}/verdict",
            params={"model_a": seeded.names[0], "model_b": seeded.names[1]},
        )
        assert v.status_code == 200, v.text
        assert [x["code"] for x in v.json()["warnings"]] == expect


def test_config_field_values_count_every_reference(db_session: Session) -> None:
    from app.services.selection.drift import config_mismatches

    refs = {f"s{i}": {"num_fewshot": 0, "metric": "acc"} for i in range(3)}
    refs["s3"] = {"num_fewshot": 5}
    refs["s4"] = None
    out = config_mismatches("m", {"num_fewshot": 5, "metric": "acc", "repeats": 2}, refs)
    assert [(w.field, w.value, w.sources) for w in out] == [("num_fewshot", 5, {"0": 3, "5": 1})]
    assert config_mismatches("m", None, refs) == []
    assert copy.deepcopy(out[0]).message.startswith("num_fewshot = 5 for 'm' but 3 of 4")


def test_files_with_different_k_are_refused_naming_samples() -> None:
    from app.errors import InvalidInput
    from app.services.catalog.uploads import merge

    a = parse_columnar([0.5, 0.25], item_ids=["a", "b"], samples=4)
    b = parse_columnar([1.0, 0.0], item_ids=["c", "d"], samples=2)
    with pytest.raises(InvalidInput) as exc:
        merge([a, b])
    assert "different samples per item: [2, 4]" in str(exc.value.detail)
    assert [e.field for e in exc.value.errors] == [("samples",)]
    both = merge([a, parse_columnar([1.0, 0.75], item_ids=["c", "d"], samples=4)])
    assert both.samples == 4 and both.correct.tolist() == [0.5, 0.25, 1.0, 0.75]
