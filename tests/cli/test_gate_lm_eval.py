"""`benchslice gate --run` driving a real lm-evaluation-harness run on a suite of two tasks
(issue 34), against the real service (uvicorn, a Celery worker, SQLite).

lm-eval's `dummy` model answers two local tasks (tests/fixtures/lm_eval: `bs_tiny`, 40 sums, and
`bs_tiny2`, 60 differences; nothing comes from a hub). Each task is its own benchmark, created
from a full run's sample logs; the baseline `oracle` is right wherever the dummy model is and on
half of the items it gets wrong, so a chance-level candidate regresses by far more than a
2-point margin. Every round is ONE `lm_eval --tasks {tasks} --samples {samples}` call for every
open benchmark. The command fails on round 2: the gate stays open at round 2 and the error says
so; the same command again resumes it and goes on to FAIL, round 1 kept as it was and every
item counted once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import CLI
from tests.support.tools import missing

pytestmark = pytest.mark.integration

TASK_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
TASKS = {"bs_tiny": 40, "bs_tiny2": 60}


@pytest.fixture(scope="module")
def lm_eval_bin() -> Path:
    path = Path(sys.executable).parent / "lm_eval"
    found = path if path.exists() else shutil.which("lm_eval")
    if found is None:
        missing("lm_eval is not installed (a dev dependency: pip install -e '.[dev]')")
    return Path(found)


@pytest.fixture(scope="module")
def hf_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("hf")
    return {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(home)}


def _lm_eval(lm_eval_bin: Path, tasks: str, extra: str = "") -> str:
    return (
        f"cd {shlex.quote(str(TASK_DIR))} && {shlex.quote(str(lm_eval_bin))} --model dummy "
        f"--tasks {tasks} --include_path . --log_samples {extra}"
    )


@pytest.fixture(scope="module")
def suite(cli: CLI, lm_eval_bin: Path, hf_env: dict[str, str], tmp_path_factory) -> list[str]:
    """One benchmark per task, created from a full run, with the baseline `oracle`."""
    out = tmp_path_factory.mktemp("full")
    done = subprocess.run(
        _lm_eval(lm_eval_bin, ",".join(TASKS), f"--output_path {shlex.quote(str(out))}"),
        shell=True,
        env={**os.environ, **hf_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names = []
    for task, n in TASKS.items():
        (log,) = out.rglob(f"samples_{task}_*.jsonl")
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(rows) == n
        full = out / f"full-{task}"
        full.mkdir()
        (full / log.name).write_text(log.read_text())
        name = f"gate-{task}"
        run = cli("push", "--create", "--benchmark", name, "--model", "dummy/full", str(full))
        assert run.code == 0, run
        wrong = [i for i, r in enumerate(rows) if float(r["acc"]) == 0.0]
        extra = set(wrong[::2])
        oracle = out / f"oracle-{task}"
        oracle.mkdir()
        (oracle / log.name).write_text(
            "".join(
                json.dumps({**r, "acc": 1.0 if (float(r["acc"]) == 1.0 or i in extra) else 0.0})
                + "\n"
                for i, r in enumerate(rows)
            )
        )
        run = cli("push", "--benchmark", name, "--model", "oracle", str(oracle))
        assert run.code == 0, run
        names.append(name)
    return names


def test_gate_runs_lm_eval_per_round_resumes_and_fails(
    cli: CLI, service, suite: list[str], lm_eval_bin: Path, hf_env, tmp_path: Path
) -> None:
    run_round = _lm_eval(lm_eval_bin, "{tasks}", "--samples {samples} --output_path {output}")
    mark = tmp_path / "ran-once"
    flaky = f"if [ -e {mark} ]; then echo 'simulated crash' >&2; exit 3; fi; touch {mark}; "
    args = ["gate", "-m", "dummy/candidate", "--baseline", "oracle", "--margin", "0.02",
            "--batch", "6", "--seed", "1"]  # fmt: skip
    for name in suite:
        args += ["-b", name]
    first = cli(*args, "--run", flaky + run_round, **hf_env)
    assert first.code == 2, first
    gid = re.search(r"gate ([0-9a-f-]{36})", first.stderr).group(1)
    assert "exited with 3 on round 2" in first.stderr and "rerun" in first.stderr, first.stderr
    before = httpx.get(f"{service.url}/v1/gates/{gid}").json()
    assert before["state"] == "open" and before["round"] == 1
    assert before["items_used"] == 12  # one lm_eval call served both benchmarks' 6 items
    assert set(before["history"][0]["counts"]) == set(suite)

    out = tmp_path / "gh-output"
    junit = tmp_path / "gate.xml"
    resumed = cli(*args, "--run", run_round, "--json", "--junit", str(junit),
                  GITHUB_OUTPUT=str(out), **hf_env)  # fmt: skip
    assert resumed.code == 3, resumed  # FAIL: a regression exits 3
    assert f"resuming gate {gid} at round 2" in resumed.stderr
    doc = json.loads(resumed.stdout)  # stdout is the JSON document alone; lm-eval's went to stderr
    assert doc["gate"] == gid and doc["outcome"] == "fail" and doc["regressed"]
    final = httpx.get(f"{service.url}/v1/gates/{gid}").json()
    assert final["history"][0] == before["history"][0]  # round 1 kept as it was
    assert [h["round"] for h in final["history"]] == list(range(1, final["round"] + 1))
    assert final["items_used"] == sum(sum(h["counts"].values()) for h in final["history"])
    assert final["items_used"] < sum(TASKS.values())  # decided before running everything
    for row in final["benchmarks"]:
        assert row["items"] == sum(h["counts"].get(row["benchmark"], 0) for h in final["history"])
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert lines["outcome"] == "fail"
    assert b"<failure" in junit.read_bytes()
    # a closed gate is not resumed: the same command starts a new one
    listed = httpx.get(f"{service.url}/v1/gates", params={"model": "dummy/candidate"}).json()
    assert [g["id"] for g in listed["items"]] == [gid]
