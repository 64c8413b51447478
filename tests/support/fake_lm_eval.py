"""A stand-in for ``lm_eval`` in tests of CI recipes: it answers from a real results matrix
instead of running a model, and writes what ``lm_eval --log_samples`` writes (one
``samples_<task>_<timestamp>.jsonl`` and a ``results_<timestamp>.json`` naming the model).

Arguments used: ``--model_args pretrained=NAME``, ``--tasks TASK``, ``--samples FILE`` (lm-eval's
``{task: [doc_id, ...]}``; all documents without it), ``--output_path DIR``. The matrix is
``$FAKE_LM_EVAL_MATRIX`` (``.npz`` with ``correct`` and ``models``); ``$FAKE_LM_EVAL_AS`` maps
model names that are not rows of it onto rows (``new/name=row/name,…``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

STAMP = "2026-01-01T00-00-00.000000"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lm_eval")
    parser.add_argument("--model")
    parser.add_argument("--model_args", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--samples")
    parser.add_argument("--log_samples", action="store_true")
    parser.add_argument("--output_path", required=True)
    args = parser.parse_args(argv)
    name = dict(kv.split("=", 1) for kv in args.model_args.split(","))["pretrained"]
    alias = dict(
        kv.split("=", 1) for kv in os.environ.get("FAKE_LM_EVAL_AS", "").split(",") if "=" in kv
    )
    with np.load(os.environ["FAKE_LM_EVAL_MATRIX"], allow_pickle=False) as data:
        models = [str(m) for m in data["models"]]
        row = np.asarray(data["correct"][models.index(alias.get(name, name))], dtype=float)
    task = args.tasks
    docs = range(row.size)
    if args.samples:
        docs = json.loads(Path(args.samples).read_text())[task]
    out = Path(args.output_path) / name.replace("/", "__")
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"samples_{task}_{STAMP}.jsonl").open("w") as f:
        for d in docs:
            record = {
                "doc_id": int(d),
                "doc_hash": hashlib.sha256(f"{task}/{d}".encode()).hexdigest(),
                "filter": "none",
                "metrics": ["acc"],
                "acc": float(row[int(d)]),
            }
            f.write(json.dumps(record) + "\n")
    (out / f"results_{STAMP}.json").write_text(json.dumps({"model_name": name, "results": {}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
