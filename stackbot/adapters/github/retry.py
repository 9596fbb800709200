"""Rate limits and outages: wait as GitHub says, within bounds, then hand over to the task queue.

On 403/429 the wait comes from the answer: ``Retry-After`` seconds if present; else, with
``x-ratelimit-remaining: 0``, until ``x-ratelimit-reset`` (+1 s, since the reset is a whole
second); else, for a secondary-limit message, a minute (GitHub's advice). A wait longer than
``max_wait_s``, or more than ``max_attempts`` tries, raises :class:`GitHubRateLimited` with the
wait as ``retry_after`` so the task queue retries later instead of a worker sleeping for an hour.

5xx and connection failures are retried with a short backoff only for idempotent requests (a
repeated POST could write twice), then raise :class:`GitHubUnavailable`.

PyGithub's own ``GithubRetry`` is not used: it sleeps inside urllib3 (no injectable clock), does
not treat 429 as a rate limit and does not bound ``Retry-After`` waits.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import requests
from github import GithubException

from stackbot.adapters.github_errors import (
    ChecksNotPermitted,
    GitHubAuthFailed,
    GitHubForbidden,
    GitHubNotFound,
    GitHubRateLimited,
    GitHubRejected,
    GitHubUnavailable,
)

log = logging.getLogger("stackbot.adapters.github")

T = TypeVar("T")

SECONDARY_DEFAULT_WAIT_S = 60.0
RESET_PAD_S = 1.0


@dataclass
class RetryPolicy:
    max_wait_s: float = 120.0  # one wait longer than this goes back to the task queue
    max_total_wait_s: float = 300.0  # all waits of one call together
    max_attempts: int = 4
    server_error_backoff_s: tuple[float, ...] = (1.0, 3.0)
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.time)  # wall clock, for x-ratelimit-reset


def _header(headers: Mapping[str, object] | None, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return str(value)
    return None


def _retry_after(value: str, now: float) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - now) if parsed is not None else None


def rate_limit_wait(
    status: int, headers: Mapping[str, object] | None, message: str, now: float
) -> float | None:
    """Seconds to wait before retrying, or None when the answer is not a rate limit."""
    if status not in (403, 429):
        return None
    retry_after = _header(headers, "retry-after")
    if retry_after is not None:
        wait = _retry_after(retry_after, now)
        if wait is not None:
            return wait
    remaining, reset = (
        _header(headers, "x-ratelimit-remaining"),
        _header(headers, "x-ratelimit-reset"),
    )
    if remaining == "0" and reset is not None and reset.isdigit():
        return max(0.0, int(reset) - now) + RESET_PAD_S
    lowered = message.lower()
    if status == 429 or "rate limit" in lowered or "please wait a few minutes" in lowered:
        return SECONDARY_DEFAULT_WAIT_S
    return None


def _message(error: GithubException) -> str:
    data = error.data
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])
    return str(error.message or "")


def translate(error: GithubException, operation: str, *, checks_write: bool = False) -> Exception:
    """The stackbot error for a GitHub answer that no retry will fix."""
    status, detail = error.status, _message(error)
    if status in (404, 410):
        return GitHubNotFound(operation, status, detail)
    if status == 401:
        return GitHubAuthFailed(operation, status, detail)
    if status == 403:
        kind = ChecksNotPermitted if checks_write else GitHubForbidden
        return kind(operation, status, detail)
    if status >= 500:
        return GitHubUnavailable(operation, status, detail)
    return GitHubRejected(operation, status, detail)


def call_with_retries(
    policy: RetryPolicy,
    operation: str,
    call: Callable[[], T],
    *,
    idempotent: bool,
    checks_write: bool = False,
    on_unauthorized: Callable[[], bool] | None = None,
) -> T:
    """Run ``call`` (one GitHub request, or one listing), retrying what is worth retrying.

    ``on_unauthorized`` may refresh credentials after a 401; when it returns True the call is
    tried once more (an installation token can expire between check and use).
    """
    waited = 0.0
    refreshed = False
    for attempt in range(1, policy.max_attempts + 1):
        last = attempt == policy.max_attempts
        try:
            return call()
        except GithubException as error:
            status, detail = error.status, _message(error)
            wait = rate_limit_wait(status, error.headers, detail, policy.clock())
            if wait is not None:
                if last or wait > policy.max_wait_s or waited + wait > policy.max_total_wait_s:
                    raise GitHubRateLimited(operation, status, detail, retry_after=wait) from None
                log.warning(
                    "GitHub rate limit on %s (%s); waiting %.1fs (attempt %d)",
                    operation,
                    status,
                    wait,
                    attempt,
                )
            elif (
                status == 401
                and on_unauthorized is not None
                and not refreshed
                and on_unauthorized()
            ):
                refreshed, wait = True, 0.0
            elif (
                status >= 500
                and idempotent
                and not last
                and attempt <= len(policy.server_error_backoff_s)
            ):
                wait = policy.server_error_backoff_s[attempt - 1]
                log.warning("GitHub %s on %s; retrying in %.1fs", status, operation, wait)
            else:
                raise translate(error, operation, checks_write=checks_write) from None
        except (requests.ConnectionError, requests.Timeout) as error:
            if not idempotent or last or attempt > len(policy.server_error_backoff_s):
                raise GitHubUnavailable(operation, None, type(error).__name__) from None
            wait = policy.server_error_backoff_s[attempt - 1]
            log.warning(
                "cannot reach GitHub for %s (%s); retrying in %.1fs",
                operation,
                type(error).__name__,
                wait,
            )
        if wait > 0:
            policy.sleep(wait)
            waited += wait
    raise AssertionError("unreachable: the last attempt returns or raises")
