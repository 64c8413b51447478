"""MDAD grid benchmark: the paper protocol + MDAD analysis, whole process and by method.

Cases
-----
``gpqa``     the full GPQA grid (every registered paper method x 10/25/50/100/200, 50 runs, 300
             sources, paper mode, bootstrap CIs, seen + unseen) timed as a whole process through
             ``benchslice mdad --json`` (bar: < 15 s), plus an in-process split by method.
``mmlu``     SYNTHETIC MMLU-Pro-scale grid (447 x 12,032, 7 sizes 10..1000, 50 runs; issue 27's goal:
             <= 120 s wall on 2 quiet cores), from ``bench/synth.py``'s ``make_synthetic`` (labelled
             synthetic), in-process: prints the grid's wall and CPU seconds (this process and its
             pool workers) and the protocol CPU-seconds per method.
``mmlu-cli`` the same SYNTHETIC grid timed as a whole process through ``benchslice mdad --json``
             (the matrix written to a temporary ``.npz`` first).
``scaling``  protocol seconds per method as runs, items and models grow (synthetic, few runs).
``irt-tol``  tinyBenchmarks' IRT fit tolerance against accuracy (``--matrix gpqa|mmlu``, ``--tols``):
             fit CPU, paper MDAD, |error| of the irt / p-IRT / gp-IRT estimates.
``same-numbers`` the SYNTHETIC MMLU-Pro-scale protocol's records for the first ``--runs`` runs
             (every paper method, 7 sizes, in-process): ``--save FILE`` writes them, ``--compare
             FILE`` says per method whether this tree's estimates and subset sizes are bit-identical
             to the saved ones (run it once on the old commit with ``--save``); prints CPU-s per method.
``pam-warm`` Anchor Points' FasterPAM from the reference's random start against a warm start from
             the previous size's medoids, per size on the first ``--runs`` SYNTHETIC splits.

Whole-process rows report wall time, the CPU seconds of the process and its workers
(``getrusage(RUSAGE_CHILDREN)``) and the 1-minute load average before the run: on a shared machine
the CPU figure is the one to compare (wall ~ import + CPU / 2 + analysis on a quiet 2-core machine).

Usage::

    .venv/bin/python bench/mdad_grid.py                 # gpqa
    .venv/bin/python bench/mdad_grid.py --case mmlu --workers 2
    .venv/bin/python bench/mdad_grid.py --case mmlu-cli --workers 2
    .venv/bin/python bench/mdad_grid.py --case scaling
    .venv/bin/python bench/mdad_grid.py --case irt-tol --matrix mmlu --runs 10 --tols 2e-5 1e-4
    .venv/bin/python bench/mdad_grid.py --quick         # smoke-sized
    .venv/bin/python bench/mdad_grid.py --case same-numbers --runs 3 --save old.npz   # old commit
    .venv/bin/python bench/mdad_grid.py --case same-numbers --runs 3 --compare old.npz
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
GPQA = (
    Path(os.environ.get("BENCHSLICE_SHARED_DATA") or REPO.parent / "shared" / "data") / "gpqa.npz"
)
PAPER_METHODS = (
    "random",
    "subtask_stratified",
    "confidence_stratified",
    "anchor_points",
    "tiny_benchmarks",
    "dpp",
)


def available_methods() -> list[str]:
    from app.core.selectors import SELECTORS

    return [m for m in PAPER_METHODS if m in SELECTORS]


def split_by_method(correct, sizes, runs, *, confidence=None, subtasks=None, workers=2, seed=0):
    """In-process: protocol seconds per method (CPU-seconds summed over processes) and analysis time."""
    from app.core.reliability.mdad import analyze_protocol
    from app.core.reliability.protocol import run_protocol

    t0 = time.perf_counter()
    res = run_protocol(
        correct,
        available_methods(),
        sizes,
        confidence=confidence,
        subtasks=subtasks,
        runs=runs,
        seed=seed,
        workers=workers,
    )
    t1 = time.perf_counter()
    analyze_protocol(res, mode="paper")
    t2 = time.perf_counter()
    analyze_protocol(res, mode="robust")
    t3 = time.perf_counter()
    return {
        "protocol_wall_s": round(t1 - t0, 2),
        "method_s": {k: round(v, 2) for k, v in res.seconds.items()},
        "analysis_paper_s": round(t2 - t1, 2),
        "analysis_robust_s": round(t3 - t2, 2),
    }


def whole_process(matrix: Path, sizes: str, runs: int, workers: int) -> dict:
    """Time ``benchslice mdad --json`` as a child process: wall, CPU (child + its workers), load."""
    import resource

    cmd = [
        str(REPO / ".venv" / "bin" / "benchslice"), "mdad", "--matrix", str(matrix),
        "--methods", ",".join(available_methods()), "--sizes", sizes, "--runs", str(runs),
        "--json", "--workers", str(workers),
    ]  # fmt: skip
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    payload = json.loads(out.stdout)
    return {"wall": wall, "cpu": cpu, "load": load, "elapsed": payload["elapsed_s"]}


def case_gpqa(args) -> None:
    import numpy as np

    print(f"| {machine_probe()} |", flush=True)
    methods = ",".join(available_methods())
    runs = 5 if args.quick else 50
    r = whole_process(GPQA, "10,25,50,100,200", runs, args.workers)
    print(
        f"| gpqa whole process | {methods} | 5 sizes x {runs} runs, paper, seen+unseen "
        f"| {r['wall']:.2f} s wall | CPU {r['cpu']:.1f} s | load {r['load']:.1f} "
        f"| cli elapsed {r['elapsed']:.2f} s |"
    )
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import app.core.reliability.mdad, app.core.reliability.protocol"],
        check=True,
        cwd=REPO,
    )
    print(
        f"| gpqa import app.core (python + numpy + scipy + sklearn) | | | {time.perf_counter() - t0:.2f} s | |"
    )
    with np.load(GPQA) as d:
        split = split_by_method(
            d["correct"], (10, 25, 50, 100, 200), runs, subtasks=d["subtasks"], workers=args.workers
        )
    print(
        f"| gpqa in-process split | | | protocol {split['protocol_wall_s']} s wall | {json.dumps(split)} |"
    )


def _cpu_now() -> float:
    """CPU seconds (user + system) of this process and its reaped children (pool workers)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def machine_probe() -> str:
    """A few seconds of fixed work that tells two VMs (or two moments of one) apart.

    The same commit's grid moved by 2.5x in CPU-seconds between two sessions' 2-vCPU VMs of the
    same kind (bench/RESULTS.md, issue 27): printed next to every grid figure so that figures
    from different machines are compared through it. Pure-Python loop (interpreter speed), one
    thread of float64 matrix products (BLAS), float32 ``exp`` (SIMD) and a fresh 100 MB array
    touched once (page faults).
    """
    import numpy as np
    from threadpoolctl import threadpool_limits

    t0 = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i
    loop = time.process_time() - t0
    a = np.random.default_rng(0).random((1500, 1500))
    with threadpool_limits(limits=1):
        t0 = time.process_time()
        for _ in range(4):
            a @ a
        gemm = 4 * 2 * 1500**3 / (time.process_time() - t0) / 1e9
    x = np.random.default_rng(1).random(2_000_000, dtype=np.float32)
    out = np.empty_like(x)
    t0 = time.process_time()
    for _ in range(10):
        np.exp(x, out=out)
    exp_ns = (time.process_time() - t0) / 10 / x.size * 1e9
    t0 = time.process_time()
    np.ones(12_500_000)
    fault = time.process_time() - t0
    return (
        f"machine probe: python loop 5e6 adds {loop:.2f} CPU-s, dgemm 1 thread {gemm:.1f} GFLOP/s, "
        f"float32 exp {exp_ns:.2f} ns/elem, fresh 100 MB {1000 * fault:.0f} ms"
    )


def case_mmlu(args) -> None:
    from bench.synth import make_synthetic

    print(f"| {machine_probe()} |", flush=True)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    syn = make_synthetic(447, 12032, seed=0)
    gen = time.perf_counter() - t0
    runs = 3 if args.quick else args.runs
    t1, c1 = time.perf_counter(), _cpu_now()
    split = split_by_method(
        syn.correct,
        (10, 25, 50, 100, 250, 500, 1000),
        runs,
        confidence=syn.confidence,
        subtasks=syn.subtasks,
        workers=args.workers,
    )
    total = time.perf_counter() - t0
    grid_wall, grid_cpu = time.perf_counter() - t1, _cpu_now() - c1
    print(
        f"| mmlu-pro-scale SYNTHETIC 447x12032 | {','.join(available_methods())} | 7 sizes x {runs} runs "
        f"| grid (protocol + analyses) {grid_wall:.1f} s wall, {grid_cpu:.1f} CPU-s, "
        f"{args.workers} workers, load {load:.1f} | {total:.1f} s with synth {gen:.1f} s "
        f"| {json.dumps(split)} |"
    )


def case_mmlu_cli(args) -> None:
    import tempfile

    import numpy as np

    from bench.synth import make_synthetic

    syn = make_synthetic(447, 12032, seed=0)
    runs = 3 if args.quick else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mmlu_pro_synthetic.npz"
        np.savez(path, correct=syn.correct, confidence=syn.confidence, subtasks=syn.subtasks)
        r = whole_process(path, "10,25,50,100,250,500,1000", runs, args.workers)
    print(
        f"| mmlu-pro-scale SYNTHETIC 447x12032 whole process | {','.join(available_methods())} "
        f"| 7 sizes x {runs} runs, paper, seen+unseen | {r['wall']:.1f} s wall | CPU {r['cpu']:.1f} s "
        f"| load {r['load']:.1f} | cli elapsed {r['elapsed']:.1f} s |"
    )


def case_scaling(args) -> None:
    from app.core.reliability.protocol import run_protocol
    from bench.synth import make_synthetic

    sizes = (10, 25, 50, 100)
    methods = [m for m in available_methods() if m not in args.skip]

    def row(axis, value, res) -> None:
        cells = " | ".join(f"{m} {s:.2f}" for m, s in res.seconds.items())
        print(f"| scaling {axis} | {value} | {cells} |", flush=True)

    base = make_synthetic(447, 4000, seed=1)
    for runs in (2, 4, 8):
        res = run_protocol(
            base.correct,
            methods,
            sizes,
            confidence=base.confidence,
            runs=runs,
            n_sources=300,
            seed=0,
        )
        row("runs", runs, res)
    for items in (1000, 2000, 4000, 8000):
        syn = make_synthetic(447, items, seed=1)
        res = run_protocol(
            syn.correct, methods, sizes, confidence=syn.confidence, runs=2, n_sources=300, seed=0
        )
        row("items", items, res)
    for models, sources in ((150, 100), (300, 200), (447, 300)):
        res = run_protocol(
            base.correct[:models],
            methods,
            sizes,
            confidence=base.confidence[:models],
            runs=2,
            n_sources=sources,
            seed=0,
        )
        row("models/sources", f"{models}/{sources}", res)


def case_irt_tol(args) -> None:
    """tinyBenchmarks' IRT fit tolerance against accuracy: CPU of the fit, MDAD and |error|.

    Per tolerance: the protocol grid of ``tiny_benchmarks`` alone (paper MDAD, seen split, and the
    protocol's mean |error| of the default "irt" estimator), and on the first runs' splits the
    fully calibrated selector's p-IRT and gp-IRT mean |estimate - seen accuracy| over targets.
    """
    import numpy as np
    from threadpoolctl import threadpool_limits

    from app.core.reliability.mdad import analyze_protocol
    from app.core.reliability.protocol import (
        _subtask_codes,
        run_protocol,
        selection_seed,
        split_run,
    )
    from app.core.selectors import make_selector

    if args.matrix == "gpqa":
        with np.load(GPQA) as d:
            correct, confidence, subtasks = d["correct"], None, d["subtasks"]
        sizes, label = (10, 25, 50, 100, 200), "GPQA 420x448"
    else:
        from bench.synth import make_synthetic

        syn = make_synthetic(447, 12032, seed=0)
        correct, confidence, subtasks = syn.correct, syn.confidence, syn.subtasks
        sizes, label = PAPER_SIZES_MMLU, "SYNTHETIC 447x12032"
    codes = _subtask_codes(subtasks)
    for tol in args.tols:
        t0 = time.process_time()
        res = run_protocol(
            correct,
            ["tiny_benchmarks"],
            sizes,
            confidence=confidence,
            subtasks=subtasks,
            runs=args.runs,
            seed=0,
            selector_params={"tiny_benchmarks": {"fit_tol": tol, "fit_seed": args.fit_seed}},
        )
        cpu = time.process_time() - t0
        cells = [c for c in analyze_protocol(res, mode="paper", splits=("seen",))]
        mdad = " ".join(f"{c.n}:{100 * c.mdad:.1f}" for c in cells)
        err = " ".join(f"{c.n}:{100 * c.mean_abs_error:.2f}" for c in cells)
        errs: dict[str, list] = {"p_irt": [], "gp_irt": []}
        fit_cpu, iters = 0.0, []
        with threadpool_limits(limits=1):
            for run in range(args.est_runs):
                targets, sources, seen = split_run(
                    correct.shape[0], codes, n_targets=50, n_sources=300, seed=0, run=run
                )
                si = np.flatnonzero(seen)
                f0 = time.process_time()
                sel = make_selector("tiny_benchmarks", fit_tol=tol, fit_seed=args.fit_seed)
                sel.fit(correct[np.ix_(sources, si)], subtasks=subtasks[si])
                fit_cpu += time.process_time() - f0
                iters.append(sel.irt_.n_iter)
                y_t = correct[np.ix_(targets, si)]
                truth = y_t.mean(axis=1)
                for name in errs:
                    errs[name].append(
                        [
                            np.mean(
                                np.abs(sel.estimate(s, y_t[:, s.indices], estimator=name) - truth)
                            )
                            for s in (
                                sel.select(n, rng=selection_seed(0, run, "tiny_benchmarks", n))
                                for n in sizes
                            )
                        ]
                    )
        est = " | ".join(
            f"{name} "
            + " ".join(f"{n}:{100 * v:.2f}" for n, v in zip(sizes, np.mean(e, axis=0), strict=True))
            for name, e in errs.items()
        )
        print(
            f"| {label} | tol {tol:g}, fit_seed {args.fit_seed} | protocol {args.runs} runs CPU {cpu:.1f} s "
            f"| calibrated fit (2 IRT fits) {fit_cpu / args.est_runs:.2f} CPU-s, main-fit iters "
            f"{np.mean(iters):.0f} | MDAD pts {mdad} | irt |err| pts {err} | {est} |",
            flush=True,
        )


PAPER_SIZES_MMLU = (10, 25, 50, 100, 250, 500, 1000)


def case_same_numbers(args) -> None:
    """Save or compare the protocol's per-(method, n, run) records on the SYNTHETIC grid."""
    import numpy as np

    from app.core.reliability.protocol import run_protocol
    from bench.synth import make_synthetic

    if bool(args.save) == bool(args.compare):
        raise SystemExit("same-numbers: give exactly one of --save FILE and --compare FILE")
    syn = make_synthetic(447, 12032, seed=0)
    load = os.getloadavg()[0]
    c0 = time.process_time()
    res = run_protocol(
        syn.correct,
        available_methods(),
        PAPER_SIZES_MMLU,
        confidence=syn.confidence,
        subtasks=syn.subtasks,
        runs=args.runs,
        seed=0,
        workers=1,
    )
    cpu = time.process_time() - c0
    per_method = " ".join(f"{m} {v / args.runs:.2f}" for m, v in res.seconds.items())
    print(
        f"| same-numbers SYNTHETIC 447x12032 | {args.runs} runs in-process | CPU {cpu:.1f} s "
        f"| per run (s): {per_method} | load {load:.1f} |"
    )
    if args.save:
        np.savez(
            args.save,
            methods=np.array(res.methods),
            estimates=res.estimates,
            subset_sizes=res.subset_sizes,
        )
        return
    with np.load(args.compare) as ref:
        names = list(ref["methods"])
        for mi, name in enumerate(res.methods):
            if name not in names:
                print(f"{name}: not in {args.compare}")
                continue
            j = names.index(name)
            runs = min(args.runs, ref["estimates"].shape[2])
            est, old = res.estimates[mi, :, :runs], ref["estimates"][j, :, :runs]
            sizes_equal = np.array_equal(
                res.subset_sizes[mi, :, :runs], ref["subset_sizes"][j, :, :runs]
            )
            if np.array_equal(est, old) and sizes_equal:
                print(f"{name}: IDENTICAL ({runs} runs x {len(res.sizes)} sizes)")
            else:
                cells = int((np.abs(est - old).max(axis=-1) > 0).sum())
                print(
                    f"{name}: DIFFERENT in {cells} of {est.shape[0] * est.shape[1]} (n, run) cells, "
                    f"max |d estimate| {np.max(np.abs(est - old)):.3g}, sizes equal {sizes_equal}"
                )


def case_pam_warm(args) -> None:
    """Anchor Points' FasterPAM: the reference's random start against a warm start per size.

    On the first ``--runs`` runs' SYNTHETIC splits (float32 D of the seen half), per size: CPU,
    swaps and loss of ``fasterpam(D, n, init="random")`` and of FasterPAM started from the
    previous size's (random-start) medoids plus random others. A measurement for a possible
    documented change, not what the selector does.
    """
    import kmedoids
    import numpy as np

    from app.core.reliability.protocol import _subtask_codes, split_run
    from app.core.selectors.anchor_points import correlation_dissimilarity
    from bench.synth import make_synthetic

    syn = make_synthetic(447, 12032, seed=0)
    codes = _subtask_codes(syn.subtasks)
    for run in range(args.runs):
        _, sources, seen = split_run(447, codes, n_targets=50, n_sources=300, seed=0, run=run)
        d = correlation_dissimilarity(
            syn.confidence[np.ix_(sources, np.flatnonzero(seen))], np.float32
        )
        prev = None
        for n in PAPER_SIZES_MMLU:
            seed = 1000 * run + n
            t0 = time.process_time()
            ref = kmedoids.fasterpam(
                d.T, n, max_iter=100, init="random", random_state=seed, n_cpu=1
            )
            t_ref = time.process_time() - t0
            if prev is not None:
                rng = np.random.RandomState(seed)
                extra = rng.choice(np.setdiff1d(np.arange(d.shape[0]), prev), n - prev.size, False)
                start = np.concatenate([prev, extra]).astype(np.uintp)
                t0 = time.process_time()
                warm = kmedoids.fasterpam(d.T, start, max_iter=100, n_cpu=1)
                t_warm = time.process_time() - t0
                print(
                    f"| run {run} | n {n} | random start {t_ref:.2f} CPU-s, {ref.n_swap} swaps, "
                    f"loss {ref.loss:.2f} | warm {t_warm:.2f} CPU-s, {warm.n_swap} swaps, loss "
                    f"{warm.loss:.2f} | ratio {warm.loss / ref.loss:.5f} |",
                    flush=True,
                )
            prev = np.asarray(ref.medoids, dtype=np.int64)


def render_table(paths: list[str]) -> None:
    """Markdown table (MDAD [CI] in points, agreement, |error| in points, tau) from --json outputs."""
    for path in paths:
        payload = json.loads(Path(path).read_text())

        def pts(v):
            return "n/r" if v is None else f"{100 * v:.1f}"

        print(
            f"\n{payload['mode']} mode, seed {payload['seed']}, elapsed {payload['elapsed_s']:.1f} s\n"
        )
        print("| method | n | split | MDAD | CI | agreement | mean abs err | Kendall tau |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in payload["cells"]:
            tau = "nan" if c["kendall_tau"] is None else f"{c['kendall_tau']:.3f}"
            print(
                f"| {c['method']} | {c['n']} | {c['split']} | {pts(c['mdad'])} | [{pts(c['ci_low'])}, {pts(c['ci_high'])}] "
                f"| {c['mean_agreement']:.3f} | {pts(c['mean_abs_error'])} | {tau} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--case",
        choices=("gpqa", "mmlu", "mmlu-cli", "scaling", "irt-tol", "same-numbers", "pam-warm"),
        default="gpqa",
    )
    parser.add_argument("--save", metavar="FILE", help="same-numbers: write the records here")
    parser.add_argument("--compare", metavar="FILE", help="same-numbers: compare with these")
    parser.add_argument("--matrix", choices=("gpqa", "mmlu"), default="gpqa", help="irt-tol case")
    parser.add_argument("--tols", nargs="+", type=float, default=[2e-5, 5e-5, 1e-4])
    parser.add_argument("--est-runs", type=int, default=5, help="irt-tol: calibrated runs")
    parser.add_argument("--fit-seed", type=int, default=42, help="irt-tol: the IRT fit's seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip", nargs="*", default=[], help="methods to leave out (scaling case)")
    parser.add_argument(
        "--table", nargs="+", metavar="JSON", help="render `benchslice mdad --json` outputs"
    )
    args = parser.parse_args()
    if args.table:
        render_table(args.table)
        return
    {
        "gpqa": case_gpqa,
        "mmlu": case_mmlu,
        "mmlu-cli": case_mmlu_cli,
        "scaling": case_scaling,
        "irt-tol": case_irt_tol,
        "same-numbers": case_same_numbers,
        "pam-warm": case_pam_warm,
    }[args.case](args)


if __name__ == "__main__":
    main()
