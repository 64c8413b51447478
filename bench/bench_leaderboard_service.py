"""The leaderboard service on a leaderboard-size population in Postgres (issue 27).

SYNTHETIC population from ``bench/synth.py`` (GPQA-calibrated 2PL, seed 0), default 5,000
models x 250 items, stored in one batch through ``app.services.catalog.bulk_results.store_many``
into a scratch Postgres database (migrated, dropped at the end); 200 models are also stored one
by one (``store_results``) for comparison. Then, in this process (the service layer an API
worker runs, without HTTP):

* cold leaderboard: decode the matrix from Postgres + engine + JSON rendering (caches cleared);
* warm leaderboard: the same request again (rendered bytes cached);
* first page of the unfiltered pairs (1,000 pairs) and of the significant pairs;
* the process's peak resident set (``VmHWM``) before the leaderboard and after everything.

    .venv/bin/python bench/bench_leaderboard_service.py [--models 5000] [--items 250]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database, status_mb  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=5_000)
    parser.add_argument("--items", type=int, default=250)
    args = parser.parse_args(argv)

    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.benchmarks import create_version, get_version
    from app.services.catalog.bulk_results import store_many
    from app.services.catalog.results import store_results
    from app.services.ranking import leaderboards, pair_pages
    from bench.synth import make_synthetic

    correct = make_synthetic(args.models, args.items, seed=0).correct
    print(f"load before: {os.getloadavg()}")
    with scratch_database("benchslice_lb") as url:
        factory = sessionmaker(create_engine(url))
        batch = [
            (ModelCreate(name=f"model-{i:05d}"), parse_columnar(correct[i].tolist()))
            for i in range(args.models)
        ]
        with factory() as session:
            ids = [f"item-{j}" for j in range(args.items)]
            version, _ = create_version(session, "synth-board", ids, [None] * args.items)
            one_by_one = create_version(session, "one-by-one", ids, [None] * args.items)[0]
            session.commit()
            version_id, one_by_one_id = version.id, one_by_one.id
        with factory() as session:
            t0 = time.perf_counter()
            store_many(session, version_id, batch)
            session.commit()
            bulk_s = time.perf_counter() - t0
        n_one = min(200, args.models)
        with factory() as session:
            t0 = time.perf_counter()
            for ref, parsed in batch[:n_one]:
                store_results(session, one_by_one_id, ref, parsed)
            session.commit()
            one_s = time.perf_counter() - t0
        print(
            f"stored {args.models:,} x {args.items:,} in one batch (store_many, parsed input): "
            f"{bulk_s:.2f} s; model by model (store_results): {one_s / n_one * 1e3:.1f} ms a "
            f"model ({n_one} models)"
        )
        del correct
        hwm_before = status_mb("VmHWM")
        with factory() as session:
            version = get_version(session, version_id)
            query = leaderboards.LeaderboardQuery.of()
            leaderboards.clear_caches()
            t0 = time.perf_counter()
            body = leaderboards.rendered(session, version, query, fmt="json")
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            leaderboards.rendered(session, version, query, fmt="json")
            warm = time.perf_counter() - t0
            computed = leaderboards.compute(session, version, query)
            t0 = time.perf_counter()
            page = pair_pages.pairs_page(computed, query, pair_pages.PairsFilter())
            data = pair_pages.render_page(computed, page, "json")
            first_page = time.perf_counter() - t0
            t0 = time.perf_counter()
            sig = pair_pages.pairs_page(computed, query, pair_pages.PairsFilter(significant=True))
            sig_page = time.perf_counter() - t0
        print(f"cold leaderboard (load + engine + JSON, {len(body) / 2**20:.1f} MiB): {cold:.2f} s")
        print(f"warm leaderboard: {warm * 1e3:.1f} ms")
        print(
            f"first pairs page ({len(page.columns['model_a']):,} pairs, "
            f"{len(data) / 2**10:.0f} KiB): {first_page * 1e3:.0f} ms; first significant page "
            f"({len(sig.columns['model_a']):,} pairs): {sig_page * 1e3:.0f} ms"
        )
        print(
            f"peak RSS before the leaderboard {hwm_before:.0f} MB, after all {status_mb('VmHWM'):.0f} MB"
        )
        print(
            f"tiers {computed.info.n_tiers}, significant pairs {computed.board.table.n_significant:,} of {computed.board.table.n_pairs:,}"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
