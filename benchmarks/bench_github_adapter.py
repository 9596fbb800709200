"""The GitHub adapter's cost on the local stand-in, as ratios to baselines of the same run.

1. Per-call overhead: ``GitHubClient.get_pull`` (PyGithub requester, retry wrapper, JSON →
   ``PrRecord``) against a bare ``httpx`` GET of the same URL with the same token.
2. Reading a series of N open PRs: one paginated ``list_open_pulls`` against N ``get_pull``
   calls (what a per-PR sync does): requests sent and wall time.

    python benchmarks/bench_github_adapter.py [--prs 40] [--repeat 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from stackbot.adapters.github import GitHubClient
from stackbot.config import load_settings
from stackbot.standin import StandinServer

REPO = "NVIDIA/Megatron-LM"


def timed(run: Callable[[], object], repeat: int) -> float:
    run()  # warm-up: connections, caches
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, StandinServer(Path(tmp) / "standin") as github:
        control = github.control
        control.add_org("NVIDIA")
        control.create_repo(REPO, files={"README.md": "stand-in\n"})
        print(f"opening {args.prs} PRs on the stand-in ...", flush=True)
        for i in range(args.prs):
            control.open_pull(
                REPO, author="alice", head=f"pr-{i}", title=f"PR {i}", files={f"f{i}.py": f"{i}\n"}
            )
        token = control.create_token("bob")
        settings = load_settings(
            dev=True, github_token=token, github_api_url=github.url, data_dir=Path(tmp) / "d"
        )
        client = GitHubClient.from_settings(settings)
        numbers = sorted(control.repo(REPO).pulls)
        raw = httpx.Client(base_url=github.url, headers={"Authorization": f"token {token}"})

        adapter_s = timed(lambda: client.get_pull(REPO, numbers[0]), args.repeat)
        bare_s = timed(lambda: raw.get(f"/repos/{REPO}/pulls/{numbers[0]}").json(), args.repeat)
        print(
            f"get_pull: adapter {adapter_s * 1e3:.2f} ms, bare httpx {bare_s * 1e3:.2f} ms, "
            f"ratio {adapter_s / bare_s:.2f}x"
        )

        before = len(control.requests())
        listing_s = timed(lambda: client.list_open_pulls(REPO), 3)
        listing_requests = (len(control.requests()) - before) // 4
        before = len(control.requests())
        per_pr_s = timed(lambda: [client.get_pull(REPO, n) for n in numbers], 3)
        per_pr_requests = (len(control.requests()) - before) // 4
        print(
            f"{args.prs} open PRs: list_open_pulls {listing_requests} request(s) {listing_s * 1e3:.1f} ms; "
            f"get_pull each {per_pr_requests} requests {per_pr_s * 1e3:.1f} ms; "
            f"ratio {per_pr_requests / listing_requests:.0f}x requests, {per_pr_s / listing_s:.1f}x time"
        )
        raw.close()


if __name__ == "__main__":
    main()
