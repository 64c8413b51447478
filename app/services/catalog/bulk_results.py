"""Many models' results in one write: a matrix push of thousands of models in seconds.

:func:`store_many` is :func:`app.services.catalog.results.store_results` for a batch: the same
packing, content hashes, identical-is-a-no-op and conflict rules, in a fixed number of
statements instead of several round trips per model (one advisory-lock statement for all names,
one query for the existing models, one for their existing rows, batched inserts). Rows come out
identical to storing the models one by one (tested). It flushes only: the request or task owns
the transaction, so a conflict anywhere in the batch leaves nothing written.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app.db.models.model_result import LanguageModel, ModelResult
from app.db.repositories.model_results import LanguageModelRepository
from app.errors import Conflict, InvalidInput
from app.ingest import IngestError, ParsedResults
from app.ingest.archives import ArchiveRefused, load_npz
from app.ingest.types import finalize_values
from app.schemas.benchmarks import MODEL_NAME_PATTERN
from app.schemas.results import MatrixWritten, ModelCreate
from app.services.catalog.benchmarks import item_index
from app.services.catalog.results import (
    DEFAULT_RETENTION,
    WriteStatus,
    archive_results,
    fill_row,
    item_positions,
    lock_version_for_write,
    pack,
    set_metadata,
)
from app.services.catalog.uploads import UploadPart, resolve_media_type
from app.services.platform import idempotency

_IN_CHUNK = 1_000  # names / ids per IN (...) list
_NAME = re.compile(MODEL_NAME_PATTERN)


def _chunks(values: Sequence, size: int = _IN_CHUNK):
    for start in range(0, len(values), size):
        yield values[start : start + size]


def store_many(
    session: Session,
    version_id: uuid.UUID,
    batch: Sequence[tuple[ModelCreate, ParsedResults]],
    *,
    replace: bool = False,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> list[tuple[ModelResult, WriteStatus]]:
    """Validate and upsert many models' rows on one benchmark version (flush only).

    Parameters
    ----------
    batch : sequence of (ModelCreate, ParsedResults)
        One entry per model; names must be distinct.
    replace : bool
        Overwrite different existing results (else the first such model is a 409 and nothing
        of the batch is kept once the caller rolls back).

    Returns
    -------
    list of (ModelResult, status)
        In the order of ``batch``; status ``created``, ``unchanged`` or ``replaced``.
    """
    names = [ref.name for ref, _ in batch]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
        raise InvalidInput(
            f"model {dup!r} appears twice in the batch", field="models", message="duplicate name"
        )
    version = lock_version_for_write(session, version_id)
    index = item_index(version)
    packed = [pack(parsed, item_positions(parsed, index), index.n_items) for _, parsed in batch]
    models = LanguageModelRepository(session)
    models.lock_names(names)
    by_name = {m.name: m for chunk in _chunks(names) for m in models.get_by_names(chunk)}
    fresh = [LanguageModel(name=r.name) for r, _ in batch if r.name not in by_name]
    session.add_all(fresh)
    session.flush()
    by_name.update((m.name, m) for m in fresh)
    # what the upload says of its models goes to this project's rows only
    set_metadata(session, version.benchmark.project_id, [(by_name[r.name], r) for r, _ in batch])
    ids = [by_name[n].id for n in names]
    vectors = (ModelResult.correct, ModelResult.confidence, ModelResult.coverage)
    existing = {
        row.model_id: row
        for chunk in _chunks(ids)
        for row in session.scalars(
            select(ModelResult)
            .where(ModelResult.benchmark_version_id == version.id, ModelResult.model_id.in_(chunk))
            .options(
                *(
                    defer(c)
                    for c in (*vectors, ModelResult.within_variance, ModelResult.sample_counts)
                )
            )
        )
    }
    out: list[tuple[ModelResult, WriteStatus]] = []
    for (ref, parsed), pk, model_id in zip(batch, packed, ids, strict=True):
        row = existing.get(model_id)
        if row is not None and row.content_hash == pk.content_hash:
            out.append((row, "unchanged"))
            continue
        if row is not None and not replace:
            raise Conflict(
                f"model {ref.name!r} already has different results on this benchmark; "
                "pass ?replace=true to overwrite them",
                field="replace",
                message="set to true to overwrite",
            )
        if row is None:
            model = by_name[ref.name]
            row = ModelResult(benchmark_version_id=version.id, model_id=model_id, model=model)
            status: WriteStatus = "created"
        else:
            # kept for undo (loads the deferred vectors of this row only)
            archive_results(session, row, "replaced", keep_for=keep_for)
            idempotency.invalidate(session, idempotency.results_resource(version.id, model_id))
            status = "replaced"
        fill_row(row, pk, parsed)
        session.add(row)
        out.append((row, status))
    try:
        session.flush()
    except IntegrityError:  # a concurrent upload won the race; the request rolls back
        raise Conflict("concurrent upload for a model of this batch; retry") from None
    return out


# --- a whole matrix in one upload -----------------------------------------------------------

MATRIX_MEDIA_TYPES = frozenset({"application/x-npz", "application/octet-stream"})
MAX_MATRIX_MODELS = 20_000


def parse_matrix_parts(parts: Sequence[UploadPart]) -> list[tuple[ModelCreate, ParsedResults]]:
    """:func:`parse_matrix_upload` of a request body: exactly one ``.npz`` part (415 else)."""
    if len(parts) != 1:
        raise InvalidInput(
            f"expected one .npz matrix, got {len(parts)} parts", field="body", message="one file"
        )
    resolve_media_type(parts[0], MATRIX_MEDIA_TYPES)
    return parse_matrix_upload(parts[0].data)


def parse_matrix_upload(data: bytes) -> list[tuple[ModelCreate, ParsedResults]]:
    """The models of an ``.npz`` matrix upload, for :func:`store_many`.

    Arrays: ``correct`` (m, N) scores in [0, 1] (NaN: no result), ``models`` (m,) distinct
    names; optional ``item_ids`` (N,) (else the benchmark's item order), ``coverage`` (m, N)
    booleans (False: no result), ``confidence`` (m, N) and ``params_b`` (m,) model sizes in
    billions (NaN: unknown). 422 naming the array at fault.
    """
    try:  # measured from its headers before anything is inflated (app/ingest/archives.py)
        arrays = load_npz(data)
    except ArchiveRefused as exc:
        raise InvalidInput(str(exc), field=exc.field, message="a bounded .npz matrix") from None
    correct = arrays.get("correct")
    if correct is None or correct.ndim != 2 or correct.dtype.kind not in "biuf":
        raise InvalidInput(
            "correct: expected a 2-d numeric array (models x items)",
            field="correct",
            message="a 2-d numeric array",
        )
    m, n = correct.shape
    if not 1 <= m <= MAX_MATRIX_MODELS:
        raise InvalidInput(
            f"correct: {m} models; one upload holds 1 to {MAX_MATRIX_MODELS:,}",
            field="correct",
            message=f"1 to {MAX_MATRIX_MODELS:,} rows",
        )
    names = arrays.get("models")
    if names is None or names.shape != (m,) or names.dtype.kind not in "US":
        raise InvalidInput(
            f"models: expected {m} names (one per row of correct)",
            field="models",
            message=f"{m} strings",
        )
    names_list = [str(x) for x in names.tolist()]
    # the rule of every other upload (MODEL_NAME_PATTERN: no unsafe character, no "." or ".."
    # part; issue 39)
    bad = [i for i, x in enumerate(names_list) if not 1 <= len(x) <= 300 or not _NAME.match(x)]
    if bad:
        raise InvalidInput(
            f"models[{bad[0]}]: names are 1-300 characters, no control or bidirectional "
            "characters, no '.' or '..' part",
            field="models",
            message=f"row {bad[0]}: not a valid model name",
        )
    item_ids = arrays.get("item_ids")
    if item_ids is not None and (item_ids.shape != (n,) or item_ids.dtype.kind not in "USiu"):
        raise InvalidInput(
            f"item_ids: expected {n} ids (one per column of correct)",
            field="item_ids",
            message=f"{n} ids",
        )
    ids = None if item_ids is None else np.asarray([str(x) for x in item_ids.tolist()])
    covered = ~np.isnan(correct) if correct.dtype.kind == "f" else np.ones((m, n), dtype=bool)
    coverage = arrays.get("coverage")
    if coverage is not None:
        if coverage.shape != (m, n) or coverage.dtype.kind not in "biu":
            raise InvalidInput(
                f"coverage: expected a ({m}, {n}) boolean mask",
                field="coverage",
                message=f"shape ({m}, {n})",
            )
        covered &= coverage.astype(bool)
    confidence = arrays.get("confidence")
    if confidence is not None and (confidence.shape != (m, n) or confidence.dtype.kind != "f"):
        raise InvalidInput(
            f"confidence: expected a ({m}, {n}) float array",
            field="confidence",
            message=f"shape ({m}, {n})",
        )
    params_b = arrays.get("params_b")
    if params_b is not None and (params_b.shape != (m,) or params_b.dtype.kind not in "fiu"):
        raise InvalidInput(
            f"params_b: expected {m} numbers (NaN: unknown)",
            field="params_b",
            message=f"{m} numbers",
        )
    sizes = (
        [None] * m
        if params_b is None
        else [float(x) if np.isfinite(x) and x >= 0 else None for x in params_b.tolist()]
    )
    if ids is not None:
        counts = np.unique(ids, return_counts=True)[1]
        if (counts > 1).any() or (np.char.str_len(ids) == 0).any():
            raise InvalidInput(
                "item_ids: expected distinct non-empty ids", field="item_ids", message="distinct"
            )
    values = correct.astype(np.float64, copy=False)
    conf_values = None if confidence is None else confidence.astype(np.float64, copy=False)
    batch = []
    full = covered.all(axis=1)
    for i, name in enumerate(names_list):  # per row: vector work only (what parse_columnar does)
        keep = slice(None) if full[i] else np.flatnonzero(covered[i])
        row_ids = None if ids is None and full[i] else _ids(ids, keep, n)
        if not full[i] and not np.size(keep):
            raise InvalidInput(
                f"model {name!r} (row {i}) has no result", field="correct", message="empty row"
            )
        try:
            c8, cf32 = finalize_values(
                values[i, keep], None if conf_values is None else conf_values[i, keep]
            )
        except IngestError as exc:
            detail = str(exc)
            raise InvalidInput(
                f"model {name!r} (row {i}): {detail}", field="correct", message=detail
            ) from None
        parsed = ParsedResults(
            item_ids=row_ids, correct=c8, confidence=cf32, source_format="columnar"
        )
        batch.append((_model_ref(name, sizes[i], i), parsed))
    return batch


def _model_ref(name: str, params_b: float | None, row: int) -> ModelCreate:
    """The row's model as the JSON routes validate it: 422 naming the array, never a 500."""
    try:
        return ModelCreate(name=name, params_b=params_b)
    except ValidationError as exc:
        issue = exc.errors()[0]
        field = "params_b" if issue["loc"] and issue["loc"][0] == "params_b" else "models"
        raise InvalidInput(
            f"{field} (row {row}, model {name!r}): {issue['msg']}",
            field=field,
            message=issue["msg"],
        ) from None


def _ids(ids: np.ndarray | None, keep, n: int) -> np.ndarray:
    """Item ids of the kept columns (the benchmark's order is stated by position otherwise)."""
    if ids is not None:
        return ids[keep]
    raise InvalidInput(
        "coverage gaps need item_ids (which items each row's values are for)",
        field="item_ids",
        message=f"give the {n} item ids",
    )


def matrix_outcome(version_id: uuid.UUID, stored: Sequence[tuple[ModelResult, WriteStatus]]):
    """The compact reply of a matrix upload (:class:`MatrixWritten`)."""
    statuses = [s for _, s in stored]
    return MatrixWritten(
        benchmark_version_id=version_id,
        models=len(statuses),
        created=statuses.count("created"),
        unchanged=statuses.count("unchanged"),
        replaced=statuses.count("replaced"),
    )
