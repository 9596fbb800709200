"""The GitHub adapter: the only place that imports PyGithub (``github``).

- :class:`GitHubClient` (``client.py``): reads PRs, stacks, commits, comments, permissions and
  membership; writes comments, check runs and commit statuses; returns domain records.
- ``auth.py``: GitHub App JWT → installation token, refreshed before expiry.
- ``retry.py``: rate-limit waits (``Retry-After``, ``x-ratelimit-reset``) within bounds, then
  :class:`GitHubRateLimited` for the task queue.
- ``pacing.py``: the process-wide write pacer (80 writes a minute, 500 an hour).
- Errors live in :mod:`stackbot.adapters.github_errors` and are re-exported here.

Secrets are masked in this package's logs (the redaction filter is installed at import) and in
every error message.
"""

from stackbot.adapters.github.auth import InstallationTokens
from stackbot.adapters.github.client import GitHubClient
from stackbot.adapters.github.pacing import WritePacer, shared_write_pacer
from stackbot.adapters.github.retry import RetryPolicy, rate_limit_wait
from stackbot.adapters.github_errors import (
    ChecksNotPermitted,
    GitHubAuthFailed,
    GitHubConfigError,
    GitHubError,
    GitHubForbidden,
    GitHubNotFound,
    GitHubRateLimited,
    GitHubRejected,
    GitHubUnavailable,
    NotFound,
)
from stackbot.logging_redaction import GITHUB_LOGGERS, install_on, install_redaction

install_on(*GITHUB_LOGGERS)

__all__ = [
    "ChecksNotPermitted",
    "GitHubAuthFailed",
    "GitHubClient",
    "GitHubConfigError",
    "GitHubError",
    "GitHubForbidden",
    "GitHubNotFound",
    "GitHubRateLimited",
    "GitHubRejected",
    "GitHubUnavailable",
    "InstallationTokens",
    "NotFound",
    "RetryPolicy",
    "WritePacer",
    "install_redaction",
    "rate_limit_wait",
    "shared_write_pacer",
]
