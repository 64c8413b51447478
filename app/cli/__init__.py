"""benchslice command line: the typer app and the table of its commands.

One module per command group; shared options, output and error handling in
:mod:`app.cli.common`. Command modules import only ``common`` (never each other), so this file
is the one place that says which command lives where.

========================================  ===============================================
module                                    commands
========================================  ===============================================
:mod:`app.cli.server`                     ``serve``, ``worker``, ``migrate``, ``run``
:mod:`app.cli.offline`                    ``mdad``, ``coverage`` (no server)
:mod:`app.cli.push`                       ``push``
:mod:`app.cli.subsets`                    ``subset create|get``, ``score``
:mod:`app.cli.verdicts`                   ``verdict``, ``plan``
:mod:`app.cli.analyses`                   ``analyze``
:mod:`app.cli.leaderboard`                ``leaderboard``
:mod:`app.cli.sessions`                   ``evaluate``, ``sessions``, ``simulate`` (no server)
:mod:`app.cli.gates`                      ``gate`` (``--offline``: no server)
:mod:`app.cli.keys`                       ``keys create|list|rotate|grant|revoke``,
                                          ``projects create|list|set-public`` (local admin)
:mod:`app.cli.benchmarks`                 ``benchmarks list|show|items|coverage``, ``jobs get|wait|cancel``
:mod:`app.cli.audit`                      ``audit``, ``benchmarks restore|retire|unretire``
========================================  ===============================================
"""

from __future__ import annotations

import typer

from app.cli import (
    analyses,
    audit,
    benchmarks,
    gates,
    keys,
    leaderboard,
    offline,
    push,
    server,
    sessions,
    subsets,
    verdicts,
)

__all__ = ["app"]

app = typer.Typer(
    help="benchslice: micro-benchmark selection and reliability service",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",
)

# Service processes (server side).
app.command("serve")(server.serve)
app.command("worker")(server.worker)
app.command("migrate")(server.migrate)
app.command("run")(server.run)

# Offline analysis of a local matrix.
app.command("mdad", epilog=offline.MDAD_EPILOG)(offline.mdad)
app.command("coverage", epilog=offline.COVERAGE_EPILOG)(offline.coverage)
app.command("simulate")(sessions.simulate)

# Client-side commands (talk to a running service through app.client).
app.command("push")(push.push)
app.command("score")(subsets.score)
app.command("verdict")(verdicts.verdict)
app.command("plan")(verdicts.plan)
app.command("analyze")(analyses.analyze)
app.command("leaderboard")(leaderboard.leaderboard)
app.command("evaluate")(sessions.evaluate)
app.command("gate")(gates.gate)
app.command("sessions")(sessions.sessions)
app.command("audit")(audit.audit)
benchmarks.benchmarks_app.command("restore")(audit.restore)
benchmarks.benchmarks_app.command("retire")(audit.retire)
benchmarks.benchmarks_app.command("unretire")(audit.unretire)

# Command groups.
app.add_typer(keys.keys_app, name="keys")
app.add_typer(keys.projects_app, name="projects")
app.add_typer(subsets.subset_app, name="subset")
app.add_typer(benchmarks.benchmarks_app, name="benchmarks")
app.add_typer(benchmarks.jobs_app, name="jobs")
