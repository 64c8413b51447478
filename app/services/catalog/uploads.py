"""Turn an uploaded body (JSON, lm-eval JSONL, CSV, parquet, or multipart files) into parsed results.

The route hands in the raw parts; this picks the parser by media type (or file extension),
maps parser errors to 422 problems naming the line and field, and merges several files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from app.errors import DomainError, FieldIssue, InvalidInput
from app.ingest import (
    AmbiguousChoiceError,
    IngestError,
    ParsedResults,
    is_lm_eval_results,
    parse_columnar,
    parse_csv,
    parse_keyed,
    parse_leaderboard_details,
    parse_lm_eval_config,
    parse_lm_eval_samples,
)
from app.ingest.corpus_metrics import refuse_corpus_metric
from app.ingest.logs.archive import BoundedZip, is_zip
from app.ingest.logs.eee import is_eee_instances, parse_eee_instances
from app.ingest.logs.helm import is_helm_run_spec, is_helm_stats, parse_helm_run
from app.ingest.logs.inspect import is_inspect_eval, is_inspect_json, parse_inspect_log
from app.ingest.logs.lighteval import (
    is_lighteval_details,
    parse_lighteval_details,
    select_details,
)
from app.ingest.types import ItemCosts
from app.schemas.results import ModelCreate, ResultsCreate

JSON_TYPES = frozenset({"application/json"})
NDJSON_TYPES = frozenset(
    {
        "application/x-ndjson",
        "application/jsonl",
        "application/json-lines",
        "application/jsonlines",
        "application/x-jsonlines",
    }
)
CSV_TYPES = frozenset({"text/csv", "application/csv"})
PARQUET_TYPES = frozenset(
    {"application/vnd.apache.parquet", "application/x-parquet", "application/parquet"}
)
MULTIPART = "multipart/form-data"
RESULT_TYPES = JSON_TYPES | NDJSON_TYPES | CSV_TYPES | PARQUET_TYPES | {MULTIPART}
SAMPLE_TYPES = NDJSON_TYPES | PARQUET_TYPES | {MULTIPART}
_EXTENSIONS = {
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".csv": "text/csv",
    ".parquet": "application/vnd.apache.parquet",
}
# ``?format=``: which parser reads the upload; ``auto`` tells Inspect logs by their content and
# the rest by media type / file extension, as before.
FORMATS = ("auto", "inspect", "every-eval-ever", "helm", "lighteval", "lm-eval", "csv", "json")


class UnsupportedMediaType(DomainError):
    status_code = 415
    title = "Unsupported media type"
    type_slug = "unsupported-media-type"


# Parse options the upload routes take (as query parameters where a route declares them): a
# file-level error about one of them names that option, not a place in the body.
OPTION_FIELDS = frozenset({"metric", "filter", "item_key", "format"})


def ingest_error(exc: IngestError, *, file: int | None = None) -> InvalidInput:
    """An IngestError as a 422 whose ``errors`` name the option, or the file, line and field at
    fault in the uploaded content."""
    errors = []
    in_file = f"file {file}: " if file is not None else ""
    for e in exc.errors:
        if e.line is None and e.field in OPTION_FIELDS:
            errors.append(FieldIssue((e.field,), in_file + e.message, location="query"))
            continue
        path: list[str | int] = []
        if file is not None:
            path += ["file", file]
        if e.line is not None:
            path += ["line", e.line]
        if e.field is not None:
            path.append(e.field)
        where = f"line {e.line}: " if e.line is not None else ""
        # content of the upload: its field names may shadow a query parameter (task, model)
        errors.append(FieldIssue(tuple(path), in_file + where + e.message, location="body"))
    detail = str(exc) if file is None else f"file {file}: {exc}"
    return InvalidInput(detail, errors=errors, errors_total=exc.total)


@dataclass(frozen=True)
class UploadPart:
    """One uploaded file (or the whole body): its media type, bytes and file name."""

    media_type: str
    data: bytes
    filename: str | None = None


@dataclass(frozen=True)
class ParseOptions:
    metric: str | None = None
    filter: str | None = None
    task: str | None = None
    item_key: str = "doc_hash"
    subject_field: str | None = None
    format: str = "auto"


def log_format(part: UploadPart, fmt: str = "auto") -> str | None:
    """``"inspect"`` / ``"every-eval-ever"`` when the part is (or is forced to be read as) an
    Inspect log or Every Eval Ever instances, else None (the media type decides)."""
    if fmt in ("inspect", "every-eval-ever"):
        return fmt
    if fmt != "auto":
        return None
    if is_eee_instances(part.data):
        return "every-eval-ever"
    name = (part.filename or "").lower()
    # the name first: telling a zip by its members costs a read of its central directory
    if (name.endswith(".eval") and part.data[:2] == b"PK") or is_inspect_eval(part.data):
        return "inspect"
    if is_inspect_json(part.data):
        return "inspect"
    return None


def _forced_type(part: UploadPart, fmt: str) -> str | None:
    """The media type ``?format=`` imposes (``None``: go by the part's own type)."""
    if fmt == "csv":
        return "text/csv"
    if fmt == "json":
        return "application/json"
    if fmt == "lm-eval":
        return "application/vnd.apache.parquet" if part.data[:4] == b"PAR1" else NDJSON_DEFAULT
    return None


NDJSON_DEFAULT = "application/x-ndjson"


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def resolve_media_type(part: UploadPart, allowed: frozenset[str]) -> str:
    mt = part.media_type
    if (
        mt in ("", "application/octet-stream", "text/plain") or mt not in allowed
    ) and part.filename:
        for ext, guessed in _EXTENSIONS.items():
            if part.filename.lower().endswith(ext):
                mt = guessed
                break
    if mt not in allowed:
        raise UnsupportedMediaType(
            f"unsupported content type {part.media_type or '(none)'!r}"
            + (f" for file {part.filename!r}" if part.filename else "")
            + f"; use one of: {', '.join(sorted(allowed))}"
        )
    return mt


def _json_results(data: bytes) -> tuple[ParsedResults, ModelCreate]:
    try:
        body = ResultsCreate.model_validate_json(data)
    except ValidationError as exc:
        # the body's own names (``model``) shadow ``?model=``: say where they are
        errors = [FieldIssue(tuple(e["loc"]), e["msg"], location="body") for e in exc.errors()[:50]]
        raise InvalidInput(f"{exc.error_count()} invalid field(s)", errors=errors) from None
    if body.results is not None:
        plain = {
            k: (v if isinstance(v, float) else v.model_dump(exclude_none=True))
            for k, v in body.results.items()
        }
        parsed = parse_keyed(plain, samples=body.samples)
    else:
        parsed = parse_columnar(
            body.correct,
            body.confidence,
            body.item_ids,
            samples=body.samples,
            within_variance=body.within_variance,
            costs=body.costs.model_dump() if body.costs is not None else None,
        )
    return parsed, body.model_ref


def parse_samples_part(part: UploadPart, mt: str, opts: ParseOptions) -> ParsedResults:
    if mt in PARQUET_TYPES:
        return parse_leaderboard_details(
            part.data,
            fmt="parquet",
            metric=opts.metric,
            filter=opts.filter,
            task=opts.task,
            filename=part.filename,
            item_key=opts.item_key,
            subject_field=opts.subject_field,
        )
    return parse_lm_eval_samples(
        part.data,
        metric=opts.metric,
        filter=opts.filter,
        task=opts.task,
        filename=part.filename,
        item_key=opts.item_key,
        subject_field=opts.subject_field,
    )


def _parse_part(part: UploadPart, opts: ParseOptions) -> tuple[ParsedResults, ModelCreate | None]:
    if not part.data.strip():
        raise InvalidInput("empty upload", field=(), message="no content")
    fmt = log_format(part, opts.format)
    if fmt == "inspect":
        return parse_inspect_log(part.data, metric=opts.metric, filename=part.filename), None
    if fmt == "every-eval-ever":
        return parse_eee_instances(part.data, metric=opts.metric, filename=part.filename), None
    mt = _forced_type(part, opts.format) or resolve_media_type(part, RESULT_TYPES - {MULTIPART})
    if mt in JSON_TYPES:
        return _json_results(part.data)
    if mt in CSV_TYPES:
        return parse_csv(part.data), None
    return parse_samples_part(part, mt, opts), None


_RESULTS_JSON_MARKERS = (b'"configs"', b'"n-shot"', b'"versions"', b'"task_hashes"')


def lm_eval_results_json(part: UploadPart) -> dict[str, Any] | None:
    """The part as an lm-eval results JSON (it carries the evaluation configuration), else None."""
    if resolve_media_type(part, RESULT_TYPES - {MULTIPART}) not in JSON_TYPES:
        return None
    if not any(m in part.data for m in _RESULTS_JSON_MARKERS):
        return None
    try:
        obj = orjson.loads(part.data)
    except orjson.JSONDecodeError:
        return None  # the results-body parser words the error
    return obj if is_lm_eval_results(obj) else None


def merge(parsed: Sequence[ParsedResults]) -> ParsedResults:
    """Concatenate several files' results (e.g. one lm-eval sample log per subtask)."""
    if len(parsed) == 1:
        return parsed[0]
    ks = sorted({p.k for p in parsed})
    if len(ks) > 1:
        raise InvalidInput(
            f"the files have different samples per item: {ks}",
            field="samples",
            message="every file needs the same number of samples per item (repeats)",
        )
    if any(p.item_ids is None for p in parsed):
        raise InvalidInput(
            "several files must each name their items",
            field="item_ids",
            message="required",
        )
    ids = np.concatenate([p.item_ids for p in parsed])
    uniq, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise InvalidInput(
            f"item {str(uniq[counts > 1][0])!r} appears in several files",
            field="item_ids",
            message="duplicate item id",
        )
    binary = all(p.binary for p in parsed)
    correct = np.concatenate([p.correct.astype(np.uint8 if binary else np.float32) for p in parsed])
    conf = None
    if all(p.confidence is not None for p in parsed):
        conf = np.concatenate([p.confidence for p in parsed])
    metrics = sorted({p.metric for p in parsed if p.metric})
    filters = {p.filter for p in parsed}
    within = None
    if all(p.within_variance is not None for p in parsed):
        within = np.concatenate([p.within_variance for p in parsed])
    counts = None
    if any(p.sample_counts is not None for p in parsed):
        counts = np.concatenate(
            [
                p.sample_counts
                if p.sample_counts is not None
                else np.full(p.n_items, p.k, dtype=np.int32)
                for p in parsed
            ]
        )
    return ParsedResults(
        item_ids=ids,
        correct=correct,
        confidence=conf,
        source_format=parsed[0].source_format,
        metric=",".join(metrics) or None,
        filter=filters.pop() if len(filters) == 1 else None,
        samples=parsed[0].samples,
        within_variance=within,
        sample_counts=counts,
        costs=merge_costs(parsed),
        model=parsed[0].model,
        task=parsed[0].task if len({p.task for p in parsed}) == 1 else None,
    )


def merge_costs(parsed: Sequence[ParsedResults]) -> ItemCosts | None:
    """The files' per-item costs end to end (NaN where a file reports none)."""
    if all(p.costs is None for p in parsed):
        return None
    fields = {}
    for name in ("input_tokens", "output_tokens", "seconds", "usd"):
        columns = [getattr(p.costs, name) if p.costs is not None else None for p in parsed]
        if all(c is None for c in columns):
            fields[name] = None
            continue
        fields[name] = np.concatenate(
            [
                c if c is not None else np.full(p.n_items, np.nan)
                for c, p in zip(columns, parsed, strict=True)
            ]
        )
    sources = dict.fromkeys(p.costs.source for p in parsed if p.costs is not None)
    return ItemCosts(**fields, source="; ".join(sources))


def _log_model(results: Sequence[ParsedResults], single: bool) -> ModelCreate | None:
    """The one model the logs name (Inspect ``eval.model``); several models are refused."""
    named = [(k, p.model) for k, p in enumerate(results, start=1) if p.model]
    models = dict.fromkeys(m for _, m in named)
    if len(models) > 1:
        k, other = next((k, m) for k, m in named if m != named[0][1])
        raise InvalidInput(
            f"the logs are of several models ({', '.join(models)}): upload one model's logs",
            field=("file", k, "eval.model") if not single else ("eval", "model"),
            message=f"model {other!r} differs from {named[0][1]!r} (file {named[0][0]})",
        )
    if not models:
        return None
    name = next(iter(models))
    try:
        return ModelCreate(name=name)
    except ValidationError as exc:
        raise InvalidInput(
            f"the log's model name {name!r} is not a valid model name",
            field=("eval", "model"),
            message=exc.errors()[0]["msg"],
        ) from None


def with_config(
    merged: ParsedResults, parts: Sequence[ParsedResults], configs: Sequence[tuple[int, dict]]
) -> ParsedResults:
    """Attach the evaluation configuration of the upload's one lm-eval results JSON."""
    if not configs:
        return merged
    if len(configs) > 1:
        raise InvalidInput(
            f"{len(configs)} lm-eval results JSON files in one upload",
            field="file",
            message="give at most one results_*.json per upload",
        )
    k, obj = configs[0]
    tasks = [p.task for p in parts if p.task]
    try:
        cfg = parse_lm_eval_config(obj, tasks=tasks, metric=merged.metric, filter=merged.filter)
    except IngestError as exc:
        raise ingest_error(exc, file=k) from None
    return replace(merged, eval_config=cfg or None)


def expand_archives(parts: Sequence[UploadPart]) -> list[UploadPart]:
    """A ``.zip`` part that is not an Inspect log, replaced by its files (bounded inflation, in
    name order; folders and macOS metadata left out), so a zipped output folder uploads like
    its files."""
    out: list[UploadPart] = []
    for k, part in enumerate(parts, start=1):
        zipped = (part.filename or "").lower().endswith(".zip") or part.media_type in (
            "application/zip",
            "application/x-zip-compressed",
        )
        if not (zipped and is_zip(part.data)) or is_inspect_eval(part.data):
            out.append(part)
            continue
        try:
            archive = BoundedZip(part.data)
            names = sorted(
                n
                for n in archive.names()
                if not n.endswith("/")
                and "__MACOSX" not in n
                and not n.rsplit("/", 1)[-1].startswith(".")
            )
            members = [UploadPart("", archive.read(n), n) for n in names]
        except IngestError as exc:
            raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
        if not members:
            raise InvalidInput("the zip holds no file", field="file", message="empty archive")
        out.extend(members)
    return out


def helm_runs(parts: Sequence[UploadPart], fmt: str = "auto") -> dict[int, int | None]:
    """HELM runs in the upload: 1-based index of each ``per_instance_stats.json`` part -> index
    of its ``run_spec.json`` (the one in the same folder, or the only one), or None."""
    if fmt not in ("auto", "helm"):
        return {}
    stats = [k for k, p in enumerate(parts, start=1) if is_helm_stats(p.data)]
    specs = [k for k, p in enumerate(parts, start=1) if is_helm_run_spec(p.data)]

    def folder(k: int) -> str:
        name = parts[k - 1].filename or ""
        return name.rsplit("/", 1)[0] if "/" in name else ""

    pairs: dict[int, int | None] = {}
    for k in stats:
        same = [j for j in specs if folder(j) == folder(k)]
        pairs[k] = (
            same[0] if len(same) == 1 else (specs[0] if len(specs) == len(stats) == 1 else None)
        )
    return pairs


def lighteval_parts(parts: Sequence[UploadPart], fmt: str = "auto") -> tuple[set[int], set[int]]:
    """lighteval details in the upload (1-based part indices): those read (its model's latest
    run) and those left out (older runs). Details of several models are a 422."""
    if fmt not in ("auto", "lighteval"):
        return set(), set()
    found = [
        k
        for k, p in enumerate(parts, start=1)
        if fmt == "lighteval" or is_lighteval_details(p.data, p.filename)
    ]
    try:
        keep, _ = select_details([parts[k - 1].filename for k in found], one_model=True)
    except IngestError as exc:
        raise ingest_error(exc) from None
    read = {found[i] for i in keep}
    return read, set(found) - read


def _lighteval(part: UploadPart, metric: str | None) -> ParsedResults:
    parsed = parse_lighteval_details(part.data, metric=metric, filename=part.filename)
    refuse_corpus_metric(parsed.metric)
    return parsed


def parse_results_upload(
    parts: Sequence[UploadPart], opts: ParseOptions, *, model: ModelCreate | None
) -> tuple[ParsedResults, ModelCreate]:
    """Parse one model's results from the uploaded parts; the model comes from the JSON body
    or from ``model`` (query/form)."""
    if not parts:
        raise InvalidInput("empty upload", field=(), message="no file")
    results: list[ParsedResults] = []
    configs: list[tuple[int, dict]] = []
    body_model: ModelCreate | None = None
    helm = helm_runs(parts, opts.format)
    specs = {j for j in helm.values() if j is not None}
    details, older = lighteval_parts(parts, opts.format)
    for k, part in enumerate(parts, start=1):
        if k in specs or k in older:
            continue  # read with its run's per_instance_stats.json; an older lighteval run
        if k in details:
            try:
                results.append(_lighteval(part, opts.metric))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        if k in helm:
            spec = parts[helm[k] - 1].data if helm[k] is not None else None
            try:
                results.append(parse_helm_run(part.data, spec, metric=opts.metric))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        obj = None if log_format(part, opts.format) else lm_eval_results_json(part)
        if obj is not None:
            configs.append((k, obj))
            continue
        try:
            parsed, ref = _parse_part(part, opts)
            refuse_corpus_metric(parsed.metric)  # whatever parser produced it (issue 35)
        except IngestError as exc:
            raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
        results.append(parsed)
        body_model = body_model or ref
    if not results:
        raise InvalidInput(
            "an lm-eval results JSON has no per-item results: upload the sample logs with it",
            field="file",
            message="add the samples_*.jsonl files",
        )
    ref = body_model or model or _log_model(results, len(parts) == 1)
    if model is not None:
        _log_model(results, len(parts) == 1)  # several models in the logs: refused even so
    if ref is None:
        raise InvalidInput(
            "which model are these results for?",
            field="model",
            message="required for non-JSON uploads",
        )
    return with_config(merge(results), results, configs), ref


def parse_sample_logs(parts: Sequence[UploadPart], opts: ParseOptions) -> list[ParsedResults]:
    """Parse sample logs for benchmark creation: the metric/filter choice does not matter for
    the items, so an ambiguous file uses its first metric and filter."""
    if not parts:
        raise InvalidInput("empty upload", field=(), message="no file")
    out = []
    helm = helm_runs(parts, opts.format)
    specs = {j for j in helm.values() if j is not None}
    details, older = lighteval_parts(parts, opts.format)
    for k, part in enumerate(parts, start=1):
        if k in specs or k in older:
            continue
        if k in details:
            try:
                try:
                    out.append(_lighteval(part, opts.metric))
                except AmbiguousChoiceError as amb:
                    out.append(_lighteval(part, amb.choices["metric"][0]))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        if k in helm:
            spec = parts[helm[k] - 1].data if helm[k] is not None else None
            try:
                try:
                    out.append(parse_helm_run(part.data, spec, metric=opts.metric))
                except AmbiguousChoiceError as amb:
                    out.append(parse_helm_run(part.data, spec, metric=amb.choices["metric"][0]))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        if log_format(part, opts.format) == "every-eval-ever":
            try:
                try:
                    out.append(parse_eee_instances(part.data, metric=opts.metric))
                except AmbiguousChoiceError as amb:
                    out.append(parse_eee_instances(part.data, metric=amb.choices["metric"][0]))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        if log_format(part, opts.format) == "inspect":
            try:
                try:
                    out.append(parse_inspect_log(part.data, metric=opts.metric))
                except AmbiguousChoiceError as amb:
                    out.append(parse_inspect_log(part.data, metric=amb.choices["metric"][0]))
            except IngestError as exc:
                raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
            continue
        mt = resolve_media_type(part, SAMPLE_TYPES - {MULTIPART})
        try:
            try:
                out.append(parse_samples_part(part, mt, opts))
            except AmbiguousChoiceError as amb:
                first = ParseOptions(
                    metric=opts.metric or amb.choices.get("metric", [None])[0],
                    filter=opts.filter or amb.choices.get("filter", [None])[0],
                    task=opts.task,
                    item_key=opts.item_key,
                    subject_field=opts.subject_field,
                )
                out.append(parse_samples_part(part, mt, first))
        except IngestError as exc:
            raise ingest_error(exc, file=k if len(parts) > 1 else None) from None
    return out
