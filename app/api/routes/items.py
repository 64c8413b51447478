"""Item health of a benchmark: per-item statistics and flags (issue 13 §3)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import BenchmarkVersionDep, ReadPrincipal, SessionDep
from app.api.errors import CONFLICT, INVALID, NOT_FOUND
from app.api.responses import AUTH
from app.schemas.items import MAX_ITEMS_PAGE, ItemHealthPage
from app.services.catalog import items as service

router = APIRouter(tags=["benchmarks"])


@router.get(
    "/benchmarks/{benchmark}/items",
    response_model=ItemHealthPage,
    responses={**NOT_FOUND, **CONFLICT, **INVALID, **AUTH},
    name="list_items",
)
def list_items(
    _: ReadPrincipal,
    version: BenchmarkVersionDep,
    session: SessionDep,
    limit: Annotated[int, Query(ge=1, le=MAX_ITEMS_PAGE)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    flag: Annotated[
        list[str] | None,
        Query(
            description="Only items carrying any of these flags: constant, saturated, "
            "negative_discrimination, misfit (repeat the parameter or separate by commas)"
        ),
    ] = None,
) -> ItemHealthPage:
    """Item health: per item its accuracy, rest-score point-biserial correlation, 2PL
    discrimination, difficulty and infit (when an IRT fit is stored for the version), and its
    flags - `constant` (every model right or every model wrong), `saturated` (> 98 % or < 2 %
    right), `negative_discrimination` (point-biserial <= -0.2 and significantly negative: a
    suspected wrong key), `misfit` (infit outside 0.7-1.3). Statistics over the models with full
    0/1 results (409 with fewer than 3), cached per results stamp. Items sorted by position,
    cursor pagination; `summary` counts the flags over the whole benchmark and gives the
    effective number of informative items. `{benchmark}` is a version id, a name or
    `name@vN`."""
    return service.list_items(session, version, limit=limit, cursor=cursor, flags=flag)
