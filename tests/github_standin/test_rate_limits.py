"""Rate limits and outages against the stand-in's injected faults: the adapter waits as the
answer says (Retry-After, x-ratelimit-reset), within bounds, then raises for the task queue."""

from __future__ import annotations

import email.utils
import time

import pytest

from stackbot.adapters.github import (
    ChecksNotPermitted,
    GitHubClient,
    GitHubForbidden,
    GitHubRateLimited,
    GitHubUnavailable,
    RetryPolicy,
    rate_limit_wait,
)
from stackbot.config import Settings
from stackbot.errors import Permanent, RetryLater
from stackbot.standin import StandinServer
from tests.support.standin import StandinWorld


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def pr(standin: StandinWorld) -> int:
    return standin.control.open_pull(
        standin.repo, author="alice", head="f", title="f", files={"f": "1\n"}
    ).number


def _client(settings: Settings, sleeps: Sleeps, **policy: float) -> GitHubClient:
    return GitHubClient.from_settings(settings, policy=RetryPolicy(sleep=sleeps, **policy))  # type: ignore[arg-type]


def _statuses(world: StandinWorld, method: str, path: str) -> list[int]:
    return [r.status for r in world.control.requests(method, path)]


def test_a_read_waits_out_a_403_with_retry_after(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault(
        "secondary_rate_limit", method="GET", path=f"/pulls/{pr}$", retry_after=1
    )
    assert _client(token_settings, sleeps).get_pull(standin.repo, pr).number == pr
    assert sleeps == [1.0]
    assert _statuses(standin, "GET", f"/pulls/{pr}") == [403, 200]


def test_a_write_waits_out_a_403_and_writes_once(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault(
        "secondary_rate_limit", method="POST", path="/comments$", retry_after=2
    )
    comment_id = _client(token_settings, sleeps).create_comment(standin.repo, pr, "report")
    assert sleeps == [2.0]
    assert [c.id for c in standin.control.comments(standin.repo, pr)] == [comment_id]


def test_the_wait_really_happens(standin: StandinWorld, token_settings: Settings, pr: int) -> None:
    standin.control.inject_fault(
        "secondary_rate_limit", method="GET", path=f"/pulls/{pr}$", retry_after=1
    )
    client = GitHubClient.from_settings(token_settings)  # the real clock and sleep
    started = time.monotonic()
    client.get_pull(standin.repo, pr)
    waited = time.monotonic() - started
    assert waited >= 1.0, "Retry-After: 1 was not honoured"
    first, second = standin.control.requests("GET", f"/pulls/{pr}")
    assert second.at - first.at >= 1.0


def test_429_is_a_rate_limit_too(standin: StandinWorld, token_settings: Settings, pr: int) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault("too_many_requests", path="/commits$", retry_after=3)
    assert _client(token_settings, sleeps).list_pull_commits(standin.repo, pr)
    assert sleeps == [3.0]


def test_an_exhausted_budget_waits_until_the_reset(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault("primary_rate_limit", path=f"/pulls/{pr}$", reset_in=30)
    before = time.time()
    _client(token_settings, sleeps).get_pull(standin.repo, pr)
    (wait,) = sleeps
    reset = next(iter(standin.control.requests("GET", f"/pulls/{pr}")))
    assert reset.status == 403
    # The reset is a whole second, 30 s ahead of the stand-in's clock; one second of margin.
    assert 30 < wait <= 32 + (time.time() - before)


def test_the_standin_runs_out_of_budget_like_github(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    standin.server.state.rate_limit_per_hour = 3
    sleeps = Sleeps()
    client = _client(token_settings, sleeps, max_wait_s=10_000, max_total_wait_s=10_000)
    for _ in range(3):
        client.get_pull(standin.repo, pr)
    with pytest.raises(GitHubRateLimited) as raised:
        _client(token_settings, Sleeps()).get_pull(
            standin.repo, pr
        )  # an hour away: too long to wait
    assert raised.value.retry_after is not None and 3500 < raised.value.retry_after <= 3602
    assert isinstance(raised.value, RetryLater)


def test_retries_are_bounded_then_the_task_queue_takes_over(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault(
        "secondary_rate_limit", path=f"/pulls/{pr}$", retry_after=5, count=100
    )
    with pytest.raises(GitHubRateLimited, match="rate limited; retry in 5s") as raised:
        _client(token_settings, sleeps, max_attempts=4).get_pull(standin.repo, pr)
    assert raised.value.retry_after == 5
    assert sleeps == [5.0, 5.0, 5.0]
    assert _statuses(standin, "GET", f"/pulls/{pr}") == [403] * 4


def test_a_wait_beyond_the_bound_is_not_slept(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault("too_many_requests", retry_after=3600)
    with pytest.raises(GitHubRateLimited) as raised:
        _client(token_settings, sleeps, max_wait_s=120).get_pull(standin.repo, pr)
    assert (sleeps, raised.value.retry_after) == ([], 3600)


def test_a_secondary_limit_without_retry_after_waits_a_minute(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.inject_fault("secondary_rate_limit", path=f"/pulls/{pr}$")
    _client(token_settings, sleeps).get_pull(standin.repo, pr)
    assert sleeps == [60.0]


def test_server_errors_are_retried_for_reads_only(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    client = _client(token_settings, sleeps)
    standin.control.inject_fault("server_error", status=502, path=f"/pulls/{pr}$")
    assert client.get_pull(standin.repo, pr).number == pr
    assert sleeps == [1.0]
    standin.control.inject_fault("server_error", status=500, method="POST", path="/comments$")
    with pytest.raises(GitHubUnavailable, match="500") as raised:
        client.create_comment(standin.repo, pr, "maybe written, so not repeated")
    assert isinstance(raised.value, RetryLater)
    assert _statuses(standin, "POST", "/comments") == [500]
    standin.control.inject_fault("server_error", status=503, path="/commits$", count=10)
    with pytest.raises(GitHubUnavailable, match="503"):
        client.list_pull_commits(standin.repo, pr)
    assert len(_statuses(standin, "GET", "/commits")) == 3


def test_forbidden_check_runs_are_named_for_the_fallback(
    standin: StandinWorld, app_settings: Settings, pr: int
) -> None:
    sha = standin.control.pull(standin.repo, pr).head_sha
    standin.control.inject_fault("checks_forbidden", method="POST", path="/check-runs$")
    client = _client(app_settings, Sleeps())
    with pytest.raises(ChecksNotPermitted) as raised:
        client.create_check_run(standin.repo, sha, "x", status="queued", title="t", summary="s")
    assert isinstance(raised.value, Permanent)


def test_a_plain_403_is_not_retried(
    standin: StandinWorld, token_settings: Settings, pr: int
) -> None:
    sleeps = Sleeps()
    standin.control.set_permission(standin.repo, "bob", "read")
    sha = standin.control.pull(standin.repo, pr).head_sha
    with pytest.raises(GitHubForbidden, match="push access"):
        _client(token_settings, sleeps).create_commit_status(
            standin.repo, sha, state="success", context="c", description="d"
        )
    assert sleeps == []


def test_an_unreachable_github_is_unavailable(tmp_path: object, token_settings: Settings) -> None:
    with StandinServer(tmp_path) as server:  # type: ignore[arg-type]
        url = server.url
    sleeps = Sleeps()
    settings = token_settings.model_copy(update={"github_api_url": url})
    with pytest.raises(GitHubUnavailable, match="ConnectionError"):
        _client(settings, sleeps).get_pull("NVIDIA/Megatron-LM", 1)
    assert sleeps == [1.0, 3.0]


@pytest.mark.parametrize(
    ("status", "headers", "message", "expected"),
    [
        (403, {"Retry-After": "7"}, "", 7.0),
        (429, {"retry-after": "0"}, "", 0.0),
        (
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"},
            "API rate limit exceeded",
            11.0,
        ),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "900"}, "", 1.0),
        (403, {}, "You have exceeded a secondary rate limit", 60.0),
        (429, {}, "", 60.0),
        (403, {"x-ratelimit-remaining": "12"}, "Resource not accessible by integration", None),
        (404, {"Retry-After": "5"}, "Not Found", None),
        (500, {}, "", None),
    ],
)
def test_rate_limit_waits(
    status: int, headers: dict[str, str], message: str, expected: float | None
) -> None:
    assert rate_limit_wait(status, headers, message, now=990.0) == expected


def test_retry_after_may_be_an_http_date() -> None:
    when = email.utils.formatdate(1_000_000 + 42, usegmt=True)
    assert rate_limit_wait(403, {"Retry-After": when}, "", now=1_000_000.0) == 42.0
