"""Model results: store one model's per-item vectors packed, load a benchmark as a matrix.

One row per (benchmark version, model). ``correct`` is ``np.packbits`` of the 0/1 vector (or
float32 scores), ``confidence`` float32, ``coverage`` a packbits mask (NULL = every item).
Repeated samples: ``correct`` holds float32 per-item means of ``samples_per_item`` (``K``)
samples and ``within_variance`` their float32 per-item sample variances (when known). The
evaluation configuration is stored readable (``eval_config``) with its ``config_fingerprint``.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Literal, NamedTuple

import numpy as np
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models.benchmark import BenchmarkVersion
from app.db.models.model_result import (
    ARCHIVED_COLUMNS,
    LanguageModel,
    ModelMetadata,
    ModelResult,
    ModelResultArchive,
)
from app.db.repositories.benchmarks import BenchmarkVersionRepository
from app.db.repositories.model_results import (
    LanguageModelRepository,
    ModelMetadataRepository,
    ModelResultArchiveRepository,
    ModelResultRepository,
)
from app.errors import Conflict, InvalidInput, NotFound
from app.ingest import ParsedResults, config_fingerprint
from app.ingest.costs import cost_matrix
from app.schemas.results import ModelCreate, ModelPublic, ModelResultPublic
from app.services.catalog.benchmarks import get_version, item_index
from app.services.platform import idempotency

WriteStatus = Literal["created", "unchanged", "replaced"]
DEFAULT_RETENTION = timedelta(days=30)  # RESULTS_RETENTION_DAYS: replaced/deleted results kept


class PackedResults(NamedTuple):
    binary: bool
    correct: bytes
    confidence: bytes | None
    coverage: bytes | None
    n_items: int
    accuracy: float
    content_hash: str
    samples_per_item: int | None = None
    within_variance: bytes | None = None
    config_fingerprint: str | None = None
    item_costs: bytes | None = None
    cost_source: str | None = None
    sample_counts: bytes | None = None


def pack(parsed: ParsedResults, positions: np.ndarray, n_items: int) -> PackedResults:
    """Scatter parsed values to their item positions and pack them for storage."""
    binary = parsed.binary
    full = np.zeros(n_items, dtype=np.uint8 if binary else "<f4")
    full[positions] = parsed.correct
    correct = np.packbits(full).tobytes() if binary else full.tobytes()
    confidence = None
    if parsed.confidence is not None:
        conf = np.zeros(n_items, dtype="<f4")
        conf[positions] = parsed.confidence
        confidence = conf.tobytes()
    coverage = None
    if positions.size != n_items:
        mask = np.zeros(n_items, dtype=bool)
        mask[positions] = True
        coverage = np.packbits(mask).tobytes()
    k = parsed.samples if parsed.samples is not None and parsed.samples > 1 else None
    within = None
    if k is not None and parsed.within_variance is not None:
        var = np.zeros(n_items, dtype="<f4")
        var[positions] = parsed.within_variance
        within = var.tobytes()
    counts = None
    if k is not None and parsed.sample_counts is not None:
        per_item = np.zeros(n_items, dtype="<i4")
        per_item[positions] = parsed.sample_counts
        counts = per_item.tobytes()
    fingerprint = config_fingerprint(parsed.eval_config)
    h = hashlib.sha256(b"b" if binary else b"f")
    for part in (correct, coverage, confidence):
        h.update(len(part or b"").to_bytes(8, "little"))
        h.update(part or b"")
    # only uploads with repeated samples or a configuration hash more (older hashes unchanged)
    if k is not None:
        h.update(b"K" + k.to_bytes(8, "little") + len(within or b"").to_bytes(8, "little"))
        h.update(within or b"")
    if fingerprint is not None:
        h.update(b"C" + fingerprint.encode())
    costs = cost_matrix(parsed.costs, parsed.n_items)
    item_costs = None
    if costs is not None:  # only uploads with costs hash them (older hashes unchanged)
        full_costs = np.full((costs.shape[0], n_items), np.nan, dtype="<f4")
        full_costs[:, positions] = costs
        item_costs = full_costs.tobytes()
        h.update(b"$" + len(item_costs).to_bytes(8, "little") + item_costs)
    if counts is not None:  # only uploads whose samples vary per item (older hashes unchanged)
        h.update(b"S" + counts)
    accuracy = float(parsed.correct.mean(dtype=np.float64))
    return PackedResults(
        binary,
        correct,
        confidence,
        coverage,
        int(positions.size),
        accuracy,
        h.hexdigest(),
        k,
        within,
        fingerprint,
        item_costs,
        parsed.costs.source[:64] if item_costs is not None else None,  # type: ignore[union-attr]
        counts,
    )


def item_positions(parsed: ParsedResults, version_index) -> np.ndarray:
    """Positions in the version's item order of the parsed values (422 on unknown items)."""
    n = version_index.n_items
    if parsed.item_ids is None:
        if parsed.n_items != n:
            raise InvalidInput(
                f"correct has {parsed.n_items} values but the benchmark has {n} items",
                field="correct",
                message=f"expected {n} values aligned to the item order (or give item_ids)",
            )
        return np.arange(n, dtype=np.int64)
    return version_index.positions(parsed.item_ids)


def get_or_create_model(session: Session, ref: ModelCreate) -> LanguageModel:
    """The model called ``ref.name`` (created when new). Its metadata is per project:
    :func:`set_metadata`."""
    models = LanguageModelRepository(session)
    model = models.get_by_name(ref.name)
    if model is None:
        return models.add(LanguageModel(name=ref.name))
    return model


def set_metadata(
    session: Session,
    project_id: uuid.UUID,
    refs: Sequence[tuple[LanguageModel, ModelCreate]],
) -> dict[uuid.UUID, ModelMetadata]:
    """Record what an upload to one of ``project_id``'s benchmarks says about its models (size,
    family, tags; a field the upload leaves out keeps its value) in that project's own rows:
    nothing another project sees changes. Returns the project's rows for these models."""
    repo = ModelMetadataRepository(session)
    rows = repo.for_models(project_id, [m.id for m, _ in refs])
    fresh = []
    for model, ref in refs:
        row = rows.get(model.id)
        if row is None:
            if ref.params_b is None and ref.family is None and ref.tags is None:
                continue  # nothing said: no row (reads show nothing recorded)
            row = ModelMetadata(project_id=project_id, model_id=model.id, tags=[])
            rows[model.id] = row
            fresh.append(row)
        if ref.params_b is not None:
            row.params_b = ref.params_b
        if ref.family is not None:
            row.family = ref.family
        if ref.tags is not None:
            row.tags = list(ref.tags)
    repo.add_all(fresh)
    return rows


def metadata_of(
    session: Session, version: BenchmarkVersion, model_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, ModelMetadata]:
    """The metadata the version's project has recorded for these models."""
    return ModelMetadataRepository(session).for_models(version.benchmark.project_id, model_ids)


def fill_row(row: ModelResult, packed, parsed) -> None:
    """Write one model's packed vectors and upload metadata into its result row (one upload or a
    matrix upload: the same columns, the same rules)."""
    row.binary = packed.binary
    row.correct = packed.correct
    row.confidence = packed.confidence
    row.coverage = packed.coverage
    row.n_items = packed.n_items
    row.accuracy = packed.accuracy
    row.content_hash = packed.content_hash
    row.source_format = parsed.source_format
    row.metric = parsed.metric.replace("\x00", "")[:64] if parsed.metric else None
    row.samples_per_item = packed.samples_per_item
    row.within_variance = packed.within_variance
    row.sample_counts = packed.sample_counts
    row.config_fingerprint = packed.config_fingerprint
    row.eval_config = dict(parsed.eval_config) if packed.config_fingerprint else None
    row.item_costs = packed.item_costs
    row.cost_source = packed.cost_source


def lock_version_for_write(session: Session, version_id: uuid.UUID) -> BenchmarkVersion:
    """The version, locked shared for a write of its results until the request commits.

    A retire locks it exclusively, so the two are serialised: a version that was live when the
    request resolved it and is retired now was retired while this write was in flight, and the
    write is refused (409, nothing stored) instead of landing in a retired version."""
    version = get_version(session, version_id)
    was_live = version.retired_at is None
    BenchmarkVersionRepository(session).lock(version.id)
    if was_live and version.retired_at is not None:
        raise Conflict(
            f"version {version.version} of benchmark {version.benchmark.name!r} was retired "
            "while this write was in flight; nothing was stored (push again: the name now "
            "means its newest version that is not retired)",
            field="benchmark",
            message="retired during the request",
        )
    return version


def store_results(
    session: Session,
    version_id: uuid.UUID,
    model_ref: ModelCreate,
    parsed: ParsedResults,
    *,
    replace: bool = False,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> tuple[ModelResult, WriteStatus]:
    """Validate against the version's items and upsert the model's row (flush only).

    Identical results are a no-op; different results need ``replace`` (else 409); replaced
    results are archived for ``keep_for`` (:func:`restore_results` brings them back).
    """
    version = lock_version_for_write(session, version_id)
    index = item_index(version)
    packed = pack(parsed, item_positions(parsed, index), index.n_items)
    # Concurrent uploads for one model queue here: the second sees the first's committed row
    # (identical results: 200 unchanged) instead of losing a unique-constraint race (409).
    LanguageModelRepository(session).lock_name(model_ref.name)
    model = get_or_create_model(session, model_ref)
    set_metadata(session, version.benchmark.project_id, [(model, model_ref)])
    repo = ModelResultRepository(session)
    existing = repo.get_for(version.id, model.id)
    if existing is not None:
        if existing.content_hash == packed.content_hash:
            return existing, "unchanged"
        if not replace:
            raise Conflict(
                f"model {model.name!r} already has different results on this benchmark; "
                "to overwrite them: `benchslice push --replace` (API: ?replace=true)",
                field="replace",
                message="set to true to overwrite",
            )
        row, status = existing, "replaced"
        archive_results(
            session,
            repo.get_for(version.id, model.id, with_vectors=True),
            "replaced",
            keep_for=keep_for,
        )
        idempotency.invalidate(session, idempotency.results_resource(version.id, model.id))
    else:
        row, status = (
            ModelResult(benchmark_version_id=version.id, model_id=model.id, model=model),
            "created",
        )
    fill_row(row, packed, parsed)
    session.add(row)
    try:
        session.flush()
    except IntegrityError:  # a concurrent upload won the race; the request rolls back
        raise Conflict(f"concurrent upload for model {model.name!r}; retry") from None
    return row, status


def to_public(
    row: ModelResult, n_items_total: int, meta: ModelMetadata | None = None
) -> ModelResultPublic:
    """``meta``: the metadata of the row's project for the model (None: it has recorded none)."""
    return ModelResultPublic(
        version_id=row.benchmark_version_id,
        model=ModelPublic(
            id=row.model.id,
            name=row.model.name,
            params_b=meta.params_b if meta is not None else None,
            family=meta.family if meta is not None else None,
            tags=list(meta.tags or []) if meta is not None else [],
        ),
        n_items=row.n_items,
        coverage=row.n_items / n_items_total,
        accuracy=row.accuracy,
        binary=row.binary,
        has_confidence=(
            row.has_confidence
            if "confidence" in sa_inspect(row).unloaded
            else row.confidence is not None
        ),
        source_format=row.source_format,
        metric=row.metric,
        samples_per_item=row.samples_per_item,
        config_fingerprint=row.config_fingerprint,
        eval_config=row.eval_config,
        content_hash=row.content_hash,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def to_public_for(session: Session, row: ModelResult) -> ModelResultPublic:
    version = get_version(session, row.benchmark_version_id)
    meta = metadata_of(session, version, [row.model_id]).get(row.model_id)
    return to_public(row, version.n_items, meta)


def list_results(session: Session, version_id: uuid.UUID) -> list[ModelResultPublic]:
    version = get_version(session, version_id)
    rows = ModelResultRepository(session).summaries(version.id)
    meta = metadata_of(session, version, [r.model_id for r in rows])
    return [to_public(r, version.n_items, meta.get(r.model_id)) for r in rows]


def find_model(session: Session, model: str) -> LanguageModel | None:
    """A model by name or id."""
    models = LanguageModelRepository(session)
    found = models.get_by_name(model) if "\x00" not in model else None
    if found is None:
        try:
            found = models.get(uuid.UUID(model))
        except ValueError:
            found = None
    return found


def delete_results(
    session: Session,
    version_id: uuid.UUID,
    model: str,
    *,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> ModelResultArchive:
    """Delete a model's results on a version (``model``: its name or id); they are archived
    for ``keep_for`` and can be restored. Returns the archived copy."""
    version = lock_version_for_write(session, version_id)
    found = find_model(session, model)
    if found is not None:  # serialised with every other write of this model's results
        LanguageModelRepository(session).lock_name(found.name)
    repo = ModelResultRepository(session)
    row = repo.get_for(version.id, found.id, with_vectors=True) if found is not None else None
    if found is None or row is None:
        raise NotFound(f"model {model!r} has no results on benchmark {version_id}")
    copy = archive_results(session, row, "deleted", keep_for=keep_for)
    repo.delete_for(version.id, found.id)
    idempotency.invalidate(session, idempotency.results_resource(version.id, found.id))
    return copy


def restore_results(
    session: Session,
    version_id: uuid.UUID,
    model: str,
    *,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> tuple[ModelResult, ModelResultArchive, ModelResultArchive | None]:
    """Put back the newest replaced or deleted results of ``model`` (name or id) on a version;
    see :func:`restore_archived`."""
    version = lock_version_for_write(session, version_id)
    found = find_model(session, model)
    if found is None:
        raise NotFound(f"model {model!r} has no earlier results on benchmark {version_id}")
    # serialised with every other write of this model's results: what is read below (the
    # newest archived copy, the current row) is what the previous writer committed
    LanguageModelRepository(session).lock_name(found.name)
    restored = restore_archived(session, version.id, found.id, keep_for=keep_for)
    idempotency.invalidate(session, idempotency.results_resource(version.id, found.id))
    return restored


class Matrix(NamedTuple):
    """A benchmark version's results as arrays (rows = models sorted by name, or as requested).

    ``correct`` and ``confidence`` are float64 with NaN where ``coverage`` is False;
    ``confidence`` is None unless every model has it.
    """

    correct: np.ndarray
    confidence: np.ndarray | None
    coverage: np.ndarray
    model_names: np.ndarray
    item_ids: np.ndarray
    subtasks: np.ndarray


def _unpack_bits(blobs: Sequence[bytes], n_items: int) -> np.ndarray:
    packed = np.frombuffer(b"".join(list(blobs)), dtype=np.uint8).reshape(len(blobs), -1)
    return np.unpackbits(packed, axis=1, count=n_items)


def load_matrix(
    session: Session, benchmark_version_id: uuid.UUID, models: Sequence[str] | None = None
) -> Matrix:
    """Load a benchmark version's stored results into numpy (one query, vectorised decode).

    Parameters
    ----------
    session : Session
    benchmark_version_id : UUID
    models : sequence of str, optional
        Model names, in the row order wanted; default every model with results, by name.

    Returns
    -------
    Matrix
        ``(correct, confidence | None, coverage, model_names, item_ids, subtasks)``; unpacks as
        a tuple. Raises ``NotFound`` for an unknown version or model name.
    """
    version = get_version(session, benchmark_version_id)
    index = item_index(version)
    n = index.n_items
    rows = ModelResultRepository(session).vectors(version.id, models)
    names = np.array([r[0] for r in rows], dtype=str)
    if models is not None:
        wanted = np.asarray(list(models), dtype=str)
        missing = np.setdiff1d(wanted, names)
        if missing.size:
            raise NotFound(f"no results on this benchmark for model(s): {', '.join(missing[:10])}")
        order = np.argsort(names)
        perm = order[np.searchsorted(names, wanted, sorter=order)]
        rows = [rows[i] for i in perm]
        names = wanted
    m = len(rows)
    binary = np.fromiter((r[1] for r in rows), dtype=bool, count=m)
    if m == 0:
        correct = np.empty((0, n), dtype=np.float64)
    elif binary.all():
        correct = _unpack_bits([r[2] for r in rows], n).astype(np.float64)
    else:
        correct = np.empty((m, n), dtype=np.float64)
        idx = np.flatnonzero(binary)
        if idx.size:
            correct[idx] = _unpack_bits([rows[i][2] for i in idx], n)
        idx = np.flatnonzero(~binary)
        correct[idx] = np.frombuffer(b"".join(rows[i][2] for i in idx), dtype="<f4").reshape(-1, n)
    confidence = None
    if m and all(r[3] is not None for r in rows):
        packed = np.frombuffer(b"".join([r[3] for r in rows]), dtype="<f4").reshape(m, n)
        confidence = packed.astype(np.float64)
    coverage = np.ones((m, n), dtype=bool)
    partial = np.fromiter((r[4] is not None for r in rows), dtype=bool, count=m)
    if partial.any():
        idx = np.flatnonzero(partial)
        coverage[idx] = _unpack_bits([rows[i][4] for i in idx], n).astype(bool)
        correct[~coverage] = np.nan
        if confidence is not None:
            confidence[~coverage] = np.nan
    return Matrix(correct, confidence, coverage, names, index.item_ids, index.subtasks)


def export_npz(session: Session, benchmark_version_id: uuid.UUID) -> tuple[bytes, str]:
    """The version's matrix as an ``.npz`` (the layout ``benchslice mdad`` reads) and a filename.

    Keys: ``correct`` (models x items; uint8 0/1 when every row is 0/1 with full coverage,
    else float32 with NaN where not covered), ``coverage`` (uint8 mask), ``confidence``
    (float32, only when every model has it), ``item_ids``, ``subtasks``, ``models``,
    ``params_b`` (float32, NaN unknown), ``benchmark``, ``version``.
    """
    version = get_version(session, benchmark_version_id)
    mat = load_matrix(session, version.id)
    models = (
        LanguageModelRepository(session).get_by_names(mat.model_names.tolist())
        if mat.model_names.size
        else []
    )
    meta = metadata_of(session, version, [m.id for m in models])  # this project's sizes only
    params = {m.name: meta[m.id].params_b for m in models if m.id in meta}
    full = bool(mat.coverage.all())
    finite = np.nan_to_num(mat.correct, nan=0.0)
    is_binary = full and bool(np.all((finite == 0.0) | (finite == 1.0)))
    arrays = {
        "correct": mat.correct.astype(np.uint8) if is_binary else mat.correct.astype(np.float32),
        "coverage": mat.coverage.astype(np.uint8),
        "item_ids": mat.item_ids,
        "subtasks": mat.subtasks,
        "models": mat.model_names,
        "params_b": np.array(
            [np.nan if params.get(n) is None else params[n] for n in mat.model_names.tolist()],
            dtype=np.float32,
        ),
        "benchmark": np.array(version.benchmark.name),
        "version": np.array(version.version, dtype=np.int32),
    }
    if mat.confidence is not None:
        arrays["confidence"] = mat.confidence.astype(np.float32)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    filename = f"{version.benchmark.name}-v{version.version}.npz".replace("/", "_")
    return buf.getvalue(), filename


# --- undo: replaced or deleted results are archived and can be restored ---------------------
#
# Replacing or deleting a model's results first copies the current row, byte for byte, into
# ``model_result_archive``. ``restore_archived`` puts the newest archived copy back (the current results,
# if any, are archived in turn, so a restore can itself be undone) with a fresh ``updated_at``:
# the version's results stamp changes, so cached matrices, verdicts and leaderboards recompute.
# Archived copies older than the retention period (``RESULTS_RETENTION_DAYS``) are purged
# whenever another one is written.


def archive_results(
    session: Session, row: ModelResult, reason: str, *, keep_for: timedelta = DEFAULT_RETENTION
) -> ModelResultArchive:
    """Copy ``row`` into the archive (flush only) and purge copies past ``keep_for``."""
    now = utcnow()
    repo = ModelResultArchiveRepository(session)
    repo.purge_before(now - keep_for)
    copy = ModelResultArchive(
        benchmark_version_id=row.benchmark_version_id,
        model_id=row.model_id,
        reason=reason,
        archived_at=now,
        result_id=row.id,
        result_created_at=row.created_at,
        **{c: getattr(row, c) for c in ARCHIVED_COLUMNS},
    )
    return repo.add(copy)


def latest_archived(
    session: Session, version_id: uuid.UUID, model_id: uuid.UUID
) -> ModelResultArchive:
    found = ModelResultArchiveRepository(session).latest(version_id, model_id)
    if found is None:
        raise NotFound("no earlier results of this model on this benchmark to restore")
    return found


def restore_archived(
    session: Session,
    version_id: uuid.UUID,
    model_id: uuid.UUID,
    *,
    keep_for: timedelta = DEFAULT_RETENTION,
) -> tuple[ModelResult, ModelResultArchive, ModelResultArchive | None]:
    """Bring back the newest archived results of a model on a version (flush only).

    Returns ``(restored row, the archived copy it came from, the archive of the results it
    replaced or None)``; the copy used is removed from the archive.
    """
    ModelResultArchiveRepository(session).purge_before(utcnow() - keep_for)
    copy = latest_archived(session, version_id, model_id)
    results = ModelResultRepository(session)
    current = results.get_for(version_id, model_id, with_vectors=True)
    displaced = (
        archive_results(session, current, "replaced", keep_for=keep_for) if current else None
    )
    row = current or ModelResult(
        id=copy.result_id,
        benchmark_version_id=version_id,
        model_id=model_id,
        created_at=copy.result_created_at,
    )
    for column in ARCHIVED_COLUMNS:
        setattr(row, column, getattr(copy, column))
    row.updated_at = utcnow()
    session.add(row)
    session.delete(copy)
    session.flush()
    return row, copy, displaced
