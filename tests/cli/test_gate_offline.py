"""`benchslice gate --offline` end to end in a subprocess: every exit code, the reports a CI job
reads (JUnit validated against a schema, $GITHUB_OUTPUT, --summary, --json), the same outcome as
the engine on the same inputs and seed.

Matrices: the REAL GPQA baseline row and SYNTHETIC candidates (the baseline with items flipped to
an exact gap), and a SYNTHETIC 3,000-item benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from app.core.sequential.gating.gates import OUTCOMES, run_gates

REPO = Path(__file__).resolve().parents[2]
GPQA = (
    Path(os.environ.get("BENCHSLICE_SHARED_DATA") or REPO.parent / "shared" / "data") / "gpqa.npz"
)
SCHEMA = Path(__file__).parent / "data" / "junit.xsd"


def _flip(b: np.ndarray, gap: float, disagree: int, rng) -> np.ndarray:
    net = int(np.floor(gap * b.size + 1e-9))
    up, down = (disagree + net) // 2, (disagree - net) // 2
    a = b.copy()
    a[rng.choice(np.flatnonzero(b == 1), down, replace=False)] = 0
    a[rng.choice(np.flatnonzero(b == 0), up, replace=False)] = 1
    return a


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """gpqa: REAL baseline (row 5) + SYNTHETIC candidates; synth: SYNTHETIC 3,000 items."""
    rng = np.random.default_rng(34)
    d = tmp_path_factory.mktemp("gate")
    with np.load(GPQA, allow_pickle=False) as g:
        base = g["correct"][5].astype(float)
    fine = _flip(base, 0.0, 20, rng)
    worse = _flip(base, -0.15, 80, rng)
    rows = np.stack([base, fine, worse])
    models = np.array(["prod", "cand", "bad"])
    np.savez(d / "gpqa.npz", correct=rows, models=models, item_ids=np.arange(base.size))
    sb = (rng.random(3000) < 0.7).astype(float)
    srows = np.stack([sb, _flip(sb, 0.0, 150, rng), _flip(sb, 0.0, 150, rng)])
    np.savez(d / "synth.npz", correct=srows, models=models, item_ids=np.arange(3000))
    return {"gpqa": d / "gpqa.npz", "synth": d / "synth.npz", "dir": d}


def _args(files, *args: str) -> list[str]:
    return [
        "gate", "--offline", "--baseline", "prod", "-b", "gpqa", "-b", "synth",
        "--answers", f"gpqa={files['gpqa']}", "--answers", f"synth={files['synth']}",
        *args,
    ]  # fmt: skip


def _gate(files, *args: str, env: dict | None = None):
    """In process (typer's runner): the command's code, exit code, stdout and stderr."""
    from typer.testing import CliRunner

    from app.cli import app

    return CliRunner().invoke(app, _args(files, *args), env={"GITHUB_OUTPUT": "", **(env or {})})


def test_the_installed_command_runs_in_a_subprocess(files) -> None:
    cmd = [sys.executable, "-m", "app.cli", *_args(files, "--model", "bad", "--margin", "0.05")]
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_OUTPUT"}
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert res.returncode == 3, res.stderr
    assert res.stdout.startswith("FAIL:") and "gate: fail (gpqa" in res.stderr


def test_pass_writes_every_report(files) -> None:
    d = files["dir"]
    out_file, summary, junit = d / "gh_output", d / "summary.md", d / "pass.xml"
    res = _gate(
        files, "--model", "cand", "--margin", "0.05", "--seed", "3", "--json",
        "--summary", str(summary), "--junit", str(junit),
        env={"GITHUB_OUTPUT": str(out_file)},
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["outcome"] == "pass" and doc["regressed"] == []
    assert [r["state"] for r in doc["benchmarks"]] == ["noninferior", "noninferior"]
    assert all(r["bound"] > -0.05 for r in doc["benchmarks"])
    assert doc["items_used"] < doc["items_total"]
    lines = dict(line.split("=", 1) for line in out_file.read_text().splitlines())
    assert lines["outcome"] == "pass" and int(lines["items_used"]) == doc["items_used"]
    assert float(lines["bound_synth"]) == pytest.approx(doc["benchmarks"][1]["bound"], abs=1e-6)
    assert "delta_gpqa" in lines
    text = summary.read_text()
    assert "Release gate: **PASS**" in text and len(text.encode()) < 1 << 20
    _valid_junit(junit, failures=0, skipped=0)


def test_regression_exits_3_and_names_the_benchmark(files) -> None:
    junit = files["dir"] / "fail.xml"
    res = _gate(files, "--model", "bad", "--margin", "0.05", "--json", "--junit", str(junit))
    assert res.exit_code == 3, res.stderr
    doc = json.loads(res.stdout)
    assert doc["outcome"] == "fail" and "gpqa" in doc["regressed"]
    tree = _valid_junit(junit, failures=len(doc["regressed"]), skipped=None)
    failed = [c.get("name") for c in tree.iter("testcase") if c.find("failure") is not None]
    assert failed == doc["regressed"]


def test_inconclusive_exits_1_with_skipped_cases(files) -> None:
    junit = files["dir"] / "open.xml"
    res = _gate(
        files, "--model", "cand", "--margin", "0.01", "--budget", "60", "--batch", "30",
        "--json", "--junit", str(junit),
    )  # fmt: skip
    assert res.exit_code == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["outcome"] == "inconclusive" and doc["items_used"] == 60
    _valid_junit(junit, failures=0, skipped=2)


@pytest.mark.parametrize(
    "args, hint",
    [
        (["--model", "cand", "--margin", "1.5"], "--margin"),
        (["--model", "cand", "--margin", "0.02", "-b", "gpqa"], "--benchmark"),
        (["--model", "cand", "--margin", "0.02", "--budget", "10"], "--budget"),
        (["--model", "nobody", "--margin", "0.02"], "nobody"),
        (["--model", "cand", "--margin", "0.02", "--prediction", "combined"], "IRT fit"),
    ],
)
def test_bad_input_exits_2_naming_what_is_wrong(files, args, hint) -> None:
    res = _gate(files, *args)
    assert res.exit_code == 2
    assert hint in res.stderr


def test_offline_is_the_engine_on_the_same_inputs_and_seed(files) -> None:
    res = _gate(files, "--model", "cand", "--margin", "0.03", "--seed", "11", "--json")
    doc = json.loads(res.stdout)
    cand, base = [], []
    for name in ("gpqa", "synth"):
        with np.load(files[name]) as m:
            cand.append(m["correct"][1].astype(float))
            base.append(m["correct"][0].astype(float))
    run = run_gates(cand, base, [0.03, 0.03], batch_size=50, seed=11)
    assert doc["outcome"] == OUTCOMES[int(run.outcome[0])]
    assert [r["items"] for r in doc["benchmarks"]] == run.items[0].tolist()


def _valid_junit(path: Path, *, failures: int, skipped: int | None):
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    tree = etree.parse(str(path))
    schema.assertValid(tree)
    suite = tree.getroot().find("testsuite")
    assert int(suite.get("failures")) == failures
    if skipped is not None:
        assert int(suite.get("skipped")) == skipped
    assert len(suite.findall("testcase")) == 2
    names = {p.get("name") for p in suite.find("properties")}
    assert {"gpqa.delta", "gpqa.bound", "synth.items", "outcome"} <= names
    return tree


def test_the_schema_rejects_a_malformed_report(tmp_path) -> None:
    """The validation can fail: a test case without a name is refused."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x" tests="1"><testcase/></testsuite></testsuites>')
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    assert not schema.validate(etree.parse(str(bad)))


def test_the_ci_doc_gate_command_runs(tmp_path) -> None:
    """docs/ci.md's `benchslice gate --offline` step, as written, on SYNTHETIC matrices in its
    paths (its server step runs lm_eval on a Hugging Face model: tests/cli/test_gate_lm_eval.py
    runs the same command shape with lm-eval's dummy model)."""
    import re

    doc = (REPO / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", doc, re.S)
    (cmd,) = [b for b in blocks if "benchslice gate" in b and "--offline" in b]
    rng = np.random.default_rng(1)
    (tmp_path / "results").mkdir()
    for name, n in (("gpqa", 448), ("mmlu", 4000)):
        b = (rng.random(n) < 0.6).astype(float)
        rows = np.stack([_flip(b, 0.0, n // 20, rng), b])
        models = np.array(["my-org/candidate", "my-org/production"])
        np.savez(tmp_path / "results" / f"{name}.npz", correct=rows, models=models)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "out"),
    }
    res = subprocess.run(["bash", "-c", "set -euo pipefail\n" + cmd], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "outcome=pass" in (tmp_path / "out").read_text()
    assert "**PASS**" in (tmp_path / "summary.md").read_text()
    etree.XMLSchema(etree.parse(str(SCHEMA))).assertValid(etree.parse(str(tmp_path / "gate.xml")))
