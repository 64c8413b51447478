"""Client operations answered from the statistics: verdicts, plans, MDAD analyses and plots."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from app.client.benchmarks import benchmark_path
from app.client.transport import Progress, Transport
from app.schemas.analyses import AnalysisPage, AnalysisPublic
from app.schemas.subsets import PlanPublic, VerdictPublic


class AnalysisOperations(Transport):
    """``/v1/benchmarks/{benchmark}/verdict|plan|analyses`` and ``/v1/analyses/{id}``."""

    # --- verdicts and planning ------------------------------------------------------------------

    def verdict(
        self,
        benchmark: str | uuid.UUID,
        model_a: str,
        model_b: str,
        *,
        size: int,
        method: str = "random",
        threshold: float | None = None,
        min_discordant: int | None = None,
    ) -> VerdictPublic:
        """``GET /v1/benchmarks/{benchmark}/verdict``: would a ``size``-item subset order the pair
        as the full benchmark does (P(same order), tie, reversed, MDAD at that size, size
        needed), and the pair's paired outcome on all items (``paired``: cells, P(A better),
        exact McNemar, ``undecidable`` below ``min_discordant`` discordant items).
        ``benchmark``: a version id, a name (its latest version) or ``name@vN``."""
        return VerdictPublic.model_validate(
            self.get_json(
                benchmark_path(benchmark, "/verdict"),
                model_a=model_a,
                model_b=model_b,
                size=size,
                method=method,
                threshold=threshold,
                min_discordant=min_discordant,
            )
        )

    def plan(
        self,
        benchmark: str | uuid.UUID,
        *,
        gap: float,
        method: str = "random",
        probability: float | None = None,
        model_a: str | None = None,
        model_b: str | None = None,
        alpha: float | None = None,
        power: float | None = None,
    ) -> PlanPublic:
        """``GET /v1/benchmarks/{benchmark}/plan``: smallest subset size whose MDAD is at most
        ``gap`` (``size``, kind ``mdad``), and the shared items a paired test needs to detect
        ``gap`` at ``alpha`` with ``power`` (``significance``; from the pair's discordance when
        ``model_a`` and ``model_b`` are given)."""
        return PlanPublic.model_validate(
            self.get_json(
                benchmark_path(benchmark, "/plan"),
                gap=gap,
                method=method,
                probability=probability,
                model_a=model_a,
                model_b=model_b,
                alpha=alpha,
                power=power,
            )
        )

    # --- analyses -------------------------------------------------------------------------------

    def create_analysis(
        self,
        benchmark: str | uuid.UUID,
        *,
        methods: Sequence[str],
        sizes: Sequence[int],
        runs: int | None = None,
        n_sources: int | None = None,
        n_targets: int | None = None,
        mode: Literal["robust", "paper"] | None = None,
        seed: int | None = None,
        gap: float | None = None,
        threshold: float | None = None,
    ) -> AnalysisPublic:
        """``POST /v1/benchmarks/{benchmark}/analyses``: queue an MDAD analysis (a job)."""
        body = {
            "methods": list(methods),
            "sizes": list(sizes),
            "runs": runs,
            "n_sources": n_sources,
            "n_targets": n_targets,
            "mode": mode,
            "seed": seed,
            "gap": gap,
            "threshold": threshold,
        }
        body = {k: v for k, v in body.items() if v is not None}
        response = self.request("POST", benchmark_path(benchmark, "/analyses"), json_body=body)
        return AnalysisPublic.model_validate(response.json())

    def run_analysis(
        self,
        benchmark: str | uuid.UUID,
        *,
        methods: Sequence[str],
        sizes: Sequence[int],
        progress: Progress | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> AnalysisPublic:
        """Queue an analysis, wait for its job, and return it with its results."""
        analysis = self.create_analysis(benchmark, methods=methods, sizes=sizes, **options)
        self.wait(analysis.job_id, progress=progress, timeout=timeout)
        return self.get_analysis(analysis.id)

    def get_analysis(self, analysis_id: str | uuid.UUID) -> AnalysisPublic:
        """``GET /v1/analyses/{id}``: status, progress, and once done the MDAD table, curves and
        recommendation."""
        return AnalysisPublic.model_validate(self.get_json(f"/v1/analyses/{analysis_id}"))

    def list_analyses(
        self,
        benchmark: str | uuid.UUID,
        *,
        status: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> AnalysisPage:
        """``GET /v1/benchmarks/{benchmark}/analyses``: newest first, without results."""
        return AnalysisPage.model_validate(
            self.get_json(
                benchmark_path(benchmark, "/analyses"),
                status=status,
                limit=limit,
                cursor=cursor,
            )
        )

    def plot(
        self,
        analysis_id: str | uuid.UUID,
        kind: Literal["mdad", "agreement"] = "mdad",
        fmt: Literal["svg", "png"] = "svg",
        *,
        method: str | None = None,
        n: int | None = None,
        split: Literal["seen", "unseen"] | None = None,
    ) -> bytes:
        """``GET /v1/analyses/{id}/plots/{kind}.{fmt}``: the image bytes."""
        params = {"split": split}
        if kind == "agreement":
            params.update(method=method, n=n)
        response = self.request(
            "GET", f"/v1/analyses/{analysis_id}/plots/{kind}.{fmt}", params=params, accept="*/*"
        )
        return response.content
