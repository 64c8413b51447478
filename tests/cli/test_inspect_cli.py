"""`benchslice push` of Inspect AI logs (a file, a log folder, a zip, --format), `subset get
--format inspect`, and `benchslice evaluate --run 'inspect eval … --sample-id {sample_ids}
--log-dir {output}'` driving real `inspect eval` with mockllm until it decides."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.cli.conftest import CLI
from tests.support.o200k import tiktoken_cache_dir
from tests.support.tools import missing

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"
LOGS = HERE / "logs"
GATE = HERE / "gate_task.py"


@pytest.fixture(scope="module")
def inspect_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("inspect_ai")
    cache = tiktoken_cache_dir(tmp_path_factory.mktemp("tiktoken"))
    return {"TIKTOKEN_CACHE_DIR": str(cache), "INSPECT_LOG_LEVEL": "warning"}


@pytest.fixture(scope="module")
def inspect_bin() -> Path:
    path = Path(sys.executable).parent / "inspect"
    found = path if path.exists() else shutil.which("inspect")
    if found is None:
        missing("inspect is not installed (a dev dependency: pip install -e '.[dev]')")
    return Path(found)


def test_push_an_eval_file_takes_the_logs_model(cli: CLI) -> None:
    run = cli(
        "push", "--create", "-b", "insp-cli", str(LOGS / "eval" / "arith_beta.eval"), "--json"
    )
    assert run.code == 0, run
    body = run.json()
    (result,) = body["results"]
    assert body["benchmark_created"] and result["model"]["name"] == "mockllm/beta"
    assert result["n_items"] == 8 and result["metric"] == "match"


def test_push_a_log_folder_and_a_zip_asks_for_the_scorer(cli: CLI, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("arith_gamma.eval", "graded_gamma.eval"):
        shutil.copy(LOGS / "eval" / name, folder / name)
    ambiguous = cli("push", "--create", "-b", "insp-dir", str(folder))
    assert ambiguous.code == 2, ambiguous
    assert "partial, closeness" in ambiguous.stderr and "nothing was created" in ambiguous.stderr
    args = ["push", "--create", "-b", "insp-dir", "--metric", "match,partial", "--json"]
    run = cli(*args, str(folder))
    assert run.code == 0, run
    assert run.json()["results"][0]["n_items"] == 16
    bundle = tmp_path / "logs.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        for f in folder.iterdir():
            z.write(f, f"run/{f.name}")
    again = cli(*args, str(bundle))
    assert again.code == 0, again
    assert (
        again.json()["results"][0]["replayed"]
        or again.json()["results"][0]["status"] == "unchanged"
    )


def test_format_override_and_mixed_models(cli: CLI, tmp_path: Path) -> None:
    plain = tmp_path / "log.txt"
    plain.write_bytes((LOGS / "json" / "arith_alpha.json").read_bytes())
    run = cli("push", "--create", "-b", "insp-fmt", "--format", "inspect", str(plain), "--json")
    assert run.code == 0, run
    assert run.json()["results"][0]["model"]["name"] == "mockllm/alpha"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for model in ("alpha", "beta"):
        shutil.copy(LOGS / "eval" / f"arith_{model}.eval", mixed / f"arith_{model}.eval")
    bad = cli("push", "-b", "insp-fmt", str(mixed))
    assert bad.code != 0 and "several models" in bad.stderr, bad
    # with --create the logs are read first: nothing is created
    fresh = cli("push", "--create", "-b", "insp-mixed", str(mixed))
    assert fresh.code != 0 and "nothing was created" in fresh.stderr, fresh
    broken = tmp_path / "broken.eval"
    broken.write_bytes((LOGS / "eval" / "arith_alpha.eval").read_bytes()[:4000])
    refused = cli("push", "--create", "-b", "insp-broken", str(broken))
    assert refused.code != 0 and "nothing was created" in refused.stderr, refused
    for name in ("insp-mixed", "insp-broken"):
        shown = cli("benchmarks", "show", name)
        assert shown.code != 0, shown  # never created


def _gate_run(inspect_bin: Path, extra: str) -> str:
    # from the task's folder: inspect resolves a task file relative to the working directory
    return (
        f"cd {shlex.quote(str(GATE.parent))} && {shlex.quote(str(inspect_bin))} eval {GATE.name} "
        f"--model mockllm/model --display none --no-log-realtime {extra}"
    )


def test_evaluate_runs_inspect_eval_until_it_decides(
    cli: CLI, inspect_bin: Path, inspect_env: dict[str, str], tmp_path: Path
) -> None:
    full = tmp_path / "full"
    done = subprocess.run(
        _gate_run(inspect_bin, f"--log-dir {shlex.quote(str(full))}"),
        shell=True,
        env={**__import__("os").environ, **inspect_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    made = cli("push", "--create", "-b", "insp-gate", str(full), "--json")
    assert made.code == 0, made
    assert made.json()["results"][0]["accuracy"] == 0.75  # mockllm on the gate task
    # the baseline: right on 10 of the 40 samples (25 %): mockllm is decidedly better
    baseline = tmp_path / "baseline.json"
    baseline.write_text(
        json.dumps(
            {
                "model": {"name": "org/weak"},
                "results": {f"gate/s{i}": float(i % 4 == 0) for i in range(40)},
            }
        )
    )
    assert cli("push", "-b", "insp-gate", str(baseline)).code == 0
    sid = cli("subset", "create", "-b", "insp-gate", "--method", "random", "-n", "6", "--seed", "3")
    assert sid.code == 0, sid
    exported = cli("subset", "get", sid.stdout.strip(), "--format", "inspect")
    assert exported.code == 0, exported
    (line,) = exported.stdout.strip().splitlines()
    task, flag, ids = line.split()
    assert task == "gate" and flag == "--sample-id" and len(ids.split(",")) == 6
    assert all(i.startswith("s") for i in ids.split(","))

    command = _gate_run(inspect_bin, "--sample-id {sample_ids} --log-dir {output}")
    # estimand benchmark: accuracy on these 40 items, decidable before the last one
    args = ["-b", "insp-gate", "-m", "mock/candidate", "--baseline", "org/weak", "--batch", "8"]
    args += ["--estimand", "benchmark"]
    run = cli(
        "evaluate",
        *args,
        "--seed",
        "0",
        "--policy",
        "random",
        "--run",
        command,
        "--json",
        **inspect_env,
    )
    assert run.code == 0, run
    final = json.loads(run.stdout)
    assert final["state"] == "decided" and final["decision"] == "better", final
    assert 8 <= final["items_used"] < 40 and final["items_used"] % 8 == 0
    assert final["difference"]["lower"] > 0

    # the same harness behind a release gate: each round runs inspect eval on its sample ids
    gate = cli(
        "gate", "--benchmark", "insp-gate", "--model", "mock/gate-candidate", "--baseline",
        "org/weak", "--margin", "0.02", "--batch", "8", "--seed", "0", "--run", command,
        "--json", **inspect_env,
    )  # fmt: skip
    assert gate.code == 0, gate  # PASS: no worse than the baseline by 2 points
    doc = json.loads(gate.stdout)
    assert doc["outcome"] == "pass" and not doc["offline"], doc
    (row,) = doc["benchmarks"]
    assert row["state"] == "noninferior" and 8 <= row["items"] < 40 and row["items"] % 8 == 0
    assert row["bound"] > -0.02 and row["delta"] > 0


def test_push_every_eval_ever_folder(cli: CLI) -> None:
    folder = HERE.parent / "eee" / "converted" / "arith"
    run = cli("push", "--create", "-b", "eee-arith", str(folder), "--json")
    assert run.code == 0, run
    (result,) = run.json()["results"]
    assert result["model"]["name"] == "mockllm/mockllm" and result["n_items"] == 8
    assert result["metric"] == "match:accuracy"


def test_push_helm_runs_folder_asks_for_the_stat(cli: CLI) -> None:
    folder = HERE.parent / "helm" / "runs"
    ambiguous = cli("push", "--create", "-b", "helm-runs", str(folder))
    assert ambiguous.code == 2 and "max_prob" in ambiguous.stderr, ambiguous
    assert "batch_size" not in ambiguous.stderr and "num_prompt_tokens" not in ambiguous.stderr
    run = cli(
        "push",
        "--create",
        "-b",
        "helm-runs",
        "--metric",
        "exact_match,max_prob",
        str(folder),
        "--json",
    )
    assert run.code == 0, run
    (result,) = run.json()["results"]
    # simple_mcqa 10 + simple1 10 + the extra_space run's 2 instances and their 2 perturbed copies
    assert result["model"]["name"] == "simple/model1" and result["n_items"] == 24
