"""Benchmarks: create (from an item list or from lm-eval sample logs), list, describe."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response, status

from app.api.deps import (
    ActorDep,
    AdministeredVersionDep,
    BenchmarkVersionDep,
    JobQueueDep,
    ProjectChooserDep,
    ReadPrincipal,
    SessionDep,
    WritableVersionDep,
    WritePrincipal,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND, UNAVAILABLE
from app.api.responses import AUTH, UNSUPPORTED
from app.api.uploads import FILE_SCHEMA, MULTIPART_SCHEMA, UploadDep, request_body
from app.errors import NotFound
from app.queue import enqueue_job_after_commit
from app.schemas.benchmarks import (
    NAME_PATTERN,
    NO_NUL,
    PROJECT_PATTERN,
    BenchmarkCreate,
    BenchmarkDetail,
    BenchmarkPage,
    BenchmarkPublic,
)
from app.schemas.coverage import CoverageRunCreate, CoverageRunPublic
from app.schemas.jobs import JobPublic
from app.services.access.access import visibility
from app.services.catalog import benchmarks as service
from app.services.catalog.ownership import record_write
from app.services.catalog.uploads import ParseOptions, parse_sample_logs
from app.services.selection import coverage_runs

router = APIRouter(prefix="/benchmarks", tags=["benchmarks"])

EXISTING = {
    200: {
        "model": BenchmarkPublic,
        "description": "This exact item list already exists: its version is returned",
    }
}


def _created(
    session: SessionDep, actor: ActorDep, response: Response, version, created: bool
) -> None:
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    response.headers["Location"] = f"/v1/benchmarks/{version.id}"
    if created:  # the same item list again changes nothing: no audit row
        summary = {"created": True, "n_items": version.n_items}
        record_write(session, actor, "benchmark.create_version", version, summary)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=BenchmarkPublic,
    # 404: an unknown `project`; 409: the name belongs to another project
    responses={**EXISTING, **NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="create_benchmark",
)
def create_benchmark(
    body: BenchmarkCreate,
    session: SessionDep,
    response: Response,
    chooser: ProjectChooserDep,
    actor: ActorDep,
) -> BenchmarkPublic:
    """Create a benchmark version from an ordered item list.

    The list's content hash identifies the version: posting the same items again returns the
    existing version (200); a changed list under the same name creates the next version (201).
    A new name goes to `project` (default: the key's only writable project); a name owned by
    a project needs `write` there (403 naming it).
    """
    project = chooser.for_benchmark(body.name, body.project)
    version, created = service.create_benchmark(session, body, project)
    _created(session, actor, response, version, created)
    return service.public(session, version)


@router.post(
    "/from-samples",
    status_code=status.HTTP_201_CREATED,
    response_model=BenchmarkPublic,
    responses={**EXISTING, **NOT_FOUND, **CONFLICT, **INVALID, **AUTH, **UNSUPPORTED},
    name="create_benchmark_from_samples",
    openapi_extra=request_body(
        "lm-evaluation-harness `--log_samples` JSONL (or Open LLM Leaderboard details as "
        "JSONL/parquet); several files (one per task) as multipart `file` parts.",
        {
            "application/x-ndjson": {"schema": {"type": "string"}},
            "application/vnd.apache.parquet": {"schema": FILE_SCHEMA},
            "multipart/form-data": MULTIPART_SCHEMA,
        },
    ),
)
def create_benchmark_from_samples(
    _: WritePrincipal,  # before the body is read: no key, no upload
    upload: UploadDep,
    session: SessionDep,
    response: Response,
    chooser: ProjectChooserDep,
    actor: ActorDep,
    name: Annotated[str, Query(min_length=1, max_length=200, pattern=NAME_PATTERN)],
    subtask: Annotated[
        Literal["task", "subject"],
        Query(description="Subtask per item: the task name, or the doc's subject field"),
    ] = "task",
    task: Annotated[
        str | None, Query(description="Task name when the body has no file name")
    ] = None,
    item_key: Annotated[Literal["doc_hash", "doc_id"], Query()] = "doc_hash",
    subject_field: Annotated[
        str | None,
        Query(description="doc field used by subtask=subject (default subject/category)"),
    ] = None,
    description: Annotated[str | None, Query(max_length=2000, pattern=NO_NUL)] = None,
    project: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=100,
            pattern=PROJECT_PATTERN,
            description="Project of a new benchmark (default: the key's only writable project)",
        ),
    ] = None,
) -> BenchmarkPublic:
    """Create a benchmark whose items are a sample log's `doc_hash`es (in `doc_id` order)."""
    owner = chooser.for_benchmark(name, project)
    opts = ParseOptions(task=task, item_key=item_key, subject_field=subject_field)
    parsed = parse_sample_logs(upload, opts)
    version, created = service.create_from_samples(
        session, name, parsed, subtask=subtask, description=description, project=owner
    )
    _created(session, actor, response, version, created)
    return service.public(session, version)


@router.get("", response_model=BenchmarkPage, responses={**INVALID, **AUTH}, name="list_benchmarks")
def list_benchmarks(
    session: SessionDep,
    principal: ReadPrincipal,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    name: Annotated[
        str | None, Query(pattern=NO_NUL, description="only versions of this benchmark")
    ] = None,
    project: Annotated[
        str | None, Query(pattern=NO_NUL, max_length=100, description="only this project's")
    ] = None,
) -> BenchmarkPage:
    """Benchmark versions the key may read, newest first (cursor pagination)."""
    return service.list_benchmarks(
        session,
        limit=limit,
        cursor=cursor,
        name=name,
        visible=visibility(principal),
        project=project,
    )


@router.get(
    "/{benchmark}",
    response_model=BenchmarkDetail,
    responses={**NOT_FOUND, **AUTH},
    name="get_benchmark",
)
def get_benchmark(
    _: ReadPrincipal, version: BenchmarkVersionDep, session: SessionDep
) -> BenchmarkDetail:
    """Counts, subtasks, the models with results and their accuracy summary.

    `{benchmark}` is a version id, a name (its latest version) or `name@vN`."""
    return service.describe(session, version.id)


def _retire(
    session: SessionDep, actor: ActorDep, version: AdministeredVersionDep, retired: bool
) -> BenchmarkPublic:
    changed = service.set_retired(session, version, retired)
    if changed:  # already so: a no-op, no audit row
        action = "benchmark.retire" if retired else "benchmark.unretire"
        record_write(session, actor, action, version, {"changed": True})
    return service.public(session, version)


@router.post(
    "/{benchmark}/retire",
    response_model=BenchmarkPublic,
    responses={**NOT_FOUND, **AUTH},
    name="retire_benchmark_version",
)
def retire_benchmark_version(
    version: AdministeredVersionDep, session: SessionDep, actor: ActorDep
) -> BenchmarkPublic:
    """Hide this version from name resolution (`name` then means the newest version that is
    not retired; `name@vN` is a 404); its results stay and its id still works. Needs `admin`
    on the project."""
    return _retire(session, actor, version, True)


@router.post(
    "/{benchmark}/unretire",
    response_model=BenchmarkPublic,
    responses={**NOT_FOUND, **AUTH},
    name="unretire_benchmark_version",
)
def unretire_benchmark_version(
    version: AdministeredVersionDep, session: SessionDep, actor: ActorDep
) -> BenchmarkPublic:
    """Make a retired version resolvable by name again (`{benchmark}`: its id or `name@vN`)."""
    return _retire(session, actor, version, False)


@router.post(
    "/{benchmark}/coverage",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    responses={**NOT_FOUND, **INVALID, **UNAVAILABLE, **AUTH},
    name="start_coverage_study",
)
def start_coverage_study(
    version: WritableVersionDep,
    session: SessionDep,
    queue: JobQueueDep,
    response: Response,
    actor: ActorDep,
    body: CoverageRunCreate | None = None,
) -> JobPublic:
    """Queue a coverage study on this version's own models with full results (job kind
    `coverage`): how often the service's 95 % intervals contain held-out models' full accuracy,
    overall and in the lowest / highest fifth, with mean width and |error|. Needs `write`."""
    body = body or CoverageRunCreate()
    params = body.model_dump(exclude_none=True, exclude={"seed"})
    job = coverage_runs.request_run(session, version.id, params, body.seed)
    record_write(session, actor, "coverage.start", version, {"job": str(job.id)})
    enqueue_job_after_commit(session, queue, job.id)
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return JobPublic.from_job(job)


@router.get(
    "/{benchmark}/coverage",
    response_model=CoverageRunPublic,
    responses={**NOT_FOUND, **AUTH},
    name="get_coverage_study",
)
def get_coverage_study(
    _: ReadPrincipal, version: BenchmarkVersionDep, session: SessionDep
) -> CoverageRunPublic:
    """The newest finished coverage study of this version (404 when none has run yet)."""
    job = coverage_runs.latest(session, version.id)
    if job is None:
        raise NotFound(
            "no coverage study has finished on this benchmark version; start one: "
            f"benchslice benchmarks coverage {version.benchmark.name} --start"
        )
    return CoverageRunPublic(job_id=job.id, finished_at=job.finished_at, **job.result)
