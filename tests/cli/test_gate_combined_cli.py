"""`benchslice gate --prediction combined` against the real service (uvicorn, a Celery worker,
SQLite), issue 34 item 3: the creation waits for the benchmark's IRT fit (the server answers 202
with the fit job, the worker fits, the client sends the same request again), then the gate runs
to the outcome its exit code names. Matrix: 12 REAL GPQA models (the fit's sources) and a
SYNTHETIC candidate (the baseline with items flipped to an exact gap)."""

from __future__ import annotations

import uuid

import numpy as np

from tests.cli.conftest import CLI
from tests.cli.test_gate_offline import GPQA, _flip


def test_a_combined_gate_waits_for_the_fit_and_decides(cli: CLI, tmp_path) -> None:
    rng = np.random.default_rng(343)
    with np.load(GPQA, allow_pickle=False) as g:
        stored = g["correct"][:12].astype(float)
    base = stored[5]
    cand = _flip(base, 0.0, base.size // 20, rng)
    name = f"gate-irt-{uuid.uuid4().hex[:6]}"
    models = [f"src{i}" for i in range(12)]
    models[5] = "prod"
    path = tmp_path / "m.npz"
    np.savez(path, correct=np.vstack([stored, cand]), models=np.array([*models, "cand"]),
             item_ids=np.array([f"{name}-{i}" for i in range(base.size)]))  # fmt: skip
    pushed = cli("push", "--create", "--benchmark", name, str(path), "--exclude", "cand")
    assert pushed.code == 0, pushed
    args = ["gate", "--model", "cand", "--baseline", "prod", "--margin", "0.05", "--seed", "3",
            "--batch", "40", "-b", name, "--answers", f"{name}={path}", "--json", "--new"]  # fmt: skip
    served = cli(*args, "--prediction", "combined")
    assert served.code == 0, served
    doc = served.json()
    assert doc["outcome"] == "pass" and doc["prediction"] == "combined", doc
    assert doc["benchmarks"][0]["state"] == "noninferior"
    # the same question with the default prediction is another gate, on the same items
    plain = cli(*args)
    assert plain.code == 0 and plain.json()["prediction"] == "calibrated", plain
