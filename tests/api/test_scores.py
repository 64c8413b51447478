"""Scoring a model from its subset results: estimates with CIs, baseline comparison, shift flag."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats as st
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.estimation.intervals import jeffreys_fpc
from app.core.estimation.stats import compare_to_baseline
from app.core.scoring.crossfit import stored_out_of_fold
from app.core.scoring.score_models import design_inclusion, score_models, size_needed_for_gap
from app.core.scoring.support import guttman_errors, guttman_limit
from app.db.models import SubsetScore
from app.services.selection import subsets as subset_service
from tests.api._subset_data import Seeded, gpqa, seed_gpqa

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=30)
    db_session.commit()
    return seeded


def _subset(db_session: Session, seeded: Seeded, method: str = "random", size: int = 40, **params):
    sources = seeded.names[:20] if method not in ("random", "subtask_stratified") else None
    req = subset_service.resolve_request(
        db_session, seeded.version_id, method, size, params, 9, sources
    )
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    return subset, np.frombuffer(subset.indices, dtype="<i8")


def _post_results(client: TestClient, subset, seeded: Seeded, idx, y, model: str):
    """POST one model's results on the subset's items (``y`` in ``idx`` order)."""
    results = {seeded.item_ids[p]: int(v) for p, v in zip(idx, y, strict=True)}
    return client.post(f"/v1/subsets/{subset.id}/scores", json={"model": model, "results": results})


def test_random_subset_score_with_baseline(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    subset, idx = _subset(db_session, seeded)
    new = gpqa()["correct"][100].astype(int)  # a model not stored on the benchmark
    results = {seeded.item_ids[p]: int(new[p]) for p in idx}
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        params={"baseline": seeded.names[0]},
        json={"model": "new-model", "results": results},
    )
    assert r.status_code == 201, r.text
    body = r.json()
    est = body["estimates"]
    assert [e["estimator"] for e in est] == ["mean"]
    lo, hi = jeffreys_fpc(int(new[idx].sum()), 40, 448)  # the default interval (issue 24)
    assert est[0]["value"] == pytest.approx(new[idx].mean())
    assert (est[0]["ci_low"], est[0]["ci_high"]) == pytest.approx((float(lo), float(hi)))
    assert est[0]["interval"] == "jeffreys_fpc" and est[0]["basis"] == "design"
    assert est[0]["raw_value"] == est[0]["value"] and est[0]["note"] is None
    base = body["baseline"]
    cmp = compare_to_baseline(new[idx], seeded.correct[0], idx)
    assert base["p_better"] == pytest.approx(cmp.p_better)
    assert base["mcnemar_p"] == pytest.approx(cmp.mcnemar_p)
    assert base["size_needed"] == size_needed_for_gap(
        cmp.n_new_only, cmp.n_baseline_only, 40, 448, 0.8
    )
    assert base["large_enough"] == (base["size_needed"] is not None and 40 >= base["size_needed"])
    shift = body["population_shift"]
    assert shift["checked"] == "accuracy_range_and_person_fit"
    assert shift["details"]["reference_models"] == 30
    ref = seeded.correct[:, idx].astype(np.float64)
    assert shift["details"]["guttman_errors"] == pytest.approx(
        float(guttman_errors(new[None, idx], ref.mean(axis=0))[0])
    )
    assert shift["details"]["reference_guttman_limit"] == pytest.approx(guttman_limit(ref))
    stored = db_session.scalars(select(SubsetScore).where(SubsetScore.subset_id == subset.id)).one()
    assert stored.model_name == "new-model" and stored.baseline["p_better"] == base["p_better"]


def test_a_model_that_fails_the_easy_items_is_flagged_and_answered_design_based(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    """Issue 38 (person misfit off IRT subsets): right on the items the references find
    hardest, wrong on the easiest, with an ordinary subset score: flagged by its Guttman errors,
    answered design-based on a random subset (the reason says why)."""
    subset, idx = _subset(db_session, seeded)
    ref = seeded.correct[:, idx].astype(np.float64)
    n_right = round(float(ref.mean()) * idx.size)  # the references' mean score
    hardest = np.argsort(ref.mean(axis=0), kind="stable")[:n_right]
    y = np.zeros(idx.size, dtype=int)
    y[hardest] = 1
    r = _post_results(client, subset, seeded, idx, y, "reversed")
    assert r.status_code == 201, r.text
    body = r.json()
    shift = body["population_shift"]
    lo, hi = shift["details"]["reference_min"], shift["details"]["reference_max"]
    assert lo <= y.mean() <= hi  # the score range alone would not flag it
    assert shift["flagged"] and "poor person fit (normed Guttman errors" in shift["reasons"][0]
    assert shift["details"]["guttman_errors"] > shift["details"]["reference_guttman_limit"]
    assert body["answer"]["basis"] == "design"
    assert "extrapolation (poor person fit" in body["answer_reason"]


def test_csv_upload_and_weighted_subset(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    subset, idx = _subset(db_session, seeded, "confidence_stratified", 30)
    y = seeded.correct[25, idx]
    csv_body = "item_id,correct\n" + "".join(
        f"{seeded.item_ids[p]},{v}\n" for p, v in zip(idx, y, strict=True)
    )
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        params={"model": "csv-model"},
        content=csv_body,
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    (est,) = r.json()["estimates"]  # < 50 items: no model_assisted
    w = np.frombuffer(subset.weights, dtype="<f8")
    assert est["estimator"] == "horvitz_thompson" and est["interval"] == "stratified_ht"
    assert est["basis"] == "design" and est["value"] == pytest.approx(float(y @ w))
    # closed form: stratified HT variance sum_h N_h^2 (1 - n_h/N_h) s_h^2 / n_h / N^2; 0/1
    # results: Jeffreys at the effective size p (1 - p) / se^2 (z / t_{n-H})^2 (issue 24)
    # (a stratum with one sampled item borrows the pooled variance)
    pi, strata = design_inclusion(subset_service.to_selection(subset), 448)
    var, n_strata = 0.0, int(strata.max()) + 1
    for h in range(n_strata):
        yh = y[strata == h].astype(float)
        n_h, big_h = yh.size, yh.size / pi[strata == h][0]
        s2 = yh.var(ddof=1) if n_h > 1 else y.astype(float).var(ddof=1)
        var += big_h**2 * (1 - n_h / big_h) * s2 / n_h
    se = np.sqrt(var) / 448
    q = st.t.ppf(0.975, idx.size - n_strata)  # the design may round the size up
    assert est["se"] == pytest.approx(se, rel=1e-9)
    p, z = est["value"], st.norm.ppf(0.975)
    n_e = p * (1 - p) / se**2 * (z / q) ** 2
    lo = st.beta.ppf(0.025, p * n_e + 0.5, (1 - p) * n_e + 0.5)
    hi = st.beta.isf(0.025, p * n_e + 0.5, (1 - p) * n_e + 0.5)
    assert 5 <= y.sum() <= y.size - 5  # not sparse: no Wilson hull
    assert est["ci_low"] == pytest.approx(max(lo, y.sum() / 448), rel=1e-9)
    assert est["ci_high"] == pytest.approx(min(hi, (y.sum() + 448 - y.size) / 448), rel=1e-9)


def test_interval_parameter(client: TestClient, db_session: Session, seeded: Seeded) -> None:
    subset, idx = _subset(db_session, seeded)
    y = gpqa()["correct"][102].astype(int)[idx]
    url = f"/v1/subsets/{subset.id}/scores"
    payload = {
        "model": "jeff",
        "results": {seeded.item_ids[p]: int(v) for p, v in zip(idx, y, strict=True)},
    }
    (est,) = client.post(url, params={"interval": "jeffreys"}, json=payload).json()["estimates"]
    k = int(y.sum())
    assert est["interval"] == "jeffreys" and est["basis"] == "design"
    assert (est["ci_low"], est["ci_high"]) == pytest.approx(
        (st.beta.ppf(0.025, k + 0.5, 40 - k + 0.5), st.beta.ppf(0.975, k + 0.5, 40 - k + 0.5))
    )
    (cp,) = client.post(
        url, params={"interval": "clopper_pearson"}, json={**payload, "model": "cp"}
    ).json()["estimates"]
    assert (cp["ci_low"], cp["ci_high"]) == pytest.approx(
        (st.beta.ppf(0.025, k, 40 - k + 1), st.beta.ppf(0.975, k + 1, 40 - k))
    )
    bad = client.post(url, params={"interval": "wald"}, json=payload)
    assert bad.status_code == 422 and bad.headers["content-type"] == PROBLEM
    assert ["query", "interval"] in [e["loc"] for e in bad.json()["errors"]]


def test_outlier_model_is_flagged(client: TestClient, db_session: Session, seeded: Seeded) -> None:
    subset, idx = _subset(db_session, seeded)
    r = client.post(
        f"/v1/subsets/{subset.id}/scores",
        json={"model": "perfect", "correct": [1] * len(idx)},  # aligned to position order
    )
    assert r.status_code == 201, r.text
    shift = r.json()["population_shift"]
    assert shift["flagged"] is True and "outside" in shift["reasons"][0]
    # issue 38: the answer is design-based and says why; the estimand is named
    body = r.json()
    assert body["answer"]["basis"] == "design" and body["answer"]["estimand"] == "benchmark"
    assert body["answer_reason"].startswith("extrapolation (subset estimate")
    typical = client.post(
        f"/v1/subsets/{subset.id}/scores",
        json={"model": "typical", "correct": seeded.correct[3, np.sort(idx)].tolist()},
    ).json()
    assert not typical["population_shift"]["flagged"]
    assert typical["answer"] == typical["estimates"][0]


def test_bad_uploads_are_422(client: TestClient, db_session: Session, seeded: Seeded) -> None:
    subset, idx = _subset(db_session, seeded)
    url = f"/v1/subsets/{subset.id}/scores"
    partial = {seeded.item_ids[p]: 1 for p in idx[:-1]}
    r = client.post(url, json={"model": "m", "results": partial})
    assert r.status_code == 422 and "missing" in r.json()["detail"]
    outside = next(i for i in range(448) if i not in set(idx.tolist()))
    r = client.post(url, json={"model": "m", "results": {**partial, seeded.item_ids[outside]: 1}})
    assert r.status_code == 422 and "not in this subset" in r.json()["detail"]
    r = client.post(url, json={"model": "m", "correct": [1, 0]})
    assert r.status_code == 422
    full = {seeded.item_ids[p]: 1 for p in idx}
    r = client.post(url, params={"baseline": "ghost"}, json={"model": "m", "results": full})
    assert r.status_code == 404 and r.headers["content-type"] == PROBLEM
    assert (
        client.post(
            f"/v1/subsets/{'f' * 64}/scores", json={"model": "m", "results": full}
        ).status_code
        == 404
    )


def test_tiny_benchmarks_irt_estimates_and_shift(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    from app.core.estimation.estimators import estimate

    subset, idx = _subset(db_session, seeded, "tiny_benchmarks", 25, dims=2, max_iter=100)
    selection = subset_service.to_selection(subset)
    # the job stored every calibrated estimator's out-of-fold values on the 20 sources: the
    # intervals below are the cross-fitted ones (issue 24)
    assert set(stored_out_of_fold(selection, 20)) == {"irt", "p_irt", "gp_irt"}
    y = seeded.correct[5, idx].astype(float)  # a source model: expected in range
    r = _post_results(client, subset, seeded, idx, y, "tb-model")
    assert r.status_code == 201, r.text
    body = r.json()
    by = {e["estimator"]: e for e in body["estimates"]}
    assert list(by) == ["irt", "p_irt", "gp_irt"]
    # bias-corrected by the source models' error law: the service equals the engine on the
    # same inputs, and raw_value is the estimator's own number
    ref = seeded.correct[[seeded.names.index(n) for n in subset.source_models]]
    engine = {
        b.estimator: b.row(0)
        for b in score_models(selection, y[None, :], 448, reference_correct=ref)
    }
    for name, e in by.items():
        assert e["raw_value"] == pytest.approx(
            float(estimate(selection, y[None, :], estimator=name)[0])
        )
        assert e["interval"] == "reference_calibrated" and e["basis"] == "model"
        for key in ("value", "ci_low", "ci_high", "se"):
            assert e[key] == pytest.approx(engine[name][key], abs=1e-12), (name, key)
        assert e["ci_low"] <= e["value"] <= e["ci_high"] and e["se"] > 0
    shift = body["population_shift"]
    assert shift["checked"] == "irt_ability_and_person_fit"
    assert len(shift["details"]["theta"]) == 2 and "person_fit_lz" in shift["details"]

    assert body["answer"] == body["estimates"][0]  # a source model: the default estimate
    oracle = client.post(
        f"/v1/subsets/{subset.id}/scores", json={"model": "oracle", "correct": [1] * len(idx)}
    ).json()
    perfect = oracle["population_shift"]
    assert perfect["flagged"] is True and perfect["reasons"]
    # issue 38: every interval of this (non-random) subset is model-based: no answer, and why
    assert oracle["answer"] is None
    assert "not drawn at random" in oracle["answer_reason"]
    assert "--method random" in oracle["answer_reason"]
    # the subset page reads the answers the API returned: tb-model's first estimate, and for
    # the oracle none (withheld, with the API's reason), never its model-based irt estimate
    page = client.get(f"/ui/subsets/{subset.id}")
    assert page.status_code == 200, page.text
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(
            r'<tr class="score[^"]*"><td class="name">([^<]+)</td>.*?</tr>', page.text, re.S
        )
    }
    assert set(rows) == {"tb-model", "oracle"}
    first = body["estimates"][0]
    assert (
        'class="score"' in rows["tb-model"]
        and f"{first['estimator']} (model-based" in rows["tb-model"]
    )
    assert f"{100 * first['value']:.1f}" in rows["tb-model"]
    assert "extrapolated" in rows["oracle"] and "withheld" in rows["oracle"]
    assert oracle["answer_reason"] in html.unescape(rows["oracle"])
    assert "(model-based" not in rows["oracle"]


def test_anchor_points_confidence_estimator_needs_confidences(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    subset, idx = _subset(db_session, seeded, "anchor_points", 15)
    ys = [int(v) for v in seeded.correct[3, np.sort(idx)]]  # columnar: in position order
    r = client.post(f"/v1/subsets/{subset.id}/scores", json={"model": "ap", "correct": ys})
    by = {e["estimator"]: e for e in r.json()["estimates"]}
    assert by["weighted_confidence"]["available"] is False
    w = np.frombuffer(subset.weights, dtype="<f8")
    assert by["weighted_mean"]["raw_value"] == pytest.approx(float(seeded.correct[3, idx] @ w))
    assert by["weighted_mean"]["basis"] == "model"
    assert by["weighted_mean"]["interval"] == "reference_calibrated"
    conf = [0.9 if v else 0.2 for v in ys]
    r = client.post(
        f"/v1/subsets/{subset.id}/scores", json={"model": "ap2", "correct": ys, "confidence": conf}
    )
    assert {e["estimator"]: e for e in r.json()["estimates"]}["weighted_confidence"]["available"]


def test_idempotency_key_stores_one_score(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    subset, idx = _subset(db_session, seeded)
    new = gpqa()["correct"][101].astype(int)
    payload = {"model": "retried", "results": {seeded.item_ids[p]: int(new[p]) for p in idx}}
    url = f"/v1/subsets/{subset.id}/scores"
    key = {"Idempotency-Key": "score-1"}
    first = client.post(url, json=payload, headers=key)
    assert first.status_code == 201, first.text
    replay = client.post(url, json=payload, headers=key)
    assert replay.status_code == 201 and replay.json() == first.json()
    assert replay.headers["idempotency-replayed"] == "true"
    payload["results"][seeded.item_ids[idx[0]]] = 1 - int(new[idx[0]])
    other = client.post(url, json=payload, headers=key)
    assert other.status_code == 422 and other.json()["errors"][0]["loc"] == [
        "header",
        "Idempotency-Key",
    ]
    stored = db_session.scalars(select(SubsetScore).where(SubsetScore.model_name == "retried"))
    assert len(stored.all()) == 1
    # no key: each request is a new score
    assert client.post(url, json=payload).status_code == 201


def test_reanchor_prompt_when_many_models_lie_beyond_the_sources(
    client: TestClient, db_session: Session, seeded: Seeded
) -> None:
    """Issue 38: a subset fitted on the 20 weakest models, with 10 stronger ones stored: the
    subset page says so and names the command that rebuilds it; fitted on a spread, it does not."""
    from app.services.catalog.benchmarks import get_version
    from app.services.selection.extrapolation import reanchor_prompt

    acc = seeded.correct.mean(axis=1)
    order = np.argsort(acc, kind="stable")
    weakest = [seeded.names[i] for i in order[:20]]
    beyond = int((acc[order[20:]] > acc[order[:20]].max()).sum())
    assert beyond >= 5
    req = subset_service.resolve_request(
        db_session, seeded.version_id, "anchor_points", 15, {}, 9, weakest
    )
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    version = get_version(db_session, seeded.version_id)
    text = reanchor_prompt(db_session, subset, version)
    assert text is not None and text.startswith(f"{beyond} models with full results lie beyond")
    assert "--method anchor_points --size 15" in text
    page = client.get(f"/ui/subsets/{subset.id}").text
    assert 'id="reanchor"' in page and "benchslice subset create" in page
    listing = client.get(f"/ui/benchmarks/{version.benchmark.name}").text  # and the benchmark page
    assert f'id="reanchor-{subset.id}"' in listing
    assert f"{beyond} models with full results lie beyond" in listing
    spread = [seeded.names[i] for i in order[::3][:10]] + [seeded.names[i] for i in order[-3:]]
    req = subset_service.resolve_request(
        db_session, seeded.version_id, "anchor_points", 15, {}, 9, sorted(set(spread))
    )
    other, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    assert reanchor_prompt(db_session, other, version) is None
    listing = client.get(f"/ui/benchmarks/{version.benchmark.name}").text
    assert f'id="reanchor-{other.id}"' not in listing and f'id="reanchor-{subset.id}"' in listing
