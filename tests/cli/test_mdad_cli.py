"""`benchslice mdad` end to end in a subprocess on the real GPQA matrix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPQA = (
    Path(os.environ.get("BENCHSLICE_SHARED_DATA") or REPO.parent / "shared" / "data") / "gpqa.npz"
)
BASE = [
    sys.executable,
    "-m",
    "app.cli",
    "mdad",
    "--matrix",
    str(GPQA),
    "--runs",
    "3",
    "--sizes",
    "10,25",
]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*BASE, *args], capture_output=True, text=True, cwd=REPO, timeout=300)


@pytest.mark.parametrize("mode", ["paper", "robust"])
def test_json_is_one_object_with_the_documented_keys(mode) -> None:
    out = _run(
        "--methods",
        "random,subtask_stratified",
        "--json",
        "--mode",
        mode,
        "--workers",
        "1",
        "--seed",
        "7",
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)  # exactly one JSON document
    assert out.stdout.strip().count("\n") == 0
    assert set(payload) == {"cells", "elapsed_s", "seed", "mode"}
    assert payload["seed"] == 7 and payload["mode"] == mode
    assert len(payload["cells"]) == 2 * 2 * 2
    keys = {
        "method",
        "n",
        "split",
        "mdad",
        "ci_low",
        "ci_high",
        "mean_agreement",
        "mean_abs_error",
        "kendall_tau",
    }
    for cell in payload["cells"]:
        assert set(cell) == keys
        assert cell["split"] in ("seen", "unseen")
        assert cell["mdad"] is None or 0 <= cell["mdad"] <= 0.5
    assert "runs 3/3" in out.stderr


def test_same_seed_same_numbers_across_workers() -> None:
    a = json.loads(_run("--methods", "random", "--json", "--workers", "1").stdout)
    b = json.loads(_run("--methods", "random", "--json", "--workers", "2").stdout)
    assert a["cells"] == b["cells"]


def test_table_and_errors() -> None:
    out = _run("--methods", "random", "--workers", "1")
    assert out.returncode == 0, out.stderr
    assert "random" in out.stdout and "MDAD" in out.stdout
    bad = _run("--methods", "no_such_method", "--json")
    assert bad.returncode == 2 and bad.stdout == "" and "no_such_method" in bad.stderr
