"""GitHub App authentication: App JWT → installation token, refreshed before it expires.

The App signs a short JWT (RS256, ``iat`` a minute in the past for clock drift, ``exp`` under
GitHub's ten-minute cap) with its private key, finds its installation on the repository
(``GET /repos/{owner}/{repo}/installation``) unless told, and mints an installation token
(``POST /app/installations/{id}/access_tokens``). The token is reused until ``refresh_margin_s``
before its ``expires_at``, then minted again: a request never starts with a token about to
lapse. PyGithub's own ``AppInstallationAuth`` refreshes 20 s before expiry on the real clock;
this one takes an injectable clock and margin so tests can show the refresh.

Every token and JWT is registered with the log redactor as soon as it exists.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import jwt
from github import Auth, Github

from stackbot.adapters.github.retry import RetryPolicy, call_with_retries
from stackbot.adapters.github_errors import GitHubConfigError
from stackbot.logging_redaction import register_secret

JWT_LIFETIME_S = 540  # GitHub's cap is 600 s; stay under it despite clock drift
JWT_BACKDATE_S = 60
DEFAULT_REFRESH_MARGIN_S = 300.0


class InstallationTokens:
    """Mints and caches one installation's access token (thread-safe)."""

    def __init__(
        self,
        *,
        app_id: int,
        private_key: str,
        base_url: str,
        policy: RetryPolicy,
        installation_id: int | None = None,
        repo: str | None = None,
        clock: Callable[[], float] = time.time,
        refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
        timeout_s: int = 30,
    ) -> None:
        if installation_id is None and repo is None:
            raise ValueError("an installation id or a repository to find it from is needed")
        register_secret(private_key)
        self.app_id = app_id
        self._key = private_key
        self._base_url = base_url
        self._policy = policy
        self._clock = clock
        self._margin = refresh_margin_s
        self._timeout = timeout_s
        self._repo = repo
        self._installation_id = installation_id
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0
        self.minted = 0  # how many tokens this process asked for

    def app_jwt(self) -> str:
        now = int(self._clock())
        claims = {"iat": now - JWT_BACKDATE_S, "exp": now + JWT_LIFETIME_S, "iss": str(self.app_id)}
        token = jwt.encode(claims, self._key, algorithm="RS256")
        register_secret(token)
        return token

    def _as_app(self) -> Any:
        client = Github(
            auth=Auth.AppAuthToken(self.app_jwt()),
            base_url=self._base_url,
            retry=None,
            timeout=self._timeout,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        return client.requester

    def installation_id(self) -> int:
        if self._installation_id is None:
            assert self._repo is not None
            operation = f"GET /repos/{self._repo}/installation"
            _, data = call_with_retries(
                self._policy,
                operation,
                lambda: self._as_app().requestJsonAndCheck(
                    "GET", f"/repos/{self._repo}/installation"
                ),
                idempotent=True,
            )
            self._installation_id = int(data["id"])
        return self._installation_id

    def token(self) -> str:
        with self._lock:
            if self._token is None or self._clock() >= self._expires_at - self._margin:
                self._mint()
            assert self._token is not None
            return self._token

    def invalidate(self) -> bool:
        """Forget the cached token (after a 401); True when there was one to forget."""
        with self._lock:
            had = self._token is not None
            self._token = None
            return had

    def _mint(self) -> None:
        installation = self.installation_id()
        path = f"/app/installations/{installation}/access_tokens"
        _, data = call_with_retries(
            self._policy,
            f"POST {path}",
            lambda: self._as_app().requestJsonAndCheck("POST", path),
            idempotent=True,  # minting twice only wastes a token
        )
        token = str(data["token"])
        register_secret(token)
        self._token = token
        self._expires_at = datetime.fromisoformat(
            str(data["expires_at"]).replace("Z", "+00:00")
        ).timestamp()
        self.minted += 1


class InstallationAuth(Auth.Auth):
    """PyGithub auth that asks :class:`InstallationTokens` for a fresh token on each request."""

    def __init__(self, tokens: InstallationTokens) -> None:
        self.tokens = tokens

    @property
    def token_type(self) -> str:
        return "token"

    @property
    def token(self) -> str:
        return self.tokens.token()

    @property
    def _masked_token(self) -> str:
        return "token (installation token removed)"


def read_private_key(path: Any) -> str:
    """The App's PEM key; errors name the setting, never the contents."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise GitHubConfigError(
            f"cannot read the GitHub App private key at {path} (STACKBOT_GITHUB_PRIVATE_KEY_PATH): "
            f"{error.strerror}"
        ) from None
    if "PRIVATE KEY-----" not in text:
        raise GitHubConfigError(
            f"{path} (STACKBOT_GITHUB_PRIVATE_KEY_PATH) is not a PEM private key: download the "
            "App's key from its GitHub settings page"
        )
    register_secret(text.strip())
    return text
