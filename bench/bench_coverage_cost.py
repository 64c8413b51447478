"""What one coverage draw costs next to one analysis draw, on real GPQA (issue 39: the weight of
a coverage study in the cost quotas, app/services/platform/quotas.COVERAGE_DRAW_COST).

    python -m bench.bench_coverage_cost [path/to/gpqa.npz]
"""

import sys
import time

import numpy as np

from app.core.reliability.protocol import run_protocol
from app.core.scoring.coverage import coverage_study

d = np.load(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/gpqa.npz")
c = d["correct"].astype(float)
sub = d["subtasks"] if "subtasks" in d.files else None
m = c.shape[0]
methods = ("random", "anchor_points", "tiny_benchmarks")
sizes = (25, 50, 100)
t = time.process_time()
w = time.perf_counter()
run_protocol(c, methods, sizes, subtasks=sub, runs=2, n_sources=300, n_targets=50, seed=1)
pa, wa = time.process_time() - t, time.perf_counter() - w
print(f"analysis: 2 runs x 3 sizes x 3 methods = 18 draws: {pa:.1f} CPU-s, {wa:.1f} s wall")
n_t = min(120, max(2, m // 4))
t = time.process_time()
w = time.perf_counter()
coverage_study(
    c, list(methods), list(sizes), repeats=1, n_sources=m - n_t, n_targets=n_t, subtasks=sub, seed=1
)
pc, wc = time.process_time() - t, time.perf_counter() - w
print(f"coverage: 1 repeat x 3 sizes x 3 methods = 9 draws: {pc:.1f} CPU-s, {wc:.1f} s wall")
print(
    f"CPU per draw: analysis {pa / 18:.2f} s, coverage {pc / 9:.2f} s, ratio {(pc / 9) / (pa / 18):.0f}"
)
