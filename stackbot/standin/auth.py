"""Who is calling the stand-in, and what they may do: tokens, App JWTs, installation scopes.

Like GitHub: a personal token (``token ghp_...``) acts as its user; an installation token
(``token ghs_...``) acts as the App's bot on the installation's repositories, within the
installation's permissions, until it expires; an App JWT (``Bearer <RS256 JWT>``, checked with
the App's registered public key) may only manage the App itself (find installations, mint
installation tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import jwt

from stackbot.standin.state import App, Repo, StandinState, permission_at_least

JWT_MAX_LIFETIME_S = 600  # GitHub refuses App JWTs valid for more than ten minutes
CLOCK_DRIFT_S = 60


class StandinHTTPError(Exception):
    """An answer other than success, shaped like GitHub's error bodies."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        errors: list[dict[str, Any]] | list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.errors = errors


def not_found() -> StandinHTTPError:
    return StandinHTTPError(404, "Not Found")


def unprocessable(
    message: str, *, field_name: str | None = None, code: str = "invalid"
) -> StandinHTTPError:
    error: dict[str, Any] = {"code": code, "message": message}
    if field_name is not None:
        error["field"] = field_name
    return StandinHTTPError(422, "Validation Failed", errors=[error])


def unprocessable_simple(message: str) -> StandinHTTPError:
    """422 as the operations documented with ``validation_failed_simple`` answer: the errors
    are plain strings."""
    return StandinHTTPError(422, "Validation Failed", errors=[message])


@dataclass(frozen=True)
class Caller:
    kind: Literal["anonymous", "user", "installation", "app"]
    login: str | None = None  # the user, or the App's bot for installation tokens
    installation_id: int | None = None
    app_id: int | None = None
    permissions: dict[str, str] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        if self.kind == "installation":
            return f"installation:{self.installation_id}"
        if self.kind == "app":
            return f"app:{self.app_id}"
        if self.kind == "user":
            return f"user:{self.login}"
        return "anonymous"


def authenticate(state: StandinState, authorization: str | None) -> Caller:
    if not authorization:
        return Caller("anonymous")
    scheme, _, credential = authorization.partition(" ")
    credential = credential.strip()
    if scheme.lower() not in ("token", "bearer") or not credential:
        raise StandinHTTPError(401, "Bad credentials")
    with state.lock:
        token = state.tokens.get(credential)
        if token is not None:
            if token.expires_at is not None and token.expires_at <= state.now():
                raise StandinHTTPError(401, "Bad credentials")
            if token.kind == "user":
                return Caller("user", login=token.login)
            assert token.installation_id is not None
            app = state.app_of_installation(token.installation_id)
            if app is None:
                raise StandinHTTPError(401, "Bad credentials")
            installation = app.installations[token.installation_id]
            return Caller(
                "installation",
                login=app.bot_login,
                installation_id=installation.id,
                app_id=app.id,
                permissions=dict(installation.permissions),
            )
    if scheme.lower() == "bearer" and credential.count(".") == 2:
        app = verify_app_jwt(state, credential)
        return Caller("app", app_id=app.id)
    raise StandinHTTPError(401, "Bad credentials")


def verify_app_jwt(state: StandinState, token: str) -> App:
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as error:
        raise StandinHTTPError(401, f"A JSON web token could not be decoded ({error})") from None
    if header.get("alg") != "RS256":
        raise StandinHTTPError(
            401, "A JSON web token could not be decoded: algorithm must be RS256"
        )
    try:
        app = state.apps.get(int(claims.get("iss", "")))
    except (TypeError, ValueError):
        app = None
    if app is None or not app.public_key_pem:
        raise StandinHTTPError(
            401, "'Issuer' claim ('iss') must be an Integer naming a registered App"
        )
    try:
        jwt.decode(
            token,
            app.public_key_pem,
            algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
        )
    except jwt.PyJWTError:
        raise StandinHTTPError(
            401, "A JSON web token could not be decoded: signature does not match the App's key"
        ) from None
    _check_jwt_times(state.now(), claims)
    return app


def _check_jwt_times(now: float, claims: dict[str, Any]) -> None:
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or iat > now + CLOCK_DRIFT_S:
        raise StandinHTTPError(
            401, "'Issued at' claim ('iat') must be an Integer representing a time in the past."
        )
    if not isinstance(exp, int) or exp <= now:
        raise StandinHTTPError(
            401,
            "'Expiration time' claim ('exp') must be a numeric value representing the future time "
            "at which the assertion expires.",
        )
    if exp > now + JWT_MAX_LIFETIME_S + CLOCK_DRIFT_S:
        raise StandinHTTPError(401, "'Expiration time' claim ('exp') is too far in the future.")


# -- what a caller may do ---------------------------------------------------------------------


def require_token(caller: Caller) -> None:
    """Repository and org endpoints: a user or installation token, never an App JWT."""
    if caller.kind == "anonymous":
        raise StandinHTTPError(401, "Requires authentication")
    if caller.kind == "app":
        raise StandinHTTPError(
            403, "A JSON web token cannot be used here: authenticate as an installation"
        )


def require_app(caller: Caller) -> int:
    if caller.kind != "app" or caller.app_id is None:
        raise StandinHTTPError(
            401, "A JSON web token could not be decoded: this endpoint needs an App JWT"
        )
    return caller.app_id


def can_see(state: StandinState, caller: Caller, repo: Repo) -> None:
    require_token(caller)
    if caller.kind == "installation":
        app = state.apps.get(caller.app_id or 0)
        installation = app.installations.get(caller.installation_id or 0) if app else None
        if installation is None or not installation.covers(repo.full_name):
            raise not_found()


def require_write(
    state: StandinState, caller: Caller, repo: Repo, *, app_permission: str, role: str = "write"
) -> None:
    """An installation needs ``app_permission: write``; a user needs ``role`` on the repo."""
    can_see(state, caller, repo)
    if caller.kind == "installation":
        if caller.permissions.get(app_permission) != "write":
            raise StandinHTTPError(403, "Resource not accessible by integration")
        return
    assert caller.login is not None
    if not permission_at_least(role_of(state, repo, caller.login), role):
        raise StandinHTTPError(403, "Must have push access to repository")


def role_of(state: StandinState, repo: Repo, login: str) -> str:
    if login == repo.owner:
        return "admin"
    explicit = repo.permissions.get(login)
    if explicit is not None:
        return explicit
    org = state.orgs.get(repo.owner)
    if org is not None and org.members.get(login) == "admin":
        return "admin"
    return "none"
