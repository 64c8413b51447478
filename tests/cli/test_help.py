"""Every ``benchslice`` command (and sub-command) answers ``--help`` with an example."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from app.cli import app


def _leaves(group: object, path: list[str]) -> list[list[str]]:
    if hasattr(group, "commands"):
        return [
            leaf
            for name, cmd in sorted(group.commands.items())  # type: ignore[attr-defined]
            for leaf in _leaves(cmd, [*path, name])
        ]
    return [path]


def test_every_command_has_help_with_an_example() -> None:
    commands = _leaves(typer.main.get_command(app), [])
    assert ["verdict"] in commands and ["subset", "get"] in commands and ["mdad"] in commands
    runner = CliRunner()
    for words in commands:
        result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (words, result.output)
        assert "Example" in result.output, words


def test_usage_errors_exit_2() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["verdict", "--benchmark", "x", "a"]).exit_code == 2
    assert (
        runner.invoke(app, ["subset", "create", "--benchmark", "x", "--size", "0"]).exit_code == 2
    )
    assert runner.invoke(app, ["plan", "--benchmark", "x", "--gap", "1.5"]).exit_code == 2
