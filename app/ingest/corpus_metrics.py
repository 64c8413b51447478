"""Metrics with no per-item score: refused on upload, naming the metric and why (issue 35).

A corpus-level metric (BLEU, chrF, TER, corpus F1, Matthews correlation, perplexities) is
computed from the whole corpus at once, not as a mean of per-item scores, so a subset's mean
of per-item values does not estimate it and no item can be subsampled. lm-eval logs such
metrics per sample as the ``(reference, prediction)`` pair its corpus aggregation needs, not a
score. Metrics that are a mean of per-item scores (``acc``, ``exact_match``, per-item ``f1`` of
SQuAD-style tasks, ROUGE per item, a judge's score) are accepted.
"""

from __future__ import annotations

from app.ingest.types import IngestError

# metric name (lower case) -> why it has no per-item score
CORPUS_METRICS: dict[str, str] = {
    "bleu": "BLEU is computed on the whole corpus (n-gram counts pooled over items, a brevity "
    "penalty on the total length)",
    "sacrebleu": "BLEU is computed on the whole corpus (n-gram counts pooled over items, a "
    "brevity penalty on the total length)",
    "chrf": "chrF pools character n-gram statistics over the whole corpus",
    "ter": "TER divides the corpus' total edits by its total reference length",
    "corpus_f1": "corpus F1 is computed from precision and recall pooled over the corpus",
    "f1_corpus": "corpus F1 is computed from precision and recall pooled over the corpus",
    "macro_f1": "macro F1 averages per-class F1 computed over the whole corpus",
    "mcc": "Matthews' correlation is computed from the corpus' confusion matrix",
    "word_perplexity": "perplexity weights items by their length over the whole corpus",
    "byte_perplexity": "perplexity weights items by their length over the whole corpus",
    "bits_per_byte": "bits per byte weights items by their length over the whole corpus",
}


def corpus_metric_reason(metric: str | None) -> str | None:
    """Why ``metric`` has no per-item score, or ``None`` when it may be a per-item mean."""
    if not metric:
        return None
    return CORPUS_METRICS.get(metric.strip().lower())


def refuse_corpus_metric(metric: str | None, *, field: str = "metric") -> None:
    """Raise ``IngestError`` naming ``metric`` when it is corpus-level."""
    why = corpus_metric_reason(metric)
    if why is None:
        return
    raise IngestError.single(
        f"metric {metric!r} has no per-item score: {why}, so a subset's mean of per-item "
        "values does not estimate it and items cannot be subsampled. Upload a metric that is a "
        "mean of per-item scores (e.g. exact_match, a per-item f1 or rouge, acc, a judge's "
        "score in [0, 1]) with --metric",
        field=field,
    )


__all__ = ["CORPUS_METRICS", "corpus_metric_reason", "refuse_corpus_metric"]
