"""benchslice engine: selectors, estimators, the paper protocol, MDAD, exact probabilities, planning.

Pure numerical code (numpy, scipy, scikit-learn, kmedoids): no web framework, database, task queue,
settings or I/O. Submodules: :mod:`~app.core.selectors`, :mod:`~app.core.estimators`,
:mod:`~app.core.protocol`, :mod:`~app.core.agreement`, :mod:`~app.core.mdad`,
:mod:`~app.core.exact`, :mod:`~app.core.planning`, :mod:`~app.core.stats`.
"""

from app.core._validation import ResultsData, validate_results
from app.core.agreement import kendall_tau_b, pair_differences, paper_agree
from app.core.estimators import ESTIMATORS, estimate
from app.core.exact import (
    discordant_counts,
    exact_agreement,
    order_probabilities,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)
from app.core.mdad import (
    analyze_cell,
    analyze_protocol,
    isotonic_increasing,
    mdad_paper,
    mdad_robust,
)
from app.core.planning import curve_probability, plan, verdict
from app.core.protocol import GPQA_SIZES, PAPER_SIZES, run_protocol, split_run
from app.core.results import (
    AgreementCurve,
    Estimate,
    MDADResult,
    OrderProbabilities,
    PairedComparison,
    Plan,
    ProtocolResult,
    RunRecord,
    Selection,
    Verdict,
)
from app.core.selectors import SELECTORS, Selector, make_selector
from app.core.stats import (
    clustered_se,
    compare_to_baseline,
    mcnemar_exact,
    paired_bootstrap,
    score_subset,
    wilson_interval,
)

__all__ = [
    "ESTIMATORS",
    "GPQA_SIZES",
    "PAPER_SIZES",
    "SELECTORS",
    "AgreementCurve",
    "Estimate",
    "MDADResult",
    "OrderProbabilities",
    "PairedComparison",
    "Plan",
    "ProtocolResult",
    "ResultsData",
    "RunRecord",
    "Selection",
    "Selector",
    "Verdict",
    "analyze_cell",
    "analyze_protocol",
    "clustered_se",
    "compare_to_baseline",
    "curve_probability",
    "discordant_counts",
    "estimate",
    "exact_agreement",
    "isotonic_increasing",
    "kendall_tau_b",
    "make_selector",
    "mcnemar_exact",
    "mdad_paper",
    "mdad_robust",
    "order_probabilities",
    "pair_differences",
    "pair_probability",
    "paired_bootstrap",
    "paper_agree",
    "plan",
    "run_protocol",
    "score_subset",
    "smallest_n",
    "split_run",
    "stratified_order_probabilities",
    "validate_results",
    "verdict",
    "wilson_interval",
]
