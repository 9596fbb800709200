"""Dashboard server time for a big series, against ``/healthz`` in the same run.

Seeds a database with one series of N PRs (default 60) and about J jobs (default 500), then
times ``GET /series/{key}`` (and its JSON twin) through the real app in this process, and the
trivial ``/healthz`` as the baseline. Prints p50/p95/max and the ratio of p95s, on SQLite and on
PostgreSQL (a fresh database on 127.0.0.1:5432).

    python benchmarks/bench_dashboard.py [--prs 60] [--jobs 500] [--requests 200]

Goal: p95 under 50 ms for /series/{key} with 60 PRs and 500 jobs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlmodel import Session, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from stackbot.db.models import Job
from stackbot.web.app import create_app
from tests.support import postgres
from tests.support.dashboard_data import seed_series


def timings(client: TestClient, path: str, n: int) -> list[float]:
    client.get(path)  # warm caches and templates
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return samples


def describe(name: str, samples: list[float]) -> tuple[float, str]:
    ordered = sorted(samples)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    text = f"{name:<22} p50 {statistics.median(ordered):7.2f} ms  p95 {p95:7.2f} ms  max {ordered[-1]:7.2f} ms"
    return p95, text


def run(url: str, label: str, args: argparse.Namespace, tmp: Path) -> None:
    migrate.upgrade(url)
    engine = make_engine(url)
    extra = max(0, args.jobs - 3 * args.prs)
    seed_series(engine, prs=args.prs, extra_jobs=extra)
    with Session(engine) as session:
        jobs = session.exec(select(func.count()).select_from(Job)).one()
    settings = load_settings(dev=True, data_dir=tmp / label, database_url=url)
    app = create_app(settings, engine=engine)
    with TestClient(app) as client:
        base = timings(client, "/healthz", args.requests)
        page = timings(client, "/series/6307", args.requests)
        api = timings(client, "/api/series/6307", args.requests)
    engine.dispose()
    print(f"\n{label}: one series of {args.prs} PRs, {jobs} jobs, {args.requests} requests each")
    base_p95, text = describe("/healthz (baseline)", base)
    print(text)
    for name, samples in (("/series/6307", page), ("/api/series/6307", api)):
        p95, text = describe(name, samples)
        verdict = "meets" if p95 < 50 else "MISSES"
        print(f"{text}  ×{p95 / base_p95:.1f} of baseline p95  ({verdict} the 50 ms goal)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        run(f"sqlite:///{tmp / 'dash.db'}", "SQLite", args, tmp)
        with postgres.fresh_database("stackbot_bench") as url:
            run(url, "PostgreSQL", args, tmp)


if __name__ == "__main__":
    main()
