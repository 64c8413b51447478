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
from app.services.ranking import pair_pages

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
    data = service.rendered(session, version, query, fmt=format)
    return Response(data, media_type=service.MEDIA_TYPES[format])


@router.get(
    "/benchmarks/{benchmark}/leaderboard/pairs",
    response_class=Response,
    responses={
        **_ok(
            LeaderboardPairsPublic,
            "format=json: a page of pairs (model_a ranked above model_b) and `next_cursor`; "
            "csv: one row per pair; markdown: the same as a table, then the method. Every "
            "format carries the next page's cursor in the `Next-Cursor` header (absent on the "
            "last page).",
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
    tier: Annotated[
        int | None, Query(ge=1, description="Only pairs of two models of this tier")
    ] = None,
    significant: Annotated[
        bool | None,
        Query(description="true: only significant pairs; false: only non-significant pairs"),
    ] = None,
    limit: Annotated[
        int,
        Query(
            ge=1,
            le=pair_pages.MAX_PAIRS_PAGE,
            description=f"Pairs per page, at most {pair_pages.MAX_PAIRS_PAGE:,}",
        ),
    ] = pair_pages.DEFAULT_PAIRS_PAGE,
    cursor: Annotated[
        str | None, Query(max_length=200, description="next_cursor of the previous page")
    ] = None,
) -> Response:
    """The pairwise table behind the leaderboard, a page at a time: for every pair, the
    accuracy difference with its interval, the p-value before and after the correction,
    P(model_a better) and the discordant counts. Same selection parameters as the leaderboard;
    `tier` and `significant` filter the pairs. Pairs come in leaderboard order (by model_a's
    rank position, then model_b's), at most `limit` per page; follow `next_cursor` (also the
    `Next-Cursor` header) until it is null. With `significant`, a page can hold fewer than
    `limit` pairs (each request scans a bounded number of pairs) and still have a next page."""
    query = service.LeaderboardQuery.of(
        models=models,
        match=match,
        top=top,
        subset=subset,
        alpha=alpha,
        correction=correction,
        mid_p=mid_p,
    )
    computed = service.compute(session, version, query)
    page = pair_pages.pairs_page(
        computed,
        query,
        pair_pages.PairsFilter(tier=tier, significant=significant),
        limit=limit,
        cursor=cursor,
    )
    headers = {"Next-Cursor": page.next_cursor} if page.next_cursor else None
    return Response(
        pair_pages.render_page(computed, page, format),
        media_type=service.MEDIA_TYPES[format],
        headers=headers,
    )
