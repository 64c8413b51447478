"""Shared pieces of the CLI commands: options, error handling, tables, progress, finding result
files and choosing among the metrics they hold.

Conventions: results go to stdout (a compact table for people, exactly one JSON document with
``--json``); progress and messages go to stderr; any API or connection error prints the problem
and exits with code 2 (``verdict`` uses 0/1 for its answer).
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.exceptions import TyperException

from app import formatting

if TYPE_CHECKING:
    from app.client import Client
    from app.schemas.jobs import JobPublic

T = TypeVar("T")

EXIT_PASS = 0
EXIT_INCONCLUSIVE = 1
EXIT_ERROR = 2
EXIT_REGRESSION = 3
#: The one exit-code table of ``gate`` (and the CI contract of ``docs/ci.md``): a decided
#: regression and an inconclusive answer never exit 0.
EXIT_CODES = {
    "pass": EXIT_PASS,
    "inconclusive": EXIT_INCONCLUSIVE,
    "error": EXIT_ERROR,
    "regression": EXIT_REGRESSION,
}
ALL_METHODS = "random,subtask_stratified,confidence_stratified,anchor_points,tiny_benchmarks,dpp"

UrlOpt = typer.Option(
    None,
    "--url",
    envvar="BENCHSLICE_URL",
    help="Service URL [env BENCHSLICE_URL; default http://127.0.0.1:8000]",
    show_default=False,
)
ApiKeyOpt = typer.Option(
    None,
    "--api-key",
    envvar="BENCHSLICE_API_KEY",
    help="API key [env BENCHSLICE_API_KEY]",
    show_default=False,
)
JsonOpt = typer.Option(False, "--json", help="Print one JSON document on stdout (for machines)")


def err(message: str) -> None:
    typer.echo(message, err=True)


def fail(message: str, code: int = EXIT_ERROR) -> typer.Exit:
    """Print ``error: message`` on stderr and return the Exit to raise."""
    err(f"error: {message}")
    return typer.Exit(code)


@contextmanager
def api(url: str | None, api_key: str | None) -> Iterator[Client]:
    """A client for the command; any BenchsliceError becomes ``error: …`` and exit code 2."""
    from app.client import BenchsliceError, Client

    try:
        with Client(url, api_key) as client:
            yield client
    except BenchsliceError as exc:
        err(f"error: {exc}")
        raise typer.Exit(EXIT_ERROR) from None
    except (typer.Exit, typer.Abort, TyperException):
        raise
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except Exception as exc:
        # Never exit 1 (verdict's "not distinguishable") on a failure we did not foresee.
        err(f"error: unexpected {type(exc).__name__}: {exc}")
        raise typer.Exit(EXIT_ERROR) from None


BENCHMARK_HELP = "Benchmark: name (latest version), name@vN or version id"
"""Help of every ``--benchmark``: the value goes straight into ``/v1/benchmarks/{benchmark}``."""


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(_plain(obj), indent=2, default=str))


def _plain(obj: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def fmt(value: Any, digits: int = 3) -> str:
    """Numbers for tables: floats with ``digits`` decimals, None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "-" if not math.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None, digits: int = 1) -> str:
    """An accuracy as a percentage (:func:`app.formatting.pct`; ``-`` when missing, as in
    every CLI table cell)."""
    return "-" if value is None else formatting.pct(value, digits)


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None
) -> None:
    """A compact table: rich on a terminal, plain aligned columns otherwise (CI logs, pipes)."""
    cells = [[fmt(c) for c in row] for row in rows]
    if sys.stdout.isatty():
        from rich import box
        from rich.console import Console
        from rich.table import Table

        table = Table(*headers, title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for row in cells:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    numeric = [all(_numeric(r[i]) for r in cells) and bool(cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ).rstrip()

    if title:
        typer.echo(title)
    typer.echo(line(list(headers)))
    typer.echo(line(["-" * w for w in widths]))
    for row in cells:
        typer.echo(line(row))


def _numeric(text: str) -> bool:
    try:
        float(text.rstrip("%"))
    except ValueError:
        return text == "-"
    return True


class JobProgress:
    """``progress`` callback for :meth:`Client.wait`: a rich bar on a terminal, otherwise a
    line on stderr whenever the status changes or another tenth of the work is done."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._bar: Any = None
        self._task: Any = None
        self._last: tuple[str, int] | None = None
        self._start = time.monotonic()

    def __enter__(self) -> JobProgress:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=None)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def __call__(self, job: JobPublic) -> None:
        done, total = job.progress.done, job.progress.total
        if job.status == "succeeded" and total:
            done = total  # some job kinds do not report their last step
        if self._bar is not None:
            self._bar.update(
                self._task, completed=done, total=total, description=f"{self.label} ({job.status})"
            )
            return
        tenth = int(10 * done / total) if total else 0
        key = (str(job.status), tenth)
        if key != self._last:
            self._last = key
            of = f" {done}/{total}" if total else ""
            elapsed = time.monotonic() - self._start
            err(f"{self.label}: {job.status}{of} ({elapsed:.1f}s)")


def wait_job(client: Client, job_id: Any, label: str, timeout: float | None) -> JobPublic:
    with JobProgress(label) as progress:
        return client.wait(job_id, progress=progress, timeout=timeout)


def split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [v.strip() for v in text.split(",") if v.strip()]


def int_list(text: str | None, name: str) -> list[int] | None:
    values = split_list(text)
    if values is None:
        return None
    try:
        return [int(v) for v in values]
    except ValueError:
        raise typer.BadParameter(
            f"expected comma-separated integers, got {text!r}", param_hint=name
        ) from None


def parse_params(values: Sequence[str] | None) -> dict[str, Any]:
    """``k=v`` pairs; values parsed as JSON when they are (numbers, true, lists), else strings."""
    out: dict[str, Any] = {}
    for item in values or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--param")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


# --- result files (push, score) ---------------------------------------------------------

SAMPLE_GLOBS = ("samples_*.jsonl", "*.parquet", "details_*.jsonl")
_CHOICES = re.compile(r"choose one of: (.+)$")
_TIMESTAMP = re.compile(r"_(\d{4}-\d{2}-\d{2}T[\d\-.]+)\.(jsonl|parquet)$")


@dataclass(frozen=True)
class Source:
    """What PATH holds: ``kind`` is samples | inspect | csv | json | npz; ``files`` the files to
    send."""

    kind: str
    files: list[Path]
    model_hint: str | None = None
    # lm-eval's results_<timestamp>.json of the same run as the samples: sent along with them,
    # it gives the server the evaluation configuration (drift guard)
    config_file: Path | None = None

    def named(self) -> list[Any]:
        """The files to send; a HELM run's as ``(<run folder>/<file>, bytes)`` so several runs'
        ``per_instance_stats.json`` / ``run_spec.json`` pairs stay told apart."""
        if self.kind == "lighteval":  # details/{model}/{date}/…: the path names the model
            return [(details_name(f), f.read_bytes()) for f in self.files]
        if self.kind != "helm":
            return list(self.files)
        return [(f"{f.parent.name}/{f.name}", f.read_bytes()) for f in self.files]

    @property
    def upload_files(self) -> list[Path]:
        return [*self.files, self.config_file] if self.config_file else list(self.files)


SOURCE_FORMATS = (
    "auto",
    "lm-eval",
    "inspect",
    "every-eval-ever",
    "helm",
    "lighteval",
    "csv",
    "json",
    "npz",
)
_INSPECT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T[\d\-+:]+_(.+)_[A-Za-z0-9]+$")


def _is_inspect_log(path: Path) -> bool:
    """An Inspect AI log: an ``.eval`` zip, or a JSON log (told by its first bytes)."""
    from app.ingest.logs.inspect import is_inspect_json

    if path.suffix.lower() == ".eval":
        return True
    if path.suffix.lower() != ".json":
        return False
    try:
        with path.open("rb") as f:
            return is_inspect_json(f.read(4096))
    except OSError:
        return False


def _is_eee(path: Path) -> bool:
    """Every Eval Ever instance-level JSONL (told by its first line)."""
    from app.ingest.logs.eee import is_eee_instances

    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return False
    try:
        with path.open("rb") as f:
            return is_eee_instances(f.read(65536))
    except OSError:
        return False


def _inspect_logs(folder: Path) -> list[Path]:
    """The newest Inspect log of each task in ``folder`` (Inspect names logs
    ``<timestamp>_<task>_<id>.eval``; the timestamp sorts)."""
    found = sorted(p for p in folder.rglob("*") if p.is_file() and _is_inspect_log(p))
    latest: dict[tuple[Path, str], Path] = {}
    for f in found:
        m = _INSPECT_NAME.match(f.stem)
        key = (f.parent, m.group(1) if m else f.stem)
        if key not in latest or f.name > latest[key].name:
            latest[key] = f
    return sorted(latest.values())


def details_name(path: Path) -> str:
    """A lighteval details file's path from its ``details/`` folder on (the file name alone
    when there is none)."""
    parts = path.parts
    anchors = [i for i, p in enumerate(parts[:-3]) if p == "details"]
    return "/".join(parts[anchors[-1] :]) if anchors else path.name


def _is_lighteval(path: Path) -> bool:
    from app.ingest.logs.lighteval import is_lighteval_details

    try:
        return path.suffix.lower() == ".parquet" and is_lighteval_details(
            path.read_bytes(), details_name(path)
        )
    except OSError:
        return False


def _lighteval_details(folder: Path, fmt: str) -> list[Path]:
    """lighteval details parquet files under ``folder``, each model's latest run (said on
    stderr when older runs are left out)."""
    from app.ingest.logs.lighteval import select_details

    found = sorted(
        p
        for p in folder.rglob("*.parquet")
        if p.is_file()
        and (_is_lighteval(p) or (fmt == "lighteval" and p.name.startswith("details_")))
    )
    keep, notes = select_details([details_name(p) for p in found])
    for note in notes:
        err(f"lighteval {note}")
    return [found[i] for i in keep]


def _zip_is_inspect_log(path: Path) -> bool:
    from app.ingest.logs.inspect import is_inspect_eval

    try:
        return is_inspect_eval(path.read_bytes())
    except OSError:
        return False


def _unzipped(path: Path) -> Path:
    """A zip of result files (an lm-eval output folder, Inspect logs…) unpacked into a
    temporary folder (removed at exit), within the same decompression caps as the server's."""
    import atexit
    import shutil
    import tempfile

    from app.ingest.logs.archive import BoundedZip
    from app.ingest.types import IngestError

    target = Path(tempfile.mkdtemp(prefix="benchslice-zip-"))
    atexit.register(shutil.rmtree, target, True)
    try:
        archive = BoundedZip(path.read_bytes())
        for name in archive.names():
            inside = (target / name).resolve()
            if name.endswith("/") or not inside.is_relative_to(target.resolve()):
                continue  # folders, and names escaping the folder (../x, /x)
            inside.parent.mkdir(parents=True, exist_ok=True)
            inside.write_bytes(archive.read(name))
    except IngestError as exc:
        raise fail(f"cannot unpack {path.name}: {exc}") from None
    return target


def find_source(path: Path, fmt: str = "auto") -> Source:
    """Classify PATH; for a directory, the newest sample file of every task (lm-eval layout) or
    the newest Inspect log of every task. ``fmt`` (``--format``) overrides the detection."""
    if fmt not in SOURCE_FORMATS:
        raise fail(f"unknown format {fmt!r}: use one of {', '.join(SOURCE_FORMATS)}")
    if path.is_dir():
        if fmt in ("auto", "lighteval"):  # before lm-eval's *.parquet glob, which they match
            details = _lighteval_details(path, fmt)
            if details:
                return Source("lighteval", details)
        if fmt in ("auto", "lm-eval"):
            for pattern in SAMPLE_GLOBS:
                found = sorted(p for p in path.rglob(pattern) if p.is_file())
                if found:
                    files = _newest_per_task(found)
                    folders = dict.fromkeys([*(f.parent for f in files), path])
                    hint = next(filter(None, map(_model_from_results, folders)), None)
                    return Source("samples", files, hint, _results_of_run(files))
        if fmt in ("auto", "inspect"):
            logs = _inspect_logs(path)
            if logs:
                return Source("inspect", logs)
        if fmt in ("auto", "every-eval-ever"):
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file() and _is_eee(p))
            if found:
                return Source("every-eval-ever", found)
        if fmt in ("auto", "helm"):
            # HELM: benchmark_output/runs/<suite>/<run>/ holds per_instance_stats.json and
            # run_spec.json; both are sent, named <run>/<file> so the server pairs them
            runs = sorted(p.parent for p in path.rglob("per_instance_stats.json") if p.is_file())
            if runs:
                files = [
                    run / name
                    for run in runs
                    for name in ("per_instance_stats.json", "run_spec.json")
                    if (run / name).is_file()
                ]
                return Source("helm", files)
        raise fail(
            f"no sample files in {path} (looked for {', '.join(SAMPLE_GLOBS)}, Inspect "
            "*.eval / JSON logs, Every Eval Ever JSONL, HELM runs and lighteval details; run "
            "lm_eval with --log_samples)"
        )
    suffix = path.suffix.lower()
    if suffix == ".zip" and fmt == "auto" and not _zip_is_inspect_log(path):
        return find_source(_unzipped(path), fmt)
    if fmt == "inspect" or (fmt == "auto" and (_is_inspect_log(path) or suffix == ".zip")):
        return Source("inspect", [path])
    if fmt == "lighteval" or (fmt == "auto" and _is_lighteval(path)):
        return Source("lighteval", [path])
    if fmt == "every-eval-ever" or (fmt == "auto" and _is_eee(path)):
        return Source("every-eval-ever", [path])
    if fmt == "lm-eval" or (fmt == "auto" and suffix in (".jsonl", ".ndjson", ".parquet")):
        return Source("samples", [path], _model_from_results(path.parent), _results_of_run([path]))
    if fmt in ("csv", "json", "npz"):
        return Source(fmt, [path])
    if suffix in (".csv", ".json", ".npz"):
        return Source(suffix[1:], [path])
    raise fail(
        f"cannot tell the format of {path.name}: use .jsonl, .parquet, .csv, .json, .npz or an "
        "Inspect .eval log (or say --format)"
    )


def _newest_per_task(files: list[Path]) -> list[Path]:
    """lm-eval writes ``samples_<task>_<timestamp>.jsonl`` per run: keep the latest per task."""
    latest: dict[tuple[Path, str], Path] = {}
    for f in files:
        m = _TIMESTAMP.search(f.name)
        task = f.name[: m.start()] if m else f.name
        key = (f.parent, task)
        if key not in latest or f.name > latest[key].name:
            latest[key] = f
    return sorted(latest.values())


def _results_of_run(samples: list[Path]) -> Path | None:
    """The newest lm-eval ``results_<timestamp>.json`` whose timestamp is one of the sample
    files' (a results JSON of that run, with its task configs)."""
    from app.ingest.lm_eval_config import is_lm_eval_results

    stamps = {m.group(1) for f in samples if (m := _TIMESTAMP.search(f.name))}
    found = [
        f
        for folder in dict.fromkeys(f.parent for f in samples)
        for f in folder.glob("results_*.json")
        if f.is_file() and f.name[len("results_") : -len(".json")] in stamps
    ]
    for f in sorted(found, key=lambda f: f.name, reverse=True):
        try:
            if is_lm_eval_results(json.loads(f.read_text())):
                return f
        except (OSError, ValueError):
            continue
    return None


def _model_from_results(folder: Path) -> str | None:
    """The model name lm-eval recorded in ``results_*.json`` next to the samples, if any."""
    for results in sorted(folder.glob("results_*.json"), reverse=True):
        try:
            data = json.loads(results.read_text())
        except (OSError, ValueError):
            continue
        name = data.get("model_name")
        if isinstance(name, str) and name:
            return name
        args = str((data.get("config") or {}).get("model_args") or "")
        m = re.search(r"pretrained=([^,]+)", args)
        if m:
            return m.group(1)
    return None


def _choices(exc: Any, name: str) -> list[str] | None:
    """The alternatives the server listed for an ambiguous ``metric``/``filter``."""
    for e, f in zip(exc.errors, exc.fields, strict=False):
        if f in (f"query.{name}", name):
            m = _CHOICES.search(str(e.get("message", "")))
            if m:
                return [c.strip() for c in m.group(1).split(",")]
    return None


def with_choices(call: Callable[[dict[str, Any]], T], opts: dict[str, Any], interactive: bool) -> T:
    """Run ``call(opts)``; when the server says the results hold several metrics (or filters) and
    none was chosen, ask on a terminal and retry, otherwise fail (exit 2) listing the choices."""
    from app.client import BenchsliceError

    opts = dict(opts)
    while True:
        try:
            return call(opts)
        except BenchsliceError as exc:
            if exc.status != 422:
                raise
            for name in ("metric", "filter"):
                choices = _choices(exc, name)
                if choices and opts.get(name) is None:
                    break
            else:
                raise
            if not interactive:
                raise fail(
                    f"the results hold several {name}s; pass --{name} with one of: "
                    + ", ".join(choices)
                ) from None
            opts[name] = ask_choice(name, choices)


def ask_choice(name: str, choices: list[str]) -> str:
    """Ask on the terminal which of ``choices`` (metrics or filters) gives correctness."""
    while True:
        answer = typer.prompt(
            f"Several {name}s in the results ({', '.join(choices)}); which one gives correctness?",
            default=choices[0],
            err=True,
        ).strip()
        if answer in choices:
            return answer
        err(f"choose one of: {', '.join(choices)}")
