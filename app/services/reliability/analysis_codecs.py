"""Codecs of stored analyses: the engine's results as JSON (NaN <-> null; floats exact) and the
per-run protocol records / chunks as npz bytes."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.core.reliability.analysis import ProtocolChunk
from app.core.results import AgreementCurve, MDADResult, ProtocolResult
from app.db.models import Analysis


def _floats(a: np.ndarray | None) -> list[float | None] | None:
    if a is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in np.asarray(a, dtype=np.float64)]


def _array(values: Sequence[float | None] | None) -> np.ndarray | None:
    if values is None:
        return None
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _opt(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def curve_to_json(c: AgreementCurve) -> dict[str, Any]:
    return {
        "gaps": _floats(c.gaps),
        "gap_upper": _floats(c.gap_upper),
        "n_pairs": _floats(c.n_pairs),
        "p_same": _floats(c.p_same),
        "p_tie": _floats(c.p_tie),
        "p_reversed": _floats(c.p_reversed),
        "fitted": _floats(c.fitted),
        "band_low": _floats(c.band_low),
        "band_high": _floats(c.band_high),
        "method": c.method,
        "n": int(c.n),
        "split": c.split,
        "kind": c.kind,
        "max_gap": float(c.max_gap),
    }


def curve_from_json(d: Mapping[str, Any]) -> AgreementCurve:
    return AgreementCurve(
        gaps=_array(d["gaps"]),
        gap_upper=_array(d["gap_upper"]),
        n_pairs=_array(d["n_pairs"]),
        p_same=_array(d["p_same"]),
        p_tie=_array(d["p_tie"]),
        p_reversed=_array(d["p_reversed"]),
        fitted=_array(d["fitted"]),
        band_low=_array(d["band_low"]),
        band_high=_array(d["band_high"]),
        method=d["method"],
        n=int(d["n"]),
        split=d["split"],
        kind=d["kind"],
        max_gap=float(d["max_gap"]),
    )


def mdad_to_json(r: MDADResult, mean_subset_size: float) -> dict[str, Any]:
    return {
        "method": r.method,
        "n": int(r.n),
        "split": r.split,
        "mode": r.mode,
        "mdad": _opt(r.mdad),
        "ci_low": _opt(r.ci_low),
        "ci_high": _opt(r.ci_high),
        "threshold": float(r.threshold),
        "reached": bool(r.reached),
        "max_gap": float(r.max_gap),
        "mean_agreement": float(r.mean_agreement),
        "mean_abs_error": _opt(r.mean_abs_error),
        "kendall_tau": _opt(r.kendall_tau),
        "n_runs": int(r.n_runs),
        "n_pairs": int(r.n_pairs),
        "n_boot": int(r.n_boot),
        "seed": r.seed,
        "mean_subset_size": float(mean_subset_size),
        "curve": None if r.curve is None else curve_to_json(r.curve),
    }


def mdad_from_json(d: Mapping[str, Any]) -> MDADResult:
    return MDADResult(
        method=d["method"],
        n=int(d["n"]),
        split=d["split"],
        mode=d["mode"],
        mdad=d["mdad"],
        ci_low=d["ci_low"],
        ci_high=d["ci_high"],
        threshold=float(d["threshold"]),
        reached=bool(d["reached"]),
        max_gap=float(d["max_gap"]),
        mean_agreement=float(d["mean_agreement"]),
        mean_abs_error=d["mean_abs_error"],
        kendall_tau=d["kendall_tau"],
        n_runs=int(d["n_runs"]),
        n_pairs=int(d["n_pairs"]),
        n_boot=int(d["n_boot"]),
        seed=d["seed"],
        curve=None if d["curve"] is None else curve_from_json(d["curve"]),
    )


def protocol_to_bytes(result: ProtocolResult) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        targets=result.targets,
        sources=result.sources,
        seen=result.seen,
        acc_seen=result.acc_seen,
        acc_unseen=result.acc_unseen,
        acc_full=result.acc_full,
        estimates=result.estimates,
        subset_sizes=result.subset_sizes,
    )
    return buf.getvalue()


def protocol_from_bytes(data: bytes, row: Analysis) -> ProtocolResult:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return ProtocolResult(
        methods=tuple(row.methods),
        sizes=tuple(int(n) for n in row.sizes),
        runs=row.runs,
        n_sources=row.n_sources,
        n_targets=row.n_targets,
        seed=int(row.seed),
        **arrays,
    )


def chunk_to_bytes(chunk: ProtocolChunk) -> bytes:
    buf = io.BytesIO()
    seconds = np.array(list(chunk.seconds.values()), dtype=np.float64)
    names = np.array(list(chunk.seconds.keys()), dtype=str)
    np.savez(buf, seconds=seconds, seconds_names=names, **chunk.arrays())
    return buf.getvalue()


def chunk_from_bytes(data: bytes, run_start: int, run_stop: int) -> ProtocolChunk:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    seconds = dict(
        zip(arrays.pop("seconds_names").tolist(), arrays.pop("seconds").tolist(), strict=True)
    )
    return ProtocolChunk(run_start=run_start, run_stop=run_stop, seconds=seconds, **arrays)
