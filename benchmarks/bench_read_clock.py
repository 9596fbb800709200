"""What the read clock costs writers: small writing transactions from several threads, with the
clock's triggers and without them (dropped, in the same run, on the same database).

Each transaction updates one job row (as a worker recording a job's state does) and commits.
On PostgreSQL every such commit also takes the clock row's lock (a deferred trigger), so
writers queue there for the length of a commit; on SQLite writers are serialised anyway and the
trigger adds one row update inside the transaction.

    python benchmarks/bench_read_clock.py [--threads 4] [--transactions 500] [--sqlite-only]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackbot.db import migrate, read_clock
from stackbot.db.engine import make_engine
from tests.support import postgres
from tests.support.dashboard_data import seed_series


def writers(engine: Engine, threads: int, transactions: int) -> float:
    """Transactions per second, ``threads`` threads each committing ``transactions``."""
    with engine.connect() as conn:
        ids = [row[0] for row in conn.execute(text("SELECT id FROM jobs ORDER BY id"))]
    assert len(ids) >= threads, "seed more jobs than threads"

    def work(job_id: int) -> None:
        for n in range(transactions):
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE jobs SET gpu_seconds = :s WHERE id = :i"), {"s": n, "i": job_id}
                )

    pool = [threading.Thread(target=work, args=(ids[k],)) for k in range(threads)]
    start = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return threads * transactions / (time.perf_counter() - start)


def run(url: str, label: str, args: argparse.Namespace) -> None:
    migrate.upgrade(url)
    engine = make_engine(url)
    seed_series(engine, prs=10)
    rates: dict[str, list[float]] = {"with the clock": [], "without": []}
    for _ in range(args.repeat):  # interleaved: drift in load touches both alike
        rates["with the clock"].append(writers(engine, args.threads, args.transactions))
        with engine.begin() as conn:
            read_clock.uninstall(conn)
        rates["without"].append(writers(engine, args.threads, args.transactions))
        with engine.begin() as conn:
            read_clock.install(conn)
    engine.dispose()
    best = {k: max(v) for k, v in rates.items()}
    print(f"{label}: {args.threads} threads x {args.transactions} one-row transactions")
    for name, rate in best.items():
        print(f"  {name:<15} {rate:8.0f} transactions/s (best of {args.repeat})")
    print(f"  the clock costs writers {1 - best['with the clock'] / best['without']:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--transactions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(f"sqlite:///{Path(tmp) / 'clock.db'}", "SQLite", args)
    if not args.sqlite_only:
        with postgres.fresh_database("stackbot_bench") as url:
            run(url, "PostgreSQL", args)


if __name__ == "__main__":
    main()
