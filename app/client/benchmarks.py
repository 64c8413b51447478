"""Client operations on benchmarks and their results: list, find, create, upload, delete."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import quote

from app.client.errors import BenchsliceError
from app.client.transport import FileLike, Transport, content_idempotency_key, file_list
from app.schemas.benchmarks import BenchmarkDetail, BenchmarkPage, BenchmarkPublic
from app.schemas.coverage import CoverageRunPublic
from app.schemas.items import ItemHealthPage
from app.schemas.jobs import JobPublic
from app.schemas.results import MatrixWritten, ModelResultList, ResultsWritten


def benchmark_path(benchmark: str | uuid.UUID, rest: str = "") -> str:
    """``/v1/benchmarks/{benchmark}…``: ``benchmark`` is a version id, a benchmark name (its
    latest version) or ``name@vN``, sent as one path segment."""
    return f"/v1/benchmarks/{quote(str(benchmark), safe='@')}{rest}"


class UploadReply(ResultsWritten):
    """What an upload stored; ``replayed`` when the server answered from its Idempotency-Key
    record (the same request was already applied)."""

    replayed: bool = False


class BenchmarkOperations(Transport):
    """``/v1/benchmarks``: versions and the per-model results stored under them."""

    # --- benchmarks -----------------------------------------------------------------------------

    def list_benchmarks(
        self,
        *,
        name: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        project: str | None = None,
    ) -> BenchmarkPage:
        """``GET /v1/benchmarks``: versions the key may read, newest first."""
        return BenchmarkPage.model_validate(
            self.get_json("/v1/benchmarks", name=name, limit=limit, cursor=cursor, project=project)
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

    def get_benchmark(self, benchmark: str | uuid.UUID) -> BenchmarkDetail:
        """``GET /v1/benchmarks/{benchmark}``: counts, subtasks, models and accuracy summary."""
        return BenchmarkDetail.model_validate(self.get_json(benchmark_path(benchmark)))

    def list_items(
        self,
        benchmark: str | uuid.UUID,
        *,
        flags: Sequence[str] | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> ItemHealthPage:
        """``GET /v1/benchmarks/{benchmark}/items``: one page of item health rows (only items
        carrying any of ``flags`` when given) and the benchmark's flag summary."""
        return ItemHealthPage.model_validate(
            self.get_json(
                benchmark_path(benchmark, "/items"),
                flag=list(flags) if flags else None,
                limit=limit,
                cursor=cursor,
            )
        )

    def all_items(
        self, benchmark: str | uuid.UUID, *, flags: Sequence[str] | None = None
    ) -> ItemHealthPage:
        """Every page of :meth:`list_items` merged into one (``next_cursor`` None)."""
        page = self.list_items(benchmark, flags=flags)
        rows = list(page.items)
        while page.next_cursor:
            page = self.list_items(benchmark, flags=flags, cursor=page.next_cursor)
            rows += page.items
        return page.model_copy(update={"items": rows, "next_cursor": None})

    def create_benchmark(
        self,
        name: str,
        items: Sequence[str | Mapping[str, Any]],
        *,
        description: str | None = None,
        project: str | None = None,
    ) -> BenchmarkPublic:
        """``POST /v1/benchmarks`` from an ordered item list (ids, or ``{id, subtask, …}``).

        The same list again returns the existing version (idempotent by content). ``project``
        owns a new name (default: the key's only writable project)."""
        body: dict[str, Any] = {
            "name": name,
            "items": [{"id": i} if isinstance(i, str) else dict(i) for i in items],
        }
        if description is not None:
            body["description"] = description
        if project is not None:
            body["project"] = project
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
        project: str | None = None,
    ) -> BenchmarkPublic:
        """``POST /v1/benchmarks/from-samples``: items from lm-eval sample logs / OLL details."""
        params = {
            "name": name,
            "project": project,
            "subtask": subtask,
            "task": task,
            "item_key": item_key,
            "subject_field": subject_field,
            "description": description,
        }
        # Retry-safe: versions are content-addressed (the same items return the same version).
        response = self.send_files("/v1/benchmarks/from-samples", files, params, key=True)
        return BenchmarkPublic.model_validate(response.json())

    # --- results --------------------------------------------------------------------------------

    def upload_results(
        self,
        benchmark: str | uuid.UUID,
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
        """``POST /v1/benchmarks/{benchmark}/results`` as JSON: keyed (``results={item: 0/1}``) or
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
            benchmark,
            [("results.json", data)],
            {},
            replace,
            idempotency_key,
            verify_replay,
            raw=True,
        )

    def upload_results_file(
        self,
        benchmark: str | uuid.UUID,
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
        format: str | None = None,
    ) -> UploadReply:
        """Upload one model's results from files: lm-eval ``samples_*.jsonl`` (several = one per
        task), Open LLM Leaderboard details (``.jsonl``/``.parquet``), CSV
        ``item_id,correct[,confidence]``, a results ``.json``, or Inspect AI logs (``.eval`` /
        JSON; the model is the log's unless ``model`` is given, ``metric`` names the scorer).
        ``format`` forces the parser (``inspect``, ``lm-eval``, ``csv``, ``json``)."""
        params = {
            "format": format,
            "model": model,
            "params_b": params_b,
            "family": family,
            "metric": metric,
            "filter": filter,
            "task": task,
            "item_key": item_key,
        }
        return self._post_results(
            benchmark, file_list(files), params, replace, idempotency_key, verify_replay
        )

    def _post_results(
        self,
        benchmark: str | uuid.UUID,
        files: Sequence[FileLike],
        params: Mapping[str, Any],
        replace: bool,
        key: str | bool,
        verify_replay: bool,
        *,
        raw: bool = False,
    ) -> UploadReply:
        path = benchmark_path(benchmark, "/results")
        clean = {**params, "replace": replace or None}
        response = self.send_files(path, files, clean, key=key, raw=raw)
        reply = UploadReply.model_validate(
            {
                **response.json(),
                "replayed": response.headers.get("Idempotency-Replayed") == "true",
            }
        )
        if verify_replay and reply.replayed and not self.replay_holds(benchmark, [reply]):
            fresh = f"bs-{uuid.uuid4().hex}"
            response = self.send_files(path, files, clean, key=fresh, raw=raw)
            reply = UploadReply.model_validate(response.json())
        return reply

    def replay_holds(self, benchmark: str | uuid.UUID, replies: Sequence[UploadReply]) -> bool:
        """Whether replayed uploads still describe what is stored.

        A replayed Idempotency-Key returns the first response even if the model's results were
        deleted or replaced since, or (``benchmark`` a name) the name now means a newer version;
        then the upload must be sent again under a fresh key."""
        stored = {
            m.model.name: (m.version_id, m.content_hash) for m in self.list_models(benchmark).items
        }
        return all(
            stored.get(r.model.name) == (r.version_id, r.content_hash)
            for r in replies
            if r.replayed
        )

    def upload_matrix(
        self, benchmark: str | uuid.UUID, npz: bytes, *, replace: bool = False
    ) -> MatrixWritten:
        """``POST /v1/benchmarks/{benchmark}/results/matrix``: many models in one request (an
        ``.npz`` with ``correct``, ``models`` and optionally ``item_ids``, ``coverage``,
        ``confidence``). The same matrix again reports ``unchanged``; each call carries a fresh
        Idempotency-Key, so the transport's retries of a lost reply are replayed, not redone."""
        response = self.request(
            "POST",
            benchmark_path(benchmark, "/results/matrix"),
            params={"replace": "true"} if replace else None,
            content=npz,
            headers={"content-type": "application/x-npz"},
            idempotency_key=f"bs-mx-{uuid.uuid4().hex}",
        )
        return MatrixWritten.model_validate(response.json())

    def list_models(self, benchmark: str | uuid.UUID) -> ModelResultList:
        """``GET /v1/benchmarks/{benchmark}/models``: models with results (accuracy, coverage)."""
        return ModelResultList.model_validate(self.get_json(benchmark_path(benchmark, "/models")))

    def delete_model_results(self, benchmark: str | uuid.UUID, model: str) -> None:
        """``DELETE /v1/benchmarks/{benchmark}/models/{model}``."""
        self.request("DELETE", benchmark_path(benchmark, f"/models/{quote(model, safe='/')}"))

    def restore_model_results(self, benchmark: str | uuid.UUID, model: str) -> ResultsWritten:
        """``POST /v1/benchmarks/{benchmark}/models/{model}/restore``: the results as they were
        before their last replace or delete."""
        path = benchmark_path(benchmark, f"/models/{quote(model, safe='/')}/restore")
        return ResultsWritten.model_validate(self.request("POST", path).json())

    def retire_version(
        self, benchmark: str | uuid.UUID, *, retired: bool = True
    ) -> BenchmarkPublic:
        """``POST /v1/benchmarks/{benchmark}/retire`` (or ``/unretire`` with ``retired=False``)."""
        path = benchmark_path(benchmark, "/retire" if retired else "/unretire")
        return BenchmarkPublic.model_validate(self.request("POST", path).json())

    def get_matrix(self, benchmark: str | uuid.UUID) -> bytes:
        """``GET /v1/benchmarks/{benchmark}/matrix``: the results as ``.npz`` bytes."""
        path = benchmark_path(benchmark, "/matrix")
        return self.request("GET", path, accept="application/octet-stream").content

    # --- coverage study on the version's own models ------------------------------------------

    def start_coverage(
        self,
        benchmark: str | uuid.UUID,
        *,
        methods: Sequence[str] | None = None,
        sizes: Sequence[int] | None = None,
        repeats: int | None = None,
        seed: int | None = None,
        extrapolation: bool = False,
    ) -> JobPublic:
        """``POST /v1/benchmarks/{benchmark}/coverage``: queue a coverage study (a job);
        ``extrapolation`` adds the weak-to-strong and strong-to-weak splits (issue 38)."""
        body = {"methods": methods, "sizes": sizes, "repeats": repeats, "seed": seed}
        if extrapolation:
            body["extrapolation"] = True
        body = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in body.items()}
        path = benchmark_path(benchmark, "/coverage")
        reply = self.request(
            "POST", path, json_body={k: v for k, v in body.items() if v is not None}
        )
        return JobPublic.model_validate(reply.json())

    def get_coverage(self, benchmark: str | uuid.UUID) -> CoverageRunPublic:
        """``GET /v1/benchmarks/{benchmark}/coverage``: the newest finished study (404 if none)."""
        return CoverageRunPublic.model_validate(
            self.get_json(benchmark_path(benchmark, "/coverage"))
        )
