"""The README's tour runs for real: its ```bash blocks in one shell against a live service
(``make run``'s launcher on SQLite + the embedded broker), then its ```python block. Also: every
command the README's CLI table names exists and has an example in its ``--help``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.service import live_service
from tests.support.tools import missing

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
TOUR = "## Five-minute tour"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def tour_blocks() -> list[tuple[str, str]]:
    text = README.read_text()
    start = text.index(TOUR)
    end = text.find("\n## ", start + len(TOUR))
    section = text[start : end if end != -1 else None]
    return [(lang, body) for lang, body in FENCE.findall(section)]


def test_tour_structure() -> None:
    blocks = tour_blocks()
    langs = [lang for lang, _ in blocks]
    assert set(langs) <= {"bash", "python", "text"}, langs
    assert blocks[0] == ("bash", "make run\n"), "the tour starts the service with `make run`"
    shell = "".join(body for lang, body in blocks[1:] if lang == "bash")
    for step in (
        "push --create",
        "subset create",
        "--format lm-eval",
        "score",
        "verdict",
        "plan",
        "analyze",
        "evaluate",
    ):
        assert f"benchslice {step}" in shell or step in shell, step


@pytest.mark.integration
def test_tour_runs_against_a_real_service(tmp_path: Path) -> None:
    """Blocks 2… run in one bash (``set -euo pipefail``) in a scratch checkout layout:
    ``repo/.venv`` → this venv, ``shared/data`` → the real data, so the README's relative paths
    hold and its outputs (subset.json, plots/) land in the temp dir."""
    data = Path(os.environ.get("BENCHSLICE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not (data / "gpqa.npz").exists():
        missing(f"{data / 'gpqa.npz'} not found")
    venv = Path(sys.prefix)
    work = tmp_path / "repo"
    work.mkdir()
    (work / ".venv").symlink_to(venv, target_is_directory=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(data.resolve(), target_is_directory=True)
    if not (work / ".venv" / "bin" / "activate").exists():
        missing("the tests do not run from a virtualenv with bin/activate")

    blocks = tour_blocks()
    shell = "".join(body for lang, body in blocks[1:] if lang == "bash")
    python = [body for lang, body in blocks if lang == "python"]
    with live_service() as service:  # what `make run` starts, on a free port
        env = service.client_env()
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + shell],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for body in python:
            run = subprocess.run(
                [sys.executable, "-c", body],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, run.stdout + run.stderr
            assert "P(same order) = 0.887, distinguishable: True" in run.stdout
        shown_on_pages = _same_numbers_everywhere(service, env, done.stdout)

    out = done.stdout
    # the sample output shown in the tour is what the commands print (exact verdicts and plan)
    shown = [body for lang, body in blocks if lang == "text"]
    assert shown
    for line in "".join(shown).splitlines():
        if line.strip() not in ("", "…"):
            assert line in out.splitlines(), line
    assert "420      420" in out  # models pushed, all created
    assert "NOT distinguishable: meta-llama/Llama-3.1-8B-Instruct" in out
    assert "exit code 1: too close to call with 25 items" in out
    assert "DISTINGUISHABLE: mistralai/Mistral-Large-Instruct-2411" in out
    assert "MDAD on gpqa (robust mode, 10 runs" in out
    assert "(design, generalized)  decided: better" in out  # the session stops at its decision
    assert shown_on_pages == 2
    spec = json.loads((work / "subset.json").read_text())
    assert list(spec) == ["gpqa_main"] and len(spec["gpqa_main"]) == 25
    for name in ("mdad.svg", "agreement-random.svg", "agreement-tiny_benchmarks.svg"):
        root = ET.fromstring((work / "plots" / name).read_bytes())
        assert root.tag.endswith("svg"), name


TOUR_PAIRS = (
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"),  # close
    ("mistralai/Mistral-Large-Instruct-2411", "meta-llama/Meta-Llama-3-8B-Instruct"),  # far
)


def _same_numbers_everywhere(service, env: dict[str, str], tour_out: str) -> int:
    """For the tour's close and far pair: every number the tour printed, the CLI's JSON, the
    API and the pair page show for one quantity is the same (after the number style)."""
    import html as html_lib

    import httpx

    checked = 0
    lines = tour_out.splitlines()
    for a, b in TOUR_PAIRS:
        params = {"model_a": a, "model_b": b, "size": 25}
        api = httpx.get(f"{service.url}/v1/benchmarks/gpqa/verdict", params=params).json()
        cli = subprocess.run(
            [sys.executable, "-m", "app.cli", "verdict", "-b", "gpqa", a, b, "-n", "25", "--json"],
            env=env,
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
        as_json = json.loads(cli.stdout)
        page = httpx.get(f"{service.url}/ui/benchmarks/gpqa/pair", params=params).text

        def cell(name: str, page: str = page) -> str:
            m = re.search(rf'id="{name}">([^<]*)<', page)
            assert m is not None, name
            return html_lib.unescape(m.group(1)).strip()

        for key in ("p_same_order", "mdad_at_size", "size_needed", "gap", "answers", "paired"):
            assert api[key] == as_json[key], key
        # the tour's printed verdict: headline and the three answers, as the API words them
        start = lines.index(api["headline"])
        assert lines[start + 1 : start + 4] == [
            f"{i}. {t}" for i, t in enumerate(api["answers"], start=1)
        ]
        row = lines[start + 6].split()  # the numbers table under the answers
        assert row[0] == cell("p-same") == f"{api['p_same_order']:.2f}"
        assert " ".join(row[3:5]) == cell("mdad") == f"{100 * api['mdad_at_size']:.1f} pts"
        assert row[5] == cell("size-needed") == str(api["size_needed"])
        assert cell("gap") == f"{100 * abs(api['gap']):.1f} pts"
        assert cell("discordant") == f"{api['paired']['n10']} / {api['paired']['n01']}"
        p_cell = cell("mcnemar-p")
        assert (f"p {p_cell}" if p_cell.startswith("<") else f"p = {p_cell}") in api["answers"][0]
        listed = re.findall(r"<li>(.*?)</li>", page.split('id="answers"')[1].split("</ol>")[0])
        assert [html_lib.unescape(x) for x in listed] == api["answers"]
        checked += 1
    return checked


def test_tour_outputs_are_not_left_untracked() -> None:
    """The tour writes subset.json and plots/ where it runs (the repository root)."""
    ignored = (REPO_ROOT / ".gitignore").read_text().splitlines()
    assert "/subset.json" in ignored and "/plots/" in ignored
    shell = "".join(body for lang, body in tour_blocks() if lang == "bash")
    assert "-o subset.json" in shell and "--plots plots/" in shell


SUBCOMMANDS = ("list", "show", "get", "create", "items", "coverage", "restore", "retire", "rotate")


def _cli_table_commands() -> list[list[str]]:
    text = README.read_text()
    section = text[text.index("\n## CLI") :]
    commands = []
    for cell in re.findall(r"^\| `(benchslice [^`]+)`", section, re.M):
        for variant in re.findall(r"benchslice [a-z]+(?: [a-z]+)?", cell):
            words = variant.split()[1:]
            if words[-1] not in SUBCOMMANDS and len(words) == 2:
                words = words[:1]  # `benchslice push --…` style: a command, then options
            commands.append(words)
    return commands


def test_cli_table_commands_exist_with_examples() -> None:
    from typer.testing import CliRunner

    from app.cli import app

    commands = _cli_table_commands()
    assert ["verdict"] in commands and ["subset", "create"] in commands
    runner = CliRunner()
    for words in commands:
        result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (words, result.output)
        assert "Example" in result.output, words
