"""docs/ci.md's CI jobs run for real: the GitHub Actions steps (every ``run:`` but the install)
in one temp checkout against a live service, with a stand-in ``lm_eval`` answering from the real
GPQA matrix (tests/support/fake_lm_eval.py); the GitLab script must be the same commands."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli.service import live_service
from tests.support.tools import missing

REPO_ROOT = Path(__file__).resolve().parents[1]
DOC = REPO_ROOT / "docs" / "ci.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INSTALL = ("pip install", "apt-get")  # the installs are the CI image's business, not run here
CANDIDATE_ROW = "mistralai/Mistral-Large-Instruct-2411"  # what the stand-in answers as


def _jobs() -> tuple[dict, dict]:
    blocks = [
        yaml.safe_load(body) for lang, body in FENCE.findall(DOC.read_text()) if lang == "yaml"
    ]
    github = next(b for b in blocks if "jobs" in b)
    gitlab = next(b for b in blocks if "jobs" not in b)
    return github, gitlab


def _github_steps() -> tuple[dict[str, str], list[str]]:
    """The job's env and its ``run:`` commands but the installs."""
    github, _ = _jobs()
    (job,) = github["jobs"].values()
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    return job["env"], [r for r in runs if not r.startswith(INSTALL)]


def test_gitlab_script_is_the_github_steps() -> None:
    env, runs = _github_steps()
    _, gitlab = _jobs()
    (job,) = gitlab.values()
    assert [r.strip() for r in job["script"] if not r.startswith(INSTALL)] == runs
    assert len(runs) == 2 and runs[0].startswith("benchslice push --create")
    assert not any("jq" in r for r in runs)  # the exit code is the answer
    for key in ("BENCHMARK", "CANDIDATE", "BASELINE"):
        assert job["variables"][key] == env[key]


@pytest.mark.integration
def test_ci_job_runs_against_a_live_service(tmp_path: Path, shared_data_dir: Path) -> None:
    gpqa = shared_data_dir / "gpqa.npz"
    if not gpqa.exists():
        missing(f"{gpqa} not found (set BENCHSLICE_SHARED_DATA)")
    env_block, runs = _github_steps()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "lm_eval"
    fake.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{REPO_ROOT / "tests/support/fake_lm_eval.py"}" "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "checkout"
    work.mkdir()
    summary = tmp_path / "summary.md"
    with live_service() as service:
        env = service.client_env(
            FAKE_LM_EVAL_MATRIX=str(gpqa),
            FAKE_LM_EVAL_AS=f"{env_block['CANDIDATE']}={CANDIDATE_ROW}",
            GITHUB_STEP_SUMMARY=str(summary),
            **{k: str(v) for k, v in env_block.items() if not str(v).startswith("${{")},
        )
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        # the repository's results/baseline/: the baseline's full lm-eval sample logs
        baseline = env_block["BASELINE"]
        made = subprocess.run(
            [
                "lm_eval",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={baseline}",
                "--tasks",
                "leaderboard_gpqa_main",
                "--log_samples",
                "--output_path",
                "results/baseline",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        assert made.returncode == 0, made.stderr
        for run in runs:
            done = subprocess.run(
                ["bash", "-c", "set -euo pipefail\n" + run],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, (run, done.stdout, done.stderr)
        # pushing again changes nothing (the step can run on every CI run)
        again = subprocess.run(
            ["bash", "-c", runs[0]], cwd=work, env=env, capture_output=True, text=True
        )
        assert again.returncode == 0 and "created benchmark" not in again.stderr, again.stderr
    report = summary.read_text()
    assert "### benchslice evaluate on gpqa-ci v1: better (decided)" in report
    assert f"{env_block['CANDIDATE']}: **better** after " in report
    assert "/ui/sessions/" in report
    # the doc's sample summary is what the job writes (its table rows; the link differs)
    shown = next(
        body for lang, body in FENCE.findall(DOC.read_text()) if "### benchslice evaluate" in body
    )
    for line in shown.splitlines():
        if line.startswith(("|", "###", env_block["CANDIDATE"])):
            assert line in report, line
