"""Build ``alpaca_eval_weighted.npz``: a REAL graded matrix with REAL per-item output lengths.

Source: the AlpacaEval repository (github.com/tatsu-lab/alpaca_eval, Apache-2.0), its per-model
``results/<model>/weighted_alpaca_eval_gpt4_turbo/annotations.json``: for each of the 805
AlpacaEval instructions, the GPT-4-turbo judge's *weighted* preference in [1, 2] for the model's
output over the reference ``gpt4_1106_preview`` output (the judge's log-probabilities, so a
continuous win probability), and the model's output text.

Written per model (rows) and instruction (columns, sorted by instruction text):

* ``scores``: preference - 1, in [0, 1] (a graded per-item score: 1 = the judge prefers the
  model for sure); most are near 0, as judge preferences against a strong reference are;
* ``words``: the model's output length in whitespace-separated words (a REAL per-item cost
  proxy: generation cost grows with the output tokens);
* ``models``, ``instructions``, ``subsets`` (each instruction's source set: helpful_base, koala,
  oasst, selfinstruct, vicuna; the benchmark's real subtasks).

Only models whose annotation file covers all 805 instructions are kept. Usage (with the repository
as a bare git directory, e.g. what a ``git clone --mirror`` gives)::

    python bench/data/build_alpaca_eval.py GIT_DIR [--out bench/data/alpaca_eval_weighted.npz]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"


def _git(git_dir: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True)


def build(git_dir: str) -> dict:
    listing = _git(git_dir, "ls-tree", "-r", "HEAD").stdout.decode().splitlines()
    blobs = [
        (line.split()[2], line.split("\t")[1])
        for line in listing
        if line.endswith(f"/{ANNOTATOR}/annotations.json")
        and line.split("\t")[1].startswith("results/")
    ]
    subsets: list[str] = []
    order: list[str] | None = None
    models, scores, words = [], [], []
    for blob, path in blobs:
        got = _git(git_dir, "cat-file", "-p", blob)
        if got.returncode:  # a blob the snapshot does not hold
            continue
        rows = {r["instruction"]: r for r in json.loads(got.stdout)}
        if order is None:
            order = sorted(rows)
        if set(rows) != set(order) or any(rows[i].get("preference") is None for i in order):
            continue  # not every instruction judged
        models.append(path.split("/")[1])
        scores.append([float(rows[i]["preference"]) - 1.0 for i in order])
        words.append([len((rows[i]["output_2"] or "").split()) for i in order])
        if len(models) == 1:
            subsets = [str(rows[i]["dataset"]) for i in order]
    commit = _git(git_dir, "rev-parse", "HEAD").stdout.decode().strip()
    return {
        "models": np.array(models),
        "instructions": np.array(order),
        "subsets": np.array(subsets),
        "scores": np.clip(np.array(scores), 0.0, 1.0).astype(np.float32),
        "words": np.array(words, dtype=np.int32),
        "source_commit": np.array(commit),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("git_dir")
    ap.add_argument("--out", default=str(Path(__file__).with_name("alpaca_eval_weighted.npz")))
    args = ap.parse_args()
    data = build(args.git_dir)
    np.savez_compressed(args.out, **data)
    s = data["scores"]
    print(f"{s.shape[0]} models x {s.shape[1]} items from {data['source_commit']} -> {args.out}")


if __name__ == "__main__":
    main()
