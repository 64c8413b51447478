"""`benchslice evaluate --answers` against a live service (SQLite + its own worker) on GPQA, and
the offline `benchslice simulate` (checked against the engine called in-process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lxml import etree

from app.core.sequential.simulation import simulate_sessions
from tests.cli.conftest import CLI, HELD_OUT

pytestmark = pytest.mark.integration
JUNIT_XSD = Path(__file__).parent / "data" / "junit.xsd"


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def _junit(path: Path):
    tree = etree.parse(str(path))
    etree.XMLSchema(etree.parse(str(JUNIT_XSD))).assertValid(tree)
    return tree


def _accuracies(path: Path) -> dict[str, float]:
    with np.load(path) as data:
        return {
            str(m): float(r.mean()) for m, r in zip(data["models"], data["correct"], strict=True)
        }


def _pick(path: Path, target: float, gap: float) -> str:
    """The model whose accuracy differs from ``target`` by closest to ``|gap|`` (either side)."""
    acc = _accuracies(path)
    ranked = sorted(acc, key=lambda m: abs(abs(acc[m] - target) - abs(gap)))
    return next(m for m in ranked if m != HELD_OUT)


def test_evaluate_with_answers_decides_a_far_pair(cli: CLI, gpqa: dict[str, Any]) -> None:
    acc = _accuracies(gpqa["path"])
    baseline = _pick(gpqa["path"], acc[HELD_OUT], -0.2)
    delta = acc[HELD_OUT] - acc[baseline]
    assert abs(delta) >= 0.15
    args = ["evaluate", "-b", "gpqa", "-m", "new/held-out", "--baseline", baseline]
    args += ["--answers", str(gpqa["path"]), "--answers-model", HELD_OUT, "--batch", "20"]
    run = cli(*args, "--seed", "7")
    assert run.code == (0 if delta > 0 else 3), run  # decided worse: a regression exits 3
    lines = run.stdout.strip().splitlines()
    assert lines[-1].endswith("decided: " + ("better" if delta > 0 else "worse")), run
    assert [int(x.split()[0]) for x in lines] == list(range(20, 20 * len(lines) + 1, 20))
    final = cli(*args, "--seed", "7", "--json").json()
    assert final["state"] == "decided" and final["items_used"] == 20 * len(lines)
    lo, hi = final["difference"]["lower"], final["difference"]["upper"]
    assert lo <= delta <= hi and final["difference"]["basis"] == "design"
    assert len(final["history"]) == len(lines)


def test_evaluate_writes_step_outputs_and_a_junit_report(
    cli: CLI, gpqa: dict[str, Any], tmp_path: Path
) -> None:
    """The reports a CI job reads: $GITHUB_OUTPUT lines and a JUnit file (schema-valid), for a
    regression (a failure, exit 3) and for an exhausted budget (a skipped case, exit 1)."""
    acc = _accuracies(gpqa["path"])
    worse = _pick(gpqa["path"], acc[HELD_OUT], 0.2)  # baseline 20 points apart
    answers = ["--answers", str(gpqa["path"]), "--answers-model", HELD_OUT]
    args = ["evaluate", "-b", "gpqa", "-m", "new/held-out-ci", *answers, "--seed", "3"]
    if acc[worse] < acc[HELD_OUT]:  # make the candidate the worse one: a regression
        args = ["evaluate", "-b", "gpqa", "-m", "new/held-out-ci", "--answers", str(gpqa["path"]),
                "--answers-model", worse, "--seed", "3"]  # fmt: skip
        worse = HELD_OUT
    out, junit = tmp_path / "gh_output", tmp_path / "eval.xml"
    run = cli(*args, "--baseline", worse, "--batch", "20", "--json", "--junit", str(junit),
              GITHUB_OUTPUT=str(out))  # fmt: skip
    assert run.code == 3, run
    final = run.json()
    got = _outputs(out)
    assert got["decision"] == final["decision"] == "worse" and got["regression"] == "true"
    assert got["state"] == "decided" and int(got["items_used"]) == final["items_used"]
    assert float(got["difference_upper"]) == pytest.approx(final["difference"]["upper"], abs=1e-6)
    assert float(got["difference_upper"]) < 0 and got["session"] == final["id"]
    tree = _junit(junit)
    assert tree.getroot().get("failures") == "1" and tree.getroot().get("skipped") == "0"
    (failure,) = tree.findall(".//testcase/failure")
    assert failure.get("type") == "worse"
    props = {p.get("name"): p.get("value") for p in tree.findall(".//property")}
    assert props["items_used"] == got["items_used"] and props["decision"] == "worse"

    close = _pick(gpqa["path"], acc[HELD_OUT], 0.0)
    out2, junit2 = tmp_path / "gh_output2", tmp_path / "eval2.xml"
    base = ["evaluate", "-b", "gpqa", "-m", "new/held-out-ci-2", *answers, "--baseline", close]
    short = cli(*base, "--max-items", "20", "--batch", "10", "--junit", str(junit2),
                GITHUB_OUTPUT=str(out2))  # fmt: skip
    assert short.code == 1, short
    assert _outputs(out2)["state"] == "exhausted" and _outputs(out2)["regression"] == "false"
    tree2 = _junit(junit2)
    assert tree2.getroot().get("skipped") == "1" and tree2.getroot().get("failures") == "0"
    assert tree2.find(".//testcase/skipped") is not None


def test_evaluate_exhausted_and_errors(cli: CLI, gpqa: dict[str, Any]) -> None:
    acc = _accuracies(gpqa["path"])
    close = _pick(gpqa["path"], acc[HELD_OUT], 0.0)
    base = ["evaluate", "-b", "gpqa", "-m", "new/held-out-2"]
    answers = ["--answers", str(gpqa["path"]), "--answers-model", HELD_OUT]
    run = cli(*base, "--baseline", close, *answers, "--max-items", "20", "--batch", "10")
    assert run.code == 1, run
    assert run.stdout.strip().splitlines()[-1].endswith("exhausted"), run
    bad = cli(*base, "--baseline", "no/such-model", *answers)
    assert bad.code == 2 and "baseline" in bad.stderr, bad
    neither = cli(*base, "--baseline", close)
    assert neither.code == 2, neither


def test_simulate_matches_the_engine(cli: CLI, gpqa_path: Path) -> None:
    run = cli(
        "simulate",
        "--matrix",
        str(gpqa_path),
        "--policies",
        "random,fluid",
        "--pairs",
        "40",
        "--alpha",
        "0.05",
        "--batch",
        "10",
        "--seed",
        "0",
        "--json",
    )
    assert run.code == 0, run
    out = run.json()
    with np.load(gpqa_path) as data:
        correct = data["correct"]
    ref = simulate_sessions(
        correct, policies=("random", "fluid"), pairs=40, alpha=0.05, batch_size=10, rng=0
    )
    for name in ("random", "fluid"):
        got, want = out["policies"][name], ref.policies[name]
        assert got["sessions"] == want.sessions == 40
        assert (got["decided"], got["wrong"]) == (want.decided, want.wrong)
        assert got["ever_missed"] == want.ever_missed
        assert [b["median_items"] for b in got["buckets"]] == [
            None if np.isnan(b.median_items) else b.median_items for b in want.buckets
        ]
    # every policy decides with the design-based confidence sequence
    assert out["policies"]["random"]["basis"] == out["policies"]["fluid"]["basis"] == "design"
    text = cli("simulate", "--matrix", str(gpqa_path), "--policies", "random", "--pairs", "20")
    assert text.code == 0 and "random (design): 20 sessions" in text.stdout, text


def test_simulate_takes_graded_scores(cli: CLI, tmp_path: Path) -> None:
    """Scores in [0, 1] (issue 35): simulated on their own values; out of range: a clear error."""
    rng = np.random.default_rng(5)
    p = 1 / (1 + np.exp(-(rng.uniform(-2, 2, (40, 1)) - rng.standard_normal((1, 120)))))
    graded = rng.binomial(8, p) / 8.0  # pass rates over 8 samples
    path = tmp_path / "graded.npz"
    np.savez(path, correct=graded)
    run = cli("simulate", "--matrix", str(path), "--policies", "random", "--pairs", "20", "--json")
    assert run.code == 0, run
    ref = simulate_sessions(graded, policies=("random",), pairs=20, alpha=0.05, batch_size=10)
    got = run.json()["policies"]["random"]
    assert (got["sessions"], got["wrong"]) == (20, ref.policies["random"].wrong)
    np.savez(path, correct=graded * 2)
    bad = cli("simulate", "--matrix", str(path), "--policies", "random", "--pairs", "20")
    assert bad.code == 2 and "[0, 1]" in bad.stderr, bad
