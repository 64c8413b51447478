"""Python client for the benchslice HTTP API (used by the ``benchslice`` CLI and by CI scripts).

>>> from app.client import Client
>>> with Client() as bs:                       # BENCHSLICE_URL / BENCHSLICE_API_KEY from the env
...     gpqa = bs.find_benchmark("gpqa")
...     v = bs.verdict(gpqa.id, "org/model-a", "org/model-b", size=25)

Every error the API answers (RFC 9457 problem+json) and every transport failure is raised as one
exception type, :class:`BenchsliceError` (``status``, ``title``, ``detail``, ``field``/``fields``).
Requests are retried with exponential backoff only where that is safe: ``GET`` and requests
carrying an ``Idempotency-Key`` (retried on connection errors and on 429/502/503/504, honouring
``Retry-After``). Uploads get an ``Idempotency-Key`` derived from their content by default, so a
retried upload is a no-op on the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx

from app.schemas.analyses import AnalysisPage, AnalysisPublic
from app.schemas.benchmarks import BenchmarkDetail, BenchmarkPage, BenchmarkPublic
from app.schemas.jobs import JobPublic
from app.schemas.results import ModelResultList, ResultsWritten
from app.schemas.subsets import (
    PlanPublic,
    SubsetPublic,
    SubsetScorePublic,
    SubsetVerdictPublic,
    VerdictPublic,
)

__all__ = [
    "DEFAULT_URL",
    "BenchsliceConnectionError",
    "BenchsliceError",
    "Client",
    "JobFailedError",
    "SubsetRequest",
    "UploadReply",
    "content_idempotency_key",
    "media_type_for",
]

DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUSES = frozenset({429, 502, 503, 504})
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
_MEDIA_TYPES = {
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".csv": "text/csv",
    ".parquet": "application/vnd.apache.parquet",
}

FileLike = str | os.PathLike[str] | tuple[str, bytes]
Progress = Callable[[JobPublic], None]


class UploadReply(ResultsWritten):
    """What an upload stored; ``replayed`` when the server answered from its Idempotency-Key
    record (the same request was already applied)."""

    replayed: bool = False


class BenchsliceError(Exception):
    """An API problem (RFC 9457) or a transport failure, in one type.

    Attributes
    ----------
    status : int or None
        HTTP status; ``None`` when no response arrived (see :class:`BenchsliceConnectionError`).
    title, detail : str
        The problem's title and detail.
    type : str
        The problem type URI (``about:blank`` when the server gave none).
    errors : list of dict
        Field errors, each ``{"loc": [...], "field": "query.metric", "message": "..."}``.
    retry_after : float or None
        Seconds from the ``Retry-After`` header, when present.
    """

    def __init__(
        self,
        title: str,
        *,
        status: int | None = None,
        detail: str | None = None,
        type: str = "about:blank",
        errors: Sequence[Mapping[str, Any]] | None = None,
        instance: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.title = title
        self.status = status
        self.detail = detail or title
        self.type = type
        self.errors = [dict(e) for e in errors or ()]
        self.instance = instance
        self.retry_after = retry_after
        super().__init__(str(self))

    @property
    def fields(self) -> list[str]:
        """The offending fields (``"query.metric"``, ``"body.items.0.id"`` …), in order."""
        return [str(e.get("field") or ".".join(map(str, e.get("loc", ())))) for e in self.errors]

    @property
    def field(self) -> str | None:
        """The first offending field, or ``None``."""
        fields = self.fields
        return fields[0] if fields else None

    def __str__(self) -> str:
        head = f"{self.status} {self.title}" if self.status is not None else self.title
        text = head if self.detail == self.title else f"{head}: {self.detail}"
        for e, f in zip(self.errors[:5], self.fields, strict=False):
            text += f"\n  {f}: {e.get('message', 'invalid')}"
        if len(self.errors) > 5:
            text += f"\n  … and {len(self.errors) - 5} more"
        return text

    @classmethod
    def from_response(cls, response: httpx.Response) -> BenchsliceError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {"detail": response.text[:500] or None}
        return cls(
            str(body.get("title") or response.reason_phrase or "HTTP error"),
            status=response.status_code,
            detail=body.get("detail") if isinstance(body.get("detail"), str) else None,
            type=str(body.get("type") or "about:blank"),
            errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
            instance=body.get("instance"),
            retry_after=_retry_after(response),
        )


class BenchsliceConnectionError(BenchsliceError):
    """The server could not be reached (or the connection broke) after the allowed retries."""


class JobFailedError(BenchsliceError):
    """A job ended ``failed`` or ``cancelled``; ``job`` holds its last state."""

    def __init__(self, job: JobPublic) -> None:
        self.job = job
        super().__init__(
            f"Job {job.status}", detail=job.error or f"job {job.id} {job.status}", status=None
        )


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


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def media_type_for(name: str) -> str:
    """The upload content type for a file name (by extension; ``application/octet-stream`` else)."""
    return _MEDIA_TYPES.get(Path(name).suffix.lower(), "application/octet-stream")


def content_idempotency_key(*parts: bytes | str, prefix: str = "bs") -> str:
    """A deterministic Idempotency-Key: sha256 over length-prefixed parts (method, path, body…)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return f"{prefix}-{h.hexdigest()}"


def _read_file(file: FileLike) -> tuple[str, bytes]:
    if isinstance(file, tuple):
        return file
    path = Path(file)
    return path.name, path.read_bytes()


def _clean_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (params or {}).items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(map(str, v))
        out[k] = v
    return out


class Client:
    """A benchslice API client.

    Parameters
    ----------
    url : str, optional
        Base URL of the service (``$BENCHSLICE_URL``, default ``http://127.0.0.1:8000``); a
        trailing ``/v1`` is accepted.
    api_key : str, optional
        API key (``$BENCHSLICE_API_KEY``), sent as ``Authorization: Bearer``.
    timeout : float
        Seconds per request.
    retries : int
        Extra attempts for retryable requests (GET, or carrying an Idempotency-Key).
    backoff : float
        First wait between attempts, doubled each time (capped by ``max_wait``).
    max_wait : float
        Longest single wait, including a server's ``Retry-After``.
    transport : httpx.BaseTransport, optional
        E.g. ``httpx.WSGITransport``/an ASGI bridge for in-process use.
    event_hooks : dict, optional
        httpx event hooks (``{"request": [...], "response": [...]}``), e.g. for logging.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_wait: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
    ) -> None:
        base = (url or os.environ.get("BENCHSLICE_URL") or DEFAULT_URL).rstrip("/")
        base = base.removesuffix("/v1")
        api_key = api_key if api_key is not None else os.environ.get("BENCHSLICE_API_KEY") or None
        all_headers = {"Accept": "application/json", "User-Agent": "benchslice-client/0.1"}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self.url = base
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_wait = max_wait
        self.sleep: Callable[[float], None] = time.sleep
        self._http = httpx.Client(
            base_url=base,
            headers=all_headers,
            timeout=timeout,
            transport=transport,
            event_hooks={k: list(v) for k, v in (event_hooks or {}).items()},
        )

    # --- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        files: list[tuple[str, tuple[str, bytes, str]]] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        accept: str | None = None,
    ) -> httpx.Response:
        """Send one request (retrying when safe); raise :class:`BenchsliceError` unless 2xx."""
        hdrs = dict(headers or {})
        if idempotency_key is not None:
            hdrs["Idempotency-Key"] = idempotency_key
        if accept is not None:
            hdrs["Accept"] = accept
        retryable = method.upper() in ("GET", "HEAD") or idempotency_key is not None
        attempts = 1 + (self.retries if retryable else 0)
        wait = self.backoff
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._http.request(
                    method,
                    path,
                    params=_clean_params(params),
                    json=json_body,
                    content=content,
                    files=files,
                    headers=hdrs,
                )
            except httpx.TransportError as exc:
                if last:
                    raise BenchsliceConnectionError(
                        "Connection error",
                        detail=f"{method} {self.url}{path}: {type(exc).__name__}: {exc}"
                        if str(exc)
                        else f"{method} {self.url}{path}: {type(exc).__name__}",
                    ) from exc
                self.sleep(min(wait, self.max_wait))
                wait *= 2
                continue
            if response.is_success:
                return response
            if last or response.status_code not in RETRY_STATUSES:
                raise BenchsliceError.from_response(response)
            retry_after = _retry_after(response)
            self.sleep(min(retry_after if retry_after is not None else wait, self.max_wait))
            wait *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    # --- health and jobs ------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: the API process is alive."""
        return self._get("/healthz")

    def ready(self) -> dict[str, Any]:
        """``GET /readyz``: database and broker reachable (503 → :class:`BenchsliceError`)."""
        return self._get("/readyz")

    def create_job(
        self, kind: str, params: Mapping[str, Any] | None = None, *, seed: int | None = None
    ) -> JobPublic:
        """``POST /v1/jobs`` (built-in kind ``ping``)."""
        body = {"kind": kind, "params": dict(params or {}), "seed": seed}
        return JobPublic.model_validate(self.request("POST", "/v1/jobs", json_body=body).json())

    def get_job(self, job_id: str | uuid.UUID) -> JobPublic:
        return JobPublic.model_validate(self._get(f"/v1/jobs/{job_id}"))

    def cancel_job(self, job_id: str | uuid.UUID) -> JobPublic:
        return JobPublic.model_validate(self.request("POST", f"/v1/jobs/{job_id}/cancel").json())

    def wait(
        self,
        job_id: str | uuid.UUID,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
        poll: float = 0.2,
        max_poll: float = 2.0,
    ) -> JobPublic:
        """Poll a job until it ends (interval ``poll`` growing by 1.5x up to ``max_poll``).

        ``progress(job)`` is called after every poll. Returns the succeeded job; raises
        :class:`JobFailedError` when it failed or was cancelled, and :class:`BenchsliceError`
        (title ``Timed out``) after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll
        while True:
            job = self.get_job(job_id)
            if progress is not None:
                progress(job)
            if job.status in TERMINAL:
                if job.status != "succeeded":
                    raise JobFailedError(job)
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise BenchsliceError(
                    "Timed out",
                    detail=f"job {job_id} still {job.status} after {timeout:g} s "
                    f"({job.progress.done}/{job.progress.total or '?'})",
                )
            self.sleep(interval)
            interval = min(interval * 1.5, max_poll)

    # --- benchmarks -----------------------------------------------------------------------------

    def list_benchmarks(
        self, *, name: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> BenchmarkPage:
        """``GET /v1/benchmarks``: versions, newest first."""
        return BenchmarkPage.model_validate(
            self._get("/v1/benchmarks", name=name, limit=limit, cursor=cursor)
        )

    def iter_benchmarks(self, *, name: str | None = None) -> Iterator[BenchmarkPublic]:
        """Every benchmark version (all pages), newest first."""
        cursor = None
        while True:
            page = self.list_benchmarks(name=name, limit=200, cursor=cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def find_benchmark(self, name: str) -> BenchmarkPublic:
        """The latest version of the benchmark called ``name`` (404 :class:`BenchsliceError`)."""
        page = self.list_benchmarks(name=name, limit=1)
        for version in page.items:
            if version.name == name:
                return version
        raise BenchsliceError(
            "Not found",
            status=404,
            detail=f"no benchmark named {name!r} (create it with `benchslice push --create`)",
            errors=[{"loc": ["benchmark"], "field": "benchmark", "message": "unknown name"}],
        )

    def get_benchmark(self, benchmark_id: str | uuid.UUID) -> BenchmarkDetail:
        """``GET /v1/benchmarks/{id}``: counts, subtasks, models and accuracy summary."""
        return BenchmarkDetail.model_validate(self._get(f"/v1/benchmarks/{benchmark_id}"))

    def create_benchmark(
        self,
        name: str,
        items: Sequence[str | Mapping[str, Any]],
        *,
        description: str | None = None,
    ) -> BenchmarkPublic:
        """``POST /v1/benchmarks`` from an ordered item list (ids, or ``{id, subtask, …}``).

        The same list again returns the existing version (idempotent by content)."""
        body: dict[str, Any] = {
            "name": name,
            "items": [{"id": i} if isinstance(i, str) else dict(i) for i in items],
        }
        if description is not None:
            body["description"] = description
        data = json.dumps(body).encode()
        response = self.request(
            "POST",
            "/v1/benchmarks",
            content=data,
            headers={"Content-Type": "application/json"},
            idempotency_key=content_idempotency_key("POST /v1/benchmarks", data),
        )
        return BenchmarkPublic.model_validate(response.json())

    def create_benchmark_from_samples(
        self,
        name: str,
        files: Sequence[FileLike],
        *,
        subtask: Literal["task", "subject"] = "task",
        task: str | None = None,
        item_key: Literal["doc_hash", "doc_id"] = "doc_hash",
        subject_field: str | None = None,
        description: str | None = None,
    ) -> BenchmarkPublic:
        """``POST /v1/benchmarks/from-samples``: items from lm-eval sample logs / OLL details."""
        params = {
            "name": name,
            "subtask": subtask,
            "task": task,
            "item_key": item_key,
            "subject_field": subject_field,
            "description": description,
        }
        # Retry-safe: versions are content-addressed (the same items return the same version).
        response = self._send_files("/v1/benchmarks/from-samples", files, params, key=True)
        return BenchmarkPublic.model_validate(response.json())

    # --- results --------------------------------------------------------------------------------

    def _send_files(
        self,
        path: str,
        files: Sequence[FileLike],
        params: Mapping[str, Any],
        *,
        key: bool | str,
        raw: bool = False,
    ) -> httpx.Response:
        """POST files as multipart ``file`` parts (their names carry the lm-eval task), or with
        ``raw`` one in-memory document as the body."""
        loaded = [_read_file(f) for f in files]
        if not loaded:
            raise BenchsliceError("Invalid input", detail="no file to upload")
        clean = _clean_params(params)
        parts: list[bytes | str] = ["POST", path, json.dumps(clean, sort_keys=True)]
        for fname, data in loaded:
            parts += [fname, data]
        idem = key if isinstance(key, str) else content_idempotency_key(*parts) if key else None
        if raw:
            ((fname, data),) = loaded
            return self.request(
                "POST",
                path,
                params=clean,
                content=data,
                headers={"Content-Type": media_type_for(fname)},
                idempotency_key=idem,
            )
        return self.request(
            "POST",
            path,
            params=clean,
            files=[("file", (fname, data, media_type_for(fname))) for fname, data in loaded],
            idempotency_key=idem,
        )

    def upload_results(
        self,
        benchmark_id: str | uuid.UUID,
        model: str | Mapping[str, Any],
        *,
        results: Mapping[str, float | Mapping[str, float]] | None = None,
        correct: Sequence[float] | None = None,
        confidence: Sequence[float] | None = None,
        item_ids: Sequence[str] | None = None,
        replace: bool = False,
        idempotency_key: str | bool = True,
        verify_replay: bool = True,
    ) -> UploadReply:
        """``POST /v1/benchmarks/{id}/results`` as JSON: keyed (``results={item: 0/1}``) or
        columnar (``correct=[…]`` in item order, or with ``item_ids``).

        ``idempotency_key=True`` derives the key from the request's content; with
        ``verify_replay`` a replayed answer is checked against what is stored (see
        :meth:`replay_holds`) and the upload re-sent under a fresh key when it no longer holds."""
        body: dict[str, Any] = {"model": model if isinstance(model, str) else dict(model)}
        if results is not None:
            body["results"] = dict(results)
        else:
            body["correct"] = list(correct or [])
            if confidence is not None:
                body["confidence"] = list(confidence)
            if item_ids is not None:
                body["item_ids"] = list(item_ids)
        data = json.dumps(body).encode()
        return self._post_results(
            benchmark_id,
            [("results.json", data)],
            {},
            replace,
            idempotency_key,
            verify_replay,
            raw=True,
        )

    def upload_results_file(
        self,
        benchmark_id: str | uuid.UUID,
        files: FileLike | Sequence[FileLike],
        *,
        model: str | None = None,
        params_b: float | None = None,
        family: str | None = None,
        metric: str | None = None,
        filter: str | None = None,
        task: str | None = None,
        item_key: Literal["doc_hash", "doc_id"] = "doc_hash",
        replace: bool = False,
        idempotency_key: str | bool = True,
        verify_replay: bool = True,
    ) -> UploadReply:
        """Upload one model's results from files: lm-eval ``samples_*.jsonl`` (several = one per
        task), Open LLM Leaderboard details (``.jsonl``/``.parquet``), CSV
        ``item_id,correct[,confidence]`` or a results ``.json``."""
        many = files if isinstance(files, (list, tuple)) and not _is_named_bytes(files) else [files]
        params = {
            "model": model,
            "params_b": params_b,
            "family": family,
            "metric": metric,
            "filter": filter,
            "task": task,
            "item_key": item_key,
        }
        return self._post_results(
            benchmark_id, many, params, replace, idempotency_key, verify_replay
        )

    def _post_results(
        self,
        benchmark_id: str | uuid.UUID,
        files: Sequence[FileLike],
        params: Mapping[str, Any],
        replace: bool,
        key: str | bool,
        verify_replay: bool,
        *,
        raw: bool = False,
    ) -> UploadReply:
        path = f"/v1/benchmarks/{benchmark_id}/results"
        clean = {**params, "replace": replace or None}
        response = self._send_files(path, files, clean, key=key, raw=raw)
        reply = UploadReply.model_validate(
            {
                **response.json(),
                "replayed": response.headers.get("Idempotency-Replayed") == "true",
            }
        )
        if verify_replay and reply.replayed and not self.replay_holds(benchmark_id, [reply]):
            fresh = f"bs-{uuid.uuid4().hex}"
            response = self._send_files(path, files, clean, key=fresh, raw=raw)
            reply = UploadReply.model_validate(response.json())
        return reply

    def replay_holds(self, benchmark_id: str | uuid.UUID, replies: Sequence[UploadReply]) -> bool:
        """Whether replayed uploads still describe what is stored.

        A replayed Idempotency-Key returns the first response even if the model's results were
        deleted or replaced since; then the upload must be sent again under a fresh key."""
        stored = {m.model.name: m.content_hash for m in self.list_models(benchmark_id).items}
        return all(stored.get(r.model.name) == r.content_hash for r in replies if r.replayed)

    def list_models(self, benchmark_id: str | uuid.UUID) -> ModelResultList:
        """``GET /v1/benchmarks/{id}/models``: models with results (accuracy, coverage)."""
        return ModelResultList.model_validate(self._get(f"/v1/benchmarks/{benchmark_id}/models"))

    def delete_model_results(self, benchmark_id: str | uuid.UUID, model: str) -> None:
        """``DELETE /v1/benchmarks/{id}/models/{model}``."""
        self.request("DELETE", f"/v1/benchmarks/{benchmark_id}/models/{quote(model, safe='/')}")

    def get_matrix(self, benchmark_id: str | uuid.UUID) -> bytes:
        """``GET /v1/benchmarks/{id}/matrix``: the results as ``.npz`` bytes."""
        path = f"/v1/benchmarks/{benchmark_id}/matrix"
        return self.request("GET", path, accept="application/octet-stream").content

    # --- subsets ----------------------------------------------------------------------------------

    def create_subset(
        self,
        benchmark_id: str | uuid.UUID,
        method: str,
        size: int,
        *,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        source_models: Sequence[str] | None = None,
    ) -> SubsetRequest:
        """``POST /v1/benchmarks/{id}/subsets``: a job building the subset, or the subset itself
        when this exact request (same seed) was answered before. Use :meth:`build_subset` to
        wait for it."""
        body: dict[str, Any] = {"method": method, "size": size}
        if seed is not None:
            body["seed"] = seed
        if params:
            body["params"] = dict(params)
        if source_models is not None:
            body["source_models"] = list(source_models)
        data = json.dumps(body, sort_keys=True).encode()
        path = f"/v1/benchmarks/{benchmark_id}/subsets"
        # Without a seed the server draws one, so only a seeded request is safe to replay.
        key = content_idempotency_key("POST", path, data) if seed is not None else None
        response = self.request(
            "POST",
            path,
            content=data,
            headers={"Content-Type": "application/json"},
            idempotency_key=key,
        )
        return SubsetRequest.from_response(response)

    def build_subset(
        self,
        benchmark_id: str | uuid.UUID,
        method: str,
        size: int,
        *,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        source_models: Sequence[str] | None = None,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> SubsetPublic:
        """Create a subset and wait for it (``progress(job)`` while the job runs)."""
        request = self.create_subset(
            benchmark_id, method, size, seed=seed, params=params, source_models=source_models
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
        return SubsetPublic.model_validate(self._get(f"/v1/subsets/{subset_id}"))

    def export_subset(self, subset_id: str, format: Literal["ids", "csv", "lm-eval"]) -> str:
        """``GET /v1/subsets/{id}?format=``: ``ids`` (one per line), ``csv``, or ``lm-eval``
        (the JSON for ``lm_eval --samples``)."""
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
    ) -> SubsetScorePublic:
        """``POST /v1/subsets/{id}/scores``: a model's results on the subset items (files in any
        upload format, or ``results={item_id: 0/1}``) → estimated full-benchmark accuracy with
        CIs, and the paired comparison with ``baseline`` when given.

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
        }
        raw = results is not None
        if results is not None:
            data = json.dumps({"model": model, "results": dict(results)}).encode()
            many: Sequence[FileLike] = [("results.json", data)]
        elif files is None:
            raise BenchsliceError("Invalid input", detail="give files or results to score")
        else:
            many = (
                files
                if isinstance(files, (list, tuple)) and not _is_named_bytes(files)
                else [files]  # type: ignore[list-item]
            )
        response = self._send_files(path, many, params, key=idempotency_key, raw=raw)
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
            self._get(
                f"/v1/subsets/{subset_id}/verdict",
                model_a=model_a,
                model_b=model_b,
                threshold=threshold,
            )
        )

    # --- verdicts and planning ------------------------------------------------------------------

    def verdict(
        self,
        benchmark_id: str | uuid.UUID,
        model_a: str,
        model_b: str,
        *,
        size: int,
        method: str = "random",
        threshold: float | None = None,
    ) -> VerdictPublic:
        """``GET /v1/benchmarks/{id}/verdict``: would a ``size``-item subset order the pair as the
        full benchmark does (P(same order), tie, reversed, MDAD at that size, size needed)."""
        return VerdictPublic.model_validate(
            self._get(
                f"/v1/benchmarks/{benchmark_id}/verdict",
                model_a=model_a,
                model_b=model_b,
                size=size,
                method=method,
                threshold=threshold,
            )
        )

    def plan(
        self,
        benchmark_id: str | uuid.UUID,
        *,
        gap: float,
        method: str = "random",
        probability: float | None = None,
    ) -> PlanPublic:
        """``GET /v1/benchmarks/{id}/plan``: smallest subset size whose MDAD is at most ``gap``."""
        return PlanPublic.model_validate(
            self._get(
                f"/v1/benchmarks/{benchmark_id}/plan",
                gap=gap,
                method=method,
                probability=probability,
            )
        )

    # --- analyses -------------------------------------------------------------------------------

    def create_analysis(
        self,
        benchmark_id: str | uuid.UUID,
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
        """``POST /v1/benchmarks/{id}/analyses``: queue an MDAD analysis (a job)."""
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
        response = self.request("POST", f"/v1/benchmarks/{benchmark_id}/analyses", json_body=body)
        return AnalysisPublic.model_validate(response.json())

    def run_analysis(
        self,
        benchmark_id: str | uuid.UUID,
        *,
        methods: Sequence[str],
        sizes: Sequence[int],
        progress: Progress | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> AnalysisPublic:
        """Queue an analysis, wait for its job, and return it with its results."""
        analysis = self.create_analysis(benchmark_id, methods=methods, sizes=sizes, **options)
        self.wait(analysis.job_id, progress=progress, timeout=timeout)
        return self.get_analysis(analysis.id)

    def get_analysis(self, analysis_id: str | uuid.UUID) -> AnalysisPublic:
        """``GET /v1/analyses/{id}``: status, progress, and once done the MDAD table, curves and
        recommendation."""
        return AnalysisPublic.model_validate(self._get(f"/v1/analyses/{analysis_id}"))

    def list_analyses(
        self,
        benchmark_id: str | uuid.UUID,
        *,
        status: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> AnalysisPage:
        """``GET /v1/benchmarks/{id}/analyses``: newest first, without results."""
        return AnalysisPage.model_validate(
            self._get(
                f"/v1/benchmarks/{benchmark_id}/analyses",
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


def _is_named_bytes(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], bytes)
    )
