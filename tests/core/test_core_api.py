"""The public surface of app.core, and that it stays free of server dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import app.core

EXPECTED = [
    "ESTIMATORS", "GPQA_SIZES", "PAPER_SIZES", "SELECTORS", "AgreementCurve", "Estimate",
    "MDADResult", "OrderProbabilities", "PairedComparison", "Plan", "ProtocolResult", "ResultsData",
    "RunRecord", "Selection", "Selector", "Verdict", "analyze_cell", "analyze_protocol",
    "clustered_se", "compare_to_baseline", "curve_probability", "discordant_counts", "estimate",
    "exact_agreement", "isotonic_increasing", "kendall_tau_b", "make_selector", "mcnemar_exact",
    "mdad_paper", "mdad_robust", "order_probabilities", "pair_differences", "pair_probability",
    "paired_bootstrap", "paper_agree", "plan", "run_protocol", "score_subset", "smallest_n",
    "split_run", "stratified_order_probabilities", "validate_results", "verdict", "wilson_interval",
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
