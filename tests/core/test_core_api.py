"""The public surface of app.core, and that it stays free of server dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import app.core

EXPECTED = [
    "ESTIMATORS", "GPQA_SIZES", "PAPER_SIZES", "SELECTORS", "AgreementCurve", "CSState",
    "CoverageTable", "Estimate", "EstimateBatch", "FluidState", "ItemBank", "ItemHealth",
    "Leaderboard", "MDADResult", "OrderProbabilities", "PairedComparison", "Plan", "PowerAnswer",
    "ProtocolResult", "ResultsData", "RunRecord", "Selection", "Selector", "SimulationResult",
    "Verdict", "adjust_pvalues", "analyze_cell", "analyze_protocol", "clopper_pearson",
    "clustered_se", "compare_to_baseline", "confidence_sequence", "coverage_study", "cs_init",
    "cs_interval", "cs_update", "curve_probability", "decide", "difference_interval",
    "dirichlet_p_better", "discordant_counts", "estimate", "exact_agreement", "fluid_estimate",
    "fluid_init", "fluid_next", "fluid_update", "hypergeometric_interval", "isotonic_increasing",
    "item_health", "jeffreys", "kendall_tau_b", "leaderboard", "leaderboard_for_selection",
    "make_selector", "mcnemar_exact", "mcnemar_pvalues", "mdad_paper", "mdad_robust",
    "order_probabilities", "pair_differences", "pair_probability", "paired_bootstrap",
    "paired_outcomes", "paired_sample_size", "paired_values", "pairwise_counts", "paper_agree",
    "plan", "proportion_interval", "repeated_samples_estimate", "run_protocol", "score_models",
    "score_subset", "simulate_sessions", "smallest_n", "split_run",
    "stratified_order_probabilities", "validate_results", "verdict", "wilson_interval",
]  # fmt: skip


def test_all_is_pinned_and_importable() -> None:
    assert app.core.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(app.core, name) is not None


def test_importing_core_pulls_no_server_dependencies() -> None:
    code = (
        "import json, sys; import app.core; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'sqlalchemy', 'celery', 'pydantic_settings', 'app.settings', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
    code2 = "import sys, app.core; print([m for m in sys.modules if m in ('app.settings', 'app.db', 'app.api')])"
    out2 = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, check=True)
    assert out2.stdout.strip() == "[]"
