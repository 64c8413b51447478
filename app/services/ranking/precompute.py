"""First views precomputed in the worker after results change (issue 27).

An upload, replace, delete or restore on a version with at least ``PRECOMPUTE_MIN_MODELS`` models
queues a ``precompute_views`` job after its request commits (:func:`request_precompute`; the route
enqueues it). The worker (:func:`run_precompute`) computes what the first views read and stores it
in ``precomputed_views`` (the database: every API process reads it) under the results stamp it
was computed for:

* ``leaderboard.json``: the default leaderboard (all models, Holm, alpha 0.05) as the bytes
  ``GET …/leaderboard`` answers; the benchmark page's leaderboard panel and models table read
  their ranks from it too;
* ``page.health.json``: the benchmark page's item-health panel;
* ``page.histogram.{wide,narrow}.svg``: the page's accuracy histogram (both looks).

Readers (:func:`stored_view`) serve a stored view only when its stamp equals the version's current
results stamp (:func:`app.db.repositories.subsets.results_stamp`, the key of every cache), so a
stale view is never served; when it is missing or stale they compute as before. The job computes
for the stamp current when it runs (and again when it changed meanwhile); while one is queued for
a version, further uploads queue no other.

* ``pair_counts.npz``: the pairwise counts the leaderboard's tests read, with the models'
  fingerprints (:mod:`app.services.ranking.pair_counts`): the state the next job updates.

Cost in the worker after one more upload: the results matrix (O(m·N)), the changed models' rows
and columns of the stored counts (O(k·m·N) products plus an O(m²) copy; every pair, O(m²·N),
only without a usable stored state), the default leaderboard from the counts
(:func:`app.core.ranking.stored_counts.leaderboard_from_counts`: O(m²) vector work, no matrix
products) and the item health (O(m·N)). Stored: the leaderboard's JSON (~200 bytes a model) and
the counts (m² bytes a matrix for N < 256, 2·m² below 65,536 items).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.items.health import FLAGS, item_health
from app.db.models import BenchmarkVersion, Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.model_results import ModelResultRepository
from app.db.repositories.sessions import IrtFitRepository
from app.db.repositories.subsets import results_stamp
from app.enums import JobStatus
from app.errors import DomainError
from app.services.catalog import matrices
from app.services.catalog.benchmarks import get_version, item_index
from app.services.platform import jobs as job_service
from app.services.ranking import leaderboards, pair_counts
from app.services.ranking.first_views import (
    HEALTH_VIEW,
    LEADERBOARD_VIEW,
    put_view,
    stamp_text,
    stored_view,
)

JOB_KIND = "precompute_views"
HISTOGRAM_VIEW = "page.histogram.{look}.svg"
# (accuracies, benchmark name) -> {look: SVG bytes}: the page's histogram, drawn by the room that
# owns the figures (app.services.reliability.plots; the job table passes it in)
Figures = Callable[[np.ndarray, str], dict[str, bytes]]
FLAGGED_SHOWN = 50
MIN_HEALTH_MODELS = 3
ROUNDS = 3


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """``{"version_id": uuid}`` (422 naming the field)."""
    return {"version_id": job_service.version_id_param(params, {"version_id"})}


def request_precompute(session: Session, version_id: uuid.UUID, min_models: int) -> Job | None:
    """A new queued precompute job for the version (flush only; the caller enqueues it after
    commit); ``None`` below ``min_models`` models (0: never) or when a job of the version is
    still queued: that one computes for the results current when it starts (a push of many
    models one by one queues few jobs, not one per model).

    The job is the instance's, not the uploader's: no quota is charged and an upload is never
    refused for it."""
    if min_models <= 0:
        return None
    session.flush()  # the count includes the rows this request wrote
    if results_stamp(session, version_id)[0] < min_models:
        return None
    for job in IrtFitRepository(session).active_jobs(JOB_KIND):
        if job.status is JobStatus.queued and job.params.get("version_id") == str(version_id):
            return None
    job = Job(
        kind=JOB_KIND,
        status=JobStatus.queued,
        params={"version_id": str(version_id)},
        seed=0,  # nothing random
        progress_done=0,
        owner=None,
    )
    return JobRepository(session).add(job)


# --- the benchmark page's item-health panel -----------------------------------------------------


def compute_health_panel(session: Session, version: BenchmarkVersion) -> dict[str, Any]:
    """Item flags (:func:`app.core.items.health.item_health`) over the models with full 0/1
    results, as the JSON-able fields of the page's panel (at most 50 flagged items listed)."""
    fm = matrices.full_matrix(session, version.id)
    y = fm.scores if fm.scores is not None else fm.correct  # graded scores too (issue 35)
    n_models = int(y.shape[0])
    if n_models < MIN_HEALTH_MODELS:
        return {
            "n_items": version.n_items,
            "n_models": n_models,
            "counts": {f: 0 for f in FLAGS},
            "n_flagged": 0,
            "effective_informative": 0.0,
            "flagged": [],
            "error": "item health needs at least 3 models with results on every item",
        }
    health = item_health(y)
    s = health.summary()
    flagged = np.flatnonzero(health.flagged())
    index = item_index(version)
    pb = health.point_biserial
    items = [
        {
            "item_id": str(index.item_ids[i]),
            "subtask": str(index.subtasks[i]),
            "accuracy": float(health.accuracy[i]),
            "point_biserial": None if np.isnan(pb[i]) else float(pb[i]),
            "flags": health.item_flags(int(i)),
        }
        for i in flagged[:FLAGGED_SHOWN].tolist()
    ]
    return {
        "n_items": s["n_items"],
        "n_models": s["n_models"],
        "counts": s["counts"],
        "n_flagged": s["n_flagged"],
        "effective_informative": s["effective_informative"],
        "flagged": items,
        "error": None,
    }


def health_panel(session: Session, version: BenchmarkVersion, stamp: tuple) -> dict[str, Any]:
    """The item-health panel under ``stamp``: the worker's stored one, else computed now."""
    data = stored_view(session, version.id, HEALTH_VIEW, stamp)
    if data is not None:
        return json.loads(data)
    return compute_health_panel(session, version)


# --- the job ------------------------------------------------------------------------------------


def page_accuracies(session: Session, version: BenchmarkVersion) -> list[tuple[str, float, float]]:
    """``(model, accuracy, coverage)`` per model by name: the page's models table and histogram."""
    rows = ModelResultRepository(session).accuracy_rows(version.id)
    return [(name, acc, k / version.n_items) for name, acc, k in rows]


def stored_histograms(
    session: Session, version: BenchmarkVersion, stamp: tuple, looks: tuple[str, ...]
) -> dict[str, str] | None:
    """The page's histogram SVGs the worker stored under ``stamp`` (every look), else ``None``."""
    out = {}
    for look in looks:
        data = stored_view(session, version.id, HISTOGRAM_VIEW.format(look=look), stamp)
        if data is None:
            return None
        out[look] = data.decode()
    return out


def run_precompute(
    session: Session, job: Job, ctx: job_service.JobContext, *, figures: Figures | None = None
) -> None:
    """Worker side: compute and store the first views of the job's version under its current
    results stamp; again (up to :data:`ROUNDS` times) when the results changed meanwhile (an
    upload that committed after this job started found it running and queued none, or queued
    one that this run makes redundant). ``figures`` draws the page's histogram.

    Only the last round's views are written, after the last progress report: a progress report
    commits in a session of its own, which on SQLite waits for (and times out behind) the write
    lock this session would hold from its first insert."""
    version = get_version(session, uuid.UUID(job.params["version_id"]))
    rounds = []
    for _ in range(ROUNDS):
        views, stored = _compute_views(session, version, figures)
        rounds.append(stored)
        ctx.progress(len(rounds), ROUNDS)
        session.expire_all()  # the next statements see what committed since
        if stamp_text(results_stamp(session, version.id)) == stored["stamp"]:
            break
    for name, data in views.items():
        put_view(session, version.id, name, stored["stamp"], data)
        stored[name] = len(data)
    job.result = {"rounds": rounds}


def _compute_views(
    session: Session, version: BenchmarkVersion, figures: Figures | None
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Every view, and the stamp of the results matrix they were computed from with the
    seconds and the pair counts' path (nothing written)."""
    views: dict[str, bytes] = {}
    t0 = time.perf_counter()
    rm = leaderboards.results_matrix(session, version.id)
    stamp = stamp_text(rm.stamp)
    stored: dict[str, Any] = {"stamp": stamp, "matrix_s": round(time.perf_counter() - t0, 3)}
    t0 = time.perf_counter()
    counts, stored["counts"] = pair_counts.current_counts(
        session, version.id, rm.names, rm.correct, rm.coverage
    )
    views[pair_counts.COUNTS_VIEW] = pair_counts.encode(counts)
    stored["counts_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    try:
        views[LEADERBOARD_VIEW] = leaderboards.rendered_from_counts(version, rm, counts.counts)
    except DomainError as exc:  # e.g. fewer than 2 rankable models: the API says so itself
        stored["leaderboard_error"] = exc.detail
    stored["leaderboard_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    panel = compute_health_panel(session, version)
    views[HEALTH_VIEW] = json.dumps(panel, separators=(",", ":")).encode()
    stored["health_s"] = round(time.perf_counter() - t0, 3)
    if figures is not None:
        t0 = time.perf_counter()
        acc = np.array([a for _, a, _ in page_accuracies(session, version)], dtype=np.float64)
        if acc.size:
            for look, svg in figures(acc, version.benchmark.name).items():
                views[HISTOGRAM_VIEW.format(look=look)] = svg
        stored["histogram_s"] = round(time.perf_counter() - t0, 3)
    return views, stored


__all__ = [
    "HISTOGRAM_VIEW",
    "JOB_KIND",
    "compute_health_panel",
    "health_panel",
    "page_accuracies",
    "request_precompute",
    "run_precompute",
    "stored_histograms",
    "validate_params",
]
