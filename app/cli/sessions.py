"""``benchslice evaluate`` (an evaluation session against the service) and ``benchslice simulate``
(offline replay of sessions on a local results matrix), issue 12."""

from __future__ import annotations

import json
import shlex
import subprocess
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from app.cli.common import (
    EXIT_ERROR,
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    err,
    fail,
    find_source,
    pct,
    print_json,
    print_table,
)
from app.cli.summary import SummaryOpt, session_summary, write_summary

if TYPE_CHECKING:
    from app.client import Client
    from app.schemas.sessions import SessionPublic

EXIT_EXHAUSTED = 1


def _answers(path: Path, model: str) -> dict[str, float]:
    """``{item_id: value}`` of ``model``'s row in an .npz matrix (``correct``, ``models``,
    ``item_ids``)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            names = [str(m) for m in data["models"]]
            ids = [str(i) for i in data["item_ids"]]
            if model not in names:
                raise fail(f"{path.name} has no row for model {model!r}")
            row = np.asarray(data["correct"][names.index(model)], dtype=np.float64)
    except (OSError, KeyError, ValueError) as exc:
        raise fail(f"cannot read {path}: {exc}") from None
    return {i: float(v) for i, v in zip(ids, row.tolist(), strict=True) if np.isfinite(v)}


def _line(s: SessionPublic) -> str:
    e = s.estimate
    text = f"{s.items_used:4d} items  accuracy {pct(e.value)} [{pct(e.lower)}, {pct(e.upper)}]"
    if s.difference is not None:
        d = s.difference
        text += f"  difference {pct(d.value)} [{pct(d.lower)}, {pct(d.upper)}]"
    return f"{text}  ({e.basis})  {s.state}" + (
        f": {s.decision}" if s.decision != "undecided" else ""
    )


def _run_batch(
    client: Client,
    s: SessionPublic,
    command: str,
    workdir: Path,
    step: int,
    opts: dict[str, Any],
) -> SessionPublic:
    """Write the batch's samples file, run the command, push its output."""
    samples = workdir / f"samples-{step:03d}.json"
    output = workdir / f"output-{step:03d}"
    samples.write_text(json.dumps(s.samples))
    output.mkdir()
    cmd = command.replace("{samples}", shlex.quote(str(samples))).replace(
        "{output}", shlex.quote(str(output))
    )
    done = subprocess.run(cmd, shell=True, check=False)  # the user's own command line
    if done.returncode != 0:
        raise fail(f"the command exited with {done.returncode}: {cmd}")
    source = find_source(output)
    return client.post_session_results(s.id, model=s.model, files=source.files, **opts)


def evaluate(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Name, name@vN or version id"),
    model: str = typer.Option(..., "--model", "-m", help="The model being evaluated"),
    baseline: str | None = typer.Option(
        None, "--baseline", help="A model with full results on the benchmark (goal decide)"
    ),
    goal: str = typer.Option("decide", "--goal", help="decide | precision"),
    policy: str = typer.Option("random", "--policy", help="random (design-based) | fluid (IRT)"),
    alpha: float = typer.Option(0.05, "--alpha", help="Error level"),
    margin: float | None = typer.Option(None, "--margin", help="Equivalence margin (decide)"),
    precision: float | None = typer.Option(None, "--precision", help="Target half-width"),
    batch: int = typer.Option(10, "--batch", min=1, help="Items per batch"),
    max_items: int | None = typer.Option(None, "--max-items", min=1, help="Default: all"),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Order seed (drawn if omitted)"),
    run: str | None = typer.Option(
        None,
        "--run",
        help="Command evaluating one batch: {samples} is replaced by the samples file "
        "(lm_eval --samples), {output} by the directory to write sample logs to",
    ),
    answers: Path | None = typer.Option(
        None, "--answers", exists=True, dir_okay=False, help=".npz matrix to answer from"
    ),
    answers_model: str | None = typer.Option(
        None, "--answers-model", help="Row of --answers holding the model's results"
    ),
    metric: str | None = typer.Option(None, "--metric", help="lm-eval metric (if several)"),
    filter_: str | None = typer.Option(None, "--filter", help="lm-eval filter (if several)"),
    summary: Path | None = SummaryOpt,
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Evaluate a model a batch at a time until the question is answered.

    Each batch: writes the batch's samples file, runs `--run` (or answers from `--answers`),
    pushes the results and prints one line (items so far, estimate, interval). Exit 0 when
    decided (or precise enough), 1 when `--max-items` ran out first, 2 on errors.

    Example:

        benchslice evaluate --benchmark gpqa --model org/new-7b --baseline org/old-7b --run 'lm_eval --model hf --model_args pretrained=org/new-7b --tasks gpqa_main --samples {samples} --log_samples --output_path {output}'
    """
    if (run is None) == (answers is None):
        raise typer.BadParameter("give exactly one of --run and --answers", param_hint="--run")
    if answers is not None and answers_model is None:
        raise typer.BadParameter("--answers needs --answers-model", param_hint="--answers-model")
    if goal not in ("decide", "precision"):
        raise typer.BadParameter("decide | precision", param_hint="--goal")
    if policy not in ("random", "fluid"):
        raise typer.BadParameter("random | fluid", param_hint="--policy")
    table = _answers(answers, answers_model) if answers is not None else None
    opts = {"metric": metric, "filter": filter_}
    kw: dict[str, Any] = dict(
        baseline=baseline,
        goal=goal,
        policy=policy,
        alpha=alpha,
        margin=margin,
        precision=precision,
        batch_size=batch,
        max_items=max_items,
        seed=seed,
    )
    with api(url, api_key) as client, tempfile.TemporaryDirectory(prefix="bs-eval-") as tmp:
        start = client.create_session(benchmark, model, **kw)
        if start.job is not None:
            err(f"fitting the benchmark's IRT model first (job {start.job.id}) …")
            client.wait(start.job.id, timeout=600)
            start = client.create_session(benchmark, model, **kw)
        s = start.session
        assert s is not None
        err(f"session {s.id} ({s.policy}, seed {s.seed})")
        step = 0
        while s.state == "open":
            step += 1
            if table is not None:
                missing = [it.item_id for it in s.next_items if it.item_id not in table]
                if missing:
                    raise fail(f"--answers has no result for item {missing[0]!r}")
                results = {it.item_id: table[it.item_id] for it in s.next_items}
                s = client.post_session_results(s.id, model=s.model, results=results)
            else:
                s = _run_batch(client, s, run or "", Path(tmp), step, opts)
            if not as_json:
                typer.echo(_line(s))
        base = client.url
    if as_json:
        print_json(s)
    if summary is not None:
        write_summary(summary, session_summary(s, base))
    if s.state == "exhausted":
        raise typer.Exit(EXIT_EXHAUSTED)


def simulate(
    matrix: Path = typer.Option(
        ..., "--matrix", exists=True, dir_okay=False, help=".npz with 'correct' (0/1, full)"
    ),
    policies: str = typer.Option("random,fluid", "--policies", help="random,fluid"),
    pairs: int = typer.Option(400, "--pairs", min=1),
    orders: int = typer.Option(1, "--orders", min=1, help="Random orders per pair (random)"),
    alpha: float = typer.Option(0.05, "--alpha"),
    batch: int = typer.Option(10, "--batch", min=1),
    goal: str = typer.Option("decide", "--goal", help="decide | precision"),
    margin: float | None = typer.Option(None, "--margin"),
    precision: float | None = typer.Option(None, "--precision"),
    max_items: int | None = typer.Option(None, "--max-items", min=1),
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = JsonOpt,
) -> None:
    """Replay evaluation sessions offline for random model pairs of a results matrix.

    Per policy: sessions, decided share, wrong decisions (against the full benchmark's order,
    with a Clopper-Pearson interval), and items used (median, p90, mean) per gap bucket next to
    the exact fixed random-subset size the pair needs at P(correct order) >= 1 - alpha. The IRT
    fit for `fluid` uses only models outside the pairs' pool.

    Example:

        benchslice simulate --matrix gpqa.npz --policies random,fluid --pairs 400 --alpha 0.05 --batch 10 --seed 0 --json
    """
    import numpy as np

    from app.core.sequential.simulation import simulate_sessions

    try:
        with np.load(matrix, allow_pickle=False) as data:
            correct = np.asarray(data["correct"], dtype=np.float64)
    except (OSError, KeyError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {matrix}: {exc}", param_hint="--matrix") from None
    if not np.all((correct == 0) | (correct == 1)):
        raise typer.BadParameter("needs full 0/1 results (no NaN)", param_hint="--matrix")
    try:
        res = simulate_sessions(
            correct,
            policies=[p.strip() for p in policies.split(",") if p.strip()],
            pairs=pairs,
            orders=orders,
            alpha=alpha,
            batch_size=batch,
            goal=goal,
            margin=margin,
            precision=precision,
            max_items=max_items,
            rng=seed,
        )
    except ValueError as exc:
        raise fail(str(exc)) from None
    out: dict[str, Any] = {
        "params": {k: v for k, v in res.params.items() if k != "pool"},
        "n_items": int(correct.shape[1]),
        "policies": {},
    }
    for name, p in res.policies.items():
        out["policies"][name] = {
            "sessions": p.sessions,
            "decided": p.decided,
            "decided_share": p.decided_share,
            "wrong": p.wrong,
            "wrong_share": p.wrong_share,
            "wrong_ci": list(p.wrong_ci),
            "missed": p.missed,
            "runtime_s": p.runtime_s,
            "basis": "design" if name == "random" else "model",
            "buckets": [asdict(b) for b in p.buckets],
        }
    if as_json:
        typer.echo(json.dumps(_finite(out), indent=2, default=_jsonable))
        return
    for name, p in out["policies"].items():
        lo, hi = p["wrong_ci"]
        typer.echo(
            f"{name} ({p['basis']}): {p['sessions']} sessions, decided {pct(p['decided_share'])}, "
            f"wrong {p['wrong']} ({pct(p['wrong_share'])}, CI [{pct(lo)}, {pct(hi)}]), "
            f"{p['runtime_s']:.1f} s"
        )
        print_table(
            ["gap (pts)", "sessions", "decided", "wrong", "median", "p90", "mean", "fixed n"],
            [
                [
                    b["bucket"],
                    b["sessions"],
                    b["decided"],
                    b["wrong"],
                    _num(b["median_items"]),
                    _num(b["p90_items"]),
                    _num(b["mean_items"]),
                    _num(b["median_fixed_n"]),
                ]
                for b in p["buckets"]
            ],
        )


def _num(v: float) -> str:
    return "-" if v != v else f"{v:.0f}"


def _finite(v: Any) -> Any:
    """NaN (an empty gap bucket) as null: the output stays strict JSON."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    if isinstance(v, float) and v != v:
        return None
    return v


def _jsonable(v: Any) -> Any:
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


__all__ = ["EXIT_ERROR", "evaluate", "simulate"]
