"""Subsets (build, fetch, export), scoring on a subset, pair verdicts and sample-size plans."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.api.deps import (
    ActorDep,
    BenchmarkVersionDep,
    JobQueueDep,
    ReadableSubset,
    ReadPrincipal,
    SessionDep,
    SettingsDep,
    WritableSubset,
    WritableVersionDep,
    WritePrincipal,
)
from app.api.errors import CONFLICT, INVALID, NOT_FOUND, UNAVAILABLE
from app.api.responses import AUTH, UNSUPPORTED
from app.api.uploads import UPLOAD_BODY, IdempotencyKeyHeader, UploadDep, replay_upload
from app.core.reliability.mdad import DEFAULT_THRESHOLD
from app.queue import enqueue_job_after_commit
from app.schemas.benchmarks import MODEL_NAME_PATTERN
from app.schemas.jobs import JobPublic
from app.schemas.results import ModelCreate
from app.schemas.subsets import (
    DEFAULT_SMALL_SAMPLE_INTERVAL,
    PlanPublic,
    SmallSampleInterval,
    SubsetCreate,
    SubsetPublic,
    SubsetScorePublic,
    SubsetVerdictPublic,
    VerdictPublic,
)
from app.services.catalog import ownership
from app.services.catalog.ownership import record_write
from app.services.catalog.uploads import ParseOptions, parse_results_upload
from app.services.platform import idempotency
from app.services.platform import jobs as job_service
from app.services.reliability import verdicts as verdict_service
from app.services.selection import scoring as scoring_service
from app.services.selection import subsets as service

router = APIRouter(tags=["subsets"])

ModelName = Annotated[str, Query(min_length=1, max_length=300)]
Threshold = Annotated[
    float, Query(ge=0.5, lt=1.0, description="P(same order) needed to call a pair distinguishable")
]


@router.post(
    "/benchmarks/{benchmark}/subsets",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    responses={
        200: {
            "model": SubsetPublic,
            "description": "This exact subset (same content hash) already exists: it is returned "
            "without recomputing; Location points at it",
        },
        **NOT_FOUND,
        **CONFLICT,
        **INVALID,
        **AUTH,
        **UNAVAILABLE,
    },
    name="create_subset",
)
def create_subset(
    version: WritableVersionDep,
    body: Annotated[SubsetCreate, Body()],
    session: SessionDep,
    queue: JobQueueDep,
    actor: ActorDep,
) -> Response:
    """Build a fixed subset in a worker: 202 + `Location` of the job, whose result names the
    subset (`result.subset_id`).

    The subset id is the content hash of (benchmark version, method, size, params, seed, sorted
    source models with their results' hashes). Asking again for the same thing (same `seed`)
    answers 200 with the stored subset and `Location: /v1/subsets/{id}`. Without `seed`, a fresh
    one is drawn and stored: a new subset each time. `{benchmark}` is a version id, a name (its
    latest version) or `name@vN`.
    """
    existing, job = service.request_subset(session, version.id, body)
    summary = {"subset": existing.id} if existing is not None else {"job": str(job.id)}
    record_write(session, actor, "subset.create", version, summary, method=body.method)
    if existing is not None:
        public = service.to_public(existing, version)
        return JSONResponse(
            public.model_dump(mode="json"),
            status_code=status.HTTP_200_OK,
            headers={"Location": f"/v1/subsets/{existing.id}"},
        )
    assert job is not None
    if job_service.take_created(session, job.id):  # an identical request's job is already queued
        enqueue_job_after_commit(session, queue, job.id)
    return JSONResponse(
        JobPublic.from_job(job).model_dump(mode="json"),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


@router.get(
    "/subsets/{subset_id}",
    response_class=Response,
    responses={
        200: {
            "content": {
                "application/json": {
                    "schema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/SubsetPublic"},
                            {"type": "array", "items": {"type": "string"}},
                            {
                                "type": "object",
                                "additionalProperties": {
                                    "type": "array",
                                    "items": {"type": "integer"},
                                },
                            },
                            {
                                "type": "object",
                                "additionalProperties": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                },
                            },
                        ]
                    }
                },
                "text/csv": {"schema": {"type": "string"}},
            },
            "description": "format=json: the subset; ids: JSON list of item ids; csv: "
            "item_id,doc_id,position,subtask,weight; lm-eval: {task: [doc_id…]} sorted, for "
            "`lm_eval --samples`; inspect: {task: [sample_id…]}, for `inspect eval --sample-id`",
        },
        **NOT_FOUND,
        **AUTH,
    },
    name="get_subset",
)
async def get_subset(
    subset_id: str,
    session: SessionDep,
    _: ReadableSubset,
    format: Annotated[Literal["json", "ids", "csv", "lm-eval", "inspect"], Query()] = "json",
) -> Response:
    """A subset: items (external ids, subtasks, positions, lm-eval doc ids), weights, estimator,
    provenance (method, params, seed, source models, signal used). Items are sorted by position;
    `doc_id` is the item's position within its subtask (lm-eval's doc id when the benchmark was
    created from sample logs, subtask = task name)."""
    # async: a cached rendering (immutable) is answered on the event loop, without a thread hop
    data = service.cached_rendering(subset_id, format)
    if data is None:
        data = await run_in_threadpool(service.rendered_subset, session, subset_id, format)
    return Response(data, media_type=service.MEDIA_TYPES[format])


@router.post(
    "/subsets/{subset_id}/scores",
    status_code=status.HTTP_201_CREATED,
    response_model=SubsetScorePublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH, **UNSUPPORTED},
    name="score_on_subset",
    openapi_extra=UPLOAD_BODY,
)
def score_on_subset(
    subset_id: str,
    request: Request,
    principal: WritePrincipal,  # before the body is read: no key, no upload
    project: WritableSubset,
    upload: UploadDep,
    session: SessionDep,
    settings: SettingsDep,
    actor: ActorDep,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=MODEL_NAME_PATTERN,
            description="Model name (non-JSON uploads)",
        ),
    ] = None,
    baseline: Annotated[
        str | None, Query(min_length=1, max_length=300, description="Model with full results")
    ] = None,
    threshold: Threshold = DEFAULT_THRESHOLD,
    interval: Annotated[
        SmallSampleInterval,
        Query(
            description="Small-sample interval of unweighted probability subsets (jeffreys_fpc: "
            "the default, Jeffreys at the finite-population effective size, >= 0.93 coverage "
            "overall and in both fifths on GPQA and the SYNTHETIC families at n = 25-100; "
            "wilson_fpc: Wilson, whose weakest fifth dipped to 0.92 at n = 25; clopper_pearson "
            "and hypergeometric: exact, conservative; jeffreys: Beta posterior without the "
            "finite-population correction)"
        ),
    ] = DEFAULT_SMALL_SAMPLE_INTERVAL,
    metric: Annotated[str | None, Query()] = None,
    filter: Annotated[str | None, Query()] = None,
    task: Annotated[str | None, Query()] = None,
    item_key: Annotated[Literal["doc_hash", "doc_id"], Query()] = "doc_hash",
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response | SubsetScorePublic:
    """Estimate a model's full-benchmark accuracy from its results on this subset's items only
    (any upload format of `POST /v1/benchmarks/{benchmark}/results`; every subset item, no others).

    One estimate with a CI per estimator the method supports, each with its `basis`:
    probability subsets (random, subtask_stratified, confidence_stratified) are `design`-based
    (the `interval` method for plain means on 0/1 results, stratified Horvitz-Thompson for
    weighted ones; from 50 items also `model_assisted`); DPP, Anchor Points and tinyBenchmarks
    are `model`-based, calibrated on the subset's source models (`reference_calibrated`: value
    bias-corrected, `raw_value` the estimator's own number). With `baseline`: P(new model better on the full benchmark),
    the exact McNemar p-value on the shared items, and whether this subset's size suffices at
    the observed gap. Stored; a repeated `Idempotency-Key` returns the first response.
    """
    req_hash, replay = replay_upload(
        request, upload, session, principal.id, idempotency_key, settings.idempotency_ttl_hours
    )
    if replay is not None:
        return replay
    query_model = ModelCreate(name=model) if model is not None else None
    parsed, ref = parse_results_upload(
        upload,
        ParseOptions(metric=metric, filter=filter, task=task, item_key=item_key),
        model=query_model,
    )
    score = scoring_service.score_model(
        session,
        subset_id,
        ref.name,
        parsed,
        baseline=baseline,
        threshold=threshold,
        interval=interval,
    )
    version, _ = ownership.subset_owner(session, subset_id)
    summary = {"n_items": parsed.n_items}
    record_write(session, actor, "subset.score", version, summary, subset=subset_id, model=ref.name)
    if idempotency_key is None or req_hash is None:
        return score
    body = score.model_dump(mode="json")
    idempotency.store(
        session, principal.id, idempotency_key, req_hash, status.HTTP_201_CREATED, body
    )
    return JSONResponse(body, status_code=status.HTTP_201_CREATED)


@router.get(
    "/subsets/{subset_id}/verdict",
    response_model=SubsetVerdictPublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="subset_verdict",
)
def subset_verdict(
    subset_id: str,
    model_a: ModelName,
    model_b: ModelName,
    session: SessionDep,
    _: ReadableSubset,
    threshold: Threshold = DEFAULT_THRESHOLD,
) -> SubsetVerdictPublic:
    """Does this fixed subset order the pair as the full benchmark does (its default linear
    estimator on correctness; a tie is not preserved)? Plus the verdict for a fresh subset of
    the same method and size (`fresh_draw`; null with the reason when it needs an analysis)."""
    return verdict_service.subset_verdict(session, subset_id, model_a, model_b, threshold=threshold)


@router.get(
    "/benchmarks/{benchmark}/verdict",
    response_model=VerdictPublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="pair_verdict",
)
async def pair_verdict(
    _: ReadPrincipal,
    version: BenchmarkVersionDep,
    model_a: ModelName,
    model_b: ModelName,
    session: SessionDep,
    size: Annotated[int, Query(ge=1, le=1_000_000)] = 25,
    method: Annotated[str, Query(min_length=1, max_length=64)] = "random",
    threshold: Threshold = DEFAULT_THRESHOLD,
    min_discordant: Annotated[
        int,
        Query(
            ge=0,
            le=1_000_000,
            description="Fewest discordant items (only one model right) for the paired outcome "
            "to be decidable",
        ),
    ] = verdict_service.MIN_DISCORDANT,
) -> VerdictPublic:
    """Would a `size`-item subset built by `method` order the two models as the full benchmark?

    `random`: exact (multivariate hypergeometric) from the stored results. Other methods: from
    the latest robust analysis' agreement curves at the pair's gap (interpolated in log n); 409
    naming the analysis to run when none covers the method. Both models need full 0/1 results
    (404 unknown, 409 partial). Answers are cached per process; a results upload is reflected
    within one second. `{benchmark}` is a version id, a name (its latest version) or
    `name@vN`.

    `paired`: the pair on all the benchmark's items - the four cells n11/n10/n01/n00,
    P(A better) from the Dirichlet posterior of the cells, the exact McNemar p-value, and
    `status: undecidable` when fewer than `min_discordant` items separate them."""
    # async: a verdict asked before (results unchanged) is answered on the event loop
    options = dict(size=size, method=method, threshold=threshold, min_discordant=min_discordant)
    cached = verdict_service.cached_verdict(version.id, model_a, model_b, **options)
    if cached is not None:
        return cached
    return await run_in_threadpool(
        verdict_service.pair_verdict, session, version.id, model_a, model_b, **options
    )


@router.get(
    "/benchmarks/{benchmark}/plan",
    response_model=PlanPublic,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="plan_size",
)
def plan_size(
    _: ReadPrincipal,
    version: BenchmarkVersionDep,
    gap: Annotated[float, Query(gt=0, lt=1, description="Accuracy difference, e.g. 0.02")],
    session: SessionDep,
    method: Annotated[str, Query(min_length=1, max_length=64)] = "random",
    probability: Threshold = DEFAULT_THRESHOLD,
    model_a: Annotated[
        str | None,
        Query(
            min_length=1, max_length=300, description="With model_b: use this pair's discordance"
        ),
    ] = None,
    model_b: Annotated[str | None, Query(min_length=1, max_length=300)] = None,
    alpha: Annotated[
        float, Query(ge=1e-6, le=0.5, description="Two-sided level of the paired test")
    ] = 0.05,
    power: Annotated[float, Query(gt=0, lt=1, description="1 - beta of the paired test")] = 0.8,
) -> PlanPublic:
    """Two answers, each labelled. `size` (`kind: mdad`): smallest subset size whose MDAD (at
    `probability`) is at most `gap`, with the evidence. `significance` (`kind:
    paired_significance`): shared items a two-sided paired test needs to detect `gap` at
    `alpha` with `power`, from the pair's discordance when `model_a` and `model_b` are given,
    else the benchmark's typical (median) discordance over all model pairs.

    `random`: exact. Exact agreement curves over all model pairs at a geometric grid of sizes,
    bisected to the two grid sizes around the answer and then to the size itself (about
    log2(N) exact passes, cached per benchmark results: the first call computes them, 9 s on
    GPQA at a gap of 2 points, bench/RESULTS.md); `evidence` lists every size evaluated, so the answer's row and the one below it are
    both there. Other methods: the latest robust analysis' curves, interpolated in log n (409
    naming the `benchslice analyze` command when there is none)."""
    return verdict_service.plan_size(
        session,
        version.id,
        gap=gap,
        method=method,
        probability=probability,
        model_a=model_a,
        model_b=model_b,
        alpha=alpha,
        power=power,
    )
