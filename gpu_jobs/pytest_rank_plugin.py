"""Loaded into every rank's pytest (``-p gpu_jobs.pytest_rank_plugin``) by the runner.

It gives each rank its own JUnit file, records every test's nodeid and markers in that file (JUnit's
classname/name cannot be turned back into a nodeid reliably), and leaves small files the runner
watches: ``progress/rank-N.started`` (written at import, i.e. as soon as the rank's pytest
starts; it holds the pid), one JSON line per test result in ``progress/rank-N.jsonl``, and
``progress/rank-N.done`` holding pytest's exit status once the JUnit file is written.

Everything is keyed on ``GPU_JOBS_PHASE_DIR``; without it the plugin does nothing, so a plain
``pytest`` run is unaffected.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

PHASE_DIR_ENV = "GPU_JOBS_PHASE_DIR"


def _rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _progress_file(suffix: str) -> Path | None:
    phase_dir = os.environ.get(PHASE_DIR_ENV)
    if not phase_dir:
        return None
    return Path(phase_dir) / "progress" / f"rank-{_rank()}.{suffix}"


def _write(suffix: str, text: str, append: bool = False) -> None:
    path = _progress_file(suffix)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as handle:
        handle.write(text)


_write("started", json.dumps({"pid": os.getpid(), "time": time.time()}) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    phase_dir = os.environ.get(PHASE_DIR_ENV)
    if phase_dir:
        # Runs before the junitxml plugin's own configure, which reads this option.
        config.option.xmlpath = str(Path(phase_dir) / "junit" / f"rank-{_rank()}.xml")


def pytest_itemcollected(item: pytest.Item) -> None:
    item.user_properties.append(("nodeid", item.nodeid))
    # The test's markers, so a test set can tolerate failures of tests marked flaky.
    names = sorted({mark.name for mark in item.iter_markers()})
    if names:
        item.user_properties.append(("markers", ",".join(names)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed) or report.failed:
        line: dict[str, Any] = {"nodeid": report.nodeid, "when": report.when}
        line["outcome"] = report.outcome
        _write("jsonl", json.dumps(line) + "\n", append=True)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(PHASE_DIR_ENV) is None:
        return
    _write("done", json.dumps({"exitstatus": int(exitstatus), "time": time.time()}) + "\n")
    # torchrun stops every rank as soon as one exits non-zero, so a rank whose tests merely
    # failed would cut the others short before they write their JUnit files. The verdict comes
    # from the JUnit files; the exit status is kept for crashes and pytest's own errors.
    if exitstatus in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.OK
