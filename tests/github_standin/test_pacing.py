"""The write pacer's schedule: never more than 80 writes in any minute or 500 in any hour,
each write as early as that allows, shared by every client of the process."""

from __future__ import annotations

import threading

from stackbot.adapters.github import GitHubClient, WritePacer, shared_write_pacer
from stackbot.config import Settings
from tests.support.standin import StandinWorld


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _max_in_window(slots: list[float], width: float) -> int:
    best, start = 0, 0
    for end, slot in enumerate(slots):
        while slot - slots[start] >= width:
            start += 1
        best = max(best, end - start + 1)
    return best


def test_a_burst_is_spread_over_minutes_and_hours() -> None:
    clock = Clock()
    pacer = WritePacer(clock=clock, sleep=clock.sleep)
    slots = [pacer.reserve() for _ in range(1200)]
    assert slots[:80] == [0.0] * 80
    assert slots[80:160] == [60.0] * 80
    assert slots[480:500] == [360.0] * 20
    assert (
        slots[500] == 3600.0
    )  # the hour's 500 are spent: the 501st waits for the first to age out
    assert slots[580] == 3660.0
    assert slots == sorted(slots)
    assert _max_in_window(slots, 60.0) == 80
    assert _max_in_window(slots, 3600.0) == 500


def test_writes_spread_in_time_wait_only_when_needed() -> None:
    clock = Clock()
    pacer = WritePacer(clock=clock, sleep=clock.sleep)
    for _ in range(80):
        assert pacer.acquire() == 0.0
        clock.now += 0.5  # 80 writes over 40 s
    assert pacer.acquire() == 20.0  # the first write is 40 s old: 20 s until it leaves the minute
    assert clock.sleeps == [20.0]
    clock.now += 3600
    assert pacer.acquire() == 0.0


def test_concurrent_writers_never_overbook() -> None:
    clock = Clock()
    pacer = WritePacer(clock=clock, sleep=clock.sleep)
    slots: list[float] = []
    lock = threading.Lock()

    def writer() -> None:
        for _ in range(30):
            slot = pacer.reserve()
            with lock:
                slots.append(slot)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(slots) == [0.0] * 80 + [60.0] * 80 + [120.0] * 80


def test_the_clients_writes_are_paced_and_reads_are_not(
    standin: StandinWorld, token_settings: Settings
) -> None:
    number = standin.control.open_pull(
        standin.repo, author="alice", head="f", title="f", files={"f": "1\n"}
    ).number
    clock = Clock()
    pacer = WritePacer(per_minute=2, per_hour=500, clock=clock, sleep=clock.sleep)
    client = GitHubClient.from_settings(token_settings, pacer=pacer)
    first = client.create_comment(standin.repo, number, "one")
    client.edit_comment(standin.repo, first, "one, edited")
    for _ in range(5):
        client.list_issue_comments(standin.repo, number)
    assert clock.sleeps == []
    sha = standin.control.pull(standin.repo, number).head_sha
    client.create_commit_status(standin.repo, sha, state="pending", context="c", description="d")
    assert clock.sleeps == [60.0]
    assert [c.body for c in standin.control.comments(standin.repo, number)] == ["one, edited"]


def test_clients_share_one_pacer_by_default(token_settings: Settings) -> None:
    one = GitHubClient.from_settings(token_settings)
    two = GitHubClient.from_settings(token_settings)
    assert one.pacer is two.pacer is shared_write_pacer()
    assert one.pacer.describe() == "80/60s, 500/3600s"
