"""Many models' results in one write: a matrix push of thousands of models in seconds.

:func:`store_many` is :func:`app.services.catalog.results.store_results` for a batch: the same
packing, content hashes, identical-is-a-no-op and conflict rules, in a fixed number of
statements instead of several round trips per model (one advisory-lock statement for all names,
one query for the existing models, one for their existing rows, batched inserts). Rows come out
identical to storing the models one by one (tested). It flushes only: the request or task owns
the transaction, so a conflict anywhere in the batch leaves nothing written.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app.db.models.model_result import LanguageModel, ModelResult
from app.db.repositories.model_results import LanguageModelRepository
from app.errors import Conflict, InvalidInput
from app.ingest import ParsedResults
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import get_version, item_index
from app.services.catalog.results import WriteStatus, _positions, pack
from app.services.platform import idempotency

_IN_CHUNK = 1_000  # names / ids per IN (...) list


def _chunks(values: Sequence, size: int = _IN_CHUNK):
    for start in range(0, len(values), size):
        yield values[start : start + size]


def store_many(
    session: Session,
    version_id: uuid.UUID,
    batch: Sequence[tuple[ModelCreate, ParsedResults]],
    *,
    replace: bool = False,
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
    version = get_version(session, version_id)
    index = item_index(version)
    packed = [pack(parsed, _positions(parsed, index), index.n_items) for _, parsed in batch]
    models = LanguageModelRepository(session)
    models.lock_names(names)
    by_name = {m.name: m for chunk in _chunks(names) for m in models.get_by_names(chunk)}
    fresh = [
        LanguageModel(name=r.name, params_b=r.params_b, family=r.family, tags=list(r.tags or []))
        for r, _ in batch
        if r.name not in by_name
    ]
    for ref, _ in batch:
        model = by_name.get(ref.name)
        if model is None:
            continue
        if ref.params_b is not None:
            model.params_b = ref.params_b
        if ref.family is not None:
            model.family = ref.family
        if ref.tags is not None:
            model.tags = list(ref.tags)
    session.add_all(fresh)
    session.flush()
    by_name.update((m.name, m) for m in fresh)
    ids = [by_name[n].id for n in names]
    vectors = (ModelResult.correct, ModelResult.confidence, ModelResult.coverage)
    existing = {
        row.model_id: row
        for chunk in _chunks(ids)
        for row in session.scalars(
            select(ModelResult)
            .where(ModelResult.benchmark_version_id == version.id, ModelResult.model_id.in_(chunk))
            .options(*(defer(c) for c in (*vectors, ModelResult.within_variance)))
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
            idempotency.invalidate(session, idempotency.results_resource(version.id, model_id))
            status = "replaced"
        row.binary = pk.binary
        row.correct = pk.correct
        row.confidence = pk.confidence
        row.coverage = pk.coverage
        row.n_items = pk.n_items
        row.accuracy = pk.accuracy
        row.content_hash = pk.content_hash
        row.source_format = parsed.source_format
        row.metric = parsed.metric.replace("\x00", "")[:64] if parsed.metric else None
        row.samples_per_item = pk.samples_per_item
        row.within_variance = pk.within_variance
        row.config_fingerprint = pk.config_fingerprint
        row.eval_config = dict(parsed.eval_config) if pk.config_fingerprint else None
        session.add(row)
        out.append((row, status))
    try:
        session.flush()
    except IntegrityError:  # a concurrent upload won the race; the request rolls back
        raise Conflict("concurrent upload for a model of this batch; retry") from None
    return out
