"""``benchslice push`` of an lm-eval output folder sends the run's results JSON along: the
server stores the evaluation configuration (drift guard)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.ingest import config_fingerprint, parse_lm_eval_config
from tests.cli.conftest import CLI, FIXTURES

ARC = FIXTURES / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
RESULTS = FIXTURES / "results_2024-05-01T10-00-00.123456.json"


def test_push_folder_stores_the_runs_config(cli: CLI, tmp_path: Path) -> None:
    out = tmp_path / "out" / "org__model-7b"
    out.mkdir(parents=True)
    shutil.copy(ARC, out / ARC.name)
    shutil.copy(RESULTS, out / RESULTS.name)
    other = json.loads(RESULTS.read_text())  # another run's results (other timestamp): not sent
    other["n-shot"]["arc_easy"] = 25
    (out / "results_2023-01-01T00-00-00.000000.json").write_text(json.dumps(other))
    run = cli("push", "--create", "--benchmark", "arc-cfg", "--metric", "acc", str(out), "--json")
    assert run.code == 0, run
    (result,) = run.json()["results"]
    assert result["model"]["name"] == "org/model-7b"
    cfg = parse_lm_eval_config(
        RESULTS.read_bytes(), tasks=["arc_easy"], metric="acc", filter="none"
    )
    assert result["eval_config"] == cfg and result["eval_config"]["num_fewshot"] == 0
    assert result["config_fingerprint"] == config_fingerprint(cfg)
