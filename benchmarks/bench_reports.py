"""Reporting and reconciliation on a long series, as ratios to baselines of the same run.

On the local GitHub stand-in with N open PRs (default 60, each with two test rows):

1. Republishing unchanged reports (the coalesced publisher skips by content hash) against
   republishing with the stored hashes forgotten (what a publisher without them must do: edit
   every comment and check run). Requests sent and wall time.
2. Reconciling an unchanged repository (one paginated list of open PRs) against syncing every
   PR (what periodic repair without the comparison would cost). Requests and wall time.

    python benchmarks/bench_reports.py [--prs 60]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import update

from stackbot.adapters.github import GitHubClient
from stackbot.adapters.github.pacing import WritePacer
from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine, session_scope
from stackbot.db.models import Report
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.report_view import ApprovalView, PrRef, PrReportView, TestRow
from stackbot.services.reconcile import reconcile_repo
from stackbot.services.reporting import publish_reports
from stackbot.services.sync import sync_pull_request
from stackbot.standin import StandinServer

REPO = "NVIDIA/Megatron-LM"


def measure(control: object, run: Callable[[], object]) -> tuple[int, float]:
    before = len(control.requests())  # type: ignore[attr-defined]
    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    return len(control.requests()) - before, elapsed  # type: ignore[attr-defined]


def views(heads: dict[int, str]) -> list[PrReportView]:
    tests = {f"t.py::test_{i}": "passed" for i in range(23)}
    main = {f"t.py::test_{i}": "passed" if i < 14 else "failed" for i in range(23)}
    comparison = compare_with_main(
        TestOutcomes("passed", Counts.of_tests(tests), tests),
        TestOutcomes("failed", Counts.of_tests(main), main),
    )
    rows = (
        TestRow("amax-group", "1x4", "passed", comparison),
        TestRow("amax-group", "2x4", "passed", comparison),
    )
    return [
        PrReportView(
            REPO, PrRef(n, f"PR {n}"), head, ApprovalView("approved", by="bob"), tests=rows
        )
        for n, head in sorted(heads.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StandinServer(Path(tmp) / "standin") as github:
        control = github.control
        control.add_org("NVIDIA")
        control.create_repo(REPO, files={"README.md": "stand-in\n"})
        control.set_permission(REPO, "bob", "write")  # a token: commit statuses, not check runs
        print(f"opening {args.prs} PRs on the stand-in ...", flush=True)
        for i in range(args.prs):
            control.open_pull(
                REPO, author="alice", head=f"pr-{i}", title=f"PR {i}", files={f"f{i}.py": f"{i}\n"}
            )
        settings = load_settings(
            dev=True,
            github_token=control.create_token("bob"),
            github_api_url=github.url,
            data_dir=Path(tmp) / "data",
        )
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        migrate.upgrade(url)
        engine = make_engine(url)
        client = GitHubClient.from_settings(
            settings, pacer=WritePacer(per_minute=10**6, per_hour=10**6)
        )
        numbers = sorted(control.repo(REPO).pulls)
        print(f"syncing {len(numbers)} PRs ...", flush=True)
        for n in numbers:
            sync_pull_request(engine, client, settings, repo=REPO, number=n)
        heads = {n: control.pull(REPO, n).head_sha for n in numbers}
        publish_reports(engine, client, REPO, views(heads))  # first publish: creates everything

        skip_requests, skip_s = measure(
            control, lambda: publish_reports(engine, client, REPO, views(heads))
        )

        def forget_and_publish() -> None:
            with session_scope(engine) as session:
                session.execute(update(Report).values(comment_hash=None, check_runs={}))
            publish_reports(engine, client, REPO, views(heads))

        naive_requests, naive_s = measure(control, forget_and_publish)
        print(
            f"republish {len(numbers)} unchanged reports: coalesced {skip_requests} requests "
            f"{skip_s * 1e3:.0f} ms; without stored hashes {naive_requests} requests "
            f"{naive_s * 1e3:.0f} ms; ratio {naive_s / max(skip_s, 1e-9):.0f}x time"
        )

        reconcile_requests, reconcile_s = measure(
            control, lambda: reconcile_repo(engine, client, repo=REPO)
        )
        sync_requests, sync_s = measure(
            control,
            lambda: [
                sync_pull_request(engine, client, settings, repo=REPO, number=n) for n in numbers
            ],
        )
        print(
            f"repair pass over {len(numbers)} open PRs: reconcile {reconcile_requests} request(s) "
            f"{reconcile_s * 1e3:.0f} ms; sync every PR {sync_requests} requests "
            f"{sync_s * 1e3:.0f} ms; ratio {sync_requests / max(reconcile_requests, 1):.0f}x "
            f"requests, {sync_s / reconcile_s:.0f}x time"
        )
        engine.dispose()


if __name__ == "__main__":
    main()
