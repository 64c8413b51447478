"""benchslice engine: selectors, estimators, the paper protocol, MDAD, exact probabilities, planning.

Pure numerical code (numpy, scipy, scikit-learn, kmedoids): no web framework, database, task queue,
settings or I/O. Submodules: :mod:`~app.core.selectors`, :mod:`~app.core.estimators`,
:mod:`~app.core.protocol`, :mod:`~app.core.agreement`, :mod:`~app.core.mdad`,
:mod:`~app.core.exact`, :mod:`~app.core.planning`, :mod:`~app.core.stats`; sessions
(:mod:`~app.core.sequential`, :mod:`~app.core.adaptive`, :mod:`~app.core.session_sim`), leaderboards
(:mod:`~app.core.pairwise`, :mod:`~app.core.leaderboard`), calibrated intervals and item health
(:mod:`~app.core.intervals`, :mod:`~app.core.scoring`, :mod:`~app.core.coverage`,
:mod:`~app.core.health`, :mod:`~app.core.power`).
"""

from app.core._validation import ResultsData, validate_results
from app.core.adaptive import (
    FluidState,
    ItemBank,
    fluid_estimate,
    fluid_init,
    fluid_next,
    fluid_update,
)
from app.core.agreement import kendall_tau_b, pair_differences, paper_agree
from app.core.coverage import CoverageTable, coverage_study
from app.core.estimators import ESTIMATORS, estimate
from app.core.exact import (
    discordant_counts,
    exact_agreement,
    order_probabilities,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)
from app.core.health import ItemHealth, item_health
from app.core.intervals import (
    clopper_pearson,
    hypergeometric_interval,
    jeffreys,
    proportion_interval,
)
from app.core.leaderboard import Leaderboard, leaderboard, leaderboard_for_selection
from app.core.mdad import (
    analyze_cell,
    analyze_protocol,
    isotonic_increasing,
    mdad_paper,
    mdad_robust,
)
from app.core.pairwise import adjust_pvalues, mcnemar_pvalues, pairwise_counts
from app.core.planning import curve_probability, plan, verdict
from app.core.power import PowerAnswer, paired_sample_size
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
from app.core.scoring import EstimateBatch, score_models
from app.core.selectors import SELECTORS, Selector, make_selector
from app.core.sequential import (
    CSState,
    confidence_sequence,
    cs_init,
    cs_interval,
    cs_update,
    decide,
    difference_interval,
    paired_values,
)
from app.core.session_sim import SimulationResult, simulate_sessions
from app.core.stats import (
    clustered_se,
    compare_to_baseline,
    dirichlet_p_better,
    mcnemar_exact,
    paired_bootstrap,
    paired_outcomes,
    repeated_samples_estimate,
    score_subset,
    wilson_interval,
)

__all__ = [
    "ESTIMATORS",
    "GPQA_SIZES",
    "PAPER_SIZES",
    "SELECTORS",
    "AgreementCurve",
    "CSState",
    "CoverageTable",
    "Estimate",
    "EstimateBatch",
    "FluidState",
    "ItemBank",
    "ItemHealth",
    "Leaderboard",
    "MDADResult",
    "OrderProbabilities",
    "PairedComparison",
    "Plan",
    "PowerAnswer",
    "ProtocolResult",
    "ResultsData",
    "RunRecord",
    "Selection",
    "Selector",
    "SimulationResult",
    "Verdict",
    "adjust_pvalues",
    "analyze_cell",
    "analyze_protocol",
    "clopper_pearson",
    "clustered_se",
    "compare_to_baseline",
    "confidence_sequence",
    "coverage_study",
    "cs_init",
    "cs_interval",
    "cs_update",
    "curve_probability",
    "decide",
    "difference_interval",
    "dirichlet_p_better",
    "discordant_counts",
    "estimate",
    "exact_agreement",
    "fluid_estimate",
    "fluid_init",
    "fluid_next",
    "fluid_update",
    "hypergeometric_interval",
    "isotonic_increasing",
    "item_health",
    "jeffreys",
    "kendall_tau_b",
    "leaderboard",
    "leaderboard_for_selection",
    "make_selector",
    "mcnemar_exact",
    "mcnemar_pvalues",
    "mdad_paper",
    "mdad_robust",
    "order_probabilities",
    "pair_differences",
    "pair_probability",
    "paired_bootstrap",
    "paired_outcomes",
    "paired_sample_size",
    "paired_values",
    "pairwise_counts",
    "paper_agree",
    "plan",
    "proportion_interval",
    "repeated_samples_estimate",
    "run_protocol",
    "score_models",
    "score_subset",
    "simulate_sessions",
    "smallest_n",
    "split_run",
    "stratified_order_probabilities",
    "validate_results",
    "verdict",
    "wilson_interval",
]
