"""What went wrong talking to GitHub, as stackbot's error kinds (see :mod:`stackbot.errors`).

The GitHub adapter raises only these. Each says what to do by its base class:
``RetryLater`` (rate limits, GitHub down) goes back to the task queue with a delay,
``Permanent`` (missing objects, refused credentials, forbidden writes) dead-letters with a
message naming what to fix, ``BadInput`` (unusable configuration) stops the command.
Messages never contain secrets: they are built from the operation, the status and GitHub's
own message, and pass through the redactor.
"""

from __future__ import annotations

from stackbot.errors import BadInput, Permanent, RetryLater
from stackbot.logging_redaction import redact


class GitHubError(Exception):
    """Mixin carrying the HTTP status and the operation ("GET /repos/o/r/pulls/1")."""

    status: int | None = None
    operation: str = ""


def _message(operation: str, status: int | None, detail: str) -> str:
    where = f"GitHub answered {status} to {operation}" if status else f"GitHub {operation} failed"
    return redact(f"{where}: {detail}" if detail else where)


class GitHubConfigError(BadInput, GitHubError):
    """Settings that cannot work (missing credentials, unreadable private key)."""


class GitHubNotFound(Permanent, GitHubError):
    def __init__(self, operation: str, status: int | None, detail: str) -> None:
        super().__init__(_message(operation, status, detail))
        self.operation, self.status = operation, status


class GitHubAuthFailed(Permanent, GitHubError):
    """401: the token or App credentials were refused."""

    def __init__(self, operation: str, status: int | None, detail: str) -> None:
        hint = (
            " (check STACKBOT_GITHUB_TOKEN, or STACKBOT_GITHUB_APP_ID and the key at "
            "STACKBOT_GITHUB_PRIVATE_KEY_PATH)"
        )
        super().__init__(_message(operation, status, detail) + hint)
        self.operation, self.status = operation, status


class GitHubForbidden(Permanent, GitHubError):
    """403 that is not a rate limit: the credentials lack a permission."""

    def __init__(self, operation: str, status: int | None, detail: str) -> None:
        super().__init__(_message(operation, status, detail))
        self.operation, self.status = operation, status


class ChecksNotPermitted(GitHubForbidden):
    """Check-run writes are refused (a personal token, or an App without ``checks: write``):
    report through commit statuses instead."""


class GitHubRejected(Permanent, GitHubError):
    """400/405/409/422: GitHub refused the request as it stands; ``detail`` is its message."""

    def __init__(self, operation: str, status: int | None, detail: str) -> None:
        super().__init__(_message(operation, status, detail))
        self.operation, self.status = operation, status
        self.detail = redact(detail)


class GitHubRateLimited(RetryLater, GitHubError):
    """Rate limited beyond what the adapter waits for itself; retry after ``retry_after``."""

    def __init__(
        self, operation: str, status: int | None, detail: str, *, retry_after: float
    ) -> None:
        text = _message(operation, status, detail) + f" (rate limited; retry in {retry_after:.0f}s)"
        super().__init__(text, retry_after=retry_after)
        self.operation, self.status = operation, status


class GitHubUnavailable(RetryLater, GitHubError):
    """5xx or no connection: GitHub (or the network) is down for now."""

    def __init__(
        self, operation: str, status: int | None, detail: str, *, retry_after: float | None = None
    ) -> None:
        super().__init__(_message(operation, status, detail), retry_after=retry_after)
        self.operation, self.status = operation, status


# The name the reporting code uses.
NotFound = GitHubNotFound
