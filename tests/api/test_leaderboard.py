"""Leaderboards through the API on real Postgres, against the engine on the same GPQA matrix."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.ranking.leaderboard import leaderboard as core_leaderboard
from app.core.ranking.leaderboard import leaderboard_for_selection, mcnemar_pvalues
from app.ingest import parse_columnar
from app.schemas.leaderboards import (
    LeaderboardPairPublic,
    LeaderboardPairsPublic,
    LeaderboardPublic,
    LeaderboardRowPublic,
)
from app.schemas.results import ModelCreate
from app.services.catalog.results import store_results
from app.services.selection import subsets as subset_service
from tests.api._subset_data import Seeded, seed_gpqa

PROBLEM = "application/problem+json"
N_MODELS = 30


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=N_MODELS)
    db_session.commit()  # a later failing request rolls back to here, not before the data
    return seeded


def _name(seeded: Seeded, db_session: Session) -> str:
    from app.services.catalog.benchmarks import get_version

    return get_version(db_session, seeded.version_id).benchmark.name


def _url(ref: object, pairs: bool = False) -> str:
    return f"/v1/benchmarks/{ref}/leaderboard" + ("/pairs" if pairs else "")


def _fields(body: dict) -> set[str]:
    return {".".join(map(str, e["loc"])) for e in body.get("errors", [])}


def test_leaderboard_equals_the_engine(client: TestClient, seeded: Seeded) -> None:
    r = client.get(_url(seeded.version_id))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert LeaderboardPublic.model_validate(body).model_dump(mode="json") == body
    engine = core_leaderboard(seeded.correct)
    assert body["n_models"] == N_MODELS and body["n_items"] == 448
    assert body["population"] == "items" and body["design"] == "full"
    assert body["correction"] == "holm" and body["alpha"] == 0.05
    assert body["n_tiers"] == engine.n_tiers
    assert body["method"] == engine.method
    rows = body["rows"]
    names = np.asarray(seeded.names)
    assert [x["model"] for x in rows] == names[engine.rows.model].tolist()
    assert [x["tier"] for x in rows] == engine.rows.tier.tolist()
    assert [x["rank_low"] for x in rows] == engine.rows.rank_low.tolist()
    assert [x["rank_high"] for x in rows] == engine.rows.rank_high.tolist()
    acc = seeded.correct.mean(axis=1)
    for x in rows:
        i = seeded.names.index(x["model"])
        assert x["accuracy"] == pytest.approx(acc[i], abs=1e-12)
        assert x["ci_low"] <= x["accuracy"] <= x["ci_high"]
        assert x["rank_low"] <= x["rank"] <= x["rank_high"]
        assert x["n_items"] == 448
    # point rank: 1 + number of strictly more accurate models
    for x in rows:
        assert x["rank"] == 1 + int(np.sum(acc > x["accuracy"] + 1e-12))
    # tiers are non-decreasing down the board, starting at 1
    tiers = [x["tier"] for x in rows]
    assert tiers[0] == 1 and tiers == sorted(tiers) and tiers[-1] == body["n_tiers"]


def test_pairs_p_values_are_exact_mcnemar(client: TestClient, seeded: Seeded) -> None:
    r = client.get(_url(seeded.version_id, pairs=True))
    assert r.status_code == 200, r.text
    body = r.json()
    assert LeaderboardPairsPublic.model_validate(body).model_dump(mode="json") == body
    m = N_MODELS
    assert body["n_pairs"] == len(body["pairs"]) == m * (m - 1) // 2
    idx = {n: i for i, n in enumerate(seeded.names)}
    y = seeded.correct.astype(int)
    p_raw = []
    for p in body["pairs"]:
        a, b = idx[p["model_a"]], idx[p["model_b"]]
        n10 = int(np.sum((y[a] == 1) & (y[b] == 0)))
        n01 = int(np.sum((y[a] == 0) & (y[b] == 1)))
        assert (p["n10"], p["n01"], p["n_shared"]) == (n10, n01, 448)
        assert p["difference"] == pytest.approx((n10 - n01) / 448, abs=1e-12)
        assert p["ci_low"] <= p["difference"] <= p["ci_high"]
        # model_a is listed above model_b: never less accurate
        assert y[a].mean() >= y[b].mean()
        assert p["p_better"] >= 0.5 - 1e-12 or n10 == n01
        p_raw.append(p["p_value"])
    # independent oracle: two-sided exact binomial via scipy
    from scipy.stats import binomtest

    for p in body["pairs"][:: max(1, len(body["pairs"]) // 60)]:
        k, n = p["n10"], p["n10"] + p["n01"]
        want = 1.0 if n == 0 else binomtest(k, n, 0.5).pvalue
        assert p["p_value"] == pytest.approx(want, rel=1e-9, abs=1e-12)
    # Holm from its definition: p_(i) * (m - i + 1), running maximum, capped at 1
    p_raw = np.asarray(p_raw)
    order = np.argsort(p_raw, kind="stable")
    k = p_raw.size
    holm = np.minimum(1.0, np.maximum.accumulate(p_raw[order] * (k - np.arange(k))))
    want = np.empty(k)
    want[order] = holm
    got = np.array([p["p_adjusted"] for p in body["pairs"]])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert body["n_significant"] == int(np.sum(got <= 0.05))
    assert [p["significant"] for p in body["pairs"]] == (got <= 0.05).tolist()
    # and the engine's own McNemar agrees on the counts
    n10 = np.array([p["n10"] for p in body["pairs"]])
    n01 = np.array([p["n01"] for p in body["pairs"]])
    np.testing.assert_allclose(p_raw, mcnemar_pvalues(n10, n01), rtol=1e-12)


def test_name_version_and_id_paths_agree(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    name = _name(seeded, db_session)
    params = {"top": 8, "correction": "bh", "alpha": 0.1}
    bodies = [
        client.get(_url(ref), params=params) for ref in (seeded.version_id, name, f"{name}@v1")
    ]
    assert [b.status_code for b in bodies] == [200, 200, 200], [b.text for b in bodies]
    assert bodies[0].json() == bodies[1].json() == bodies[2].json()
    body = bodies[0].json()
    assert body["benchmark"] == name and body["version"] == 1
    assert body["n_models"] == 8 and body["correction"] == "bh" and body["alpha"] == 0.1
    acc = np.sort(seeded.correct.mean(axis=1))[::-1]
    assert [x["accuracy"] for x in body["rows"]] == pytest.approx(acc[:8].tolist())
    engine = core_leaderboard(
        seeded.correct[np.argsort(-seeded.correct.mean(axis=1), kind="stable")[:8]],
        alpha=0.1,
        correction="bh",
    )
    assert body["n_tiers"] == engine.n_tiers

    missing = client.get(_url("no-such-benchmark-xyz"))
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith(PROBLEM)
    assert _fields(missing.json()) == {"path.benchmark"}
    assert client.get(_url(f"{name}@v9")).status_code == 404


def test_models_and_match_select(client: TestClient, seeded: Seeded) -> None:
    a, b, c = seeded.names[3], seeded.names[7], seeded.names[11]
    body = client.get(_url(seeded.version_id), params={"models": f"{a}, {b},{c}"}).json()
    assert sorted(x["model"] for x in body["rows"]) == sorted([a, b, c])
    engine = core_leaderboard(seeded.correct[[3, 7, 11]])
    assert [x["tier"] for x in body["rows"]] == engine.rows.tier.tolist()

    # substring (case-insensitive) and glob
    sub = client.get(_url(seeded.version_id), params={"match": "M00"}).json()
    assert sorted(x["model"] for x in sub["rows"]) == [n for n in seeded.names if "m00" in n]
    glob = client.get(_url(seeded.version_id), params={"match": "m01?-*"}).json()
    assert sorted(x["model"] for x in glob["rows"]) == [
        n for n in seeded.names if n.startswith("m01")
    ]
    both = client.get(_url(seeded.version_id), params={"match": "m00", "models": c}).json()
    assert {x["model"] for x in both["rows"]} == {n for n in seeded.names if "m00" in n} | {c}


def test_csv_and_markdown(client: TestClient, seeded: Seeded) -> None:
    js = client.get(_url(seeded.version_id), params={"top": 10}).json()
    r = client.get(_url(seeded.version_id), params={"top": 10, "format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.text.splitlines()[0].split(",") == list(LeaderboardRowPublic.model_fields)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [x["model"] for x in rows] == [x["model"] for x in js["rows"]]
    for got, want in zip(rows, js["rows"], strict=True):
        assert float(got["accuracy"]) == pytest.approx(want["accuracy"], abs=1e-15)
        assert int(got["tier"]) == want["tier"] and int(got["rank_low"]) == want["rank_low"]

    md = client.get(_url(seeded.version_id), params={"top": 10, "format": "markdown"})
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    table = [line for line in md.text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[:3] == ["model", "accuracy", "ci_low"] and "tier" in header
    body = [[c.strip() for c in line.strip("|").split("|")] for line in table[2:]]
    assert len(body) == 10
    assert [int(x[header.index("tier")]) for x in body] == [x["tier"] for x in js["rows"]]
    tiers = "1 tier " if js["n_tiers"] == 1 else f"{js['n_tiers']} tiers "
    assert tiers in md.text

    pairs = client.get(_url(seeded.version_id, pairs=True), params={"top": 10, "format": "csv"})
    assert pairs.text.splitlines()[0].split(",") == list(LeaderboardPairPublic.model_fields)
    prow = list(csv.DictReader(io.StringIO(pairs.text)))
    assert len(prow) == 45 and {"p_value", "p_adjusted", "n10", "n01"} <= set(prow[0])


def test_subset_leaderboard_tests_full_benchmark_differences(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    req = subset_service.resolve_request(db_session, seeded.version_id, "random", 25, {}, 4, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    db_session.commit()
    selection = subset_service.to_selection(subset)
    r = client.get(_url(seeded.version_id), params={"subset": subset.id})
    assert r.status_code == 200, r.text
    body = r.json()
    engine = leaderboard_for_selection(seeded.correct[:, selection.indices], selection)
    assert body["population"] == "benchmark" and body["design"] == "uniform"
    assert body["subset_id"] == subset.id and body["n_items"] == 25
    assert body["n_population"] == 448
    assert body["n_tiers"] == engine.n_tiers
    assert [x["tier"] for x in body["rows"]] == engine.rows.tier.tolist()
    est = seeded.correct[:, selection.indices].mean(axis=1)
    for x in body["rows"]:
        assert x["accuracy"] == pytest.approx(est[seeded.names.index(x["model"])])
        assert x["n_items"] == 25 and x["rank_low"] <= x["rank"] <= x["rank_high"]
    full = client.get(_url(seeded.version_id)).json()
    assert body["n_tiers"] <= full["n_tiers"]  # 25 items separate fewer models than 448

    unknown = client.get(_url(seeded.version_id), params={"subset": "nope"})
    assert unknown.status_code == 404 and _fields(unknown.json()) == {"query.subset"}
    other = seed_gpqa(db_session, n_models=3)
    db_session.commit()
    foreign = client.get(_url(other.version_id), params={"subset": subset.id})
    # a subset of another version is answered like a missing one (issue 39: no existence oracle)
    assert foreign.status_code == 404 and _fields(foreign.json()) == {"query.subset"}
    assert str(seeded.version_id) not in foreign.text


def test_partial_coverage_uses_shared_items(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    rng = np.random.default_rng(7)
    keep = np.sort(rng.choice(448, size=300, replace=False))
    values = {seeded.item_ids[j]: int(seeded.correct[0, j]) for j in keep}
    store_results(
        db_session,
        seeded.version_id,
        ModelCreate(name="zz-partial"),
        parse_columnar(list(values.values()), item_ids=list(values)),
    )
    db_session.commit()
    names = f"zz-partial,{seeded.names[0]},{seeded.names[1]}"
    r = client.get(_url(seeded.version_id, pairs=True), params={"models": names})
    assert r.status_code == 200, r.text
    pair = next(
        p
        for p in r.json()["pairs"]
        if {p["model_a"], p["model_b"]} == {"zz-partial", seeded.names[0]}
    )
    # identical results on the 300 shared items
    assert (pair["n10"], pair["n01"], pair["n_shared"]) == (0, 0, 300)
    assert pair["p_value"] == 1.0
    rows = client.get(_url(seeded.version_id), params={"models": names}).json()["rows"]
    assert next(x for x in rows if x["model"] == "zz-partial")["n_items"] == 300


def test_bad_input_names_the_field(client: TestClient, seeded: Seeded) -> None:
    def problem(params: dict, status: int = 422) -> set[str]:
        r = client.get(_url(seeded.version_id), params=params)
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith(PROBLEM)
        return _fields(r.json())

    assert problem({"models": seeded.names[0]}) == {"query.models"}
    assert problem({"match": "no-such-model-anywhere"}) == {"query.models"}
    assert problem({"correction": "bonferroni"}) == {"query.correction"}
    assert problem({"alpha": 1.5}) == {"query.alpha"}
    assert problem({"alpha": 5e-324}) == {"query.alpha"}  # found by schemathesis: null bounds
    assert problem({"top": 1}) == {"query.top"}
    assert problem({"format": "xml"}) == {"query.format"}
    assert problem({"models": f"{seeded.names[0]},not-a-model"}, 404) == {"query.models"}
    r = client.get(_url(seeded.version_id), params={"models": f"{seeded.names[0]},not-a-model"})
    assert "not-a-model" in r.json()["detail"]


def test_models_without_shared_items_are_422(
    client: TestClient, seeded: Seeded, db_session: Session
) -> None:
    for name, part in (("zz-first", slice(0, 200)), ("zz-second", slice(200, 448))):
        ids = seeded.item_ids[part]
        store_results(
            db_session,
            seeded.version_id,
            ModelCreate(name=name),
            parse_columnar([1] * len(ids), item_ids=ids),
        )
    db_session.commit()
    r = client.get(_url(seeded.version_id), params={"models": "zz-first,zz-second"})
    assert r.status_code == 422, r.text
    assert _fields(r.json()) == {"query.models"}
    assert "share no item" in r.json()["detail"]


def test_identical_models_form_one_tier(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=1)
    y = seeded.correct[0].tolist()
    for i in range(4):
        store_results(
            db_session, seeded.version_id, ModelCreate(name=f"clone-{i}"), parse_columnar(y)
        )
    db_session.commit()
    body = client.get(_url(seeded.version_id)).json()
    assert body["n_models"] == 5 and body["n_tiers"] == 1
    assert {(x["rank"], x["rank_low"], x["rank_high"], x["tier"]) for x in body["rows"]} == {
        (1, 1, 5, 1)
    }
