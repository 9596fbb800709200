"""Two workers publishing the same PR's report at the same time (PostgreSQL with two worker
processes; the soak saw it): each must not create its own check run. Runs on both databases."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from stackbot.services import reporting
from stackbot.services.reporting import publish_reports
from tests.reports.test_publish_standin import open_prs, view
from tests.sync.pipeline import Pipeline


class SlowChecks:
    """The real client, slow to create check runs: the window in which the other publisher
    has not yet stored the new run's id is what a loaded machine gives."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def create_check_run(self, *args: Any, **kwargs: Any) -> int:
        run_id = self._client.create_check_run(*args, **kwargs)
        time.sleep(0.3)
        return int(run_id)


def test_two_publishers_of_one_pr_create_each_check_run_once(pipeline: Pipeline) -> None:
    [number] = open_prs(pipeline, 1)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            client = SlowChecks(pipeline.client())
            start.wait()
            publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=publish) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    runs = pipeline.control.check_runs(pipeline.repo, pipeline.head(number))
    names = Counter(run.name for run in runs)
    # the two test sets' check runs and the pending stackbot/approval, each created once
    assert len(names) == 3 and set(names.values()) == {1}, names
    assert len(pipeline.stickies(number)) == 1


def test_a_publisher_waiting_for_another_builds_its_view_after_the_wait(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A publishes a PR while its job runs ("queued"); worker B's task, queued when the
    job finished, waits for A's lock. B must build its view after the wait: built before, it is
    A's stale view and B would set the finished check runs back to "queued" (an e2e run on
    PostgreSQL with two workers ended with `stackbot/tests: own files` queued that way)."""
    [number] = open_prs(pipeline, 1)
    status = {"now": "queued"}

    def build(session: Any, settings: Any, *, repo: str, numbers: Any) -> list[Any]:
        return [view(pipeline, n, status["now"]) for n in numbers]

    monkeypatch.setattr(reporting, "build_report_views", build)
    a_holds, b_started = threading.Event(), threading.Event()
    release_a = threading.Event()
    errors: list[BaseException] = []

    def worker_a() -> None:
        try:
            with reporting._publishers(pipeline.engine, pipeline.repo, [number]):
                a_holds.set()
                release_a.wait(30)
                status["now"] = "passed"  # the job finished while A published
                reporting._publish_one_locked(
                    pipeline.engine,
                    pipeline.client(),
                    pipeline.repo,
                    view(pipeline, number, "passed"),
                    reporting.PublishCounts(),
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def worker_b() -> None:
        try:
            b_started.set()
            reporting.publish_prs(
                pipeline.engine, pipeline.client(), None, repo=pipeline.repo, numbers=[number]
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    a = threading.Thread(target=worker_a)
    a.start()
    assert a_holds.wait(30)
    b = threading.Thread(target=worker_b)
    b.start()
    assert b_started.wait(30)
    time.sleep(0.5)  # B is waiting for A's lock now (on the old code: with a "queued" view)
    release_a.set()
    a.join(60)
    b.join(60)
    assert not errors, errors
    runs = pipeline.control.check_runs(pipeline.repo, pipeline.head(number))
    tests = [r for r in runs if r.name.startswith("stackbot/tests")]
    assert tests and all(r.status == "completed" for r in tests), [
        (r.name, r.status) for r in tests
    ]
