"""Real GPQA in a live service, as a user would put it there: the CLI pushes the matrix, then the
API builds a subset, runs a small analysis on the worker, scores a model on the subset and
drives an evaluation session to its decision. Shared by the browser tests and bench_pages."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

# the README's verdict examples (its "Five-minute tour", step 5)
CLOSE_PAIR = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct")
FAR_PAIR = ("mistralai/Mistral-Large-Instruct-2411", "meta-llama/Meta-Llama-3-8B-Instruct")
ANALYSIS = {
    "methods": ["random", "anchor_points"],
    "sizes": [10, 25, 50, 100],
    "runs": 5,
    "seed": 0,
}


@dataclass(frozen=True)
class LiveGPQA:
    benchmark: str
    analysis_id: str
    subset_id: str
    session_id: str
    gate_id: str

    def pages(self) -> dict[str, str]:
        """Every page of the view, by name (the pair page with the README's close pair)."""
        a, b = CLOSE_PAIR
        pair = httpx.QueryParams({"model_a": a, "model_b": b, "size": 25})
        return {
            "index": "/ui/",
            "benchmark": f"/ui/benchmarks/{self.benchmark}",
            "pair": f"/ui/benchmarks/{self.benchmark}/pair?{pair}",
            "analysis": f"/ui/analyses/{self.analysis_id}",
            "subset": f"/ui/subsets/{self.subset_id}",
            "session": f"/ui/sessions/{self.session_id}",
            "gate": f"/ui/gates/{self.gate_id}",
        }


def _wait(client: httpx.Client, url: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(url).json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            assert body["status"] == "succeeded", body
            return body
        time.sleep(0.3)
    raise AssertionError(f"{url} did not finish in {timeout}s")


def seed_gpqa(base_url: str, env: dict[str, str], gpqa: Path, cwd: Path, headers=None) -> LiveGPQA:
    push = subprocess.run(
        [sys.executable, "-m", "app.cli", "push", "--create", "--benchmark", "gpqa", str(gpqa)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert push.returncode == 0, push.stdout + push.stderr
    with httpx.Client(base_url=base_url, timeout=120, headers=headers or {}) as client:
        r = client.post("/v1/benchmarks/gpqa/analyses", json=ANALYSIS)
        assert r.status_code == 202, r.text
        analysis_id = r.json()["id"]
        r = client.post(
            "/v1/benchmarks/gpqa/subsets", json={"method": "random", "size": 25, "seed": 0}
        )
        assert r.status_code == 202, r.text
        job = _wait(client, f"/v1/jobs/{r.json()['id']}")
        subset_id = (
            job["result"]["subset_id"] if job.get("result") else r.json()["params"]["subset_id"]
        )
        with np.load(gpqa, allow_pickle=False) as npz:
            names = npz["models"].tolist()
            correct = npz["correct"]
            item_ids = [str(i) for i in npz["item_ids"].tolist()]
        model, baseline = FAR_PAIR
        truth = dict(zip(item_ids, correct[names.index(model)].tolist(), strict=True))
        sub = client.get(f"/v1/subsets/{subset_id}").json()
        r = client.post(
            f"/v1/subsets/{subset_id}/scores",
            json={
                "model": model,
                "item_ids": [it["item_id"] for it in sub["items"]],
                "correct": [truth[it["item_id"]] for it in sub["items"]],
            },
        )
        assert r.status_code == 201, r.text
        r = client.post(
            "/v1/benchmarks/gpqa/sessions",
            json={
                "model": model,
                "baseline": baseline,
                "policy": "random",
                "batch_size": 20,
                "seed": 1,
            },
        )
        assert r.status_code == 201, r.text
        body = r.json()
        while body["state"] == "open":
            items = body["next_items"]
            r = client.post(
                f"/v1/sessions/{body['id']}/results",
                json={
                    "model": model,
                    "item_ids": [it["item_id"] for it in items],
                    "correct": [truth[it["item_id"]] for it in items],
                },
            )
            assert r.status_code == 200, r.text
            body = r.json()
        gate = _gate(client, model, baseline, truth)
        _wait(client, f"/v1/analyses/{analysis_id}")
    return LiveGPQA("gpqa", analysis_id, subset_id, body["id"], gate)


def _gate(client: httpx.Client, model: str, baseline: str, truth: dict) -> str:
    """A release gate of the far pair on GPQA (2-point margin), run to its outcome."""
    r = client.post(
        "/v1/gates",
        json={"model": model, "baseline": baseline, "margin": 0.02, "batch_size": 20, "seed": 1,
              "benchmarks": [{"benchmark": "gpqa"}]},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    gate = r.json()
    while gate["state"] == "open":
        rnd = gate["next_round"]
        results = [{"benchmark": k, "item_ids": [it["item_id"] for it in items],
                    "correct": [truth[it["item_id"]] for it in items]}
                   for k, items in rnd["items"].items()]  # fmt: skip
        r = client.post(f"/v1/gates/{gate['id']}/results",
                        json={"round": rnd["round"], "results": results})  # fmt: skip
        assert r.status_code == 200, r.text
        gate = r.json()
    return gate["id"]
