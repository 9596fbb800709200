"""The broken-node rule (issue 26 point 4), pure: a node whose latest jobs were infra in a row
is excluded; a clean job between, stale evidence or a re-admission after them keeps it in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stackbot.domain.broken_nodes import NodeJob, NodePolicy, blamed, check_due, to_exclude

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
POLICY = NodePolicy()


def job(node: str, job_id: int, status: str, hours: float) -> NodeJob:
    return NodeJob(node, job_id, status, T0 + timedelta(hours=hours), line="NCCL timeout")


def test_two_infra_jobs_in_a_row_exclude_the_node_with_them_as_evidence() -> None:
    jobs = [job("n1", 1, "passed", 0), job("n1", 2, "infra", 1), job("n2", 3, "infra", 1.5)]
    jobs.append(job("n1", 4, "infra", 2))
    found = to_exclude(jobs, now=T0 + timedelta(hours=2), policy=POLICY)
    assert list(found) == ["n1"]
    assert [j.job_id for j in found["n1"]] == [2, 4]
    assert found["n1"][0].to_json()["line"] == "NCCL timeout"


def test_a_clean_job_between_two_infra_failures_keeps_the_node_in() -> None:
    # A test failure is clean here: the node ran the tests to their end.
    jobs = [job("n1", 1, "infra", 0), job("n1", 2, "failed", 1), job("n1", 3, "infra", 2)]
    assert to_exclude(jobs, now=T0 + timedelta(hours=2), policy=POLICY) == {}


def test_a_busy_healthy_node_with_scattered_infra_failures_stays_in() -> None:
    jobs = []
    for i in range(40):  # one transient infra failure in every ten jobs, never two in a row
        jobs.append(job("n1", i, "infra" if i % 10 == 3 else "passed", i * 0.1))
    assert to_exclude(jobs, now=T0 + timedelta(hours=4), policy=POLICY) == {}


def test_evidence_outside_the_window_or_before_a_readmission_does_not_count() -> None:
    jobs = [job("n1", 1, "infra", 0), job("n1", 2, "infra", 80)]
    assert to_exclude(jobs, now=T0 + timedelta(hours=80), policy=POLICY) == {}
    weekend = [job("n1", 1, "infra", 0), job("n1", 2, "infra", 60)]
    assert list(to_exclude(weekend, now=T0 + timedelta(hours=60), policy=POLICY)) == ["n1"]
    readmitted = {"n1": T0 + timedelta(hours=30)}
    assert to_exclude(weekend, now=T0 + timedelta(hours=60), policy=POLICY, since=readmitted) == {}
    assert to_exclude(weekend, now=T0 + timedelta(hours=60), policy=POLICY, held=["n1"]) == {}


def test_the_count_is_a_setting() -> None:
    jobs = [job("n1", 1, "infra", 0), job("n1", 2, "infra", 1)]
    strict = NodePolicy(infra_count=3)
    assert to_exclude(jobs, now=T0 + timedelta(hours=1), policy=strict) == {}
    jobs.append(job("n1", 3, "infra", 2))
    assert list(to_exclude(jobs, now=T0 + timedelta(hours=2), policy=strict)) == ["n1"]


def test_an_infra_failure_is_blamed_on_the_node_its_message_names() -> None:
    assert blamed(["n1", "n2"], "node n2: node check failed: all_reduce") == ["n2"]
    assert blamed(["n1", "n2"], "infra signature nccl-timeout (nccl) on rank 3") == ["n1", "n2"]
    assert blamed(["n1", "n10"], "node check failed on n10") == ["n10"]
    assert blamed(["gpu-1", "gpu-10"], "lost gpu-10") == ["gpu-10"]


def due(minutes: float, *, last: float | None = None, failed: int = 0, asked: bool = False) -> bool:
    last_at = None if last is None else T0 + timedelta(minutes=last)
    return check_due(
        excluded_at=T0,
        last_check_at=last_at,
        failed_checks=failed,
        asked=asked,
        now=T0 + timedelta(minutes=minutes),
        policy=POLICY,
    )


def test_a_check_is_due_after_the_recheck_interval_backed_off_or_at_once_when_asked() -> None:
    assert not due(29) and due(29, asked=True) and due(30)
    # After one failed check: an hour; after three: four hours; never more than a day.
    assert not due(30 + 59, last=30, failed=1) and due(30 + 60, last=30, failed=1)
    assert not due(100 + 239, last=100, failed=3) and due(100 + 240, last=100, failed=3)
    assert due(100 + 24 * 60, last=100, failed=12)
    assert not due(100 + 24 * 60 - 1, last=100, failed=12)
