"""``benchslice evaluate`` (an evaluation session against the service) and ``benchslice simulate``
(offline replay of sessions on a local results matrix), issue 12."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from app.cli.common import (
    EXIT_ERROR,
    EXIT_REGRESSION,
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
from app.cli.summary import (
    REGRESSION_DECISIONS,
    SummaryOpt,
    session_junit,
    session_outputs,
    session_summary,
    write_report,
    write_summary,
)

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
    for b in s.budgets:  # spent (measured / predicted) of each budget
        text += f"  {b.unit} {b.spent:,.6g}" + (f"/{b.limit:,.6g}" if b.limit else "")
    return f"{text}  ({e.basis}, {s.estimand})  {s.state}" + (
        f": {s.decision}" if s.decision != "undecided" else ""
    )


def stderr_fd() -> int | None:
    """Where the command's stdout goes: our stderr (None, inherit, when it has no descriptor,
    as under a test runner capturing it)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def sample_ids(items: Any) -> str:
    """The batch as ``inspect eval --sample-id`` wants it: comma-separated sample ids (an
    item ``{task}/{id}`` of a benchmark made from Inspect logs is sample ``id`` of ``task``)."""
    out = []
    for it in items:
        prefix = f"{it.subtask}/"
        out.append(it.item_id[len(prefix) :] if it.item_id.startswith(prefix) else it.item_id)
    return ",".join(out)


def _run_batch(
    client: Client,
    s: SessionPublic,
    command: str,
    workdir: Path,
    opts: dict[str, Any],
) -> SessionPublic:
    """Write the open batch's samples file, run the command (its output goes to stderr: stdout
    is this command's own), push the sample logs it wrote as the answer to that batch."""
    number = s.step + 1
    samples = workdir / f"samples-{number:03d}.json"
    output = workdir / f"output-{number:03d}"
    samples.write_text(json.dumps(s.samples))
    output.mkdir(exist_ok=True)
    cmd = (
        command.replace("{samples}", shlex.quote(str(samples)))
        .replace("{sample_ids}", shlex.quote(sample_ids(s.next_items)))
        .replace("{output}", shlex.quote(str(output)))
    )
    sys.stdout.flush()
    done = subprocess.run(cmd, shell=True, check=False, stdout=stderr_fd())  # the user's command
    if done.returncode != 0:
        raise fail(
            f"the command exited with {done.returncode} on batch {number}: {cmd}\n"
            f"session {s.id} is still open at batch {number}; resume it with "
            f"`benchslice evaluate --session {s.id} --run …`"
        )
    source = find_source(output)
    return client.post_session_results(
        s.id, model=s.model, files=source.files, batch=number, **opts
    )


def evaluate(
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help="Name, name@vN or version id (a new session)"
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="The model being evaluated (a new session)"
    ),
    session_id: str | None = typer.Option(
        None,
        "--session",
        help="Resume this session (e.g. after a failed batch): run its open batch and go on",
    ),
    baseline: str | None = typer.Option(
        None, "--baseline", help="A model with full results on the benchmark (goal decide)"
    ),
    goal: str = typer.Option(
        "decide",
        "--goal",
        help="decide | precision | noninferior (needs --margin) | superior (one-sided goals)",
    ),
    estimand: str | None = typer.Option(
        None,
        "--estimand",
        help="generalized: accuracy on items like these (the items a sample, as in `verdict` and "
        "`leaderboard`; never exact) | benchmark: accuracy on these N items (exact once all are "
        "seen). Default: generalized with --baseline and policy random or omitted, else benchmark",
    ),
    policy: str | None = typer.Option(
        None,
        "--policy",
        help="random | assisted | neyman | fluid (how items are drawn; every policy decides with "
        "the design-based confidence sequence; the IRT ones wait for the benchmark's IRT fit). "
        "Default: assisted when the benchmark has >= 10 models with full results, else random",
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Error level"),
    margin: float | None = typer.Option(
        None, "--margin", help="Equivalence margin (decide); the margin of noninferior / superior"
    ),
    precision: float | None = typer.Option(None, "--precision", help="Target half-width"),
    batch: int = typer.Option(10, "--batch", min=1, help="Items per batch"),
    max_items: int | None = typer.Option(None, "--max-items", min=1, help="Default: all"),
    max_cost: float | None = typer.Option(
        None, "--max-cost", min=0, help="Budget in --cost-unit: no new batch once spent"
    ),
    max_tokens: float | None = typer.Option(
        None, "--max-tokens", min=0, help="Token budget (input + output tokens)"
    ),
    cost_unit: str | None = typer.Option(
        None, "--cost-unit", help="usd (default) | seconds | input_tokens | output_tokens | tokens"
    ),
    cost_aware: bool = typer.Option(
        False, "--cost-aware", help="Draw by information per unit of predicted cost"
    ),
    seed: int | None = typer.Option(None, "--seed", min=0, help="Order seed (drawn if omitted)"),
    run: str | None = typer.Option(
        None,
        "--run",
        help="Command evaluating one batch: {samples} is replaced by the samples file "
        "(lm_eval --samples), {sample_ids} by the batch's comma-separated sample ids "
        "(inspect eval --sample-id), {output} by the directory to write sample logs to",
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
    junit: Path | None = typer.Option(
        None, "--junit", dir_okay=False, help="Write a JUnit XML report (one test case)"
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Evaluate a model a batch at a time until the question is answered.

    Each batch: writes the batch's samples file, runs `--run` (or answers from `--answers`),
    pushes the results as the answer to that batch and prints one line (items so far,
    estimate, interval). The command's own output goes to stderr, so with `--json` stdout is
    the final session alone. A failed batch leaves the session open: `--session ID` resumes it
    from that batch (a resent batch is never applied twice). Exit 0 when decided (or precise
    enough) and not worse, 1 when `--max-items` or a budget (`--max-cost`, `--max-tokens`) ran
    out first (inconclusive), 2 on errors (and for an abandoned session), 3 when decided worse
    than the baseline (a regression). `--junit FILE` writes a JUnit report (a regression is a
    failure, an exhausted budget a skipped case); with `$GITHUB_OUTPUT` set, its step outputs
    (decision, state, regression, items_used, estimate, lower, upper, difference…) are appended.

    Example:

        benchslice evaluate --benchmark gpqa --model org/new-7b --baseline org/old-7b --run 'lm_eval --model hf --model_args pretrained=org/new-7b --tasks gpqa_main --samples {samples} --log_samples --output_path {output}'

        benchslice evaluate --benchmark arith --model org/new-7b --baseline org/old-7b --run 'inspect eval arith.py --model hf/org/new-7b --sample-id {sample_ids} --log-dir {output}'
    """
    given = {
        "--benchmark": benchmark,
        "--model": model,
        "--baseline": baseline,
        "--margin": margin,
        "--precision": precision,
        "--estimand": estimand,
        "--max-items": max_items,
        "--seed": seed,
        "--max-cost": max_cost,
        "--max-tokens": max_tokens,
        "--cost-unit": cost_unit,
    }
    if session_id is not None and any(v is not None for v in given.values()):
        used = next(k for k, v in given.items() if v is not None)
        raise typer.BadParameter("--session resumes a session as it was created", param_hint=used)
    if session_id is None and (benchmark is None or model is None):
        raise typer.BadParameter(
            "give --benchmark and --model (a new session) or --session ID (resume one)",
            param_hint="--benchmark",
        )
    if (run is None) == (answers is None):
        raise typer.BadParameter("give exactly one of --run and --answers", param_hint="--run")
    if answers is not None and answers_model is None:
        raise typer.BadParameter("--answers needs --answers-model", param_hint="--answers-model")
    if goal not in ("decide", "precision", "noninferior", "superior"):
        raise typer.BadParameter("decide | precision | noninferior | superior", param_hint="--goal")
    if estimand is not None and estimand not in ("benchmark", "generalized"):
        raise typer.BadParameter("benchmark | generalized", param_hint="--estimand")
    if policy is not None and policy not in ("random", "assisted", "neyman", "fluid"):
        raise typer.BadParameter("random | assisted | neyman | fluid", param_hint="--policy")
    table = _answers(answers, answers_model) if answers is not None else None
    opts = {"metric": metric, "filter": filter_}
    kw: dict[str, Any] = dict(
        baseline=baseline,
        goal=goal,
        policy=policy,
        estimand=estimand,
        alpha=alpha,
        margin=margin,
        precision=precision,
        batch_size=batch,
        max_items=max_items,
        seed=seed,
        max_cost=max_cost,
        max_tokens=max_tokens,
        cost_unit=cost_unit,
        cost_aware=cost_aware,
    )
    with api(url, api_key) as client, tempfile.TemporaryDirectory(prefix="bs-eval-") as tmp:
        if session_id is not None:
            s = client.get_session(session_id)
            err(f"session {s.id} ({s.policy}, seed {s.seed}): {s.state} after {s.step} batches")
        else:
            assert benchmark is not None and model is not None
            start = client.create_session(benchmark, model, **kw)
            if start.job is not None:
                err(f"fitting the benchmark's IRT model first (job {start.job.id}) …")
                client.wait(start.job.id, timeout=600)
                start = client.create_session(benchmark, model, **kw)
            assert start.session is not None
            s = start.session
            err(f"session {s.id} ({s.policy}, seed {s.seed}): {s.estimand_text}")
        if s.state == "abandoned":
            raise fail(f"session {s.id} was abandoned (idle too long); start a new one")
        ran = 0
        while s.state == "open":
            ran += 1
            if table is not None:
                missing = [it.item_id for it in s.next_items if it.item_id not in table]
                if missing:
                    raise fail(f"--answers has no result for item {missing[0]!r}")
                results = {it.item_id: table[it.item_id] for it in s.next_items}
                s = client.post_session_results(
                    s.id, model=s.model, results=results, batch=s.step + 1
                )
            else:
                s = _run_batch(client, s, run or "", Path(tmp), opts)
            if not as_json:
                typer.echo(_line(s))
        base = client.url
    if not ran and not as_json and s.step:
        typer.echo(_line(s))  # resumed a closed session: its last line
    if s.state != "open":
        err(s.conclusion)  # stderr: stdout keeps one line per batch (or the JSON alone)
    if s.predictions is not None and not s.predictions.helping:
        err(s.predictions.text)
    if as_json:
        print_json(s)
    if summary is not None:
        write_summary(summary, session_summary(s, base))
    if junit is not None:
        write_report(junit, session_junit(s), "the JUnit report")
    gh_output = os.environ.get("GITHUB_OUTPUT")
    if gh_output:
        write_report(Path(gh_output), session_outputs(s), "the step outputs")
    if s.state == "exhausted":
        raise typer.Exit(EXIT_EXHAUSTED)
    if s.decision in REGRESSION_DECISIONS:  # never exit 0
        raise typer.Exit(EXIT_REGRESSION)


def sessions(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Name, name@vN or version id"),
    model: str | None = typer.Option(None, "--model", "-m", help="Only this model's sessions"),
    state: str | None = typer.Option(
        None, "--state", help="open | decided | exhausted | abandoned"
    ),
    limit: int = typer.Option(50, "--limit", min=1, help="At most this many (newest first)"),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List a benchmark's evaluation sessions, newest first (find the one to `--session`).

    `abandoned`: open sessions without a batch for longer than the server's
    `SESSION_IDLE_HOURS`; they take no more results.

    Example:

        benchslice sessions --benchmark gpqa --model org/new-7b --state open
    """
    if state is not None and state not in STATES:
        raise typer.BadParameter(" | ".join(STATES), param_hint="--state")
    rows: list[Any] = []
    cursor = None
    with api(url, api_key) as client:
        while len(rows) < limit:
            page = client.list_sessions(
                benchmark,
                model=model,
                state=state,  # type: ignore[arg-type]
                limit=min(100, limit - len(rows)),
                cursor=cursor,
            )
            rows += page.items
            cursor = page.next_cursor
            if cursor is None:
                break
    if as_json:
        print_json({"items": rows, "next_cursor": cursor})
        return
    print_table(
        ["session", "model", "baseline", "state", "decision", "items", "last activity"],
        [
            [
                str(r.id),
                r.model,
                r.baseline or "-",
                r.state,
                r.decision,
                f"{r.items_used}/{r.n_items}",
                r.updated_at.strftime("%Y-%m-%d %H:%M"),
            ]
            for r in rows
        ],
    )


STATES = ("open", "decided", "exhausted", "abandoned")


def simulate(
    matrix: Path = typer.Option(
        ...,
        "--matrix",
        exists=True,
        dir_okay=False,
        help=".npz with 'correct' (0/1 or graded in [0, 1], full)",
    ),
    policies: str = typer.Option(
        "random,assisted,neyman,fluid", "--policies", help="random,assisted,neyman,fluid"
    ),
    pairs: int = typer.Option(400, "--pairs", min=1),
    orders: int = typer.Option(1, "--orders", min=1, help="Independent replays per pair"),
    alpha: float = typer.Option(0.05, "--alpha"),
    batch: int = typer.Option(10, "--batch", min=1),
    goal: str = typer.Option(
        "decide",
        "--goal",
        help="decide | precision | noninferior (needs --margin) | superior (one-sided goals)",
    ),
    margin: float | None = typer.Option(None, "--margin"),
    precision: float | None = typer.Option(None, "--precision"),
    max_items: int | None = typer.Option(None, "--max-items", min=1),
    seed: int = typer.Option(0, "--seed", min=0),
    as_json: bool = JsonOpt,
) -> None:
    """Replay evaluation sessions offline for random model pairs of a results matrix.

    Per policy: sessions, decided share, wrong decisions (against the full benchmark's order,
    with a Clopper-Pearson interval), sessions whose interval ever excluded the true difference,
    and items used (median, p90, mean) per gap bucket next to the exact fixed random-subset size
    the pair needs at P(correct order) >= 1 - alpha. Every policy decides with the design-based
    confidence sequence; the IRT fit of the IRT policies uses only models outside the pairs'
    pool.

    Example:

        benchslice simulate --matrix gpqa.npz --policies random,assisted --pairs 400 --alpha 0.05 --batch 10 --seed 0 --json
    """
    import numpy as np

    from app.core.sequential.simulation import simulate_sessions

    try:
        with np.load(matrix, allow_pickle=False) as data:
            correct = np.asarray(data["correct"], dtype=np.float64)
    except (OSError, KeyError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {matrix}: {exc}", param_hint="--matrix") from None
    if not (np.isfinite(correct).all() and ((correct >= 0) & (correct <= 1)).all()):
        raise typer.BadParameter(
            "needs full results in [0, 1] (0/1 or graded scores, no NaN)", param_hint="--matrix"
        )
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
            "ever_missed": p.ever_missed,
            "runtime_s": p.runtime_s,
            "basis": "design",
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
            f"interval ever excluded the truth in {p['ever_missed']}, {p['runtime_s']:.1f} s"
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


__all__ = ["EXIT_ERROR", "evaluate", "sessions", "simulate"]
