"""The GitHub adapter: the only place that imports PyGithub (``github``).

- :class:`GitHubClient` (``client.py``): reads PRs, stacks, commits, comments, permissions and
  membership; writes comments, check runs and commit statuses; returns domain records.
- ``auth.py``: GitHub App JWT → installation token, refreshed before expiry.
- ``retry.py``: rate-limit waits (``Retry-After``, ``x-ratelimit-reset``) within bounds, then
  :class:`GitHubRateLimited` for the task queue.
- ``pacing.py``: the process-wide write pacer (80 writes a minute, 500 an hour).
- :class:`GitHubPort` (``port.py``): the ``Protocol`` of what the services call; no PyGithub.
- Errors live in :mod:`stackbot.adapters.github_errors` and are re-exported here.

Secrets are masked in this package's logs (the redaction filter is installed at import) and in
every error message.

The names that need PyGithub (the client, auth, retry) are loaded on first use, so importing
``stackbot.adapters.github.port`` (which runs this file first) does not import PyGithub.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stackbot.adapters.github.pacing import WritePacer, shared_write_pacer
from stackbot.adapters.github.port import GitHubPort
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

if TYPE_CHECKING:
    from stackbot.adapters.github.auth import InstallationTokens
    from stackbot.adapters.github.client import GitHubClient
    from stackbot.adapters.github.retry import RetryPolicy, rate_limit_wait

install_on(*GITHUB_LOGGERS)

_NEEDS_PYGITHUB = {
    "GitHubClient": "stackbot.adapters.github.client",
    "InstallationTokens": "stackbot.adapters.github.auth",
    "RetryPolicy": "stackbot.adapters.github.retry",
    "rate_limit_wait": "stackbot.adapters.github.retry",
}


def __getattr__(name: str) -> Any:
    module = _NEEDS_PYGITHUB.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ChecksNotPermitted",
    "GitHubAuthFailed",
    "GitHubClient",
    "GitHubConfigError",
    "GitHubError",
    "GitHubForbidden",
    "GitHubNotFound",
    "GitHubPort",
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
