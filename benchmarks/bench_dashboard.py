"""Dashboard server time for a big series, against ``/healthz`` in the same run.

Seeds a database with one series of N PRs (default 60) and about J jobs (default 500), then
times ``GET /series/{key}`` (and its JSON twin) and PR pages through the real app in this
process, and the trivial ``/healthz`` as the baseline. Prints p50/p95/max and the ratio of
p95s, on SQLite and on PostgreSQL (a fresh database on 127.0.0.1:5432), with the SQL statements
each page sends.

Each page is timed twice: as dashboards read it while nothing changes (the page computed at the
read clock's current tick is kept and sent again: ``stackbot/web/page_cache.py``), and right
after a write that moves the clock (``--computed`` requests, each after its own write: the page
is computed from the database).

    python benchmarks/bench_dashboard.py [--prs 60] [--jobs 500] [--requests 200]
        [--computed 20] [--write pull|job] [--sqlite-only | --database-url URL]
        [--paths PATH ...] [--json]

A write to a PR (``--write pull``, the default) leaves what the page derives from the runs'
tables kept (``stackbot/services/read_batch.py``'s SharedMemo); ``--write job`` times the
page computed from nothing.

Issue 16's goal: p95 under 50 ms for /series/{key} with 500 PRs and 5,000 jobs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, func, update
from sqlmodel import Session, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from stackbot.db.models import Job, PullRequest
from stackbot.web.app import create_app
from tests.support import postgres
from tests.support.dashboard_data import seed_series

FIRST_PR = 8034  # seed_series numbers its chain from here


def timings(
    client: TestClient, path: str, n: int, before: Callable[[], None] | None = None
) -> list[float]:
    client.get(path)  # warm caches and templates
    samples = []
    for _ in range(n):
        if before is not None:
            before()
        start = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return samples


def queries(client: TestClient, engine: Engine, path: str) -> int:
    """SQL statements one (warm) request to ``path`` sends to the database."""
    seen: list[object] = []

    def record(*args: object) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", record)
    try:
        assert client.get(path).status_code == 200, path
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return len(seen)


def touch(engine: Engine, what: str = "pull") -> Callable[[], None]:
    """A write that moves the read clock, in its own transaction: the next request cannot use
    a kept page and computes it. ``pull``: a PR's title changes (what the runs' tables give is
    still kept); ``job``: a job's node changes (everything is read again)."""
    counter = iter(range(10**9))

    def write() -> None:
        with engine.begin() as conn:
            if what == "job":
                conn.execute(
                    update(Job)
                    .where(Job.id == 1)  # type: ignore[arg-type]
                    .values(node=f"n{next(counter)}")
                )
                return
            conn.execute(
                update(PullRequest)
                .where(PullRequest.number == FIRST_PR)  # type: ignore[arg-type]
                .values(title=f"touched {next(counter)}")
            )

    return write


def p95_of(samples: list[float]) -> float:
    return sorted(samples)[int(0.95 * (len(samples) - 1))]


def describe(name: str, samples: list[float]) -> tuple[float, str]:
    ordered = sorted(samples)
    p95 = p95_of(samples)
    text = f"{name:<22} p50 {statistics.median(ordered):7.2f} ms  p95 {p95:7.2f} ms  max {ordered[-1]:7.2f} ms"
    return p95, text


def run(url: str, label: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    migrate.upgrade(url)
    engine = make_engine(url)
    extra = max(0, args.jobs - 3 * args.prs)
    seed_series(engine, prs=args.prs, extra_jobs=extra)
    with Session(engine) as session:
        jobs = session.exec(select(func.count()).select_from(Job)).one()
    settings = load_settings(dev=True, data_dir=tmp / label, database_url=url)
    app = create_app(settings, engine=engine)
    deep = FIRST_PR + args.prs - 2  # its stack holds almost the whole series
    paths = [
        "/series/6307",
        "/api/series/6307",
        f"/pulls/{FIRST_PR + 1}",
        f"/pulls/{deep}",
        f"/api/pulls/{deep}",
    ]
    if args.paths:
        paths = [path for path in paths if path in args.paths]
    pages: dict[str, dict[str, float]] = {}
    with TestClient(app) as client:
        base = timings(client, "/healthz", args.requests)
        changed = touch(engine, args.write)
        for path in paths:
            samples = timings(client, path, args.requests)
            kept_queries = queries(client, engine, path)
            fresh = timings(client, path, args.computed, before=changed)
            changed()
            pages[path] = {
                "queries": kept_queries,
                "p50_ms": round(statistics.median(samples), 2),
                "p95_ms": round(p95_of(samples), 2),
                "max_ms": round(max(samples), 2),
                "computed_queries": queries(client, engine, path),
                "computed_p50_ms": round(statistics.median(fresh), 2),
                "computed_p95_ms": round(p95_of(fresh), 2),
            }
    engine.dispose()
    base_p95 = p95_of(base)
    result = {
        "database": label,
        "prs": args.prs,
        "jobs": jobs,
        "requests": args.requests,
        "write": args.write,
        "healthz_p95_ms": round(base_p95, 2),
        "pages": pages,
    }
    if not args.json:
        print(
            f"\n{label}: one series of {args.prs} PRs, {jobs} jobs, {args.requests} requests each"
        )
        print(describe("/healthz (baseline)", base)[1])
        for path, page in pages.items():
            p95 = page["p95_ms"]
            verdict = "meets" if p95 < 50 else "MISSES"
            print(
                f"{path:<22} p50 {page['p50_ms']:7.2f} ms  p95 {p95:7.2f} ms  "
                f"{page['queries']:5d} queries  ×{p95 / base_p95:.1f} of baseline p95  "
                f"({verdict} the 50 ms goal)"
            )
            print(
                f"{'  after a ' + args.write + ' write':<22} p50 {page['computed_p50_ms']:7.2f} ms  "
                f"p95 {page['computed_p95_ms']:7.2f} ms  {page['computed_queries']:5d} queries  "
                f"×{page['computed_p95_ms'] / base_p95:.1f} of baseline p95  (computed)"
            )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--computed",
        type=int,
        default=20,
        help="requests each made right after a write (the page is computed, not kept)",
    )
    parser.add_argument(
        "--write",
        choices=("pull", "job"),
        default="pull",
        help="the write before each computed request: a PR's title (default) or a job's node",
    )
    parser.add_argument(
        "--database-url",
        help="run on this (empty) database instead of SQLite plus a fresh local PostgreSQL",
    )
    parser.add_argument("--sqlite-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--paths",
        nargs="+",
        metavar="PATH",
        help="time only these of the pages (e.g. /series/6307: issue 27's computed figure)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        if args.database_url:
            results.append(run(args.database_url, "given", args, tmp))
        else:
            results.append(run(f"sqlite:///{tmp / 'dash.db'}", "SQLite", args, tmp))
            if not args.sqlite_only:
                with postgres.fresh_database("stackbot_bench") as url:
                    results.append(run(url, "PostgreSQL", args, tmp))
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
