"""One-sided tests and release gates (issue 34; statistics-next §8).

:mod:`.one_sided` the one-sided tests and bounds for a mean (goals ``noninferior`` /
``superior``), :mod:`.gates` the gate over K benchmarks (PASS / FAIL / INCONCLUSIVE).
"""
