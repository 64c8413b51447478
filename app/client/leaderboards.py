"""Client operations on leaderboards: tiers, rank intervals and the pairwise table."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from app.client.transport import Transport
from app.schemas.leaderboards import LeaderboardPairsPublic, LeaderboardPublic


def _path(benchmark: str | uuid.UUID, pairs: bool) -> str:
    ref = quote(str(benchmark), safe="@")
    return f"/v1/benchmarks/{ref}/leaderboard" + ("/pairs" if pairs else "")


def _params(
    models: str | Sequence[str] | None,
    match: str | None,
    top: int | None,
    subset: str | None,
    alpha: float | None,
    correction: str | None,
    mid_p: bool | None,
) -> dict[str, Any]:
    if models is not None and not isinstance(models, str):
        models = ",".join(models)
    return {
        "models": models,
        "match": match,
        "top": top,
        "subset": subset,
        "alpha": alpha,
        "correction": correction,
        "mid_p": mid_p,
    }


class LeaderboardOperations(Transport):
    """``/v1/benchmarks/{benchmark}/leaderboard`` (``{benchmark}``: a version id, a name for
    its latest version, or ``name@vN``)."""

    def leaderboard(
        self,
        benchmark: str | uuid.UUID,
        *,
        models: str | Sequence[str] | None = None,
        match: str | None = None,
        top: int | None = None,
        subset: str | None = None,
        alpha: float | None = None,
        correction: Literal["holm", "bh", "none"] | None = None,
        mid_p: bool | None = None,
    ) -> LeaderboardPublic:
        """``GET …/leaderboard``: every selected model with its accuracy interval, rank, rank
        interval and significance tier (``subset``: on a stored subset's items)."""
        params = _params(models, match, top, subset, alpha, correction, mid_p)
        return LeaderboardPublic.model_validate(self.get_json(_path(benchmark, False), **params))

    def leaderboard_pairs(
        self,
        benchmark: str | uuid.UUID,
        *,
        models: str | Sequence[str] | None = None,
        match: str | None = None,
        top: int | None = None,
        subset: str | None = None,
        alpha: float | None = None,
        correction: Literal["holm", "bh", "none"] | None = None,
        mid_p: bool | None = None,
        tier: int | None = None,
        significant: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> LeaderboardPairsPublic:
        """``GET …/leaderboard/pairs``: one page of pairs (difference, interval, raw and
        adjusted p-values, P(better), discordant counts); ``next_cursor`` continues it.
        ``tier``: only pairs inside that tier; ``significant``: only (non-)significant pairs."""
        params = _params(models, match, top, subset, alpha, correction, mid_p)
        params |= {"tier": tier, "significant": significant, "limit": limit, "cursor": cursor}
        return LeaderboardPairsPublic.model_validate(
            self.get_json(_path(benchmark, True), **params)
        )

    def export_leaderboard(
        self,
        benchmark: str | uuid.UUID,
        format: Literal["csv", "markdown"],
        *,
        pairs: bool = False,
        models: str | Sequence[str] | None = None,
        match: str | None = None,
        top: int | None = None,
        subset: str | None = None,
        alpha: float | None = None,
        correction: Literal["holm", "bh", "none"] | None = None,
        mid_p: bool | None = None,
    ) -> str:
        """The leaderboard (or with ``pairs``, its pairwise table) as CSV or Markdown text."""
        params = _params(models, match, top, subset, alpha, correction, mid_p)
        params["format"] = format
        response = self.request("GET", _path(benchmark, pairs), params=params, accept="*/*")
        return response.text
