"""Client operations on release gates (issue 34): start one, post a round's results, read it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from app.client.transport import FileLike, Transport, content_idempotency_key, file_list
from app.schemas.gates import GatePage, GatePublic


class GateOperations(Transport):
    """``/v1/gates`` and ``/v1/gates/{id}``."""

    def create_gate(
        self, body: Mapping[str, Any], *, fit_timeout: float | None = 600.0
    ) -> GatePublic:
        """``POST /v1/gates`` (a :class:`app.schemas.gates.GateCreate` document). Sent once: a
        retried creation could start a second gate (resume an open one with :meth:`list_gates`).

        A 202 (``prediction: combined`` before a benchmark's IRT fit exists: no gate was
        created) is waited for (the fit job, at most ``fit_timeout`` seconds each) and the same
        request sent again, once per benchmark at most.
        """
        for _ in range(len(body.get("benchmarks") or ()) + 1):
            response = self.request("POST", "/v1/gates", json_body=dict(body))
            if response.status_code != 202:
                return GatePublic.model_validate(response.json())
            self.wait(response.json()["id"], timeout=fit_timeout)
        raise RuntimeError("the gate's IRT fits kept being requested; retry the command")

    def get_gate(self, gate_id: str | uuid.UUID) -> GatePublic:
        return GatePublic.model_validate(self.get_json(f"/v1/gates/{gate_id}"))

    def list_gates(
        self,
        *,
        model: str | None = None,
        outcome: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> GatePage:
        """``GET /v1/gates``: one page, newest first."""
        return GatePage.model_validate(
            self.get_json("/v1/gates", model=model, outcome=outcome, limit=limit, cursor=cursor)
        )

    def post_gate_results(
        self,
        gate_id: str | uuid.UUID,
        round_number: int,
        results: Mapping[str, Mapping[str, float]],
    ) -> GatePublic:
        """``POST /v1/gates/{id}/results``: round ``round_number``'s results, ``{benchmark:
        {item_id: value}}``. A resend of an answered round changes nothing on the server, so
        the post is retried safely (it carries a content-derived Idempotency-Key)."""
        body = {
            "round": int(round_number),
            "results": [
                {"benchmark": name, "item_ids": list(values), "correct": list(values.values())}
                for name, values in results.items()
            ],
        }
        path = f"/v1/gates/{gate_id}/results"
        data = json.dumps(body, sort_keys=True).encode()
        response = self.request(
            "POST",
            path,
            content=data,
            headers={"Content-Type": "application/json"},
            idempotency_key=content_idempotency_key("POST", path, data),
        )
        return GatePublic.model_validate(response.json())

    def post_gate_result_files(
        self,
        gate_id: str | uuid.UUID,
        round_number: int,
        files: FileLike | Sequence[FileLike],
        *,
        model: str | None = None,
        metric: str | None = None,
        filter: str | None = None,
    ) -> GatePublic:
        """``POST /v1/gates/{id}/results/files``: round ``round_number``'s results as files in any
        results-upload format (the sample logs of every task the round served). Retried safely
        (a resend of an answered round changes nothing)."""
        params = {"round": int(round_number), "model": model, "metric": metric, "filter": filter}
        response = self.send_files(
            f"/v1/gates/{gate_id}/results/files", file_list(files), params, key=True
        )
        return GatePublic.model_validate(response.json())

    def abandon_gate(self, gate_id: str | uuid.UUID) -> GatePublic:
        response = self.request("POST", f"/v1/gates/{gate_id}/abandon")
        return GatePublic.model_validate(response.json())


__all__ = ["GateOperations"]
