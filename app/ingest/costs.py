"""Per-item cost columns of plain uploads: validation and the :class:`ItemCosts` they fill.

A CSV header, a keyed JSON item or a columnar JSON ``costs`` object may carry, per item:

============== ============================== ===========================================
field          aliases (CSV header, any case) unit and plausible range per item
============== ============================== ===========================================
input_tokens   prompt_tokens                  whole tokens, at most 10,000,000
output_tokens  completion_tokens, tokens      whole tokens, at most 10,000,000
seconds        time_s                         seconds, at most 604,800 (a week)
usd            cost, cost_usd                 US dollars, at most 10,000
============== ============================== ===========================================

An empty cell (or JSON ``null``) is "not reported" (NaN in :class:`ItemCosts`). A negative, NaN or
infinite value, a fractional token count, or a value beyond the range (a sign of the wrong unit:
milliseconds for seconds, cents or micro-dollars for dollars) is a 422 naming the field and the
item.
"""

from __future__ import annotations

import math

import numpy as np

from app.ingest.types import IngestError, ItemCosts, LineError

COST_FIELDS = ("input_tokens", "output_tokens", "seconds", "usd")
COST_ALIASES = {
    "input_tokens": "input_tokens",
    "prompt_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "completion_tokens": "output_tokens",
    "tokens": "output_tokens",
    "seconds": "seconds",
    "time_s": "seconds",
    "usd": "usd",
    "cost": "usd",
    "cost_usd": "usd",
}
#: The largest plausible value for one item, and what a larger one suggests.
COST_LIMITS = {
    "input_tokens": (1e7, "tokens"),
    "output_tokens": (1e7, "tokens"),
    "seconds": (604_800.0, "seconds (milliseconds given?)"),
    "usd": (10_000.0, "US dollars (cents or micro-dollars given?)"),
}


def cost_value(raw, *, kind: str, field: str, line: int | None = None):
    """One cost cell of field ``kind`` (:data:`COST_FIELDS`) as float (NaN when empty/None), or a
    :class:`LineError` naming ``field`` (the name the upload used)."""
    where = field
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return math.nan
    if isinstance(raw, bool):
        return LineError(f"not a number: {raw!r}", line=line, field=where)
    try:
        v = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        return LineError(f"not a number: {raw!r}", line=line, field=where)
    return _check_one(v, raw, kind, where, line)


def _check_one(v: float, raw, field: str, where: str, line: int | None):
    if not math.isfinite(v):
        return LineError(
            f"NaN or infinite cost {raw!r} (leave it empty when unknown)", line=line, field=where
        )
    if v < 0:
        return LineError(f"negative cost {raw!r}", line=line, field=where)
    limit, unit = COST_LIMITS[field]
    if v > limit:
        return LineError(
            f"{v:g} is implausible for one item (at most {limit:g} {unit})", line=line, field=where
        )
    if field.endswith("_tokens") and v != int(v):
        return LineError(f"{v!r} is not a whole number of tokens", line=line, field=where)
    return v


def check_cost_arrays(columns: dict[str, object], n: int, *, source: str) -> ItemCosts | None:
    """Validate columnar cost arrays (``None`` entries = not reported) into :class:`ItemCosts`.

    ``columns`` maps a name of :data:`COST_FIELDS` to a sequence of length ``n``; the first bad
    value of each field is reported as ``costs.<field>[i]``.
    """
    errors: list[LineError] = []
    out: dict[str, np.ndarray] = {}
    for name, values in columns.items():
        if values is None:
            continue
        if name not in COST_FIELDS:
            errors.append(
                LineError(f"unknown cost field; use {COST_FIELDS}", field=f"costs.{name}")
            )
            continue
        vals = list(values)  # type: ignore[call-overload]
        if len(vals) != n:
            errors.append(
                LineError(f"length {len(vals)} differs from correct ({n})", field=f"costs.{name}")
            )
            continue
        arr = np.full(n, np.nan)
        for i, raw in enumerate(vals):
            v = cost_value(raw, kind=name, field=f"costs.{name}[{i}]")
            if isinstance(v, LineError):
                errors.append(v)
                break
            arr[i] = v
        out[name] = arr
    if errors:
        raise IngestError(errors)
    return ItemCosts(**out, source=source) if out else None


def costs_from_rows(rows: dict[str, list], n: int, *, source: str) -> ItemCosts | None:
    """:class:`ItemCosts` from per-field lists already checked by :func:`cost_value`."""
    out = {k: np.asarray(v, dtype=np.float64) for k, v in rows.items() if len(v) == n}
    if not out or all(np.isnan(a).all() for a in out.values()):
        return None
    return ItemCosts(**out, source=source)


def cost_matrix(costs: ItemCosts | None, n: int) -> np.ndarray | None:
    """The (4, n) float64 matrix of :data:`COST_FIELDS` (NaN = unknown), or None."""
    if costs is None:
        return None
    out = np.full((len(COST_FIELDS), n), np.nan)
    for j, name in enumerate(COST_FIELDS):
        v = getattr(costs, name)
        if v is not None:
            out[j] = v
    return out


__all__ = [
    "COST_ALIASES",
    "COST_FIELDS",
    "COST_LIMITS",
    "check_cost_arrays",
    "cost_matrix",
    "cost_value",
    "costs_from_rows",
]
