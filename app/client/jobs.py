"""Client calls on the service itself and on jobs in general (reading a job and waiting for
it are part of :class:`~app.client.transport.Transport`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from app.client.transport import Transport
from app.schemas.jobs import JobPublic


class JobOperations(Transport):
    """``/healthz``, ``/readyz`` and ``/v1/jobs``."""

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: the API process is alive."""
        return self.get_json("/healthz")

    def ready(self) -> dict[str, Any]:
        """``GET /readyz``: database and broker reachable (503 → :class:`BenchsliceError`)."""
        return self.get_json("/readyz")

    def create_job(
        self, kind: str, params: Mapping[str, Any] | None = None, *, seed: int | None = None
    ) -> JobPublic:
        """``POST /v1/jobs`` (built-in kind ``ping``)."""
        body = {"kind": kind, "params": dict(params or {}), "seed": seed}
        return JobPublic.model_validate(self.request("POST", "/v1/jobs", json_body=body).json())

    def cancel_job(self, job_id: str | uuid.UUID) -> JobPublic:
        """``POST /v1/jobs/{id}/cancel``: cancel a queued job, or ask a running one to stop."""
        return JobPublic.model_validate(self.request("POST", f"/v1/jobs/{job_id}/cancel").json())
