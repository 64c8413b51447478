"""Selector timings (issue 3): fit + select for every registered selector at two scales.

Scales
  gpqa          REAL GPQA-main (shared/data/gpqa.npz): 300 source models x the 224-item seen half
                (paper protocol, seeded split); correctness only, so source-using methods fall
                back to correctness.
  mmlu-pro      SYNTHETIC (bench/synth.py, seed 0), 447 models x 12,032 items with confidence and
                MMLU-Pro's 14 subtasks; paper protocol: 300 sources x the 6,012-item seen half.
  mmlu-pro-full SYNTHETIC, same matrix: all 447 models x all 12,032 items as the pool.

Every selector in ``app.core.selectors.SELECTORS`` runs with its default parameters: ``fit`` once
per repeat, then ``select(n)`` for n in {10, 100, 1000} (n larger than the pool is skipped), each
repeat with a different seed. Printed: median and min wall time (``time.perf_counter``).

Usage: .venv/bin/python bench/bench_selectors.py [--quick] [--repeats R] [--scales ...] [--methods ...]
                                           [--record]
``--record`` inserts the table as a new dated entry at the top of the "Selectors" section of
bench/RESULTS.md (created if missing); other sections are left untouched.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.selectors import SELECTORS, make_selector  # noqa: E402
from app.core.selectors._sampling import draw_within_groups, group_codes  # noqa: E402
from bench.synth import make_synthetic  # noqa: E402

SIZES = (10, 100, 1000)
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## Selectors"


def shared_data() -> Path:
    return Path(os.environ.get("BENCHSLICE_SHARED_DATA") or ROOT.parent / "shared" / "data")


def seen_half(subtasks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Paper §1.3 split: per subtask, a uniformly random floor(n_s / 2) of its items."""
    _, codes, sizes = group_codes(subtasks)
    return draw_within_groups(codes, sizes // 2, rng)


def load_scale(name: str) -> dict:
    rng = np.random.default_rng(2026)
    if name == "gpqa":
        with np.load(shared_data() / "gpqa.npz") as d:
            correct, subtasks = d["correct"], d["subtasks"]
        sources = rng.permutation(correct.shape[0])[:300]
        return {
            "label": "gpqa (real)",
            "correct": correct[sources],
            "confidence": None,
            "subtasks": subtasks,
            "candidates": seen_half(subtasks, rng),
        }
    synth = make_synthetic(447, 12032, seed=0)
    if name == "mmlu-pro":
        sources = rng.permutation(447)[:300]
        return {
            "label": "mmlu-pro (SYNTHETIC)",
            "correct": synth.correct[sources],
            "confidence": synth.confidence[sources],
            "subtasks": synth.subtasks,
            "candidates": seen_half(synth.subtasks, rng),
        }
    if name == "mmlu-pro-full":
        return {
            "label": "mmlu-pro-full (SYNTHETIC)",
            "correct": synth.correct,
            "confidence": synth.confidence,
            "subtasks": synth.subtasks,
            "candidates": None,
        }
    raise ValueError(f"scale: unknown {name!r}")


def time_selector(method: str, data: dict, repeats: int) -> list[dict]:
    fit_times: list[float] = []
    select_times: dict[int, list[float]] = {}
    sizes: dict[int, int] = {}
    pool = len(data["candidates"]) if data["candidates"] is not None else data["correct"].shape[1]
    for rep in range(repeats):
        t0 = time.perf_counter()
        selector = make_selector(method).fit(
            data["correct"],
            confidence=data["confidence"],
            subtasks=data["subtasks"],
            candidates=data["candidates"],
        )
        fit_times.append(time.perf_counter() - t0)
        for n in SIZES:
            if n > pool:
                continue
            t0 = time.perf_counter()
            try:
                sel = selector.select(n, rng=rep)
            except ValueError as exc:  # e.g. n above the DPP's post-trimming pool
                select_times.setdefault(n, [])
                sizes[n] = -1
                print(f"  {method} n={n}: {exc}", file=sys.stderr)
                continue
            select_times.setdefault(n, []).append(time.perf_counter() - t0)
            sizes[n] = sel.size
    rows = []
    for n, times in select_times.items():
        rows.append(
            {
                "method": method,
                "n": n,
                "k": sizes[n],
                "fit_med": statistics.median(fit_times),
                "fit_min": min(fit_times),
                "sel_med": statistics.median(times) if times else float("nan"),
                "sel_min": min(times) if times else float("nan"),
            }
        )
    return rows


def machine() -> dict[str, str]:
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "unknown"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(
            sorted({f"{i['internal_api']} {i['num_threads']} thread(s)" for i in threadpool_info()})
        )
    except ImportError:
        blas = "unknown"
    return {
        "blas": blas or "unknown",
        "cpu": cpu,
        "nproc": str(os.cpu_count()),
        "mem": mem,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "commit": commit or "unknown",
    }


def fmt(x: float) -> str:
    if x != x:
        return "—"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def table(results: list[tuple[str, str, list[dict]]]) -> str:
    lines = [
        "| scale | input (sources x pool) | method | fit median | fit min | n | size | "
        "select median | select min |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, shape, rows in results:
        for r in rows:
            size = "error (n > pool after trimming)" if r["k"] < 0 else str(r["k"])
            lines.append(
                f"| {label} | {shape} | {r['method']} | {fmt(r['fit_med'])} | {fmt(r['fit_min'])} "
                f"| {r['n']} | {size} | {fmt(r['sel_med'])} | {fmt(r['sel_min'])} |"
            )
    return "\n".join(lines)


def record(text: str) -> None:
    content = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    if SECTION not in content:
        content = content.rstrip("\n") + f"\n\n{SECTION}\n\n"
    head, rest = content.split(SECTION, 1)
    # newest entry first, right under the section heading; older entries are kept verbatim
    rest = rest.lstrip("\n")
    RESULTS.write_text(f"{head}{SECTION}\n\n{text.rstrip()}\n\n{rest}".rstrip("\n") + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="gpqa only, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scales", nargs="+", default=["gpqa", "mmlu-pro", "mmlu-pro-full"])
    parser.add_argument("--methods", nargs="+", default=sorted(SELECTORS))
    parser.add_argument("--record", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args(argv)
    scales = ["gpqa"] if args.quick else args.scales
    repeats = 1 if args.quick else args.repeats
    load_start = os.getloadavg()[0]
    started = dt.datetime.now(dt.UTC)
    results = []
    for scale in scales:
        data = load_scale(scale)
        pool = (
            len(data["candidates"]) if data["candidates"] is not None else data["correct"].shape[1]
        )
        shape = f"{data['correct'].shape[0]} x {pool:,}"
        rows = []
        for method in args.methods:
            method_rows = time_selector(method, data, repeats)
            rows.extend(method_rows)
            for r in method_rows:
                print(
                    f"{data['label']:<26} {method:<22} n={r['n']:<5} size={r['k']:<5} "
                    f"fit {fmt(r['fit_med']):>9}  select {fmt(r['sel_med']):>9}",
                    flush=True,
                )
        results.append((data["label"], shape, rows))
    load_end = os.getloadavg()[0]
    m = machine()
    env = " ".join(
        f"{k}={os.environ[k]}"
        for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
        if k in os.environ
    )
    args_text = " ".join(argv if argv is not None else sys.argv[1:])
    cmd = f"{env} python bench/bench_selectors.py {args_text}".strip()
    out = table(results)
    print()
    print(out)
    if args.record:
        entry = (
            f"### {started:%Y-%m-%d %H:%M} UTC — commit {m['commit']}\n\n"
            f"- command: `{cmd.strip()}` ({repeats} repeat(s); fit once per repeat, then "
            f"select at each n with seed = repeat index)\n"
            f"- machine: {m['cpu']}, nproc {m['nproc']}, {m['mem']} RAM, Python {m['python']}, "
            f"numpy {m['numpy']}, BLAS: {m['blas']}\n"
            f"- **shared machine** (other helpers' jobs running; 1-min load average "
            f"{load_start:.1f} at start, {load_end:.1f} at end): figures are indicative only and "
            f"are to be re-run on a quiet machine\n"
            f"- data: gpqa is REAL (300 sources x 224-item seen half, correctness only); "
            f"mmlu-pro rows are SYNTHETIC (bench/synth.py, seed 0, 447 x 12,032 with confidence "
            f"and 14 subtasks)\n\n{out}\n"
        )
        record(entry)
        print(f"\nrecorded in {RESULTS}")


if __name__ == "__main__":
    main()
