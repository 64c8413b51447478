"""Client operations on evaluation sessions (issue 12): start one, post a batch's results, read it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.client.transport import FileLike, Transport, results_upload
from app.schemas.jobs import JobPublic
from app.schemas.sessions import SessionPage, SessionPublic


@dataclass(frozen=True)
class SessionStart:
    """What ``POST …/sessions`` answered: the session, or (``fluid`` before the benchmark's IRT
    fit exists) the job computing the fit."""

    session: SessionPublic | None = None
    job: JobPublic | None = None


class SessionOperations(Transport):
    """``/v1/benchmarks/{benchmark}/sessions`` and ``/v1/sessions/{id}``."""

    def create_session(
        self,
        benchmark: str | uuid.UUID,
        model: str,
        *,
        baseline: str | None = None,
        goal: Literal["decide", "precision", "noninferior", "superior"] = "decide",
        policy: Literal["random", "assisted", "neyman", "fluid"] | None = None,
        alpha: float = 0.05,
        margin: float | None = None,
        precision: float | None = None,
        batch_size: int = 10,
        max_items: int | None = None,
        seed: int | None = None,
        store_results: bool = False,
        estimand: Literal["benchmark", "generalized"] | None = None,
        max_cost: float | None = None,
        max_tokens: float | None = None,
        cost_unit: str | None = None,
        cost_aware: bool = False,
    ) -> SessionStart:
        """``POST /v1/benchmarks/{benchmark}/sessions`` (``benchmark``: version id, name or
        ``name@vN``). Seeded requests carry a content-derived Idempotency-Key."""
        body: dict[str, Any] = {
            "model": model,
            "goal": goal,
            "alpha": alpha,
            "batch_size": batch_size,
            "store_results": store_results,
        }
        extra = {
            "policy": policy,  # omitted: the service's default (assisted when it can fit IRT)
            "baseline": baseline,
            "estimand": estimand,  # omitted: generalized with a baseline, else benchmark
            "margin": margin,
            "precision": precision,
            "max_items": max_items,
            "seed": seed,
            "max_cost": max_cost,
            "max_tokens": max_tokens,
            "cost_unit": cost_unit,
            "cost_aware": cost_aware or None,  # omitted unless asked: bodies as before
        }
        body.update({k: v for k, v in extra.items() if v is not None})
        response = self.post_seeded(f"/v1/benchmarks/{benchmark}/sessions", body, seed)
        if response.status_code == 202:
            return SessionStart(job=JobPublic.model_validate(response.json()))
        return SessionStart(session=SessionPublic.model_validate(response.json()))

    def get_session(self, session_id: str | uuid.UUID) -> SessionPublic:
        """``GET /v1/sessions/{id}``: the session with its whole history."""
        return SessionPublic.model_validate(self.get_json(f"/v1/sessions/{session_id}"))

    def list_sessions(
        self,
        benchmark: str | uuid.UUID,
        *,
        model: str | None = None,
        state: Literal["open", "decided", "exhausted", "abandoned"] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SessionPage:
        """``GET /v1/benchmarks/{benchmark}/sessions``: one page, newest first (pass the
        page's ``next_cursor`` as ``cursor`` for the next)."""
        return SessionPage.model_validate(
            self.get_json(
                f"/v1/benchmarks/{benchmark}/sessions",
                model=model,
                state=state,
                limit=limit,
                cursor=cursor,
            )
        )

    def post_session_results(
        self,
        session_id: str | uuid.UUID,
        *,
        model: str,
        results: Mapping[str, float] | None = None,
        files: FileLike | Sequence[FileLike] | None = None,
        metric: str | None = None,
        filter: str | None = None,
        item_key: Literal["doc_hash", "doc_id"] | None = None,
        batch: int | None = None,
        idempotency_key: str | bool = True,
    ) -> SessionPublic:
        """``POST /v1/sessions/{id}/results``: one batch's results, as ``{item_id: value}`` or
        files in any results-upload format (lm-eval sample logs …). ``batch``: the batch they
        answer (the open one is the session's ``step + 1``; needed for values without item
        ids). A resend of an answered batch gets that batch's reply and changes nothing; the
        content-derived Idempotency-Key makes a retry safe."""
        path = f"/v1/sessions/{session_id}/results"
        params = {
            "model": model,
            "metric": metric,
            "filter": filter,
            "item_key": item_key,
            "batch": batch,
        }
        many, raw = results_upload(model, results, files, missing="give files or results")
        response = self.send_files(path, many, params, key=idempotency_key, raw=raw)
        return SessionPublic.model_validate(response.json())


__all__ = ["SessionOperations", "SessionStart"]
