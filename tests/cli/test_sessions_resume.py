"""`benchslice evaluate --session ID` and `benchslice sessions` against a live service (SQLite
+ its worker) on GPQA (issue 23): a session left open after its first batch is resumed from
its open batch, the batch answered before is kept as it was, and the listing finds it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.client import Client
from tests.cli.conftest import CLI, HELD_OUT

pytestmark = pytest.mark.integration


def test_resume_an_open_session(cli: CLI, service, gpqa: dict[str, Any]) -> None:
    with np.load(gpqa["path"]) as data:
        names = [str(m) for m in data["models"]]
        ids = [str(i) for i in data["item_ids"]]
        truth = data["correct"][names.index(HELD_OUT)].astype(float)
        acc = data["correct"].mean(axis=1)
    baseline = names[int(np.argmin(np.where(np.asarray(names) == HELD_OUT, 9, acc)))]
    with Client(service.url) as bs:
        start = bs.create_session(
            "gpqa",
            "resume/held-out",
            baseline=baseline,
            policy="random",
            estimand="benchmark",  # 9 points: generalized needs more than 448 items here
            batch_size=20,
            seed=3,
        )
        s = start.session
        assert s is not None
        first = bs.post_session_results(
            s.id,
            model=s.model,
            results={it.item_id: truth[ids.index(it.item_id)] for it in s.next_items},
            batch=1,
        )
    assert first.state == "open" and first.step == 1

    listed = cli("sessions", "-b", "gpqa", "--model", "resume/held-out", "--state", "open")
    assert listed.code == 0 and str(s.id) in listed.stdout, listed
    answers = ["--answers", str(gpqa["path"]), "--answers-model", HELD_OUT]
    run = cli("evaluate", "--session", str(s.id), *answers, "--json")
    assert run.code == 0, run
    final = run.json()
    assert final["id"] == str(s.id) and final["state"] == "decided"
    assert final["history"][0] == first.model_dump(mode="json")["history"][0]
    assert [h["items_used"] for h in final["history"]] == list(
        range(20, final["items_used"] + 1, 20)
    )
    assert final["difference"]["lower"] > 0  # the weakest model as the baseline
    listed = cli("sessions", "-b", "gpqa", "--model", "resume/held-out", "--json")
    assert [(r["id"], r["state"]) for r in listed.json()["items"]] == [(str(s.id), "decided")]
    # resuming a closed session prints where it ended and exits by its state
    again = cli("evaluate", "--session", str(s.id), *answers)
    assert again.code == 0 and again.stdout.strip().endswith("decided: better"), again


def test_session_usage_errors(cli: CLI, gpqa: dict[str, Any]) -> None:
    answers = ["--answers", str(gpqa["path"]), "--answers-model", HELD_OUT]
    mixed = cli(
        "evaluate", "--session", "00000000-0000-0000-0000-000000000000", "-b", "gpqa", *answers
    )
    assert mixed.code == 2 and "--benchmark" in mixed.stderr, mixed
    neither = cli("evaluate", *answers)
    assert neither.code == 2 and "--session" in neither.stderr, neither
    unknown = cli("evaluate", "--session", "00000000-0000-0000-0000-000000000000", *answers)
    assert unknown.code == 2 and "does not exist" in unknown.stderr, unknown
    bad_state = cli("sessions", "-b", "gpqa", "--state", "sleeping")
    assert bad_state.code == 2 and "--state" in bad_state.stderr, bad_state
