"""Two workers publishing the same PR's report at the same time (PostgreSQL with two worker
processes; the soak saw it): each must not create its own check run. Runs on both databases."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

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
