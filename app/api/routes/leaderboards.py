"""Leaderboards with significance tiers, simultaneous rank intervals and pairwise tests."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.deps import BenchmarkVersionDep, ReadPrincipal, SessionDep
from app.api.errors import CONFLICT, INVALID, NOT_FOUND
from app.api.responses import AUTH
from app.schemas.leaderboards import (
    CorrectionName,
    LeaderboardFormat,
    LeaderboardPairsPublic,
    LeaderboardPublic,
)
from app.services.ranking import leaderboards as service

router = APIRouter(tags=["leaderboards"])

MAX_MODELS_PARAM = 4_000

Models = Annotated[
    str | None,
    Query(
        # the server reads request lines up to 64 KiB, and a non-ASCII character is up to 12
        # bytes percent-encoded: 4,000 keeps the worst case (with `match`, `subset` and the
        # path) inside it, so a request the spec allows is never refused with a bare 400
        max_length=MAX_MODELS_PARAM,
        description=f"Model names, comma-separated (with `match`: the union of both); at most "
        f"{MAX_MODELS_PARAM:,} characters (for more models, use `match` or `top`)",
    ),
]
Match = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=300,
        description="Models whose name matches: a case-insensitive glob when it contains "
        "`*`, `?` or `[`, otherwise a case-insensitive substring",
    ),
]
Top = Annotated[
    int | None,
    Query(ge=2, le=100_000, description="Keep the `top` most accurate of the selected models"),
]
SubsetId = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=128,
        description="A stored subset of this benchmark version: rank on its items, testing the "
        "full-benchmark differences under its design",
    ),
]
Alpha = Annotated[
    float,
    Query(ge=1e-6, le=0.5, description="Level of the tests and intervals, in [1e-6, 0.5]"),
]
Correction = Annotated[
    CorrectionName,
    Query(description="holm: family-wise error rate (simultaneous rank intervals); bh: FDR"),
]
MidP = Annotated[bool, Query(description="Mid-p variants of the exact tests")]
Format = Annotated[LeaderboardFormat, Query(description="json, csv or markdown")]


def _ok(model: type, text: str) -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "model": model,
            "description": text,
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "text/markdown": {"schema": {"type": "string"}},
            },
        }
    }


ERRORS = {**NOT_FOUND, **CONFLICT, **INVALID, **AUTH}


@router.get(
    "/benchmarks/{benchmark}/leaderboard",
    response_class=Response,
    responses={
        **_ok(
            LeaderboardPublic,
            "format=json: the leaderboard; csv: one row per model (the `rows` fields); "
            "markdown: the same as a table, then the method",
        ),
        **ERRORS,
    },
    name="leaderboard",
)
def leaderboard(
    version: BenchmarkVersionDep,
    session: SessionDep,
    _: ReadPrincipal,
    models: Models = None,
    match: Match = None,
    top: Top = None,
    subset: SubsetId = None,
    alpha: Alpha = service.DEFAULT_ALPHA,
    correction: Correction = "holm",
    mid_p: MidP = False,
    format: Format = "json",
) -> Response:
    """Which rank differences are real: every model with its accuracy and interval, point rank,
    rank interval and significance tier.

    `{benchmark}` is a version id, a name (its latest version) or `name@vN`. All pairs are
    compared (exact McNemar on the items both models have; Holm by default), the rank interval
    is `[1 + #significantly better, m - #significantly worse]` (simultaneous with Holm), and a
    tier is the best unranked model plus every model not significantly worse than it. With
    `subset`, accuracies are the subset's estimates and the tests are of the full-benchmark
    differences under the subset's design (exact hypergeometric for a random subset), so a small
    subset gives honestly wide tiers. Cached per benchmark results."""
    query = service.LeaderboardQuery.of(
        models=models,
        match=match,
        top=top,
        subset=subset,
        alpha=alpha,
        correction=correction,
        mid_p=mid_p,
    )
    data = service.rendered(session, version, query, kind="rows", fmt=format)
    return Response(data, media_type=service.MEDIA_TYPES[format])


@router.get(
    "/benchmarks/{benchmark}/leaderboard/pairs",
    response_class=Response,
    responses={
        **_ok(
            LeaderboardPairsPublic,
            "format=json: every pair (model_a ranked above model_b); csv: one row per pair; "
            "markdown: the same as a table, then the method",
        ),
        **ERRORS,
    },
    name="leaderboard_pairs",
)
def leaderboard_pairs(
    version: BenchmarkVersionDep,
    session: SessionDep,
    _: ReadPrincipal,
    models: Models = None,
    match: Match = None,
    top: Top = None,
    subset: SubsetId = None,
    alpha: Alpha = service.DEFAULT_ALPHA,
    correction: Correction = "holm",
    mid_p: MidP = False,
    format: Format = "json",
) -> Response:
    """The pairwise table behind the leaderboard: for every pair, the accuracy difference with
    its interval, the p-value before and after the correction, P(model_a better) and the
    discordant counts. Same selection parameters as the leaderboard (all m(m-1)/2 pairs of the
    selected models: select a few with `models`, `match` or `top` for a short table)."""
    query = service.LeaderboardQuery.of(
        models=models,
        match=match,
        top=top,
        subset=subset,
        alpha=alpha,
        correction=correction,
        mid_p=mid_p,
    )
    data = service.rendered(session, version, query, kind="pairs", fmt=format)
    return Response(data, media_type=service.MEDIA_TYPES[format])
