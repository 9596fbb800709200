"""What retention keeps (pure): the runs the reports show, what unfinished jobs need, the
baselines those runs compare with and the originals their jobs reuse."""

from __future__ import annotations

from datetime import UTC, datetime

from stackbot.domain.retention import JobFact, RunFact, decide_keep, expired, human_bytes

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)


def _run(id: int, name: str, *, kind: str = "stack", pr: int | None = None,
         key: str | None = None, at: datetime = T0) -> RunFact:  # fmt: skip
    return RunFact(id, 1, kind, f"refs/stackbot/{kind}/{name}/head", key, pr, "b" * 40, at)


def _job(id: int, run: int | None, *, finished: bool = True, kind: str = "integration",
         commit: str = "c" * 40, reused: int | None = None) -> JobFact:  # fmt: skip
    return JobFact(id, 1, run, kind, commit, finished, T0 if finished else None, reused)


def test_what_is_kept() -> None:
    runs = [
        _run(1, "pr-1", pr=1),  # closed PR: not shown
        _run(2, "pr-2", pr=2),  # open PR, older run of the name
        _run(3, "pr-2", pr=2, at=T1),  # open PR, newest run: shown
        _run(4, "series-6307", kind="series", key="#6307"),  # series with an open PR
        _run(5, "series-9", kind="series", key="#9"),  # every PR closed
        _run(6, "pr-7", pr=7),  # closed, but a job still runs
    ]
    jobs = [
        _job(10, 1),
        _job(11, 2),
        _job(12, 3),
        _job(13, 4, reused=10),  # takes job 10's outcome: 10's output is needed too
        _job(14, None, kind="baseline", commit="b" * 40),  # main, which the shown runs use
        _job(15, None, kind="baseline", commit="d" * 40),  # an old main
        _job(16, 6, finished=False, commit="e" * 40),
    ]
    keep = decide_keep(
        runs, jobs, open_prs={1: frozenset({2})}, series_with_open_prs={1: frozenset({"#6307"})}
    )
    assert keep.ref_prefixes == {
        (1, "refs/stackbot/stack/pr-2/"),
        (1, "refs/stackbot/series/series-6307/"),
        (1, "refs/stackbot/stack/pr-7/"),
    }
    assert keep.job_ids == {12, 13, 10, 14, 16}
    assert keep.job_commits == {1: {"job-16": "e" * 40}}
    assert keep.newest_run_of[(1, "refs/stackbot/stack/pr-2/")] == T1


def test_expired_and_sizes() -> None:
    assert expired(0.0, now=31 * 86400.0, retention_days=30)
    assert not expired(0.0, now=29 * 86400.0, retention_days=30)
    assert not expired(None, now=1e12, retention_days=0)  # age unknown: kept
    assert [human_bytes(n) for n in (None, 512, 1536, 3 * 1024**3)] == [
        "—", "512 B", "1.5 KiB", "3.0 GiB"
    ]  # fmt: skip
