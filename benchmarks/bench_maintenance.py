"""Maintenance: how much a mirror shrinks after weeks of integrations, and what a round costs.

Simulates ``--days`` days of service on a synthetic repository (``--files`` files, ``--prs``
stacked PRs): every day each PR gets a new head, the mirror fetches them, and stackbot
integrates every PR's stack and the series, as the service does (merge commits and the trees
above the regenerated files written loose, each run name's refs rewritten). Then one
maintenance round repacks the mirror (every run is recent, so no ref expires: the gain is the
repack alone; loose objects are aged three hours, as a daily round finds them). Printed: the mirror's size before and after (ratio), loose objects before and
after, and the round's time against one day's integrations measured in the same run.
Run: ``python benchmarks/bench_maintenance.py [--days 30] [--prs 12] [--files 400]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import disk_usage
from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from stackbot.domain.integration import RunKind
from stackbot.domain.types import PrNumber, Sha
from stackbot.services.integration import RunRequest, StepMemo, run_integration
from stackbot.services.maintenance import run_maintenance

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@e",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@e",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def loose(git_dir: Path) -> int:
    return int(git(git_dir, "count-objects").split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--prs", type=int, default=12)
    parser.add_argument("--files", type=int, default=400)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-maintenance-"))
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for n in range(args.files):
        (work / f"pkg/m{n:04d}.py").parent.mkdir(exist_ok=True)
        (work / f"pkg/m{n:04d}.py").write_text(f"# module {n}\n" + f"x_{n} = {n}\n" * 60)
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "base")
    settings = load_settings(dev=True, data_dir=root / "data")
    settings.ensure_dirs()
    url = settings.effective_database_url
    migrate.upgrade(url)
    engine = make_engine(url)
    mirror = GitMirror.open_or_clone(str(work), settings.mirrors_dir)
    memo = StepMemo()
    day_times = []
    print(f"simulating {args.days} days, {args.prs} PRs, {args.files} files", file=sys.stderr)
    for day in range(args.days):
        heads: dict[int, Sha] = {}
        parent = "main"
        for pr in range(1, args.prs + 1):  # a stack: each PR on the one before
            git(work, "checkout", "-q", "-B", f"pr{pr}", parent)
            for k in range(3):
                path = work / f"pkg/m{(pr * 7 + k) % args.files:04d}.py"
                path.write_text(path.read_text() + f"y_{pr}_{day} = {day}\n")
            git(work, "commit", "-q", "-am", f"pr {pr} day {day}")
            heads[pr] = Sha(git(work, "rev-parse", "HEAD"))
            git(work, "update-ref", f"refs/pull/{pr}/head", heads[pr])
            parent = f"pr{pr}"
        git(work, "checkout", "-q", "main")
        started = time.perf_counter()
        mirror.fetch(["refs/heads/main", *(f"refs/pull/{pr}/head" for pr in heads)])
        for pr in heads:
            stack = [(PrNumber(p), heads[p]) for p in range(1, pr + 1)]
            run_integration(mirror, RunRequest("main", stack, RunKind.STACK, f"pr-{pr}"), memo=memo)
        series = [(PrNumber(p), heads[p]) for p in heads]
        run_integration(mirror, RunRequest("main", series, RunKind.SERIES, "series-1"), memo=memo)
        day_times.append(time.perf_counter() - started)
        if (day + 1) % 10 == 0:
            print(f"  day {day + 1}/{args.days}", file=sys.stderr)
    mirror.close()
    # The round runs daily: what the last day wrote is hours old, the rest days (the repack
    # keeps unreachable objects younger than an hour, for writers that hold no lock).
    hours_ago = time.time() - 3 * 3600
    for path in (mirror.git_dir / "objects").glob("??/*"):
        os.utime(path, (hours_ago, hours_ago))
    before, loose_before = disk_usage(mirror.git_dir), loose(mirror.git_dir)
    started = time.perf_counter()
    report = run_maintenance(engine, settings, say=lambda line: print(line, file=sys.stderr))
    round_s = time.perf_counter() - started
    after, loose_after = disk_usage(mirror.git_dir), loose(mirror.git_dir)
    day_s = sum(day_times) / len(day_times)
    print(f"mirror: {before / 2**20:.1f} MiB, {loose_before} loose objects before the round")
    print(f"mirror: {after / 2**20:.1f} MiB, {loose_after} loose objects after")
    print(
        f"size ratio before/after: {before / max(after, 1):.1f}x (freed {report.freed['mirrors'] / 2**20:.1f} MiB)"
    )
    print(
        f"round: {round_s:.2f}s; one day's integrations: {day_s:.2f}s (ratio {round_s / day_s:.2f})"
    )
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
