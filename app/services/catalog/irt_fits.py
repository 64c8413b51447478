"""The IRT fit the IRT session policies need (``assisted``, ``neyman``, ``fluid``): computed once
per benchmark version by a job.

Job kind ``irt_fit`` (params ``{"version_id": <version id>}``; the older key ``benchmark_id`` is
still read, seed stored on the job): fits the
multidimensional 2PL model of :func:`app.core.irt.fit.fit_irt` (``dims = IRT_DIMS``, the simulator's
default) on every model with full results on the version and stores the item parameters in
``irt_fits``. :func:`request_fit` is single flight: a queued or running fit job of the version is
reused instead of queueing another.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.core.irt.fit import fit_irt
from app.core.sequential.fluid import ItemBank
from app.db.models import IrtFit, Job
from app.db.repositories.sessions import IrtFitRepository
from app.errors import InvalidInput
from app.services.catalog.benchmarks import get_version
from app.services.catalog.results import load_matrix
from app.services.platform import jobs as job_service
from app.services.platform.caching import MB, BoundedCache

JOB_KIND = "irt_fit"
IRT_DIMS = 2
# Measured, not assumed (issue 24 item 4; bench/bench_min_sources.py sessions, bench/RESULTS.md
# "Minimum source populations"): REAL GPQA, 100 held-out pairs per fit size, goal decide with
# margin 0.02, seed 303. The policies' decisions stay valid whatever the fit (confidence
# sequences; 0-3 wrong of 100 at every size, random included); what a fit could change is items
# per decision. Mean items, assisted / random on the same pairs: fit on 10 models 276 / 289
# (0.95), 20: 0.93, 35: 0.92, 50: 0.95, 100: 0.94, 200: 0.83, 315: 0.96; fluid / random 1.03,
# 1.02, 1.04, 1.03, 1.03, 0.89, 1.02. No loss measurable from 10 models up, so the floor stays 10
# (the fewest the fit was run on).
MIN_FIT_MODELS = 10

_BANKS: BoundedCache[uuid.UUID, ItemBank] = BoundedCache("irt_item_banks", 64 * MB)


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """``{"version_id": uuid}`` and nothing else (422 naming the field)."""
    params = dict(params)
    if "version_id" not in params and "benchmark_id" in params:  # the key's earlier name
        params["version_id"] = params.pop("benchmark_id")
    return {"version_id": job_service.version_id_param(params, {"version_id"})}


def job_version_id(params: dict[str, Any]) -> str | None:
    """The version id of a fit job's params (jobs written before the rename say benchmark_id)."""
    return params.get("version_id") or params.get("benchmark_id")


def get_fit(session: Session, version_id: uuid.UUID) -> IrtFit | None:
    return IrtFitRepository(session).get(version_id)


def item_bank(fit: IrtFit) -> ItemBank:
    """The fit's item bank (cached per version: a version's fit is written once)."""
    hit = _BANKS.get(fit.benchmark_version_id)
    if hit is not None:
        return hit
    a = np.frombuffer(fit.a, dtype="<f8").reshape(-1, fit.dims)
    bank = ItemBank.from_arrays(a, np.frombuffer(fit.offset, dtype="<f8"))
    _BANKS.put(fit.benchmark_version_id, bank)
    return bank


def full_models(session: Session, version_id: uuid.UUID) -> tuple[np.ndarray, np.ndarray]:
    """Names and results (float, models x items) of the models with full coverage."""
    mat = load_matrix(session, version_id)
    full = mat.coverage.all(axis=1)
    return mat.model_names[full], mat.correct[full]


def request_fit(session: Session, version_id: uuid.UUID) -> tuple[Job, bool]:
    """``(job, created)``: the queued/running fit job of the version, or a new queued one (flush
    only; the caller enqueues a new job after commit). 422 (field ``policy``) when too few models have full
    results to fit."""
    repo = IrtFitRepository(session)
    repo.lock_version(version_id)
    for job in repo.active_jobs(JOB_KIND):
        if job_version_id(job.params) == str(version_id):
            return job, False
    names, _ = full_models(session, version_id)
    if names.size < MIN_FIT_MODELS:
        raise InvalidInput(
            f"the IRT policies (assisted, neyman, fluid) need an IRT fit on at least "
            f"{MIN_FIT_MODELS} models with full results; this benchmark has {names.size}",
            field="policy",
            message="use policy 'random'",
        )
    return job_service.create_job(session, JOB_KIND, {"version_id": str(version_id)}), True


def run_irt_fit(session: Session, job: Job, ctx: job_service.JobContext) -> None:
    """Worker side: fit and store (a second run for a fitted version only reports the fit)."""
    version = get_version(session, uuid.UUID(job_version_id(job.params)))
    ctx.progress(0, 1)
    existing = get_fit(session, version.id)
    if existing is None:
        names, correct = full_models(session, version.id)
        if names.size < MIN_FIT_MODELS:
            raise ValueError(f"only {names.size} models with full results (need {MIN_FIT_MODELS})")
        model = fit_irt(correct, dims=IRT_DIMS, rng=int(job.seed))
        existing = IrtFit(
            benchmark_version_id=version.id,
            dims=IRT_DIMS,
            seed=int(job.seed),
            n_models=int(names.size),
            models=names.tolist(),
            a=np.ascontiguousarray(model.a, dtype="<f8").tobytes(),
            offset=np.ascontiguousarray(model.item_offsets(), dtype="<f8").tobytes(),
            converged=bool(model.converged),
            job_id=job.id,
        )
        session.add(existing)
        session.flush()
    job.result = {
        "version_id": str(version.id),
        "dims": existing.dims,
        "n_models": existing.n_models,
        "converged": existing.converged,
    }


__all__ = [
    "IRT_DIMS",
    "JOB_KIND",
    "MIN_FIT_MODELS",
    "full_models",
    "get_fit",
    "item_bank",
    "request_fit",
    "run_irt_fit",
    "validate_params",
]
