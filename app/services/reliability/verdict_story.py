"""A pair verdict in words, in the order a reader asks (issue 28), written once for every
surface (the API's ``answers``, ``benchslice verdict``, the pair page):

1. Is the pair different on the full benchmark? (the exact paired McNemar test, its p-value and
   the discordant counts)
2. Can a subset of this size tell them apart? (P(same order) and how it was computed)
3. What next? (nothing; the size needed; "no subset can" when the full benchmark does not
   separate them; or the ``benchslice evaluate`` command that decides it)
"""

from __future__ import annotations

import shlex

from app.core.sequential.population import estimand_sentence
from app.formatting import count, p_equals, pct, prob, pts
from app.schemas.subsets import NextStep, VerdictPublic

FULL_BENCHMARK_ALPHA = 0.05
EVALUATE_RUN = "lm_eval … --samples {samples} --log_samples --output_path {output}"


def basis_note(basis: str, *, n_pairs: int | None = None, runs: int | None = None) -> str:
    """How a verdict's probabilities were computed, in words (shown next to each number)."""
    if basis == "exact":
        pairs = f", MDAD over all {count(n_pairs)} model pairs" if n_pairs else ""
        return f"exact (hypergeometric, no sampling error{pairs})"
    if basis == "exact_stratified":
        return "exact (stratified by subtask)"
    if basis == "simulated":
        return "simulated over random subsets (graded scores)"
    runs_text = f"{runs} runs" if runs else "its runs"
    return f"estimated from the latest analysis' agreement curves (bootstrap, {runs_text})"


def headline(v: VerdictPublic) -> str:
    """The one-line answer: the verdict word, the pair, their accuracies and the gap."""
    word = "DISTINGUISHABLE" if v.distinguishable else "NOT distinguishable"
    if v.distinguishable and v.full_benchmark_differs is False:
        word += " (the full benchmark's own order is within chance)"
    return (
        f"{word}: {v.model_a} ({pct(v.full_accuracy_a)}) vs {v.model_b} "
        f"({pct(v.full_accuracy_b)}), gap {pts(abs(v.gap))}"
    )


def _full_benchmark(v: VerdictPublic, n_items: int) -> str:
    p = v.paired
    assert p is not None
    counts = f"only A right on {p.n10} items, only B on {p.n01}"
    test = f"exact McNemar {p_equals(p.mcnemar_p)}"
    if p.status == "undecidable":
        return (
            f"Full benchmark ({n_items} items): too few items separate them to test "
            f"({p.n10 + p.n01} discordant, {p.min_discordant} needed; {counts})."
        )
    if v.full_benchmark_differs:
        return f"Full benchmark ({n_items} items): different ({test}; {counts})."
    return (
        f"Full benchmark ({n_items} items): not significantly different ({test} ≥ "
        f"{v.full_benchmark_alpha:g}; {counts})."
    )


def _graded_full_benchmark(v: VerdictPublic) -> str:
    g = v.graded
    assert g is not None
    kind = "exact" if g.test == "sign_flip_exact" else "Monte Carlo"
    test = f"paired sign-flip permutation test ({kind}, graded scores) {p_equals(g.p_value)}"
    if g.test != "sign_flip_exact":
        test += f" ± {prob(g.p_value_mc_error)}"
    scores = f"mean difference {pts(abs(g.mean_difference))}, scores differ on {g.n_nonzero} items"
    if v.full_benchmark_differs:
        return f"Full benchmark ({g.n_items} items): different ({test}; {scores})."
    return (
        f"Full benchmark ({g.n_items} items): not significantly different ({test} ≥ "
        f"{v.full_benchmark_alpha:g}; {scores})."
    )


def _subset(v: VerdictPublic) -> str:
    reach = "reaches" if v.distinguishable else "is below"
    how = "exact" if v.basis.startswith("exact") else "from the analysis' curves"
    if v.basis == "simulated" and v.graded is not None:
        how = f"simulated, ± {prob(v.graded.p_same_order_mc_error)} Monte Carlo error"
    return (
        f"A {v.method} subset of {v.size} items orders them as the full benchmark with "
        f"P = {prob(v.p_same_order)} ({how}; {reach} the {prob(v.threshold)} needed)."
    )


def next_step(v: VerdictPublic, ref: str) -> NextStep:
    """The third answer: what settles the question, with the command that does it."""
    a, b = shlex.quote(v.model_a), shlex.quote(v.model_b)
    if v.full_benchmark_differs is False or (
        v.paired is not None and v.paired.status == "undecidable"
    ):
        copy = (
            f" (a {v.method} subset of {v.size_needed} items would copy the full benchmark's "
            "order with the probability asked, but that order is itself within chance)"
            if v.size_needed is not None
            else ""
        )
        if v.distinguishable:
            # the subset does copy the full benchmark's order, but that order is noise: saying
            # "no subset can" under a DISTINGUISHABLE headline would contradict it
            return NextStep(
                kind="no_subset",
                text=f"the full benchmark does not separate them: a {v.method} subset of "
                f"{v.size} items copies its order (P = {prob(v.p_same_order)}), but that order is "
                f"itself within chance; treat them as tied on {ref}.",
            )
        return NextStep(
            kind="no_subset",
            text="no subset can: the full benchmark does not separate them; treat them as "
            f"tied on {ref}{copy}.",
        )
    if v.distinguishable:
        return NextStep(kind="none", text=f"nothing: {v.size} {v.method} items are enough.")
    if v.size_needed is not None:
        command = f"benchslice verdict --benchmark {ref} {a} {b} --size {v.size_needed}"
        if v.method != "random":
            command += f" --method {v.method}"
        return NextStep(
            kind="larger_subset",
            size=v.size_needed,
            command=command,
            text=f"use a {v.method} subset of at least {v.size_needed} items (this pair's "
            f"size needed): {command}",
        )
    command = (
        f"benchslice evaluate --benchmark {ref} --model {a} --baseline {b} "
        f"--run {shlex.quote(EVALUATE_RUN)}"
    )
    return NextStep(
        kind="evaluate",
        command=command,
        text=f"no evaluated {v.method} size reaches P = {prob(v.threshold)}; an "
        f"evaluation session decides with as few items as the pair allows: {command}",
    )


def tell(v: VerdictPublic, ref: str, n_items: int) -> VerdictPublic:
    """``v`` with its full-benchmark decision, its answers in words and its next step."""
    if v.paired is not None:
        v.full_benchmark_alpha = FULL_BENCHMARK_ALPHA
        v.full_benchmark_differs = bool(
            v.paired.status == "decidable" and v.paired.mcnemar_p < FULL_BENCHMARK_ALPHA
        )
    if v.graded is not None:
        v.full_benchmark_alpha = FULL_BENCHMARK_ALPHA
        v.full_benchmark_differs = bool(v.graded.p_value < FULL_BENCHMARK_ALPHA)
    v.benchmark = ref
    v.headline = headline(v)
    step = next_step(v, ref)
    v.next_step = step
    answers = [_subset(v), f"Next: {step.text}"]
    if v.paired is not None:
        answers.insert(0, _full_benchmark(v, n_items))
    elif v.graded is not None:
        answers.insert(0, _graded_full_benchmark(v))
    v.answers = answers
    v.estimand_text = (
        f"the full-benchmark answer is about {estimand_sentence('generalized', n_items)}, as in "
        f"`evaluate` with a baseline and the leaderboard; the subset answers ask whether a random "
        f"subset orders the pair as these {n_items} items do"
    )
    return v
