"""Issue 6's check, end to end through the HTTP API with a real Celery worker over Redis on the
real GPQA matrix (420 models x 448 items): create the benchmark, upload every model, build a
tinyBenchmarks subset and fetch it in every format, score a held-out model from its subset
results, ask pair verdicts, run an MDAD analysis and read its table and plots.

Every number the service returns is checked against numpy on the npz or against ``app.core``
called directly on the same data with the same seeds (exact equality where the service is
meant to run the same engine code).
"""

from __future__ import annotations

import csv
import io
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from threadpoolctl import threadpool_limits

from app.core.estimation.estimators import estimate as core_estimate
from app.core.reliability.exact import exact_agreement, pair_probability
from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.planning import verdict as core_verdict
from app.core.reliability.protocol import run_protocol
from app.core.selectors import make_selector
from app.db.models import Benchmark, Job, LanguageModel
from app.settings import Settings
from tests.conftest import WorkerProcess, wait_for_job

pytestmark = pytest.mark.integration

Cleanup = Callable[[type, Any], None]

SUBTASK = "gpqa_main"
SUBSET_SEED = 20240
TINY_PARAMS = {"dims": 3}  # the paper's 10 dims fit for ~30 s on this machine; 3 take ~2 s
ANALYSIS = {
    "methods": ["random", "anchor_points"],
    "sizes": [10, 25, 50],
    "runs": 6,
    "n_sources": 300,
    "n_targets": 50,
    "mode": "robust",
    "seed": 606,
}
PROBLEM = "application/problem+json"


def _closest_pair(acc: np.ndarray, gap: float) -> tuple[int, int]:
    """Rows (a, b) with acc[a] > acc[b] whose gap is closest to ``gap`` (first in row order)."""
    diff = acc[:, None] - acc[None, :]
    cost = np.where(diff > 0, np.abs(diff - gap), np.inf)
    a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
    return int(a), int(b)


def _ok(response: Any, code: int = 200) -> Any:
    assert response.status_code == code, (
        f"{response.request.url}: {response.status_code} {response.text[:2000]}"
    )
    return response


def test_gpqa_end_to_end(
    shared_data_dir,
    settings: Settings,
    celery_worker_process: WorkerProcess,
    committed_client: TestClient,
    committed_sessionmaker: sessionmaker[Session],
    cleanup: Cleanup,
) -> None:
    api = committed_client
    with np.load(shared_data_dir / "gpqa.npz", allow_pickle=False) as d:
        correct = d["correct"].astype(np.uint8)
        item_ids = [str(x) for x in d["item_ids"]]
    n_models, n_items = correct.shape
    assert (n_models, n_items) == (420, 448), "gpqa.npz is not the expected 420 x 448 matrix"
    acc = correct.mean(axis=1)
    tag = uuid.uuid4().hex[:8]
    # zero-padded: the service orders models by name, which is then the npz row order
    names = [f"e2e-{tag}-{k:03d}" for k in range(n_models)]
    subtasks = np.array([SUBTASK] * n_items)

    # --- 1. benchmark and all 420 models' results (columnar JSON) -----------------------------
    created = _ok(
        api.post(
            "/v1/benchmarks",
            json={
                "name": f"gpqa-e2e-{tag}",
                "items": [{"id": i, "subtask": SUBTASK} for i in item_ids],
            },
        ),
        201,
    ).json()
    version_id = created["id"]
    cleanup(Benchmark, uuid.UUID(created["benchmark_id"]))
    try:
        for name, row in zip(names, correct, strict=True):
            written = _ok(
                api.post(
                    f"/v1/benchmarks/{version_id}/results",
                    json={"model": name, "correct": row.tolist()},
                ),
                201,
            ).json()
            assert written["coverage"] == 1.0 and written["binary"], written
    finally:
        with committed_sessionmaker() as s:
            stmt = select(LanguageModel.id).where(LanguageModel.name.in_(names))
            for mid in s.scalars(stmt):
                cleanup(LanguageModel, mid)

    detail = _ok(api.get(f"/v1/benchmarks/{version_id}")).json()
    assert (detail["n_items"], detail["n_models"]) == (448, 420), detail
    assert detail["subtasks"] == [{"name": SUBTASK, "n_items": 448}], detail["subtasks"]
    got_acc = {m["name"]: m["accuracy"] for m in detail["models"]}
    np.testing.assert_allclose(
        [got_acc[n] for n in names], acc, rtol=0, atol=1e-12, err_msg="per-model accuracy"
    )
    summary = detail["accuracy"]
    want = {
        "mean": acc.mean(),
        "min": acc.min(),
        "median": np.median(acc),
        "max": acc.max(),
    }
    for key, value in want.items():
        assert summary[key] == pytest.approx(value, abs=1e-12), (key, summary, want)

    # --- 2. tinyBenchmarks subset of 25 (one model held out of the sources), every format -----
    held_out = int(np.argsort(acc, kind="stable")[n_models // 2])  # a median model
    sources = [n for k, n in enumerate(names) if k != held_out]
    body = {
        "method": "tiny_benchmarks",
        "size": 25,
        "seed": SUBSET_SEED,
        "source_models": sources,
        "params": TINY_PARAMS,
    }
    queued = _ok(api.post(f"/v1/benchmarks/{version_id}/subsets", json=body), 202)
    cleanup(Job, uuid.UUID(queued.json()["id"]))
    job = wait_for_job(lambda: api.get(queued.headers["location"]).json(), timeout=90)
    assert job["status"] == "succeeded", (job, celery_worker_process.log[-3000:])
    sid = job["result"]["subset_id"]

    sub = _ok(api.get(f"/v1/subsets/{sid}")).json()
    assert sub["id"] == sid and sub["size"] == 25 and sub["method"] == "tiny_benchmarks", sub
    assert sub["provenance"]["seed"] == SUBSET_SEED
    assert sub["provenance"]["source_models"] == sources
    json_ids = [it["item_id"] for it in sub["items"]]
    positions = [it["position"] for it in sub["items"]]
    weights = np.array([it["weight"] for it in sub["items"]])
    assert positions == sorted(positions) and len(set(positions)) == 25, positions
    assert json_ids == [item_ids[p] for p in positions], "item ids do not match their positions"
    assert weights.sum() == pytest.approx(1.0, abs=1e-12), f"weights sum to {weights.sum()}"

    ids = _ok(api.get(f"/v1/subsets/{sid}", params={"format": "ids"})).json()
    assert ids == json_ids, "format=ids differs from the json items"

    csv_resp = _ok(api.get(f"/v1/subsets/{sid}", params={"format": "csv"}))
    assert csv_resp.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(csv_resp.text)))
    assert [r["item_id"] for r in rows] == json_ids, "format=csv ids differ from the json items"
    assert [int(r["position"]) for r in rows] == positions
    assert {r["subtask"] for r in rows} == {SUBTASK}
    assert [int(r["doc_id"]) for r in rows] == [it["doc_id"] for it in sub["items"]]
    np.testing.assert_array_equal([float(r["weight"]) for r in rows], weights, "csv weights")

    lm = _ok(api.get(f"/v1/subsets/{sid}", params={"format": "lm-eval"})).json()
    assert list(lm) == [SUBTASK], lm
    assert lm[SUBTASK] == sorted(lm[SUBTASK]), "lm-eval doc ids are not sorted"
    # one subtask: the lm-eval doc id is the position in the benchmark
    assert lm[SUBTASK] == positions, "lm-eval doc ids differ from the json positions"

    # the engine, fitted here on the same sources with the same params and seed, picks the same
    # (with the worker's BLAS thread count: the IRT fit's last bits depend on it)
    selector = make_selector("tiny_benchmarks", **sub["provenance"]["params"])
    src_rows = np.array([k for k in range(n_models) if k != held_out])
    with threadpool_limits(limits=settings.worker_native_threads):
        selector.fit(correct[src_rows].astype(np.float64), subtasks=subtasks)
    selection = selector.select(25, rng=SUBSET_SEED)
    assert sorted(selection.indices.tolist()) == positions, "subset differs from the engine's"
    order = np.argsort(selection.indices)
    np.testing.assert_array_equal(selection.weights[order], weights, "weights differ")

    # --- 3. score the held-out model from its 25 subset results only ---------------------------
    y = correct[held_out, positions]
    scored = _ok(
        api.post(
            f"/v1/subsets/{sid}/scores",
            json={
                "model": f"e2e-{tag}-candidate",
                "results": dict(zip(json_ids, y.tolist(), strict=True)),
            },
        ),
        201,
    ).json()
    assert scored["n_items"] == 25 and scored["subset_accuracy"] == pytest.approx(y.mean())
    true_acc = float(acc[held_out])
    estimates = {e["estimator"]: e for e in scored["estimates"]}
    assert sub["estimator"] in estimates, (sub["estimator"], list(estimates))
    y_engine = y[order].astype(np.float64)[None, :]  # the engine's item order
    for name, est in estimates.items():
        if est["value"] is None:
            continue
        engine_value = float(core_estimate(selection, y_engine, estimator=name)[0])
        # value is bias-corrected for model-based subsets; raw_value is the estimator's own
        assert est["raw_value"] == engine_value, (
            f"{name}: API {est['raw_value']} != engine {engine_value}"
        )
    with_ci = {k: e for k, e in estimates.items() if e["ci_low"] is not None}
    assert sub["estimator"] in with_ci and {"p_irt", "gp_irt"} <= set(with_ci), estimates
    for name, est in with_ci.items():
        half_width = (est["ci_high"] - est["ci_low"]) / 2
        assert abs(est["value"] - true_acc) <= 1.5 * half_width, (
            f"{name}: estimate {est['value']:.3f} (CI {est['ci_low']:.3f}-{est['ci_high']:.3f}) "
            f"is more than 1.5 half-widths from the true full accuracy {true_acc:.3f}"
        )

    # --- 4. random verdicts at size 25: ~2 points apart and ~15 points apart --------------------
    def verdict(a: int, b: int, method: str = "random") -> Any:
        return api.get(
            f"/v1/benchmarks/{version_id}/verdict",
            params={"model_a": names[a], "model_b": names[b], "size": 25, "method": method},
        )

    random_mdad_25 = exact_agreement(correct, 25).mdad
    close = _closest_pair(acc, 0.02)
    far = _closest_pair(acc, 0.15)
    assert abs(acc[close[0]] - acc[close[1]] - 0.02) < 0.005, "no GPQA pair ~2 points apart"
    assert abs(acc[far[0]] - acc[far[1]] - 0.15) < 0.005, "no GPQA pair ~15 points apart"
    for (a, b), expected in ((close, False), (far, True)):
        v = _ok(verdict(a, b)).json()
        exact = pair_probability(correct, a, b, 25)
        gap = acc[a] - acc[b]
        assert v["gap"] == pytest.approx(gap, abs=1e-12), (v, gap)
        assert (v["p_same_order"], v["p_tie"], v["p_reversed"]) == (
            float(exact.p_greater),
            float(exact.p_equal),
            float(exact.p_less),
        ), f"verdict {v} differs from app.core.reliability.exact.pair_probability {exact}"
        assert v["mdad_at_size"] == random_mdad_25, (v, random_mdad_25)
        assert v["distinguishable"] is expected, (
            f"gap {gap:.3f} at n=25: p_same_order={v['p_same_order']:.3f}, expected "
            f"distinguishable={expected}"
        )

    # --- 6a. anchor_points verdict before any analysis: 409 naming the analysis to run ----------
    missing = verdict(*far, method="anchor_points")
    assert missing.status_code == 409, missing.text
    assert missing.headers["content-type"].startswith(PROBLEM), missing.headers
    problem = missing.json()
    assert problem["status"] == 409
    # the fix in words a person can run: the CLI command and the API call, by benchmark name
    assert "benchslice analyze" in problem["detail"], problem
    assert "--methods anchor_points" in problem["detail"], problem
    assert "/analyses" in problem["detail"] and "POST /v1/benchmarks/gpqa-e2e-" in problem["detail"]

    # --- 5. analysis of random and anchor_points: table equal to the engine's, plots ------------
    queued_a = _ok(api.post(f"/v1/benchmarks/{version_id}/analyses", json=ANALYSIS), 202).json()
    cleanup(Job, uuid.UUID(queued_a["job_id"]))
    analysis = wait_for_job(lambda: api.get(f"/v1/analyses/{queued_a['id']}").json(), timeout=120)
    assert analysis["status"] == "succeeded", (analysis, celery_worker_process.log[-3000:])
    assert analysis["progress"] == {"done": 6, "total": 6}, analysis["progress"]
    result = analysis["result"]
    assert result["models_used"] == 420 and result["n_items"] == 448, result

    protocol = run_protocol(
        correct,
        ANALYSIS["methods"],
        ANALYSIS["sizes"],
        subtasks=subtasks,
        runs=ANALYSIS["runs"],
        n_sources=ANALYSIS["n_sources"],
        n_targets=ANALYSIS["n_targets"],
        seed=ANALYSIS["seed"],
    )
    cells = analyze_protocol(
        protocol, mode="robust", splits=("seen", "unseen"), threshold=analysis["threshold"]
    )
    table = result["mdad"]
    assert [(c["method"], c["n"], c["split"]) for c in table] == [
        (c.method, c.n, c.split) for c in cells
    ], "MDAD table rows differ from the engine's (method, n, split)"
    fields = ("mdad", "ci_low", "ci_high", "reached", "max_gap", "mean_agreement")
    fields += ("mean_abs_error", "kendall_tau", "n_runs", "n_pairs", "n_boot")
    for got, want in zip(table, cells, strict=True):
        for f in fields:
            assert got[f] == getattr(want, f), (
                f"{want.method} n={want.n} {want.split}: {f} API {got[f]} != engine "
                f"{getattr(want, f)}"
            )

    base = f"/v1/analyses/{queued_a['id']}/plots"
    for path, params in (
        (f"{base}/mdad", {}),
        (f"{base}/agreement", {"method": "anchor_points", "n": 25}),
    ):
        svg = _ok(api.get(f"{path}.svg", params=params))
        assert svg.headers["content-type"].startswith("image/svg+xml")
        root = ET.fromstring(svg.content)
        assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
        png = _ok(api.get(f"{path}.png", params=params))
        assert png.headers["content-type"] == "image/png"
        assert png.content[:8] == b"\x89PNG\r\n\x1a\n", f"{path}.png is not a PNG"

    # --- 6b. anchor_points verdict now answered from the analysis' curves -----------------------
    answered = _ok(verdict(*far, method="anchor_points")).json()
    assert answered["method"] == "anchor_points"
    assert 0.0 <= answered["p_same_order"] <= 1.0, answered
    anchor_seen = [c for c in cells if c.method == "anchor_points" and c.split == "seen"]
    pair = correct[list(far)]
    want_v = core_verdict(pair, 0, 1, 25, method="anchor_points", results=anchor_seen)
    assert (answered["p_same_order"], answered["p_tie"], answered["p_reversed"]) == (
        want_v.p_same,
        want_v.p_tie,
        want_v.p_reversed,
    ), (
        f"anchor_points verdict {answered} differs from app.core.reliability.planning.verdict {want_v}"
    )
    assert answered["mdad_at_size"] == want_v.mdad
    assert answered["distinguishable"] is want_v.distinguishable
