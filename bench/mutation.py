"""Mutation testing of the engine (``make mutation``): mutmut over each ``app/core`` module.

Each module is mutated on its own, in a scratch export of the committed tree (``git archive HEAD``),
so the work tree is never touched. mutmut runs ``tests/core`` once to learn which tests reach each
function, then runs only those tests against each mutant of that function: every module is judged
by the tests that cover it. Mutants listed in ``bench/mutation_equivalent.toml`` (with a one-line
reason each) are equivalent: they cannot change any result and are left out of the score.

Usage::

    .venv/bin/python bench/mutation.py                  # every module below
    .venv/bin/python bench/mutation.py stats mdad       # some modules
    .venv/bin/python bench/mutation.py --children 2 --keep /tmp/mut

Prints a markdown table (module, group, mutants, killed, timeout, survived, equivalent, score,
goal) and the surviving mutants' names; ``mutmut show NAME`` in the kept export shows a diff.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.toml"

# module -> group; the goal is 90 % of non-equivalent mutants killed for "statistics",
# 80 % for "selectors" (selectors and IRT)
MODULES: dict[str, str] = {
    "reliability/exact": "statistics",
    "reliability/agreement": "statistics",
    "reliability/mdad": "statistics",
    "estimation/stats": "statistics",
    "reliability/planning": "statistics",
    "estimation/intervals": "statistics",
    "scoring/score_models": "statistics",
    "estimation/weighted": "statistics",
    "scoring/reference": "statistics",
    "sequential/confidence_sequences": "statistics",
    "ranking/leaderboard": "statistics",
    "ranking/pairwise": "statistics",
    "irt/fit": "selectors",
    "irt/objective": "selectors",
    "irt/model": "selectors",
    "selectors/random": "selectors",
    "selectors/subtask_stratified": "selectors",
    "selectors/confidence_stratified": "selectors",
    "selectors/anchor_points": "selectors",
    "selectors/tiny_benchmarks": "selectors",
    "selectors/dpp": "selectors",
}
GOALS = {"statistics": 0.90, "selectors": 0.80}
# The tests mutmut may run for a module (it still runs, per mutant, only those that reach the
# mutated function); default tests/core. Narrowed where the whole folder is too slow per mutant.
TEST_SELECTION: dict[str, list[str]] = {
    # exact small cases plus the fast known answers; the statistical replays and GPQA paths (and
    # the tests/core files that reach sequential through session_sim) stay in the normal suite
    "sequential/confidence_sequences": [
        "tests/core/test_sequential_mutants.py",
        "tests/core/test_sequential.py",
        *(
            f"--deselect=tests/core/test_sequential.py::{name}"
            for name in (
                "test_time_uniform_validity_on_gpqa",
                "test_agrapa_beats_plugin_on_large_gaps",
                "test_fractions_work_and_cover",
                "test_capital_martingale_monte_carlo_fractions",
                "test_exhaustion_gives_exact_value_gpqa",
            )
        ),
    ],
    # the selections the issue-17 runs used (bench/RESULTS.md): each module's own tests, exact
    # oracles first; the whole folder spent 15+ min in mutmut's two full passes per module
    "estimation/intervals": [
        "tests/core/test_intervals_mutants.py",
        "tests/core/test_intervals.py",
    ],
    "scoring/score_models": [
        "tests/core/test_scoring_mutants.py",
        "tests/core/test_reference_values.py",
    ],
    "estimation/weighted": [
        "tests/core/test_weighted_mutants.py",
        "tests/core/test_scoring_mutants.py",
        "tests/core/test_reference_scoring_mutants.py",
    ],
    "scoring/reference": [
        "tests/core/test_reference_scoring_mutants.py",
        "tests/core/test_reference_scoring_edges.py",
        "tests/core/test_scoring_mutants.py",
        "tests/core/test_reference_values.py",
    ],
    "ranking/leaderboard": [
        "tests/core/test_leaderboard_mutants.py",
        "tests/core/test_leaderboard.py",
    ],
    "ranking/pairwise": [
        "tests/core/test_pairwise_mutants.py",
        "tests/core/test_pairwise_rounding_edges.py",
        "tests/core/test_leaderboard_mutants.py",
    ],
    **{
        f"selectors/{name}": [
            "tests/core/test_selector_contract.py",
            "tests/core/test_selectors_known_answers.py",
            f"tests/core/test_{name}_mutants.py",
        ]
        for name in ("random", "subtask_stratified", "confidence_stratified")
    },
    "selectors/dpp": [
        "tests/core/test_selector_contract.py",
        "tests/core/test_selectors_known_answers.py",
        "tests/core/test_dpp_mutants.py",
        "tests/core/test_dpp_sampler_law.py",
    ],
    "selectors/anchor_points": [
        "tests/core/test_selector_contract.py",
        "tests/core/test_selectors_known_answers.py",
        "tests/core/test_anchor_points.py",
        "tests/core/test_anchor_points_mutants.py",
    ],
    "selectors/tiny_benchmarks": [
        "tests/core/test_selector_contract.py",
        "tests/core/test_tiny_benchmarks_mutants.py",
    ],
    "irt/model": [
        "tests/core/test_irt.py",
        "tests/core/test_irt_model_mutants.py",
        "--deselect=tests/core/test_irt.py::test_recovers_difficulty_d10_paper_form",
    ],
    "irt/fit": [
        "tests/core/test_irt_mutants.py",
        "tests/core/test_irt_fit_mutants.py",
        "tests/core/test_irt_optimizer_mutants.py",
        "tests/core/test_irt.py",
        "tests/core/test_fast_paths.py",
    ],
    "irt/objective": [
        "tests/core/test_irt_mutants.py",
        "tests/core/test_irt_fit_mutants.py",
        "tests/core/test_irt_optimizer_mutants.py",
        "tests/core/test_irt.py",
        "tests/core/test_fast_paths.py",
    ],
}

CONFIG = """
[tool.mutmut]
source_paths = ["app/core/{module}.py"]
pytest_add_cli_args_test_selection = {tests}
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]
also_copy = ["app", "pyproject.toml"]
"""


def export_tree(dest: Path) -> None:
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def equivalent_mutants() -> dict[str, str]:
    if not EQUIVALENT.exists():
        return {}
    with EQUIVALENT.open("rb") as fh:
        return {
            name: str(reason) for name, reason in tomllib.load(fh).get("equivalent", {}).items()
        }


def run_module(module: str, work: Path, children: int) -> dict[str, object]:
    # A fresh folder every run: mutmut 3 keeps its results in mutants/ and reuses them for every
    # function whose code did not change, so a kept export would score new tests as absent.
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    export_tree(work)
    with (work / "pyproject.toml").open("a") as fh:
        tests = json.dumps(TEST_SELECTION.get(module, ["tests/core"]))
        fh.write(CONFIG.format(module=module, tests=tests))
    mutmut = [sys.executable, "-m", "mutmut"]
    # the export lives in a scratch folder: point the tests at the real data beside the repo
    env = dict(os.environ)
    env.setdefault("BENCHSLICE_SHARED_DATA", str(ROOT.parent / "shared" / "data"))
    # mutmut forks a test process per mutant; OpenBLAS's thread pool, started in the parent,
    # deadlocks in the child (seen as "timeouts" counted as kills): one BLAS thread per process.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    started = time.perf_counter()
    run = subprocess.run(
        [*mutmut, "run", "--max-children", str(children)],
        cwd=work,
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if "failed to collect stats" in run.stdout + run.stderr:
        tail = (run.stdout + run.stderr).strip().splitlines()[-5:]
        raise SystemExit(f"mutmut could not run tests/core for {module}:\n" + "\n".join(tail))
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=work, check=True, capture_output=True)
    stats = json.loads((work / "mutants" / "mutmut-cicd-stats.json").read_text())
    listed = subprocess.run(
        [*mutmut, "results"], cwd=work, check=True, capture_output=True, text=True
    ).stdout
    survivors = [
        line.split(":")[0].strip()
        for line in listed.splitlines()
        if line.strip().endswith("survived")
    ]
    return {"stats": stats, "survivors": survivors, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"subset of: {', '.join(MODULES)}")
    parser.add_argument("--children", type=int, default=2, help="parallel mutant runs")
    parser.add_argument("--keep", type=Path, help="keep the scratch exports under this folder")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown module(s): {', '.join(unknown)}")
    modules = args.modules or list(MODULES)
    equivalent = equivalent_mutants()
    base = args.keep or Path(tempfile.mkdtemp(prefix="benchslice-mutation-"))
    rows, failed = [], False
    print("| module | group | mutants | killed | timeout | survived | equivalent | score | goal |")
    print("|---|---|---|---|---|---|---|---|---|")
    for module in modules:
        group = MODULES[module]
        if not (ROOT / "app" / "core" / f"{module}.py").exists():
            print(f"| {module} | {group} | (module not on main yet) | | | | | | |")
            continue
        out = run_module(module, base / module.replace("/", "_"), args.children)
        stats = out["stats"]
        survivors = [s for s in out["survivors"] if s not in equivalent]
        n_equiv = len(out["survivors"]) - len(survivors)
        killed = stats["killed"] + stats["timeout"]  # a mutant that hangs the tests is caught
        scored = stats["total"] - stats["skipped"] - n_equiv
        score = killed / scored if scored else 1.0
        ok = score >= GOALS[group]
        failed |= not ok
        print(
            f"| {module} | {group} | {stats['total']} | {stats['killed']} | {stats['timeout']} "
            f"| {len(survivors)} | {n_equiv} | {score:.1%} | {'met' if ok else 'MISSED'} "
            f"({GOALS[group]:.0%}; {out['seconds']:.0f} s) |",
            flush=True,
        )
        rows.append((module, survivors))
    print()
    for module, survivors in rows:
        if survivors:
            print(f"surviving in {module} ({len(survivors)}): {' '.join(survivors)}")
    print(f"\nexports in {base} (mutmut show NAME there)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
