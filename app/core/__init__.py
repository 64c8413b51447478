"""benchslice engine: pure numerical code (numpy, scipy, scikit-learn, kmedoids).

No web framework, database, task queue, settings or I/O. Rooms, lowest first: :mod:`~app.core.irt`
(2PL fit and model), :mod:`~app.core.estimation` (estimators, intervals, design-based means),
:mod:`~app.core.selectors` (the six selectors), :mod:`~app.core.reliability` (the paper's protocol,
MDAD, exact probabilities, planning), :mod:`~app.core.scoring` (scoring from a subset, calibration,
coverage study), :mod:`~app.core.sequential` (sessions: confidence sequences, policies, simulator),
:mod:`~app.core.ranking` (pairwise tests, leaderboards), :mod:`~app.core.items` (item health).
The names below are imported from the module that defines each (no re-export chains).
"""

from app.core._validation import ResultsData, validate_results
from app.core.estimation.estimators import ESTIMATORS, estimate
from app.core.estimation.intervals import (
    clopper_pearson,
    hypergeometric_interval,
    jeffreys,
    proportion_interval,
)
from app.core.estimation.stats import (
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
from app.core.items.health import ItemHealth, item_health
from app.core.ranking.leaderboard import Leaderboard, leaderboard, leaderboard_for_selection
from app.core.ranking.pairwise import adjust_pvalues, mcnemar_pvalues, pairwise_counts
from app.core.reliability.agreement import kendall_tau_b, pair_differences, paper_agree
from app.core.reliability.exact import (
    discordant_counts,
    exact_agreement,
    order_probabilities,
    pair_probability,
    smallest_n,
    stratified_order_probabilities,
)
from app.core.reliability.mdad import (
    analyze_cell,
    analyze_protocol,
    isotonic_increasing,
    mdad_paper,
    mdad_robust,
)
from app.core.reliability.planning import curve_probability, plan, verdict
from app.core.reliability.power import PowerAnswer, paired_sample_size
from app.core.reliability.protocol import GPQA_SIZES, PAPER_SIZES, run_protocol, split_run
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
from app.core.scoring.coverage import CoverageTable, coverage_study
from app.core.scoring.score_models import EstimateBatch, score_models
from app.core.selectors import SELECTORS, Selector, make_selector
from app.core.sequential.confidence_sequences import (
    CSState,
    confidence_sequence,
    cs_init,
    cs_interval,
    cs_update,
    decide,
    difference_interval,
    paired_values,
)
from app.core.sequential.fluid import (
    FluidState,
    ItemBank,
    fluid_estimate,
    fluid_init,
    fluid_next,
    fluid_update,
)
from app.core.sequential.simulation import SimulationResult, simulate_sessions

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
