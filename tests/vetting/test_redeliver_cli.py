"""``stackbot deliveries redeliver --since …`` against the GitHub stand-in (issue 29 point 2):
the failed deliveries since then are listed and each one redelivered, through the App's
deliveries API; a lost ``/ok to test`` then approves, once."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from stackbot.adapters.github.app_hooks import AppHooks
from stackbot.cli.main import main
from tests.support.standin import WEBHOOK_SECRET
from tests.sync.pipeline import Pipeline, open_pr


@pytest.fixture
def app_env(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    standin = pipeline.standin
    monkeypatch.setenv("STACKBOT_GITHUB_API_URL", standin.url)
    monkeypatch.setenv("STACKBOT_GITHUB_APP_ID", str(standin.app_id))
    monkeypatch.setenv("STACKBOT_GITHUB_PRIVATE_KEY_PATH", str(standin.key.path))
    monkeypatch.setenv("STACKBOT_DATA_DIR", str(pipeline.settings.data_dir))
    return pipeline


def since_now() -> str:
    return (datetime.now(UTC) - timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_failed_deliveries_since_are_redelivered_and_the_command_acted_on_once(
    app_env: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    pipeline = app_env
    number = open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    pipeline.deliver()
    intake = pipeline.control.state.webhook.url
    since = since_now()
    # The intake is unreachable: the comment's delivery fails (GitHub records it, no retry).
    pipeline.control.configure_webhook("http://127.0.0.1:9/down", WEBHOOK_SECRET, mode="queue")
    head = pipeline.head(number)
    pipeline.control.comment(pipeline.repo, number, "bob", f"/ok to test {head[:7]}")
    failed = pipeline.control.flush_deliveries()
    assert failed and all(d.status_code is None for d in failed)
    pipeline.control.configure_webhook(intake, WEBHOOK_SECRET, mode="queue")
    capsys.readouterr()

    assert main(["deliveries", "redeliver", "--since", since]) == 0

    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert f"{len(failed)} failed" in lines[0]
    assert sum("redelivery asked" in line for line in lines) == len(failed)
    assert out.strip() == f"{len(failed)} of {len(failed)} redeliveries asked"
    deadline = time.monotonic() + 20
    while not pipeline.approvals(number) and time.monotonic() < deadline:
        time.sleep(0.2)
        pipeline.run_tasks()
    [approval] = pipeline.approvals(number)
    assert (approval.sha, approval.vetter) == (head, "bob")
    # Asked again: nothing has failed since that was not delivered later.
    assert main(["deliveries", "redeliver", "--since", since]) == 0
    assert "0 failed" in capsys.readouterr().err


def test_a_refused_redelivery_exits_1_and_bad_input_2(
    app_env: Pipeline, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = app_env
    since = since_now()
    pipeline.control.configure_webhook("http://127.0.0.1:9/down", WEBHOOK_SECRET, mode="queue")
    open_pr(pipeline, author="carol", branch="carol/fix", title="Fix")
    assert pipeline.control.flush_deliveries()

    def refuse(self: AppHooks, delivery_id: int) -> None:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(AppHooks, "redeliver", refuse)
    capsys.readouterr()
    assert main(["deliveries", "redeliver", "--since", since]) == 1
    assert "failed: connection refused" in capsys.readouterr().err

    for bad in ("yesterday", "2026-12-04T15:00:00"):
        assert main(["deliveries", "redeliver", "--since", bad]) == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith("stackbot deliveries: ")
