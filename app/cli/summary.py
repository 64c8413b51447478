"""``--summary FILE``: a short markdown report of a ``verdict``, ``evaluate`` or ``leaderboard``
answer, for a CI job's step summary (``$GITHUB_STEP_SUMMARY``) or a pull-request comment:
the decision, its interval, the items used and a link to the page that shows it. Also the other
reports a CI job reads of an ``evaluate`` session: ``$GITHUB_OUTPUT`` lines and a JUnit file.

The file is appended to (GitHub's step summary collects every step's lines), created if
missing. Numbers are written as everywhere else (:mod:`app.formatting`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode
from xml.etree import ElementTree as ET

import typer

from app import formatting as F

SummaryOpt = typer.Option(
    None,
    "--summary",
    help="Append a markdown summary (decision, interval, items used, link to the page) to "
    "this file, e.g. $GITHUB_STEP_SUMMARY",
    dir_okay=False,
    show_default=False,
)


def write_summary(path: Path, markdown: str) -> None:
    """Append ``markdown`` (one block, blank line after) to ``path``."""
    from app.cli.common import fail

    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(markdown.rstrip("\n") + "\n\n")
    except OSError as exc:
        raise fail(f"cannot write the summary to {path}: {exc}") from None


#: session decisions that are a regression for CI (exit 3, a JUnit failure)
REGRESSION_DECISIONS = ("worse", "regressed", "not_superior", "on_margin")


def write_report(path: Path, data: bytes | str, what: str) -> None:
    """Write ``data`` to ``path``: bytes replace the file (a JUnit report), text is appended
    (``$GITHUB_OUTPUT`` collects every step's lines)."""
    from app.cli.common import fail

    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            with path.open("a", encoding="utf-8") as out:
                out.write(data)
    except OSError as exc:
        raise fail(f"cannot write {what} to {path}: {exc}") from None


def _num(x: float | None) -> str:
    return "" if x is None else str(round(float(x), 6))


def session_outputs(s: Any) -> str:
    """``name=value`` lines for ``$GITHUB_OUTPUT`` of an ``evaluate`` session."""
    lines = [
        f"decision={s.decision}",
        f"state={s.state}",
        f"regression={'true' if s.decision in REGRESSION_DECISIONS else 'false'}",
        f"items_used={s.items_used}",
        f"n_items={s.n_items}",
        f"estimate={_num(s.estimate.value)}",
        f"lower={_num(s.estimate.lower)}",
        f"upper={_num(s.estimate.upper)}",
    ]
    if s.difference is not None:
        lines += [
            f"difference={_num(s.difference.value)}",
            f"difference_lower={_num(s.difference.lower)}",
            f"difference_upper={_num(s.difference.upper)}",
        ]
    lines.append(f"session={s.id}")
    return "\n".join(lines) + "\n"


def session_junit(s: Any) -> bytes:
    """One ``<testcase>`` for the session: ``<failure>`` when its decision is a regression,
    ``<skipped>`` when it ended undecided (a budget ran out) or is still open; the suite's
    ``<properties>`` hold its numbers."""
    failed = int(s.decision in REGRESSION_DECISIONS)
    skipped = int(not failed and s.state in ("exhausted", "open"))
    counts = {"tests": "1", "failures": str(failed), "errors": "0", "skipped": str(skipped)}
    suites = ET.Element("testsuites", name="benchslice evaluate", **counts)
    suite = ET.SubElement(suites, "testsuite", name=f"evaluate {s.model} on {s.benchmark}",
                          time="0", **counts)  # fmt: skip
    props = ET.SubElement(suite, "properties")
    for line in session_outputs(s).splitlines():
        name, _, value = line.partition("=")
        ET.SubElement(props, "property", name=name, value=value)
    case = ET.SubElement(suite, "testcase", name=f"{s.benchmark}: {s.model}",
                         classname="benchslice.evaluate", time="0")  # fmt: skip
    text = s.conclusion or f"{s.decision} ({s.state}) after {s.items_used} items"
    if failed:
        ET.SubElement(case, "failure", message=text, type=str(s.decision)).text = text
    elif skipped:
        ET.SubElement(case, "skipped", message=f"undecided: {text}")
    ET.SubElement(case, "system-out").text = text
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def _cell(text: object) -> str:
    """A markdown table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(map(_cell, headers)) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(map(_cell, r)) + " |" for r in rows]
    return "\n".join(lines)


def page_url(base: str, path: str, query: dict[str, Any] | None = None) -> str:
    """An absolute link to a page of the browser view (``/ui/…``)."""
    q = f"?{urlencode({k: v for k, v in (query or {}).items() if v is not None})}" if query else ""
    return f"{base.rstrip('/')}/ui/{path.lstrip('/')}{q}"


def verdict_summary(v: Any, base: str) -> str:
    ref = v.benchmark or "the benchmark"
    link = page_url(
        base,
        f"benchmarks/{quote(ref, safe='')}/pair",
        {"model_a": v.model_a, "model_b": v.model_b, "size": v.size, "method": v.method},
    )
    word = "DISTINGUISHABLE" if v.distinguishable else "NOT distinguishable"
    n_items = (v.paired.n11 + v.paired.n10 + v.paired.n01 + v.paired.n00) if v.paired else None
    lines = [f"### benchslice verdict on {ref}: {word}", "", v.headline, ""]
    lines += [f"{i}. {a}" for i, a in enumerate(v.answers, start=1)]
    lines += [
        "",
        _table(
            ["P(same order)", f"MDAD at {v.size}", "size needed (pair)", "items used"],
            [
                [
                    F.prob(v.p_same_order),
                    F.pts(v.mdad_at_size),
                    F.count(v.size_needed),
                    f"{v.size} of {F.count(n_items)}" if n_items else str(v.size),
                ]
            ],
        ),
        "",
        f"Computed: {v.basis_note}. [Pair page]({link})",
    ]
    return "\n".join(lines)


def leaderboard_summary(board: Any, base: str, limit: int = 20) -> str:
    """The leaderboard's first ``limit`` rows: rank, rank interval, tier, model, accuracy with
    its interval, items."""
    ref = f"{board.benchmark}@v{board.version}"
    on = f" (subset {board.subset_id[:12]})" if board.subset_id else ""
    rows = list(board.rows)
    lines = [
        f"### benchslice leaderboard on {ref}{on}: {board.n_models} models in "
        f"{board.n_tiers} tier{'' if board.n_tiers == 1 else 's'}",
        "",
        _table(
            ["rank", "rank interval", "tier", "model", "accuracy", "95% interval", "items"],
            [
                [
                    r.rank,
                    F.span(r.rank_low, r.rank_high),
                    r.tier,
                    r.model,
                    F.pct(r.accuracy),
                    F.interval(r.ci_low, r.ci_high),
                    F.count(r.n_items),
                ]
                for r in rows[:limit]
            ],
        ),
    ]
    if len(rows) > limit:
        lines += ["", F.more(limit, len(rows))]
    link = page_url(base, f"benchmarks/{quote(ref, safe='')}") + "#models"
    lines += [
        "",
        f"A tier holds the models not separated by paired tests at alpha = {board.alpha:g} "
        f"({board.correction}). [Benchmark page]({link})",
    ]
    return "\n".join(lines)


def session_summary(s: Any, base: str) -> str:
    """An evaluation session: decision, interval for the accuracy and the difference, items."""
    lines = [
        f"### benchslice evaluate on {s.benchmark} v{s.benchmark_version}: {s.decision} "
        f"({s.state})",
        "",
    ]
    rows = [["accuracy", F.pct(s.estimate.value), F.interval(s.estimate.lower, s.estimate.upper)]]
    if s.difference is not None:
        rows.append(
            [
                f"difference vs {s.baseline}",
                F.pts(s.difference.value, signed=True),
                F.interval(s.difference.lower, s.difference.upper, F.pts),
            ]
        )
    lines += [
        f"{s.model}: **{s.decision}** after {F.count(s.items_used)} of {F.count(s.n_items)} items "
        f"({s.estimate.basis}-based interval, alpha = {s.alpha:g}).",
        "",
        _table(["quantity", "estimate", "interval"], rows),
        "",
        f"[Session page]({page_url(base, f'sessions/{s.id}')})",
    ]
    return "\n".join(lines)
