"""Every command's --help shows each example on its own line (the markdown help joined the
lines of one paragraph: `plan` and `subset get` printed two commands on one line), and option
help keeps its placeholders (`analyze --plots` read "Save mdad. and agreement-.")."""

from __future__ import annotations

import re

import typer.main
from typer.testing import CliRunner

from app.cli import app

COMMAND_START = re.compile(r"^\s*(benchslice|lm_eval|curl)\s")
COMMAND_ANYWHERE = re.compile(r"(?:^|\s)(?:benchslice|lm_eval|curl)\s")


def _commands(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield list(path)


def test_examples_one_per_line() -> None:
    runner = CliRunner()
    found = 0
    for words in _commands(typer.main.get_command(app)):
        out = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "200"}).output
        for line in out.splitlines():
            if COMMAND_START.match(line):
                found += 1
                assert len(COMMAND_ANYWHERE.findall(line)) == 1, (words, line.strip())
    assert found >= 12


def test_analyze_plots_help_names_the_files() -> None:
    out = CliRunner().invoke(app, ["analyze", "--help"], env={"COLUMNS": "200"}).output
    assert "mdad.svg" in out and "agreement-METHOD.svg" in out
    assert "mdad. and agreement-." not in out
