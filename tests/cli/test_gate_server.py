"""`benchslice gate` against the real service (``python -m app.launcher``: uvicorn, a Celery
worker, SQLite), issue 34: the same outcome, items and bounds as ``--offline`` on the same
inputs and seed; a gate left open by a killed job is resumed and nothing is counted twice; the
exit code follows the outcome.

Matrices: the REAL GPQA baseline row (row 5) and SYNTHETIC candidates (the baseline with items
flipped to an exact gap), and a SYNTHETIC 1,500-item benchmark.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from app.client import Client
from tests.cli.conftest import CLI
from tests.cli.service import LiveService
from tests.cli.test_gate_offline import GPQA, _flip


@pytest.fixture(scope="module")
def suite(cli: CLI, tmp_path_factory) -> dict:
    """Two benchmarks pushed with the baseline's full results; the candidates stay local."""
    rng = np.random.default_rng(341)
    d = tmp_path_factory.mktemp("gate-server")
    tag = uuid.uuid4().hex[:6]
    with np.load(GPQA, allow_pickle=False) as g:
        base = g["correct"][5].astype(float)
    sb = (rng.random(1500) < 0.65).astype(float)
    out = {"dir": d, "names": [f"gate-gpqa-{tag}", f"gate-synth-{tag}"], "files": {}}
    for name, b in zip(out["names"], (base, sb), strict=True):
        rows = np.stack([b, _flip(b, 0.0, b.size // 20, rng), _flip(b, -0.15, b.size // 5, rng)])
        ids = np.array([f"{name}-{i}" for i in range(b.size)])
        path = d / f"{name}.npz"
        np.savez(path, correct=rows, models=np.array(["prod", "cand", "bad"]), item_ids=ids)
        pushed = cli("push", "--create", "--benchmark", name, str(path),
                     "--exclude", "cand", "--exclude", "bad")  # fmt: skip
        assert pushed.code == 0, pushed
        out["files"][name] = path
    return out


def _args(suite, model: str, *extra: str) -> list[str]:
    args = ["gate", "--model", model, "--baseline", "prod", "--margin", "0.05", "--seed", "3",
            "--batch", "40"]  # fmt: skip
    for name in suite["names"]:
        args += ["-b", name, "--answers", f"{name}={suite['files'][name]}"]
    return [*args, *extra]


def _rows(doc: dict) -> list[tuple]:
    return [
        (r["benchmark"], r["state"], r["items"], round(r["delta"], 12), round(r["bound"], 12),
         round(r["upper"], 12))
        for r in doc["benchmarks"]
    ]  # fmt: skip


@pytest.mark.parametrize("model, code", [("cand", 0), ("bad", 3)])
def test_server_gate_matches_offline(cli: CLI, suite, model: str, code: int) -> None:
    served = cli(*_args(suite, model, "--json", "--new"))
    assert served.code == code, served
    offline = cli(*_args(suite, model, "--json", "--offline"))
    assert offline.code == code, offline
    a, b = served.json(), offline.json()
    assert a["outcome"] == b["outcome"] and a["items_used"] == b["items_used"]
    assert _rows(a) == _rows(b)
    assert a["offline"] is False and uuid.UUID(a["gate"])


def test_a_killed_gate_is_resumed_and_counted_once(
    cli: CLI, service: LiveService, suite, tmp_path: Path
) -> None:
    # a job that created the gate and answered round 1, then died before its reply was read
    with Client(service.url) as client:
        body = {
            "model": "cand",
            "benchmarks": [{"benchmark": n, "baseline": "prod", "margin": 0.02}
                           for n in suite["names"]],
            "alpha": 0.05, "rule": "no_regression", "prediction": "calibrated",
            "batch_size": 40, "seed": 9,
        }  # fmt: skip
        gate = client.create_gate(body)
        rows = {}
        for name in suite["names"]:
            with np.load(suite["files"][name]) as m:
                rows[name] = dict(
                    zip(m["item_ids"].tolist(), m["correct"][1].tolist(), strict=True)
                )
        first = {k: {it.item_id: rows[k][it.item_id] for it in items}
                 for k, items in gate.next_round.items.items()}  # fmt: skip
        after = client.post_gate_results(gate.id, 1, first)
        again = client.post_gate_results(gate.id, 1, first)  # the dead job's retry: a replay
        assert again.items_used == after.items_used and again.round == 1
    out = tmp_path / "gh-output"
    args = ["gate", "--model", "cand", "--baseline", "prod", "--margin", "0.02", "--seed", "9",
            "--batch", "40", "--json", "--junit", str(tmp_path / "gate.xml")]  # fmt: skip
    for name in suite["names"]:
        args += ["-b", name, "--answers", f"{name}={suite['files'][name]}"]
    resumed = cli(*args, GITHUB_OUTPUT=str(out))
    assert resumed.code in (0, 1, 3), resumed
    doc = resumed.json()
    assert doc["gate"] == str(gate.id), resumed.stderr
    assert "resuming gate" in resumed.stderr
    offline = cli(*args, "--offline").json()
    assert _rows(doc) == _rows(offline) and doc["items_used"] == offline["items_used"]
    with Client(service.url) as client:
        final = client.get_gate(gate.id)
    assert final.items_used == sum(sum(h.counts.values()) for h in final.history)
    assert [h.round for h in final.history] == list(range(1, final.round + 1))
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert lines["outcome"] == doc["outcome"] and int(lines["items_used"]) == doc["items_used"]
    assert (tmp_path / "gate.xml").read_bytes().startswith(b"<?xml")
    assert json.loads(json.dumps(doc))  # a plain JSON document


def test_server_gate_errors_exit_2_and_name_the_entry(cli: CLI, suite) -> None:
    run = cli("gate", "--model", "cand", "--baseline", "prod", "--margin", "0.02",
              "-b", "no-such-benchmark", "--answers",
              f"no-such-benchmark={suite['files'][suite['names'][0]]}")  # fmt: skip
    assert run.code == 2, run
    assert "benchmarks" in run.stderr and "no-such-benchmark" in run.stderr
