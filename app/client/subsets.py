"""Client operations on subsets: build one (a job), read and export it, score a model on it,
and ask whether it orders a pair of models like the full benchmark."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from app.client.benchmarks import benchmark_path
from app.client.errors import BenchsliceError
from app.client.transport import (
    FileLike,
    Progress,
    Transport,
    results_upload,
)
from app.schemas.jobs import JobPublic
from app.schemas.subsets import SubsetPublic, SubsetScorePublic, SubsetVerdictPublic


@dataclass(frozen=True)
class SubsetRequest:
    """What ``POST …/subsets`` answered: the job building the subset, or the subset itself."""

    job: JobPublic | None = None
    subset: SubsetPublic | None = None
    subset_id: str | None = None

    @classmethod
    def from_response(cls, response: httpx.Response) -> SubsetRequest:
        body = response.json()
        if isinstance(body, dict) and "items" in body and "provenance" in body:
            subset = SubsetPublic.model_validate(body)
            return cls(subset=subset, subset_id=subset.id)
        if isinstance(body, dict) and isinstance(body.get("job"), dict):
            return cls(job=JobPublic.model_validate(body["job"]), subset_id=body.get("subset_id"))
        return cls(job=JobPublic.model_validate(body), subset_id=None)


class SubsetOperations(Transport):
    """``/v1/benchmarks/{benchmark}/subsets`` and ``/v1/subsets/{id}``."""

    def create_subset(
        self,
        benchmark: str | uuid.UUID,
        method: str,
        size: int,
        *,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        source_models: Sequence[str] | None = None,
        exclude: str | Sequence[str] | None = None,
    ) -> SubsetRequest:
        """``POST /v1/benchmarks/{benchmark}/subsets``: a job building the subset, or the subset
        itself when this exact request (same seed) was answered before. Use :meth:`build_subset` to
        wait for it. ``exclude``: ``"flagged"`` or item-health flags whose items are not
        candidates."""
        body: dict[str, Any] = {"method": method, "size": size}
        if seed is not None:
            body["seed"] = seed
        if params:
            body["params"] = dict(params)
        if source_models is not None:
            body["source_models"] = list(source_models)
        if exclude:
            body["exclude"] = exclude if isinstance(exclude, str) else list(exclude)
        # Without a seed the server draws one, so only a seeded request is safe to replay.
        response = self.post_seeded(benchmark_path(benchmark, "/subsets"), body, seed)
        return SubsetRequest.from_response(response)

    def build_subset(
        self,
        benchmark: str | uuid.UUID,
        method: str,
        size: int,
        *,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        source_models: Sequence[str] | None = None,
        progress: Progress | None = None,
        timeout: float | None = None,
        exclude: str | Sequence[str] | None = None,
    ) -> SubsetPublic:
        """Create a subset and wait for it (``progress(job)`` while the job runs)."""
        request = self.create_subset(
            benchmark,
            method,
            size,
            seed=seed,
            params=params,
            source_models=source_models,
            exclude=exclude,
        )
        if request.subset is not None:
            return request.subset
        assert request.job is not None
        job = self.wait(request.job.id, progress=progress, timeout=timeout)
        subset_id = (job.result or {}).get("subset_id") or request.subset_id
        if not subset_id:
            raise BenchsliceError(
                "Unexpected response", detail=f"job {job.id} succeeded without a subset id"
            )
        return self.get_subset(subset_id)

    def get_subset(self, subset_id: str) -> SubsetPublic:
        """``GET /v1/subsets/{id}``: items, weights, estimator, provenance."""
        return SubsetPublic.model_validate(self.get_json(f"/v1/subsets/{subset_id}"))

    def export_subset(
        self, subset_id: str, format: Literal["ids", "csv", "lm-eval", "inspect"]
    ) -> str:
        """``GET /v1/subsets/{id}?format=``: ``ids`` (one per line), ``csv``, ``lm-eval`` (the
        JSON for ``lm_eval --samples``) or ``inspect`` (``{task: [sample id, ...]}`` for
        ``inspect eval --sample-id``)."""
        response = self.request(
            "GET", f"/v1/subsets/{subset_id}", params={"format": format}, accept="*/*"
        )
        return response.text

    def score_subset(
        self,
        subset_id: str,
        *,
        model: str,
        files: FileLike | Sequence[FileLike] | None = None,
        results: Mapping[str, float | Mapping[str, float]] | None = None,
        baseline: str | None = None,
        threshold: float | None = None,
        metric: str | None = None,
        filter: str | None = None,
        task: str | None = None,
        item_key: Literal["doc_hash", "doc_id"] | None = None,
        idempotency_key: str | bool = True,
        interval: str | None = None,
    ) -> SubsetScorePublic:
        """``POST /v1/subsets/{id}/scores``: a model's results on the subset items (files in any
        upload format, or ``results={item_id: 0/1}``) → estimated full-benchmark accuracy with
        CIs (each with its ``basis``; ``interval`` picks the small-sample interval of unweighted
        probability subsets: jeffreys_fpc, wilson_fpc, clopper_pearson, jeffreys, hypergeometric), and the
        paired comparison with ``baseline`` when given.

        The request carries an ``Idempotency-Key`` derived from its content (``True``), so it is
        retried safely: the server stores one score and replays it for the same key and body."""
        path = f"/v1/subsets/{subset_id}/scores"
        params = {
            "model": model,
            "baseline": baseline,
            "threshold": threshold,
            "metric": metric,
            "filter": filter,
            "task": task,
            "item_key": item_key,
            "interval": interval,
        }
        many, raw = results_upload(model, results, files, missing="give files or results to score")
        response = self.send_files(path, many, params, key=idempotency_key, raw=raw)
        return SubsetScorePublic.model_validate(response.json())

    def subset_verdict(
        self,
        subset_id: str,
        model_a: str,
        model_b: str,
        *,
        threshold: float | None = None,
    ) -> SubsetVerdictPublic:
        """``GET /v1/subsets/{id}/verdict``: does this subset order the pair like the full
        benchmark, and P(same order) for a fresh draw."""
        return SubsetVerdictPublic.model_validate(
            self.get_json(
                f"/v1/subsets/{subset_id}/verdict",
                model_a=model_a,
                model_b=model_b,
                threshold=threshold,
            )
        )
