"""Subsets, subset scores, verdicts and plans: request/response models."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.schemas.benchmarks import version_id_field
from app.schemas.common import Estimand, estimand_field
from app.schemas.items import ItemFlag
from app.schemas.quality import RepeatedSamplesPublic, SamplesPlanPublic, Warning

MAX_SEED = 2**63 - 1


# --- per-method parameters (one class per registered selector; a test keeps the tags equal to
# --- app.core.selectors.SELECTORS) ---------------------------------------------------------------


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RandomParams(_Params):
    pass


class SubtaskStratifiedParams(_Params):
    allocation: Literal["equal", "proportional", "paper_proportional"] = Field(
        default="equal",
        description="equal: floor(n/K) per subtask, leftovers to random subtasks (paper §3.2); "
        "proportional: items proportional to subtask size with weights",
    )


class ConfidenceStratifiedParams(_Params):
    inclusion: Literal["paper", "exact"] = Field(
        default="paper", description="Inclusion probabilities of the Horvitz-Thompson weights"
    )


class DPPParams(_Params):
    weighting: Literal["mean", "sampler"] = Field(
        default="mean", description="mean: plain mean (paper); sampler: the sampler's weights"
    )
    pca_seed: int = Field(default=0, ge=0, le=MAX_SEED, description="random_state of the PCA")


class AnchorPointsParams(_Params):
    estimate_on: Literal["confidence", "correct"] = Field(
        default="confidence",
        description="Signal of the default estimator on the medoids (paper: confidence; falls "
        "back to correct, recorded, when models have no confidences)",
    )
    max_full_items: int = Field(
        default=20_000, ge=100, le=1_000_000, description="Above this, CLARA-style sampling"
    )
    max_iter: int = Field(default=100, ge=1, le=10_000, description="FasterPAM iterations")


class TinyBenchmarksParams(_Params):
    dims: int = Field(default=10, ge=1, le=50, description="IRT latent dimension (paper: 10)")
    form: Literal["scalar_difficulty", "per_dimension"] = "scalar_difficulty"
    prior: Literal["hierarchical", "fixed"] = "hierarchical"
    fit_seed: int = Field(default=42, ge=0, le=MAX_SEED, description="Seed of the IRT fit")
    kmeans_seed: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="None: drawn from the subset seed; 42 reproduces the paper",
    )
    holdout_fraction: float = Field(
        default=0.2, gt=0, lt=1, description="Source models held out to calibrate gp-IRT's beta"
    )
    calibrate_gp_irt: StrictBool = Field(
        default=True, description="Calibrate gp-IRT on held-out sources (False: irt and p_irt only)"
    )
    ability_prior: float = Field(default=1.0, gt=0, le=100)
    max_iter: int = Field(default=400, ge=1, le=10_000, description="L-BFGS iterations per fit")
    fit_tol: float = Field(
        default=1e-4,
        gt=0,
        le=1e-2,
        description="Relative tolerance of the IRT fits (1e-4: half the iterations of 2e-5 with "
        "the same MDAD and p-IRT / gp-IRT errors, bench/RESULTS.md issue 27)",
    )


class _SubsetCreateBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    size: int = Field(ge=1, le=1_000_000, description="Items in the subset")
    seed: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SEED,
        description="Fixes the selection. Omitted: a fresh seed is drawn and stored (a new subset)",
    )
    source_models: list[Annotated[str, Field(min_length=1, max_length=300)]] | None = Field(
        default=None,
        max_length=100_000,
        description="Models the selector is fitted on; default every model with full results. "
        "Ignored (recorded empty) by methods that do not use source models",
    )
    exclude: Literal["flagged"] | list[ItemFlag] | None = Field(
        default=None,
        description="Drop items with these item-health flags from the candidates "
        "(GET /v1/benchmarks/{benchmark}/items); 'flagged' = any flag. The flags are computed "
        "from the models with full results when the subset is requested",
    )


class RandomSubsetCreate(_SubsetCreateBase):
    method: Literal["random"]
    params: RandomParams = Field(default_factory=RandomParams)


class SubtaskStratifiedSubsetCreate(_SubsetCreateBase):
    method: Literal["subtask_stratified"]
    params: SubtaskStratifiedParams = Field(default_factory=SubtaskStratifiedParams)


class ConfidenceStratifiedSubsetCreate(_SubsetCreateBase):
    method: Literal["confidence_stratified"]
    params: ConfidenceStratifiedParams = Field(default_factory=ConfidenceStratifiedParams)


class DPPSubsetCreate(_SubsetCreateBase):
    method: Literal["dpp"]
    params: DPPParams = Field(default_factory=DPPParams)


class AnchorPointsSubsetCreate(_SubsetCreateBase):
    method: Literal["anchor_points"]
    params: AnchorPointsParams = Field(default_factory=AnchorPointsParams)


class TinyBenchmarksSubsetCreate(_SubsetCreateBase):
    method: Literal["tiny_benchmarks"]
    params: TinyBenchmarksParams = Field(default_factory=TinyBenchmarksParams)


SubsetCreate = Annotated[
    RandomSubsetCreate
    | SubtaskStratifiedSubsetCreate
    | ConfidenceStratifiedSubsetCreate
    | DPPSubsetCreate
    | AnchorPointsSubsetCreate
    | TinyBenchmarksSubsetCreate,
    Field(discriminator="method"),
]

SUBSET_CREATE_MODELS: tuple[type[_SubsetCreateBase], ...] = (
    RandomSubsetCreate,
    SubtaskStratifiedSubsetCreate,
    ConfidenceStratifiedSubsetCreate,
    DPPSubsetCreate,
    AnchorPointsSubsetCreate,
    TinyBenchmarksSubsetCreate,
)


def method_tags() -> set[str]:
    """The ``method`` tags of the discriminated union."""
    return {m.model_fields["method"].annotation.__args__[0] for m in SUBSET_CREATE_MODELS}


# --- subsets ------------------------------------------------------------------------------------


class SubsetItem(BaseModel):
    position: int = Field(description="Position in the benchmark's item order")
    item_id: str = Field(description="External item id (e.g. lm-eval doc_hash)")
    subtask: str
    doc_id: int = Field(description="Position within its subtask (the lm-eval doc_id)")
    weight: float = Field(description="Coefficient of the default linear estimator")


class SubsetProvenance(BaseModel):
    method: str
    params: dict[str, Any]
    seed: int
    size_requested: int
    source_models: list[str] = Field(description="Sorted; empty when the method ignores them")
    signal: str = Field(
        description="Signal the selection used: confidence, correct (the fallback when models "
        "have no confidences) or none (method uses no source models)"
    )
    confidence_used: bool
    n_candidates: int
    exclude: list[str] = Field(
        default_factory=list, description="Item-health flags whose items were not candidates"
    )
    job_id: uuid.UUID | None


class SubsetCost(BaseModel):
    """Expected cost of evaluating a subset in one unit, predicted from the stored models."""

    unit: Literal["input_tokens", "output_tokens", "seconds", "usd"]
    expected: float = Field(description="Expected total cost of the subset")
    sd: float = Field(description="Its spread (standard deviation; see source)")
    source: str = Field(
        description="predicted from stored models: per item the median over the models that "
        "report it (an item none reports counts as the median item); the spread is over "
        "random subsets of this size"
    )


class SubsetPublic(BaseModel):
    id: str = Field(description="Content hash of the request (sha256 hex)")
    version_id: uuid.UUID = version_id_field("The benchmark version the subset was drawn from")
    benchmark: str
    benchmark_version: int
    method: str
    size: int
    estimator: str = Field(description="Default estimator")
    estimators: list[str] = Field(description="Estimators the method supports")
    estimate_on: Literal["correct", "confidence"]
    items: list[SubsetItem] = Field(description="Sorted by position")
    provenance: SubsetProvenance
    created_at: datetime
    warnings: list[Warning] = Field(
        default_factory=list,
        description="few_source_models when the selector was fit on too few source models",
    )
    cost: list[SubsetCost] = Field(
        default_factory=list,
        description="Expected cost of evaluating this subset, per unit the stored models "
        "report: the mean over those models of the subset's total (an item a model does not "
        "report counts at the item's median), sd over the models; as of when this export was "
        "rendered (cached per server process)",
    )


# --- scores -------------------------------------------------------------------------------------


#: Default of ``interval`` (equals :data:`app.core.scoring.score_models.DEFAULT_SMALL_N`).
DEFAULT_SMALL_SAMPLE_INTERVAL = "jeffreys_fpc"
SmallSampleInterval = Literal[
    "jeffreys_fpc", "wilson_fpc", "clopper_pearson", "jeffreys", "hypergeometric"
]


class EstimatePublic(BaseModel):
    estimator: str
    value: float | None = Field(
        description="Estimated full-benchmark accuracy (bias-corrected when the interval is "
        "reference_calibrated)"
    )
    raw_value: float | None = Field(
        default=None,
        description="The estimator's own value before a calibration shifted it (equal to value "
        "otherwise)",
    )
    ci_low: float | None
    ci_high: float | None
    se: float | None
    interval: str | None = Field(
        description="How the interval was computed: jeffreys_fpc, wilson_fpc, clopper_pearson, "
        "jeffreys, hypergeometric (unweighted probability subsets), stratified_ht, difference_fpc "
        "(model_assisted), reference_calibrated (calibrated on reference models), "
        "wilson_kish_fpc / irt_ability_delta_method (uncalibrated, with a note)"
    )
    basis: Literal["design", "model", "model-assisted"] = Field(
        description="design: a probability sample, valid whatever the models; model: relies on "
        "a model of the items or of the reference models' errors; model-assisted: design-"
        "consistent difference estimator with model predictions",
    )
    confidence: float = 0.95
    estimand: Estimand = estimand_field(
        "benchmark", " (the full-benchmark accuracy a subset estimates, finite-population)"
    )
    available: bool = True
    note: str | None = Field(
        default=None, description="Why an estimate is unavailable, or a warning about it"
    )


def _absent(value: object) -> bool:
    """Graded-only fields are left out of a 0/1 answer (its JSON stays as before issue 35)."""
    return value is None


class BaselineComparison(BaseModel):
    baseline: str
    baseline_full_accuracy: float
    p_better: float = Field(description="P(new model's full accuracy > baseline's)")
    mean_diff: float = Field(description="Estimated full-benchmark difference (new - baseline)")
    se: float
    n_shared: int
    n_new_only: int
    n_baseline_only: int
    mcnemar_p: float | None = Field(
        description="Two-sided exact McNemar p-value on the shared items (null for graded "
        "scores: see test and p_value)"
    )
    size_needed: int | None = Field(
        description="Random-subset size at which a pair with this gap and discordance would be "
        "ordered correctly with the threshold probability (None: gap 0 on the subset)"
    )
    large_enough: bool
    threshold: float
    test: Literal["mcnemar_exact", "sign_flip_exact", "sign_flip_monte_carlo"] = Field(
        default="mcnemar_exact",
        exclude_if=lambda v: v == "mcnemar_exact",  # a 0/1 comparison's JSON is unchanged
        description="The paired test on the shared items: exact McNemar for 0/1 results, the "
        "paired sign-flip permutation test for graded scores (chosen automatically)",
    )
    p_value: float | None = Field(
        default=None,
        exclude_if=_absent,
        description="Graded scores: two-sided p-value of that test (0/1: see mcnemar_p)",
    )
    ci_low: float | None = Field(
        default=None,
        exclude_if=_absent,
        description="Graded scores, uniform random subset: lower end of the 95 % betting "
        "interval (finite-population, any [0, 1] scores) for the full-benchmark difference",
    )
    ci_high: float | None = Field(default=None, exclude_if=_absent, description="Its upper end")
    note: str | None = Field(
        default=None, exclude_if=_absent, description="How a graded comparison was made"
    )
    estimand: Estimand = estimand_field(
        "benchmark", " (mean_diff and p_better are about the full-benchmark difference)"
    )


class PopulationShift(BaseModel):
    checked: str = Field(
        description="What was checked: irt_ability_and_person_fit (a subset with an IRT item "
        "bank: ability range, l_z person fit, subset-score range) or "
        "accuracy_range_and_person_fit (subset-score range, normed Guttman errors); none "
        "without reference models"
    )
    flagged: bool
    reasons: list[str]
    details: dict[str, Any]


class SubsetScorePublic(BaseModel):
    id: uuid.UUID
    subset_id: str
    model: str
    n_items: int
    subset_accuracy: float
    estimates: list[EstimatePublic]
    baseline: BaselineComparison | None
    population_shift: PopulationShift
    answer: EstimatePublic | None = Field(
        default=None,
        description="The estimate to report: the first of estimates, except for a target the "
        "source models do not support (population_shift flagged): then the first design-based "
        "one (design or model-assisted; the model-based ones extrapolate), or null when the "
        "subset has none (not drawn at random)",
    )
    answer_reason: str = Field(default="", description="Why answer is that estimate (or null)")
    created_at: datetime
    repeated_samples: RepeatedSamplesPublic | None = Field(
        default=None, description="When each uploaded value is the mean of K > 1 samples"
    )
    warnings: list[Warning] = Field(
        default_factory=list,
        description="few_source_models; config_mismatch per evaluation-configuration field that differs from the reference models'",
    )


# --- verdicts and plans -------------------------------------------------------------------------


class PairedOutcomePublic(BaseModel):
    """The pair on the benchmark's shared items: the four paired cells and what they decide."""

    n11: int = Field(description="Items both models get right")
    n10: int = Field(description="Items only model_a gets right")
    n01: int = Field(description="Items only model_b gets right")
    n00: int = Field(description="Items both get wrong")
    p_a_better: float = Field(
        description="P(model_a better) under the Dirichlet(1 + n11, 1 + n10, 1 + n01, 1 + n00) "
        "posterior of the cell probabilities: P(Beta(1 + n10, 1 + n01) > 1/2)"
    )
    mcnemar_p: float = Field(description="Two-sided exact McNemar p-value")
    min_discordant: int = Field(description="Fewest discordant items a decision needs (k)")
    status: Literal["decidable", "undecidable"] = Field(
        description="undecidable when n10 + n01 < min_discordant (the numbers are still given)"
    )


class GradedPairPublic(BaseModel):
    """The pair on every item when a model's scores are graded (in [0, 1], not 0/1): the
    paired sign-flip permutation test of the mean difference (McNemar needs 0/1)."""

    n_items: int = Field(description="Items both models are scored on (every item)")
    mean_difference: float = Field(description="Mean of d_i = score_a - score_b")
    n_nonzero: int = Field(description="Items where the scores differ")
    test: Literal["sign_flip_exact", "sign_flip_monte_carlo"] = Field(
        description="Paired sign-flip permutation test: exact enumeration of every sign vector "
        "(up to 26 differing items), else Monte Carlo"
    )
    p_value: float = Field(description="Two-sided p-value of the test (statistic |sum d_i|)")
    p_value_mc_error: float = Field(
        description="Standard error of a Monte Carlo p-value, sqrt(p (1 - p) / R) (0 when exact)"
    )
    n_resamples: int | None = Field(description="Monte Carlo sign vectors (null when exact)")
    seed: int | None = Field(description="Seed of the Monte Carlo sign vectors")
    p_same_order_mc_error: float | None = Field(
        description="Monte Carlo standard error of p_same_order, sqrt(p (1 - p) / draws); null "
        "when p_same_order is read from an analysis' agreement curves (methods other than random)"
    )
    draws: int | None = Field(
        description="Random subsets simulated for p_same_order and the MDAD (null: read from "
        "an analysis' curves)"
    )
    draws_seed: int | None = Field(description="Seed of those subsets (null: not simulated)")


class NextStep(BaseModel):
    """What to do after a verdict (its third answer)."""

    kind: Literal["none", "larger_subset", "no_subset", "evaluate"] = Field(
        description="none: the subset is enough; larger_subset: a subset of `size` items is; "
        "no_subset: the full benchmark does not separate the pair, so no subset can; evaluate: "
        "no evaluated size reaches the threshold, an evaluation session can decide"
    )
    size: int | None = Field(default=None, description="larger_subset: the size to use")
    command: str | None = Field(default=None, description="The CLI command that does it")
    text: str = Field(description="The step in one sentence")


class VerdictPublic(BaseModel):
    benchmark: str | None = Field(
        default=None, description="The benchmark version asked about, as name@vN"
    )
    model_a: str
    model_b: str
    full_accuracy_a: float
    full_accuracy_b: float
    gap: float = Field(description="full_accuracy_a - full_accuracy_b")
    method: str
    size: int
    p_same_order: float
    p_tie: float
    p_reversed: float
    ci: list[float] = Field(description="[low, high] for p_same_order (equal when exact)")
    mdad_at_size: float | None = Field(description="Method's MDAD at this size (accuracy units)")
    threshold: float = Field(
        default=0.8, description="P(same order) needed to call the pair distinguishable"
    )
    distinguishable: bool
    size_needed: int | None = Field(
        description="Smallest subset size at which P(same order) reaches the threshold for "
        "this pair (its own discordance; `plan` answers for a typical pair at a gap)"
    )
    basis: Literal["exact", "exact_stratified", "robust_curve", "simulated"] = Field(
        default="exact",
        description="How p_same_order, mdad_at_size and size_needed were computed (simulated: "
        "graded scores, random subsets drawn with a stored seed; see graded)",
    )
    basis_note: str = Field(
        default="", description="The basis in words (e.g. 'exact, over all 87,990 model pairs')"
    )
    paired: PairedOutcomePublic | None = Field(
        default=None, description="Paired outcome on all the benchmark's items"
    )
    graded: GradedPairPublic | None = Field(
        default=None,
        exclude_if=lambda v: v is None,  # a 0/1 verdict's JSON is unchanged
        description="Graded scores (not 0/1): the sign-flip test on all items and the Monte "
        "Carlo errors (paired is then null)",
    )
    full_benchmark_differs: bool | None = Field(
        default=None,
        description="The exact McNemar test on all items rejects equal accuracy at "
        "full_benchmark_alpha (null without the paired outcome)",
    )
    full_benchmark_alpha: float = Field(default=0.05, description="Level of that test")
    headline: str = Field(
        default="", description="The answer in one line: verdict, pair, accuracies, gap"
    )
    answers: list[str] = Field(
        default_factory=list,
        description="The verdict in words, in order: is the pair different on the full "
        "benchmark; can a subset of this size tell them apart; what to do next (what the CLI "
        "and the pair page print)",
    )
    next_step: NextStep | None = Field(default=None, description="The third answer, as data")
    warnings: list[Warning] = Field(
        default_factory=list,
        description="config_mismatch per evaluation-configuration field where the pair differs",
    )
    estimand: Estimand = estimand_field(
        "generalized",
        " (the full-benchmark answer: McNemar's test treats the items as a sample, as a "
        "generalized session and a leaderboard do); p_same_order and ci are about a random "
        "subset reproducing the order of these N items (subset_estimand)",
    )
    subset_estimand: Estimand = estimand_field("benchmark", " (p_same_order, ci, size_needed)")
    estimand_text: str = Field(default="", description="The estimands in one sentence, with N")


class SubsetVerdictPublic(BaseModel):
    subset_id: str
    model_a: str
    model_b: str
    full_accuracy_a: float
    full_accuracy_b: float
    gap: float
    subset_estimate_a: float
    subset_estimate_b: float
    subset_gap: float
    same_order: bool = Field(description="This subset orders the pair as the full benchmark")
    tie: bool
    fresh_draw: VerdictPublic | None = Field(
        description="P for a fresh subset of this method and size (None when that needs an "
        "analysis that has not been run)"
    )
    fresh_draw_unavailable: str | None = None
    estimand: Estimand = estimand_field(
        "benchmark", " (whether this subset orders the pair as the full benchmark)"
    )
    warnings: list[Warning] = Field(
        default_factory=list,
        description="few_source_models (the subset); config_mismatch where the pair's configurations differ",
    )


class SignificancePublic(BaseModel):
    """The planner's significance answer (a paired test), next to its MDAD answer."""

    kind: Literal["paired_significance"] = "paired_significance"
    n: int = Field(
        description="Shared items a two-sided paired z-test needs to detect the gap at alpha "
        "with the given power: ceil((z_{1-alpha/2} + z_{power})^2 omega2 / gap^2), "
        "finite-population corrected"
    )
    delta: float = Field(description="The gap to detect")
    omega2: float = Field(
        description="Variance of the paired per-item difference, p10 + p01 - (p10 - p01)^2"
    )
    alpha: float
    power: float
    source: Literal["pair", "benchmark_typical"] = Field(
        description="pair: the pair's observed discordance; benchmark_typical: the median "
        "omega2 over all model pairs with full results"
    )
    estimand: Estimand = estimand_field(
        "benchmark", " (the test is finite-population corrected: a difference on these N items)"
    )


class PlanPublic(BaseModel):
    gap: float
    method: str
    probability: float
    kind: Literal["mdad"] = Field(
        default="mdad",
        description="What size answers: the smallest subset of this method whose MDAD at "
        "probability is at most gap (the pair is ordered as on the full benchmark)",
    )
    size: int | None = Field(description="Smallest size whose MDAD <= gap (None: none evaluated)")
    estimand: Estimand = estimand_field(
        "benchmark", " (a subset ordering a pair as these N items do)"
    )
    basis: Literal["exact", "robust_curve", "simulated"] = Field(
        description="exact: hypergeometric (0/1); simulated: graded scores, random subsets "
        "drawn with the seed in evidence; robust_curve: an analysis' curves"
    )
    evidence: dict[str, Any] = Field(description="Sizes evaluated and MDAD at each; analysis id")
    significance: SignificancePublic | None = Field(
        default=None,
        description="The other question: shared items a paired test needs to detect gap at "
        "alpha with the given power (null when it cannot be computed)",
    )
    cost: list[SubsetCost] = Field(
        default_factory=list,
        description="Expected cost of a subset of the recommended size, per unit the stored "
        "models report (empty without stored costs or without a size)",
    )
    samples: SamplesPlanPublic | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="With a pair scored with K >= 2 samples per item: the paired test's items "
        "for K' = 1, 2, 4, 8, 16 (and K) samples each, from Var(d_i) split into data and "
        "prediction noise",
    )
