"""`benchslice evaluate --run` driving a real lm-evaluation-harness run (issue 23).

lm-eval's `dummy` model (random log-likelihoods, seeded) answers a 40-question local task
(tests/fixtures/lm_eval: a task YAML and its JSONL data; nothing comes from a hub:
HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1, a private HF_HOME). The benchmark is created from a
full lm-eval run's sample logs; the baseline `oracle` answers every item right, so a chance-level
model is decidedly worse. A batch whose command fails leaves the session open and says how to
resume; `evaluate --session ID` re-runs that batch and goes on. Checked: the session decides
`worse` before the last item, one history row per batch, the batch answered before the failure
is kept as it was, and with `--json` stdout is exactly one JSON document while lm-eval's own
output goes to stderr.
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
from typing import Any

import httpx
import pytest

from tests.cli.conftest import CLI
from tests.support.tools import missing

pytestmark = pytest.mark.integration

TASK_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
TASK = "bs_tiny"
N_ITEMS = 40


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


def _lm_eval(lm_eval_bin: Path, extra: str = "") -> str:
    """The lm_eval command line on the local task (run from the task's folder: its data file
    path is relative)."""
    return (
        f"cd {shlex.quote(str(TASK_DIR))} && {shlex.quote(str(lm_eval_bin))} --model dummy "
        f"--tasks {TASK} --include_path . --log_samples {extra}"
    )


@pytest.fixture(scope="module")
def tiny(cli: CLI, lm_eval_bin: Path, hf_env: dict[str, str], tmp_path_factory) -> str:
    """The benchmark `tiny-lm`, created from a full lm-eval run, with a stronger baseline `oracle`."""
    out = tmp_path_factory.mktemp("full")
    done = subprocess.run(
        _lm_eval(lm_eval_bin, f"--output_path {shlex.quote(str(out))}"),
        shell=True,
        env={**os.environ, **hf_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = cli("push", "--create", "--benchmark", "tiny-lm", "--model", "dummy/full", str(out))
    assert run.code == 0, run
    # the baseline: the same sample logs, right wherever the dummy model is right and on half
    # of the items it gets wrong. Not an all-right oracle: against a known 100 % baseline one
    # wrong answer decides (Ā ≤ (N-1)/N < B̄), and the session must need more than one batch.
    (log,) = out.rglob(f"samples_{TASK}_*.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == N_ITEMS
    wrong = [i for i, r in enumerate(rows) if float(r["acc"]) == 0.0]
    assert len(wrong) >= 20, f"the dummy model got only {len(wrong)} items wrong"
    extra = set(wrong[::2])
    oracle = out / "oracle" / log.name
    oracle.parent.mkdir()
    oracle.write_text(
        "".join(
            json.dumps({**r, "acc": 1.0 if (float(r["acc"]) == 1.0 or i in extra) else 0.0}) + "\n"
            for i, r in enumerate(rows)
        )
    )
    run = cli("push", "--benchmark", "tiny-lm", "--model", "oracle", str(oracle.parent))
    assert run.code == 0, run
    return "tiny-lm"


def test_lm_eval_batches_resume_and_decide(
    cli: CLI, service, tiny: str, lm_eval_bin: Path, hf_env: dict[str, str], tmp_path: Path
) -> None:
    """Batch 1 runs, batch 2's command fails: the session stays open at batch 2 and the
    error says how to resume; `--session ID` re-runs batch 2 and goes on to a decision."""
    run_batch = _lm_eval(lm_eval_bin, "--samples {samples} --output_path {output}")
    mark = tmp_path / "ran-once"
    flaky = f"if [ -e {mark} ]; then echo 'simulated crash' >&2; exit 3; fi; touch {mark}; "
    args = ["-b", tiny, "-m", "dummy/candidate", "--baseline", "oracle", "--batch", "4"]
    first = cli(
        "evaluate", *args, "--seed", "0", "--policy", "random", "--run", flaky + run_batch, **hf_env
    )
    assert first.code == 2, first
    sid = re.search(r"session ([0-9a-f-]{36})", first.stderr).group(1)
    assert f"--session {sid}" in first.stderr, first.stderr[-1500:]
    assert "exited with 3 on batch 2" in first.stderr, first.stderr[-1500:]
    lines = first.stdout.strip().splitlines()  # one progress line, no lm-eval table
    assert len(lines) == 1 and lines[0].split()[:2] == ["4", "items"], first
    before = httpx.get(f"{service.url}/v1/sessions/{sid}").json()
    assert before["state"] == "open" and before["step"] == 1 and before["items_used"] == 4

    resumed = cli("evaluate", "--session", sid, "--run", run_batch, "--json", **hf_env)
    assert resumed.code == 3, resumed  # decided worse: a regression exits 3
    final: dict[str, Any] = json.loads(resumed.stdout)  # stdout is the JSON document alone
    assert final["id"] == sid
    assert final["state"] == "decided" and final["decision"] == "worse", final
    assert 4 < final["items_used"] < N_ITEMS and final["items_used"] % 4 == 0
    assert [h["items_used"] for h in final["history"]] == list(range(4, final["items_used"] + 1, 4))
    assert final["history"][0] == before["history"][0]
    assert final["difference"]["upper"] < 0
    assert f"|{TASK}" in resumed.stderr  # lm-eval's results table went to stderr
    listed = cli("sessions", "-b", tiny, "--model", "dummy/candidate", "--json")
    assert listed.code == 0, listed
    assert [(s["id"], s["state"]) for s in listed.json()["items"]] == [(sid, "decided")]
    again = cli("evaluate", "--session", sid, "--run", run_batch, **hf_env)
    assert again.code == 3 and again.stdout.strip().endswith("decided: worse"), again
