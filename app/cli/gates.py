"""``benchslice gate``: one release decision for a suite of benchmarks (issue 34).

Without ``--offline`` the gate runs on the server (:mod:`app.cli.gate_server`): created, or
resumed when one is open for the same question, its rounds answered from ``--answers``.
``--offline`` runs the gate of :mod:`app.core.sequential.gating.gates` on local stored results (a
matrix per benchmark, ``--answers NAME=FILE``, holding both the candidate's and the baseline's
rows): the same engine, seed rule and output as a gate of the service. The reports a CI job
reads are written here: ``--json``, ``--summary`` (markdown), ``--junit`` (one test case per
benchmark) and ``$GITHUB_OUTPUT`` lines when that variable is set.

Exit codes (the table of ``docs/ci.md``, :data:`app.cli.common.EXIT_CODES`): 0 pass, 1
inconclusive, 2 error, 3 regression (a FAIL).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import typer

from app import formatting as F
from app.cli.common import (
    EXIT_ERROR,
    EXIT_INCONCLUSIVE,
    EXIT_PASS,
    EXIT_REGRESSION,
    ApiKeyOpt,
    JsonOpt,
    UrlOpt,
    api,
    err,
    fail,
    print_json,
)
from app.cli.summary import SummaryOpt, write_report, write_summary

MAX_SUMMARY_BYTES = 1 << 20
_EXIT_OF = {"pass": EXIT_PASS, "fail": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise typer.BadParameter(f"expected NAME=VALUE, got {v!r}", param_hint=option)
        if name in out:
            raise typer.BadParameter(f"{name!r} given twice", param_hint=option)
        out[name] = rest
    return out


def _margins(values: list[str], names: list[str]) -> dict[str, float]:
    """``--margin D`` (every benchmark) and/or ``--margin NAME=D`` (one)."""
    default: float | None = None
    per: dict[str, float] = {}
    for v in values:
        name, sep, rest = v.rpartition("=")
        try:
            d = float(rest)
        except ValueError:
            raise typer.BadParameter(f"not a number: {v!r}", param_hint="--margin") from None
        if not (0.0 <= d < 1.0):
            raise typer.BadParameter(
                f"{v!r}: a margin lies in [0, 1) (accuracy units: 0.02 = 2 points)",
                param_hint="--margin",
            )
        if not sep:
            default = d
        elif name not in names:
            raise typer.BadParameter(f"{name!r} is not a --benchmark", param_hint="--margin")
        else:
            per[name] = d
    missing = [n for n in names if n not in per and default is None]
    if missing:
        raise typer.BadParameter(f"no margin for {missing[0]!r}", param_hint="--margin")
    return {n: per.get(n, default) for n in names}  # type: ignore[misc]


def _rows(path: Path, candidate: str, baseline: str, name: str):
    """The candidate's and the baseline's rows of an .npz matrix, on the items both have."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            models = [str(m) for m in data["models"]]
            matrix = np.asarray(data["correct"], dtype=np.float64)
            ids = [str(i) for i in data["item_ids"]] if "item_ids" in data else None
    except (OSError, KeyError, ValueError) as exc:
        raise fail(f"--answers {name}: cannot read {path}: {exc}") from None
    for who, opt in ((candidate, "--model"), (baseline, "--baseline")):
        if who not in models:
            raise fail(f"--answers {name}: {path.name} has no row for {opt} {who!r}")
    a = matrix[models.index(candidate)]
    b = matrix[models.index(baseline)]
    keep = np.isfinite(a) & np.isfinite(b)
    if not keep.any():
        raise fail(f"--answers {name}: no item has results for both models")
    if np.any((a[keep] < 0) | (a[keep] > 1) | (b[keep] < 0) | (b[keep] > 1)):
        raise fail(f"--answers {name}: results must lie in [0, 1]")
    item_ids = [ids[i] for i in np.flatnonzero(keep)] if ids else None
    return a[keep], b[keep], item_ids


def run_offline(
    benchmarks: dict[str, Path],
    *,
    model: str,
    baseline: str,
    margins: dict[str, float],
    alpha: float,
    rule: str,
    batch: int,
    budget: int | None,
    seed: int,
    prediction: str,
) -> dict[str, Any]:
    """The gate on local files; the document ``--json`` prints."""
    import numpy as np

    from app.core.sequential.gating.gates import BENCH_STATES, OUTCOMES, run_gates

    names = list(benchmarks)
    data = [_rows(benchmarks[n], model, baseline, n) for n in names]
    run = run_gates(
        [d[0] for d in data],
        [d[1] for d in data],
        [margins[n] for n in names],
        alpha=alpha,
        rule=rule,
        batch_size=batch,
        budget=budget,
        prediction=prediction,
        seed=seed,
        bounds=True,
    )
    assert run.bounds is not None
    rows = []
    for j, name in enumerate(names):
        est = float(run.estimate[0, j])
        rows.append(
            {
                "benchmark": name,
                "state": BENCH_STATES[int(run.codes[0, j])],
                "delta": None if np.isnan(est) else est,
                "bound": float(run.bounds[0, j, 0]),
                "upper": float(run.bounds[0, j, 1]),
                "margin": margins[name],
                "items": int(run.items[0, j]),
                "n_items": int(data[j][0].size),
            }
        )
    outcome = OUTCOMES[int(run.outcome[0])]
    return {
        "outcome": outcome,
        "model": model,
        "baseline": baseline,
        "rule": rule,
        "alpha": alpha,
        "prediction": prediction,
        "seed": seed,
        "batch_size": batch,
        "budget": budget,
        "items_used": int(run.items.sum()),
        "items_total": int(sum(r["n_items"] for r in rows)),
        "regressed": [r["benchmark"] for r in rows if r["state"] in ("regressed", "on_margin")],
        "benchmarks": rows,
        "offline": True,
    }


def _on_server(
    names, files, run, model, answers_model, baseline, margins, settings, costs, resume, url,
    api_key,
) -> dict[str, Any]:  # fmt: skip
    """Create (or resume) the gate on the server and answer its rounds: from ``files``, or by
    running ``run`` once per round."""
    from app.cli.gate_server import candidate_values, drive, find_open, run_rounds, server_doc

    try:
        answers = [candidate_values(files[n], answers_model or model, n) for n in files]
    except ValueError as exc:
        raise fail(str(exc)) from None
    body = {
        "model": model,
        "benchmarks": [{"benchmark": n, "baseline": baseline, "margin": margins[n]}
                       for n in names],
        "alpha": settings["alpha"],
        "rule": settings["rule"],
        "prediction": settings["prediction"],
        "batch_size": settings["batch"],
        "seed": settings["seed"],
    }  # fmt: skip
    if settings["budget"] is not None:
        body["budget"] = settings["budget"]
    body |= {k: v for k, v in costs.items() if v is not None}
    say = err  # progress on stderr: stdout stays the one document --json promises
    with api(url, api_key) as client, tempfile.TemporaryDirectory(prefix="bs-gate-") as tmp:
        gate = find_open(client, body) if resume else None
        if gate is not None:
            say(f"resuming gate {gate.id} at round {gate.round + 1}")
        else:
            gate = client.create_gate(body)
            say(f"gate {gate.id}")
        try:
            if run is not None:
                gate = run_rounds(client, gate, run, Path(tmp), say)
            else:
                gate = drive(client, gate, answers, say)
        except (ValueError, RuntimeError) as exc:
            raise fail(f"{exc}\ngate {gate.id} stays open at that round: rerun the same "
                       "command to resume it") from None  # fmt: skip
    return server_doc(gate)


# -- reports ------------------------------------------------------------------------------------
def _key(name: str) -> str:
    """A step-output name: letters, digits and ``_`` only."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def github_output(doc: dict[str, Any]) -> str:
    """``name=value`` lines for ``$GITHUB_OUTPUT``."""
    lines = [f"outcome={doc['outcome']}", f"items_used={doc['items_used']}"]
    for r in doc["benchmarks"]:
        k = _key(r["benchmark"])
        lines.append(f"delta_{k}={'' if r['delta'] is None else round(r['delta'], 6)}")
        lines.append(f"bound_{k}={round(r['bound'], 6)}")
        lines.append(f"state_{k}={r['state']}")
    return "\n".join(lines) + "\n"


def junit_xml(doc: dict[str, Any]) -> bytes:
    """One ``<testcase>`` per benchmark: ``<failure>`` when regressed (or on the margin),
    ``<skipped>`` when undecided; the suite's ``<properties>`` hold the gate's and every
    benchmark's numbers (``NAME.delta``, ``NAME.bound``, …)."""
    rows = doc["benchmarks"]
    failed = sum(r["state"] in ("regressed", "on_margin") for r in rows)
    skipped = sum(r["state"] == "open" for r in rows)
    suites = ET.Element("testsuites", name="benchslice gate", tests=str(len(rows)),
                        failures=str(failed), errors="0", skipped=str(skipped))  # fmt: skip
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"gate {doc['model']} vs {doc['baseline']}",
        tests=str(len(rows)),
        failures=str(failed),
        errors="0",
        skipped=str(skipped),
        time="0",
    )
    props = ET.SubElement(suite, "properties")
    for k in ("outcome", "rule", "alpha", "seed", "items_used", "items_total"):
        ET.SubElement(props, "property", name=k, value=str(doc[k]))
    for r in rows:  # the numbers per benchmark (a test case itself holds no properties)
        for k in ("state", "delta", "bound", "upper", "margin", "items", "n_items"):
            value = "" if r[k] is None else str(r[k])
            ET.SubElement(props, "property", name=f"{r['benchmark']}.{k}", value=value)
    for r in rows:
        case = ET.SubElement(
            suite, "testcase", name=r["benchmark"], classname="benchslice.gate", time="0"
        )
        text = _line(r)
        if r["state"] in ("regressed", "on_margin"):
            ET.SubElement(case, "failure", message=text, type=r["state"]).text = text
        elif r["state"] == "open":
            ET.SubElement(case, "skipped", message=f"undecided: {text}")
        ET.SubElement(case, "system-out").text = text
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['benchmark']}: {r['state']}, difference {F.pts(r['delta'], signed=True)}, "
        f"lower bound {F.pts(r['bound'], signed=True)} against the margin "
        f"{F.pts(-r['margin'], signed=True)}, {F.count(r['items'])} of {F.count(r['n_items'])} items"
    )


def _spent(b: dict[str, Any]) -> str:
    """One budget: ``Cost (unit): spent X of Y unit (source)``."""
    return (f"Cost ({b['unit']}): spent {b['spent']:,.6g} of {b['limit']:,.6g} {b['unit']}"
            + (", used up" if b["exhausted"] else "") + f" ({b['spent_source']})")  # fmt: skip


def _allocation(doc: dict[str, Any]) -> list[str]:
    """``Allocation: cost (...)`` for a cost-allocated gate; nothing otherwise."""
    if doc.get("allocation") != "cost":
        return []
    per = ", ".join(f"{k} {v:,.4g}" for k, v in doc.get("allocation_costs", {}).items())
    return [f"Allocation: cost (progress per unit of predicted cost; {doc.get('allocation_unit')} "
            f"per item, the stored models' medians: {per})"]  # fmt: skip


def gate_summary(doc: dict[str, Any]) -> str:
    """Markdown for a job summary: the outcome first, then one row per benchmark."""
    head = {
        "pass": "PASS",
        "fail": "FAIL",
        "inconclusive": "INCONCLUSIVE",
    }[doc["outcome"]]
    lines = [
        f"### Release gate: **{head}** — {doc['model']} vs {doc['baseline']}",
        "",
        f"{F.count(doc['items_used'])} of {F.count(doc['items_total'])} items, alpha = {doc['alpha']}"
        f", rule `{doc['rule']}`, seed {doc['seed']}"
        + (f"; regressed: {', '.join(doc['regressed'])}" if doc["regressed"] else ""),
        "",
        *[x for b in doc.get("budgets", []) for x in (_spent(b), "")],
        *[x for a in _allocation(doc) for x in (a, "")],
        "| benchmark | state | difference | lower bound | margin | items |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["benchmarks"]:
        lines.append(
            f"| {r['benchmark'].replace('|', '/')} | {r['state']} | "
            f"{F.pts(r['delta'], signed=True)} | {F.pts(r['bound'], signed=True)} | "
            f"{F.pts(-r['margin'], signed=True)} | {F.count(r['items'])} of "
            f"{F.count(r['n_items'])} |"
        )
    text = "\n".join(lines)
    return text[:MAX_SUMMARY_BYTES]


def _check_costs(offline: bool, max_cost, max_tokens, cost_unit: str, allocation: str) -> None:
    from typing import get_args

    from app.core.sequential.gating.gates import ALLOCATIONS
    from app.schemas.sessions import CostUnit

    if cost_unit not in get_args(CostUnit):
        raise typer.BadParameter(" | ".join(get_args(CostUnit)), param_hint="--cost-unit")
    if allocation not in ALLOCATIONS:
        raise typer.BadParameter(" | ".join(ALLOCATIONS), param_hint="--allocation")
    if allocation == "cost" and offline:
        raise typer.BadParameter(
            "cost allocation uses the stored models' per-item costs, which only the server "
            "keeps: run the gate on a server, or offline with progress",
            param_hint="--allocation",
        )
    for value, opt in ((max_cost, "--max-cost"), (max_tokens, "--max-tokens")):
        if value is not None and not (0 < value < float("inf")):
            raise typer.BadParameter("a budget is a positive number", param_hint=opt)
        if value is not None and offline:
            raise typer.BadParameter(
                "a cost budget is predicted from the stored models' per-item costs, which only "
                "the server keeps: run the gate on a server, or offline without it",
                param_hint=opt,
            )


def gate(
    benchmark: list[str] = typer.Option(
        ..., "--benchmark", "-b", help="A benchmark of the suite (repeat for each)"
    ),
    model: str = typer.Option(..., "--model", "-m", help="The candidate"),
    baseline: str = typer.Option(..., "--baseline", help="The production model"),
    margin: list[str] = typer.Option(
        ...,
        "--margin",
        help="Non-inferiority margin in accuracy units (0.02 = 2 points): D for every "
        "benchmark, or NAME=D for one",
    ),
    answers: list[str] = typer.Option(
        [], "--answers", help="NAME=FILE: an .npz matrix with the candidate's and baseline's rows"
    ),
    answers_model: str | None = typer.Option(
        None, "--answers-model", help="Row of the --answers matrices holding the candidate"
    ),
    run: str | None = typer.Option(
        None,
        "--run",
        help="Command evaluating one round of every open benchmark (server gates): {samples} "
        "is replaced by the samples file (lm_eval --samples: each task's doc ids), {tasks} by "
        "the round's comma-separated tasks, {sample_ids} by its sample ids (inspect eval "
        "--sample-id), {output} by the folder to write sample logs to",
    ),
    offline: bool = typer.Option(
        False, "--offline", help="Run on local files, without a server (same engine and output)"
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="P(wrong PASS) and P(wrong FAIL) bound"),
    rule: str = typer.Option(
        "no_regression", "--rule", help="no_regression | no_regression_and_one_better"
    ),
    prediction: str = typer.Option(
        "calibrated",
        "--prediction",
        help="calibrated | paired | random | combined (the control variate; combined adds the "
        "candidate's IRT probability from the benchmark's IRT fit: server gates only)",
    ),
    batch: int = typer.Option(50, "--batch", min=1, help="Items per open benchmark per round"),
    budget: int | None = typer.Option(None, "--budget", min=1, help="Items in all (default all)"),
    seed: int = typer.Option(0, "--seed", min=0, help="Order seed"),
    max_cost: float | None = typer.Option(
        None,
        "--max-cost",
        help="Cost budget in --cost-unit (server gates): no new round once spent (then "
        "inconclusive); spent = the costs posted with a round, else the stored models' per-item "
        "median",
    ),
    max_tokens: float | None = typer.Option(
        None, "--max-tokens", help="Token budget (input + output tokens), as --max-cost"
    ),
    cost_unit: str = typer.Option(
        "usd",
        "--cost-unit",
        help="usd | seconds | input_tokens | output_tokens | tokens (of --max-cost and of "
        "--allocation cost)",
    ),
    allocation: str = typer.Option(
        "progress",
        "--allocation",
        help="progress | cost: split each round by progress, or by progress per unit of the "
        "stored models' predicted cost per item in --cost-unit (cheap benchmarks first; server "
        "gates)",
    ),
    summary: Path | None = SummaryOpt,
    junit: Path | None = typer.Option(
        None, "--junit", dir_okay=False, help="Write a JUnit XML report (one case per benchmark)"
    ),
    as_json: bool = JsonOpt,
    resume: bool = typer.Option(
        True, "--resume/--new", help="Resume an open gate asking the same question (server)"
    ),
    url: str | None = UrlOpt,
    api_key: str | None = ApiKeyOpt,
) -> None:
    """Decide, for a suite, whether the candidate is no worse than the baseline by more than the
    margin on every benchmark: PASS, FAIL (naming the regressed benchmarks) or INCONCLUSIVE.

    P(wrong PASS) <= alpha and P(wrong FAIL) <= alpha whatever the number of benchmarks (one-sided
    confidence sequences; statistics-next §8). Exit 0 pass, 1 inconclusive, 2 error, 3 regression.

    Without --offline the gate runs on the server: created (or resumed when one is open for the
    same question), each round run with --run (one call for every open benchmark) or answered
    from --answers, each round counted once.

    Example:

        benchslice gate --model org/new --baseline org/old --margin 0.02 --benchmark mmlu --benchmark gsm8k --run 'lm_eval --model hf --model_args pretrained=org/new --tasks {tasks} --samples {samples} --log_samples --output_path {output}'

        benchslice gate --offline --model org/new --baseline org/old --margin 0.02 --benchmark gpqa --answers gpqa=gpqa.npz
    """
    from app.core.sequential.gating.gates import COMBINED, PREDICTIONS, RULES

    names = list(benchmark)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise typer.BadParameter(f"{dupes[0]!r} given twice", param_hint="--benchmark")
    files = {k: Path(v) for k, v in _pairs(answers, "--answers").items()}
    if run is not None and (files or offline):
        raise typer.BadParameter(
            "give --run (a server gate) or --answers for every benchmark", param_hint="--run"
        )
    for n in names:
        if n not in files and run is None:
            raise typer.BadParameter(f"no --answers {n}=FILE", param_hint="--answers")
    extra = [k for k in files if k not in names]
    if extra:
        raise typer.BadParameter(f"{extra[0]!r} is not a --benchmark", param_hint="--answers")
    if rule not in RULES:
        raise typer.BadParameter(" | ".join(RULES), param_hint="--rule")
    if prediction not in (*PREDICTIONS, COMBINED):
        raise typer.BadParameter(" | ".join((*PREDICTIONS, COMBINED)), param_hint="--prediction")
    if offline and prediction == COMBINED:
        raise typer.BadParameter(
            "combined needs the benchmark's IRT fit, which only the server stores: use "
            "calibrated offline, or run the gate on a server",
            param_hint="--prediction",
        )
    if not (0.0 < alpha < 1.0):
        raise typer.BadParameter("alpha lies in (0, 1)", param_hint="--alpha")
    if budget is not None and budget < batch:
        raise typer.BadParameter(f"below one batch ({batch})", param_hint="--budget")
    _check_costs(offline, max_cost, max_tokens, cost_unit, allocation)
    costs: dict[str, Any] = {"max_cost": max_cost, "max_tokens": max_tokens}
    if max_cost is not None or allocation == "cost":
        costs["cost_unit"] = cost_unit
    if allocation == "cost":
        costs["allocation"] = allocation
    margins = _margins(list(margin), names)
    settings = {"alpha": alpha, "rule": rule, "batch": batch, "budget": budget, "seed": seed,
                "prediction": prediction}  # fmt: skip
    if offline:
        doc = run_offline(files, model=answers_model or model, baseline=baseline,
                          margins=margins, **settings)  # fmt: skip
        doc["model"] = model
    else:
        doc = _on_server(names, files, run, model, answers_model, baseline, margins, settings,
                         costs, resume, url, api_key)  # fmt: skip
    if as_json:
        print_json(doc)
    else:
        typer.echo(f"{doc['outcome'].upper()}: {doc['items_used']} of {doc['items_total']} items")
        for r in doc["benchmarks"]:
            typer.echo("  " + _line(r))
        for b in doc.get("budgets", []):
            typer.echo("  " + _spent(b))
        for line in _allocation(doc):
            typer.echo("  " + line)
    if summary is not None:
        write_summary(summary, gate_summary(doc))
    if junit is not None:
        write_report(junit, junit_xml(doc), "the JUnit report")
    out = os.environ.get("GITHUB_OUTPUT")
    if out:
        write_report(Path(out), github_output(doc), "the step outputs")
    if doc["outcome"] != "pass":
        err(f"gate: {doc['outcome']}" + (f" ({', '.join(doc['regressed'])})"
                                          if doc["regressed"] else ""))  # fmt: skip
    raise typer.Exit(_EXIT_OF.get(doc["outcome"], EXIT_ERROR))


__all__ = ["gate", "gate_summary", "github_output", "junit_xml", "run_offline"]
