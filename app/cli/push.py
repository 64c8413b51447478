"""``benchslice push``: upload results from lm-eval output, leaderboard details, CSV or an .npz."""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import re
import statistics
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace as with_files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from app.cli.common import (
    BENCHMARK_HELP,
    ApiKeyOpt,
    JsonOpt,
    Source,
    UrlOpt,
    api,
    ask_choice,
    details_name,
    err,
    fail,
    find_source,
    pct,
    print_json,
    print_table,
    split_list,
    with_choices,
)

MATRIX_CELLS = 4_000_000  # values per matrix request (well inside the 64 MiB body limit)

if TYPE_CHECKING:
    from app.client import Client, UploadReply
    from app.schemas.benchmarks import BenchmarkPublic


def _ensure_benchmark(
    client: Client,
    name: str,
    create: bool,
    source: Source,
    create_items: Any,
    project: str | None = None,
) -> tuple[BenchmarkPublic, bool]:
    """The version ``name`` (a name, ``name@vN`` or version id) means; with ``create``, a name
    that does not exist yet is created from the source's items (in ``project``). An existing
    benchmark of another project than ``project`` is an error."""
    from app.client import BenchsliceError
    from app.schemas.benchmarks import BenchmarkPublic

    try:
        found = BenchmarkPublic.model_validate(client.get_benchmark(name).model_dump())
    except BenchsliceError as exc:
        if exc.status != 404:
            raise
        if not create:
            raise BenchsliceError(
                exc.title,
                status=exc.status,
                detail=f"{exc.detail} (create it with `benchslice push --create`)",
                type=exc.type,
                errors=exc.errors,
                instance=exc.instance,
            ) from None
    else:
        if project is not None and found.project != project:
            raise fail(
                f"benchmark {found.name!r} belongs to project {found.project!r}, not {project!r}"
            )
        return found, False
    if not _plain_name(name):
        raise fail(f"--create needs a plain benchmark name, not {name!r}")
    if source.kind in ("samples", "inspect", "every-eval-ever", "helm", "lighteval"):
        files = source.named()
        return client.create_benchmark_from_samples(name, files, project=project), True
    return client.create_benchmark(name, create_items(), project=project), True


def _plain_name(ref: str) -> bool:
    """Whether ``ref`` can name a new benchmark: neither a version id nor ``name@vN``."""
    try:
        uuid.UUID(ref)
    except ValueError:
        return re.fullmatch(r".+@v[1-9][0-9]*", ref) is None
    return False


def _csv_items(path: Path) -> list[str]:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if rows and rows[0] and rows[0][0].strip().lower() in ("item_id", "id", "item"):
        rows = rows[1:]
    return [r[0].strip() for r in rows if r and r[0].strip()]


def _json_items(path: Path) -> list[str]:
    body = json.loads(path.read_text())
    if isinstance(body.get("results"), dict):
        return list(body["results"])
    if isinstance(body.get("item_ids"), list):
        return [str(i) for i in body["item_ids"]]
    raise fail(
        f"{path.name} has no item ids ('results' keys or 'item_ids'): cannot --create from it"
    )


def _npz_rows(path: Path, include: list[str] | None, exclude: list[str] | None) -> Any:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read {path}: {exc}") from None
    if "correct" not in arrays:
        raise fail(f"{path.name} has no 'correct' array (models x items)")
    correct = arrays["correct"]
    n_models, n_items = correct.shape
    names = [str(m) for m in arrays.get("models", [f"model_{k}" for k in range(n_models)])]
    keep = [
        k
        for k, name in enumerate(names)
        if (include is None or any(fnmatch.fnmatchcase(name, p) for p in include))
        and not any(fnmatch.fnmatchcase(name, p) for p in exclude or ())
    ]
    if not keep:
        raise fail("--models/--exclude leave no model to push")
    ids = [str(i) for i in arrays.get("item_ids", range(n_items))]
    subtasks = arrays.get("subtasks")
    items = [
        {"id": i} if subtasks is None else {"id": i, "subtask": str(s)}
        for i, s in zip(ids, subtasks if subtasks is not None else ids, strict=True)
    ]
    return arrays, names, keep, items


def _push_npz(
    client: Client,
    name: str,
    create: bool,
    source: Source,
    include: list[str] | None,
    exclude: list[str] | None,
    replace: bool,
    project: str | None = None,
) -> tuple[BenchmarkPublic, bool, list[UploadReply]]:
    import numpy as np

    arrays, names, keep, items = _npz_rows(source.files[0], include, exclude)
    bench, created = _ensure_benchmark(client, name, create, source, lambda: items, project)
    before = (
        {}
        if created
        else {m.model.name: m.content_hash for m in client.list_models(bench.id).items}
    )
    from app.client import UploadReply

    correct = arrays["correct"]
    confidence = arrays.get("confidence")
    params_b = arrays.get("params_b")
    ids = np.asarray([it["id"] for it in items])
    step = max(1, MATRIX_CELLS // max(1, correct.shape[1]))  # request bodies of bounded size
    rows = np.asarray(keep)
    with _Bar(f"pushing {len(keep)} models", len(keep)) as bar:
        for start in range(0, rows.size, step):
            chunk = rows[start : start + step]
            arrays_out = {"correct": correct[chunk], "models": np.asarray(names)[chunk]}
            arrays_out["item_ids"] = ids
            if confidence is not None:
                arrays_out["confidence"] = confidence[chunk]
            if params_b is not None:
                arrays_out["params_b"] = np.asarray(params_b, dtype=float)[chunk]
            buf = io.BytesIO()
            np.savez_compressed(buf, **arrays_out)
            client.upload_matrix(bench.id, buf.getvalue(), replace=replace)
            for _ in chunk:
                bar.advance()
    after = {m.model.name: m for m in client.list_models(bench.id).items}
    replies = []
    for k in keep:
        row = after[names[k]]
        old = before.get(names[k])
        status = (
            "created" if old is None else "unchanged" if old == row.content_hash else "replaced"
        )
        replies.append(UploadReply(**row.model_dump(), status=status))
    return bench, created, replies


def _push_lighteval(
    client: Client,
    name: str,
    create: bool,
    source: Source,
    model: str | None,
    opts: dict[str, Any],
    interactive: bool,
    project: str | None = None,
) -> tuple[BenchmarkPublic, bool, list[UploadReply]]:
    """lighteval details, one upload per model (the model is the path's ``details/<model>/``;
    with ``--create`` the benchmark's items are the first model's docs)."""
    from app.ingest.logs.lighteval import details_path

    groups: dict[str | None, list[Path]] = {}
    for f in source.files:
        groups.setdefault(details_path(details_name(f)).model, []).append(f)
    if model is not None and len(groups) > 1:
        raise fail(
            f"--model names one model; the details are of {len(groups)}: "
            + ", ".join(str(m) for m in groups)
            + " (push without --model, or one model's folder)"
        )
    if model is None and None in groups:
        raise fail(
            f"which model is {groups[None][0].name} of? pass --model (no "
            "details/<model>/<date>/ folders around it)"
        )
    opts = {**opts, "metric": _settle_metric(source, opts["metric"], interactive, create)}
    first = with_files(source, files=next(iter(groups.values())))
    bench, created = _ensure_benchmark(client, name, create, first, None, project)
    replies = [
        client.upload_results_file(
            bench.id, with_files(source, files=files).named(), model=model, **opts
        )
        for files in groups.values()
    ]
    return bench, created, replies


def _choose_metric(
    files: list[Path],
    parse: Callable[[Path, str | None], None],
    metric: str | None,
    interactive: bool,
    create: bool,
    *,
    accumulate: bool = False,
) -> str | None:
    """Parse every file with ``parse(file, metric)`` until the metric is settled: a file scored
    several ways asks on a terminal (``accumulate``: the answer joins a comma-separated list,
    each task taking the first it has), else exits 2 listing the choices; with ``create`` a file
    the parser refuses fails here, before anything is created."""
    from app.ingest.types import AmbiguousChoiceError, IngestError

    hint = " (a comma-separated list: each task takes the first it has; " if accumulate else " ("
    for f in files:
        while True:
            try:
                parse(f, metric)
                break
            except AmbiguousChoiceError as exc:
                choices = exc.choices["metric"]
                if not interactive:
                    raise fail(
                        f"{f.name} is scored several ways; pass --metric with one of: "
                        + ", ".join(choices)
                        + hint
                        + "nothing was created or uploaded)"
                    ) from None
                chosen = ask_choice("metric", choices)
                metric = f"{metric},{chosen}" if accumulate and metric else chosen
            except (IngestError, OSError) as exc:
                if create:
                    raise fail(f"{f.name}: {exc} (nothing was created or uploaded)") from None
                break  # the server words the error
    return metric


def _settle_metric(
    source: Source, metric: str | None, interactive: bool, create: bool
) -> str | None:
    """The metric of lighteval details (a comma-separated list: each task takes the first it
    has), settled by :func:`_choose_metric`."""
    from app.ingest.logs.lighteval import parse_lighteval_details

    def parse(f: Path, chosen: str | None) -> None:
        parse_lighteval_details(f.read_bytes(), metric=chosen, filename=details_name(f))

    return _choose_metric(list(source.files), parse, metric, interactive, create, accumulate=True)


class _Bar:
    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self._bar: Any = None

    def __enter__(self) -> _Bar:
        if sys.stderr.isatty() and self.total > 1:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def push(
    path: Path = typer.Argument(
        ...,
        exists=True,
        help="lm-eval output dir or samples_*.jsonl, leaderboard details (.jsonl/.parquet), "
        "CSV item_id,correct[,confidence], results .json, an .npz matrix, Inspect AI logs "
        "(.eval / JSON, or their log dir), HELM runs, lighteval details (its output dir: "
        "each model's latest run), or a .zip of any of these",
        show_default=False,
    ),
    benchmark: str = typer.Option(
        ..., "--benchmark", "-b", help=f"{BENCHMARK_HELP} (a name with --create)"
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model name (not for .npz/.json; read from lm-eval's results_*.json or the Inspect "
        "log's eval.model when omitted)",
    ),
    create: bool = typer.Option(
        False, "--create", help="Create the benchmark from PATH's items when it does not exist"
    ),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="lm-eval metric giving correctness, e.g. acc_norm (for Inspect logs: the scorer)",
    ),
    format_: str = typer.Option(
        "auto",
        "--format",
        help="auto | lm-eval | inspect | every-eval-ever | helm | lighteval | csv | json | npz "
        "(auto: by content and extension)",
    ),
    filter_: str | None = typer.Option(
        None, "--filter", help="lm-eval filter, e.g. strict-match (when the file has several)"
    ),
    task: str | None = typer.Option(None, "--task", help="lm-eval task name, if not in the file"),
    item_key: str = typer.Option("doc_hash", "--item-key", help="doc_hash | doc_id"),
    models: str | None = typer.Option(
        None, "--models", help=".npz only: comma-separated names or globs to push"
    ),
    exclude: str | None = typer.Option(
        None, "--exclude", help=".npz only: comma-separated names or globs to leave out"
    ),
    params_b: float | None = typer.Option(None, "--params-b", help="Model size, billions"),
    replace: bool = typer.Option(
        False, "--replace", help="Overwrite different results already stored for the model"
    ),
    no_input: bool = typer.Option(
        False, "--no-input", help="Never prompt (also when stdin is not a terminal)"
    ),
    project: str | None = typer.Option(
        None,
        "--project",
        help="With --create: the project that owns a new benchmark (default: the key's only "
        "writable project); an existing benchmark must belong to it",
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Upload a model's per-item results (or a whole .npz matrix) to a benchmark.

    Sample files are found in an lm-eval output directory (the newest `samples_<task>_*.jsonl` of
    each task). The upload carries an Idempotency-Key derived from its content, so pushing again
    is a no-op. When the results hold several metrics and none is given, a terminal asks; in CI
    the command fails (exit 2) listing the choices.

    Examples:

        benchslice push --create --benchmark gpqa ../shared/data/gpqa.npz
        benchslice push --benchmark arc_easy --model org/my-7b --metric acc_norm out/org__my-7b/
    """
    if item_key not in ("doc_hash", "doc_id"):
        raise typer.BadParameter("expected doc_hash or doc_id", param_hint="--item-key")
    source = find_source(path, format_)
    include, excluded = split_list(models), split_list(exclude)
    if (include or excluded) and source.kind != "npz":
        raise typer.BadParameter("only for .npz matrices", param_hint="--models/--exclude")
    with api(url, api_key) as client:
        if source.kind == "npz":
            bench, created, replies = _push_npz(
                client, benchmark, create, source, include, excluded, replace, project
            )
        elif source.kind == "lighteval":
            opts = {"metric": metric, "params_b": params_b, "replace": replace}
            interactive = not no_input and sys.stdin.isatty()
            bench, created, replies = _push_lighteval(
                client,
                benchmark,
                create,
                source,
                model,
                {**opts, "format": "lighteval"},
                interactive,
                project,
            )
        else:
            name = model or source.model_hint
            if name is None and source.kind not in ("json", "inspect", "every-eval-ever", "helm"):
                raise fail("which model are these results for? pass --model")
            items = {"csv": lambda: _csv_items(path), "json": lambda: _json_items(path)}
            interactive = not no_input and sys.stdin.isatty()
            if source.kind == "samples":  # settle the metric before creating anything
                metric, filter_ = _settle_choices(source, metric, filter_, task, interactive)
            if source.kind in ("inspect", "helm"):  # settle the scorer/stat before creating
                metric = _settle_scorer(source, metric, interactive, create)
                opts_format: str | None = source.kind
            elif source.kind in ("every-eval-ever", "helm"):
                opts_format = source.kind
            else:
                opts_format = None if format_ in ("auto", "npz") else format_
            bench, created = _ensure_benchmark(
                client, benchmark, create, source, items.get(source.kind), project
            )
            opts = {
                "metric": metric,
                "filter": filter_,
                "task": task,
                "item_key": item_key,
                "params_b": params_b,
                "replace": replace,
                "format": opts_format,
            }
            if source.kind == "samples":
                reply = with_choices(
                    lambda o: client.upload_results_file(
                        bench.id, source.upload_files, model=name, **o
                    ),
                    opts,
                    interactive,
                )
            else:
                reply = client.upload_results_file(
                    bench.id, source.named(), model=name if source.kind != "json" else model, **opts
                )
            replies = [reply]
        _report(bench, created, source, replies, as_json)


def _settle_scorer(
    source: Source, metric: str | None, interactive: bool, create: bool = False
) -> str | None:
    """The scorer of Inspect logs (the stat of HELM runs) scored several ways (asked on a
    terminal, else exit 2 listing them), read here so a failed `push --create` leaves no
    benchmark behind: with ``create`` a log the parser refuses, or logs of several models, fail
    here too, before anything is created."""
    from app.ingest.logs.helm import parse_helm_run
    from app.ingest.logs.inspect import parse_inspect_log

    models: dict[str, str] = {}

    def parse(f: Path, chosen: str | None) -> None:
        if source.kind == "helm":
            spec = f.parent / "run_spec.json"
            parsed = parse_helm_run(
                f.read_bytes(), spec.read_bytes() if spec.is_file() else None, metric=chosen
            )
        else:
            parsed = parse_inspect_log(f.read_bytes(), metric=chosen, filename=f.name)
        if parsed.model:
            models.setdefault(parsed.model, f.name)

    files = [f for f in source.files
             if source.kind != "helm" or f.name == "per_instance_stats.json"]  # fmt: skip
    metric = _choose_metric(files, parse, metric, interactive, create)
    if create and len(models) > 1:
        raise fail(
            f"the logs are of several models ({', '.join(models)}): push one model's logs "
            "(nothing was created or uploaded)"
        )
    return metric


def _settle_choices(
    source: Source, metric: str | None, filter_: str | None, task: str | None, interactive: bool
) -> tuple[str | None, str | None]:
    """Read the sample files here and settle an ambiguous metric or filter (ask on a terminal,
    otherwise exit 2 listing the choices) before the server is asked to create anything, so a
    failed `push --create` leaves no benchmark behind. Other problems are the server's to
    report."""
    from app.ingest.lm_eval import parse_lm_eval_samples
    from app.ingest.types import AmbiguousChoiceError, IngestError

    chosen = {"metric": metric, "filter": filter_}
    for f in source.files:
        if f.suffix.lower() not in (".jsonl", ".ndjson"):
            continue
        while True:
            try:
                parse_lm_eval_samples(
                    f.read_bytes(),
                    metric=chosen["metric"],
                    filter=chosen["filter"],
                    task=task,
                    filename=f.name,
                    strict=False,
                )
                break
            except AmbiguousChoiceError as exc:
                for name, choices in exc.choices.items():
                    if not interactive:
                        raise fail(
                            f"the results hold several {name}s; pass --{name} with one of: "
                            + ", ".join(choices)
                            + " (nothing was created or uploaded)"
                        ) from None
                    chosen[name] = ask_choice(name, choices)
            except (IngestError, OSError):
                break
    return chosen["metric"], chosen["filter"]


def _report(
    bench: BenchmarkPublic, created: bool, source: Source, replies: list[UploadReply], as_json: bool
) -> None:
    if as_json:
        print_json(
            {
                "benchmark": bench,
                "benchmark_created": created,
                "files": [str(f) for f in source.files],
                "results": replies,
            }
        )
        return
    what = "created" if created else "using"
    err(f"{what} benchmark {bench.name} v{bench.version} ({bench.n_items} items, id {bench.id})")
    if len(replies) == 1:
        r = replies[0]
        print_table(
            ["model", "items", "coverage", "accuracy", "metric", "stored"],
            [
                [
                    r.model.name,
                    r.n_items,
                    pct(r.coverage),
                    pct(r.accuracy),
                    r.metric or "-",
                    "already stored (replayed)" if r.replayed else r.status,
                ]
            ],
        )
        return
    acc = sorted(r.accuracy for r in replies)
    stored = ["unchanged" if r.replayed else r.status for r in replies]
    counts = {s: stored.count(s) for s in ("created", "unchanged", "replaced")}
    full = sum(r.coverage >= 1.0 for r in replies)
    print_table(
        ["models", "created", "unchanged", "replaced", "full coverage", "accuracy min/median/max"],
        [
            [
                len(replies),
                counts["created"],
                counts["unchanged"],
                counts["replaced"],
                full,
                f"{pct(acc[0])} / {pct(statistics.median(acc))} / {pct(acc[-1])}",
            ]
        ],
    )
