"""Issue 35's newcomer: 30 models scored in quarters on 40 items (SYNTHETIC), every command asked
through the CLI against a real service, each answer checked against the engine it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from app.core.estimation.bounded import betting_interval, sign_flip_test
from app.core.ranking.graded import graded_leaderboard
from tests.cli.conftest import CLI

pytestmark = pytest.mark.integration

N_MODELS, N_ITEMS = 30, 40
NEW = "org/graded-new"  # held out: scored from a subset


@pytest.fixture(scope="module")
def graded(cli: CLI, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rng = np.random.default_rng(3540)
    ability = np.linspace(-0.35, 0.35, N_MODELS + 1)[:, None]
    scores = np.clip(rng.beta(0.7, 0.7, (N_MODELS + 1, N_ITEMS)) + ability, 0, 1)
    scores = (np.round(scores * 4) / 4).astype(np.float32)  # quarters: 0, .25, .5, .75, 1
    names = [f"org/graded-{m:02d}" for m in range(N_MODELS)] + [NEW]
    items = np.array([f"q{i:02d}" for i in range(N_ITEMS)])
    path = tmp_path_factory.mktemp("graded") / "graded.npz"
    np.savez(path, correct=scores, models=np.array(names), item_ids=items)
    run = cli("push", "--create", "--benchmark", "graded40", str(path), "--exclude", NEW)
    assert run.code == 0, run
    return {"scores": scores[:N_MODELS], "new": scores[N_MODELS], "names": names[:N_MODELS]}


def test_verdict_uses_the_sign_flip_test_and_simulation(cli: CLI, graded: dict[str, Any]):
    a, b = graded["names"][29], graded["names"][0]
    run = cli("verdict", "-b", "graded40", a, b, "-n", "20", "--json")
    assert run.code in (0, 1), run
    body = run.json()
    assert body["basis"] == "simulated" and body["paired"] is None
    g = body["graded"]
    d = graded["scores"][29].astype(float) - graded["scores"][0].astype(float)
    expected = sign_flip_test(d, seed=35)
    assert g["p_value"] == pytest.approx(expected.p_value)
    assert g["test"] == f"sign_flip_{'exact' if expected.method == 'exact' else 'monte_carlo'}"
    assert g["draws"] > 0 and 0 <= g["p_same_order_mc_error"] < 0.01
    assert body["gap"] == pytest.approx(d.mean(), abs=1e-6)
    assert "sign-flip" in body["answers"][0] and "Monte Carlo" in body["answers"][1]
    people = cli("verdict", "-b", "graded40", a, b, "-n", "20")
    assert "graded scores" in people.stdout + people.stderr


def test_leaderboard_ranks_every_graded_model(cli: CLI, graded: dict[str, Any]):
    run = cli("leaderboard", "--benchmark", "graded40", "--format", "json")
    assert run.code == 0, run
    body = run.json()
    assert body["n_models"] == N_MODELS and body["excluded"] == []
    engine = graded_leaderboard(graded["scores"])
    names = np.asarray(graded["names"])
    assert [r["model"] for r in body["rows"]] == names[engine.rows.model].tolist()
    assert [r["tier"] for r in body["rows"]] == engine.rows.tier.tolist()
    assert [r["rank_low"] for r in body["rows"]] == engine.rows.rank_low.tolist()
    assert "paired t-test" in body["method"] and body["n_tiers"] == engine.n_tiers
    top, bottom = graded["scores"][engine.rows.model[0]], graded["scores"][engine.rows.model[-1]]
    assert engine.pairs.p_value.min() == pytest.approx(
        min(stats.ttest_rel(top, bottom).pvalue, engine.pairs.p_value.min()), abs=1e-6
    )


def test_plan_and_item_health_answer(cli: CLI, graded: dict[str, Any]):
    plan = cli("plan", "-b", "graded40", "--gap", "0.2", "--json")
    assert plan.code == 0, plan
    body = plan.json()
    assert body["basis"] == "simulated" and body["evidence"]["graded"] is True
    assert body["significance"]["source"] == "benchmark_typical"
    assert body["size"] is None or 1 <= body["size"] <= N_ITEMS
    items = cli("benchmarks", "items", "graded40", "--json")
    assert items.code == 0, items
    rows = items.json()["items"]
    assert len(rows) == N_ITEMS
    acc = graded["scores"].astype(float).mean(axis=0)
    assert [r["accuracy"] for r in rows] == pytest.approx(acc.tolist(), abs=1e-6)


def test_subset_score_with_baseline_on_graded_scores(
    cli: CLI, graded: dict[str, Any], tmp_path: Path
):
    made = cli(
        "subset", "create", "-b", "graded40", "--method", "random", "-n", "20", "--seed", "1"
    )
    assert made.code == 0, made
    sid = made.stdout.strip()
    items = cli("subset", "get", sid, "-f", "json").json()["items"]
    positions = [i["position"] for i in items]
    path = tmp_path / "new.csv"
    path.write_text(
        "item_id,correct\n"
        + "".join(f"{i['item_id']},{graded['new'][i['position']]:g}\n" for i in items)
    )
    base = graded["names"][15]
    run = cli("score", sid, "--model", NEW, str(path), "--baseline", base, "--json")
    assert run.code == 0, run
    body = run.json()
    (mean,) = [e for e in body["estimates"] if e["estimator"] == "mean"]
    y = graded["new"][positions].astype(float)
    lo, hi = betting_interval(y, N_ITEMS)
    assert mean["interval"] == "betting_fpc"
    assert mean["ci_low"] == pytest.approx(lo[0]) and mean["ci_high"] == pytest.approx(hi[0])
    cmp = body["baseline"]
    d = y - graded["scores"][15][positions].astype(float)
    assert cmp["test"].startswith("sign_flip") and cmp["mcnemar_p"] is None
    assert cmp["p_value"] == pytest.approx(sign_flip_test(d, seed=35).p_value)
    assert cmp["ci_low"] <= cmp["mean_diff"] <= cmp["ci_high"]
    assert cmp["mean_diff"] == pytest.approx(d.mean(), abs=1e-6)


def test_mdad_analysis_then_curve_verdicts_and_plans_on_graded_scores(
    cli: CLI, graded: dict[str, Any], tmp_path: Path
):
    from app.core.reliability.power import paired_sample_size

    run = cli(
        "analyze", "-b", "graded40", "--sizes", "5,10", "--runs", "4", "--sources", "20",
        "--targets", "10", "--seed", "1", "--plots", str(tmp_path), "--json",
    )  # fmt: skip
    assert run.code == 0, run
    body = run.json()
    cells = body["analysis"]["result"]["mdad"]
    methods = {c["method"] for c in cells}
    assert {"random", "anchor_points", "tiny_benchmarks", "dpp"} <= methods
    assert all(0.0 <= c["mean_agreement"] <= 1.0 for c in cells)
    assert (tmp_path / "mdad.svg").stat().st_size > 0
    assert (tmp_path / "agreement-tiny_benchmarks.svg").stat().st_size > 0

    a, b = graded["names"][29], graded["names"][0]
    v = cli("verdict", "-b", "graded40", a, b, "-n", "10", "--method", "tiny_benchmarks", "--json")
    assert v.code in (0, 1), v  # answers (was a 409 asking for --method random)
    verdict = v.json()
    d = graded["scores"][29].astype(float) - graded["scores"][0].astype(float)
    assert verdict["basis"] == "robust_curve" and verdict["method"] == "tiny_benchmarks"
    assert verdict["gap"] == pytest.approx(d.mean(), abs=1e-6)
    g = verdict["graded"]
    assert g["p_value"] == pytest.approx(sign_flip_test(d, seed=35).p_value)
    assert g["draws"] is None and g["p_same_order_mc_error"] is None  # read, not simulated
    assert "sign-flip" in verdict["answers"][0] and "analysis' curves" in verdict["answers"][1]
    assert 0.0 <= verdict["p_same_order"] <= 1.0

    p = cli(
        "plan", "-b", "graded40", "--gap", "0.2", "--method", "tiny_benchmarks",
        "--pair", a, b, "--json",
    )  # fmt: skip
    assert p.code == 0, p
    plan = p.json()
    assert plan["basis"] == "robust_curve" and plan["evidence"]["sizes"] == [5, 10]
    sig = plan["significance"]  # from the graded pair's Var(d_i), not from 0/1 discordance
    assert sig["source"] == "pair" and sig["omega2"] == pytest.approx(np.var(d), rel=1e-6)
    assert sig["n"] == int(paired_sample_size(0.2, np.var(d), n_population=N_ITEMS))
    people = cli("plan", "-b", "graded40", "--gap", "0.2")
    assert people.code == 0 and "simulated over 4,000 random subsets" in people.stdout
    assert "None runs" not in people.stdout


def test_a_corpus_metric_is_refused_naming_it(cli: CLI, tmp_path: Path):
    path = tmp_path / "samples_wmt_bleu.jsonl"
    rec = {"doc_id": 0, "doc_hash": "h0", "bleu": ["a reference", "a prediction"]}
    path.write_text(json.dumps(rec) + "\n")
    run = cli("push", "--benchmark", "graded40", "--model", "org/mt", str(path))
    assert run.code != 0
    out = run.stdout + run.stderr
    assert "'bleu' has no per-item score" in out and "corpus" in out


def test_k_samples_are_stored_as_samples_not_items_and_give_pass_at_k(
    cli: CLI, graded: dict[str, Any], tmp_path: Path
):
    from app.core.estimation.bounded import pass_at_k

    rng = np.random.default_rng(8)
    k = 4
    draws = rng.random((N_ITEMS, k)) < np.linspace(0.1, 0.9, N_ITEMS)[:, None]
    means = draws.mean(axis=1)
    path = tmp_path / "k4.csv"
    path.write_text(
        "item_id,correct,samples\n" + "".join(f"q{i:02d},{m:g},{k}\n" for i, m in enumerate(means))
    )
    pushed = cli("push", "-b", "graded40", "--model", "org/k4", str(path))
    assert pushed.code == 0, pushed
    board = cli("leaderboard", "-b", "graded40", "--models", "org/k4,org/graded-00", "-f", "json")
    assert board.code == 0, board
    (row,) = [r for r in board.json()["rows"] if r["model"] == "org/k4"]
    assert row["n_items"] == N_ITEMS  # 40 items of 4 samples, not 160 items
    assert row["accuracy"] == pytest.approx(means.mean(), abs=1e-6)

    made = cli(
        "subset", "create", "-b", "graded40", "--method", "random", "-n", "20", "--seed", "2"
    )
    sid = made.stdout.strip()
    items = cli("subset", "get", sid, "-f", "json").json()["items"]
    pos = [i["position"] for i in items]
    sub = tmp_path / "k4_subset.csv"
    sub.write_text(
        "item_id,correct,samples\n" + "".join(f"q{p:02d},{means[p]:g},{k}\n" for p in pos)
    )
    run = cli("score", sid, "--model", "org/k4-new", str(sub), "--json")
    assert run.code == 0, run
    rep = run.json()["repeated_samples"]
    assert rep["k"] == k and rep["n"] == 20  # clustered by item: 20 clusters, not 80
    assert rep["within_term"] > 0 and rep["var_items"] >= 0
    c = draws[pos].sum(axis=1)
    got = {e["k"]: e for e in rep["pass_at_k"]}
    assert sorted(got) == [1, 2, 4]
    for kk, e in got.items():
        per_item = pass_at_k(k, c, kk)
        assert e["value"] == pytest.approx(per_item.mean(), abs=1e-6)
        assert e["se"] == pytest.approx(per_item.std(ddof=1) / np.sqrt(20), abs=1e-6)
        assert e["ci_low"] <= e["value"] <= e["ci_high"]
    assert got[1]["value"] == pytest.approx(means[pos].mean(), abs=1e-6)
