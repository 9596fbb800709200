"""Driving the stand-in: accounts, permissions, the App and its installations, the webhook."""

from __future__ import annotations

from typing import Any

from stackbot.standin import deliveries, payloads
from stackbot.standin.shapes import ensure_user
from stackbot.standin.shapes_git import NOREPLY_DOMAIN
from stackbot.standin.state import (
    PERMISSION_ORDER,
    App,
    Delivery,
    Installation,
    Org,
    StandinState,
    User,
)


class PeopleControl:
    def __init__(self, state: StandinState) -> None:
        self.state = state

    def add_user(self, login: str, *, name: str | None = None, email: str | None = None) -> User:
        user = ensure_user(self.state, login)
        user.name = name if name is not None else user.name
        user.email = email if email is not None else user.email
        return user

    def ensure_user(self, login: str) -> User:
        return ensure_user(self.state, login)

    def ensure_account(self, login: str) -> None:
        if login not in self.state.orgs:
            ensure_user(self.state, login)

    def create_token(self, login: str, *, lifetime_s: float | None = None) -> str:
        """A personal access token acting as ``login``."""
        self.ensure_user(login)
        return self.state.issue_token(login, kind="user", lifetime_s=lifetime_s).token

    def signature(self, login: str) -> tuple[str, str]:
        """The git author a user's commits carry (GitHub links them back by email)."""
        user = self.ensure_user(login)
        return (user.name or login, user.email or f"{login}@{NOREPLY_DOMAIN}")

    def add_org(self, login: str) -> Org:
        state = self.state
        with state.lock:
            org = state.orgs.get(login)
            if org is None:
                user = ensure_user(state, login)
                user.type = "Organization"
                org = Org(login, user.id)
                state.orgs[login] = org
            return org

    def add_org_member(
        self, org: str, login: str, *, role: str = "member", public: bool = False
    ) -> None:
        if role not in ("admin", "member"):
            raise ValueError(f"org roles are admin or member, not {role!r}")
        with self.state.lock:
            found = self.add_org(org)
            found.members[login] = role
            if public:
                found.public_members.add(login)
            self.ensure_user(login)

    def remove_org_member(self, org: str, login: str) -> None:
        with self.state.lock:
            found = self.add_org(org)
            found.members.pop(login, None)
            found.public_members.discard(login)

    def set_permission(self, repo_name: str, login: str, role: str) -> None:
        """Make ``login`` a collaborator with ``role`` (admin/maintain/write/triage/read/none)."""
        if role not in PERMISSION_ORDER:
            raise ValueError(f"unknown role {role!r}; use one of {', '.join(PERMISSION_ORDER)}")
        with self.state.lock:
            repo = self.state.repo(repo_name)
            if repo is None:
                raise ValueError(f"no repository {repo_name} on the stand-in")
            self.ensure_user(login)
            if role == "none":
                repo.permissions.pop(login, None)
            else:
                repo.permissions[login] = role

    # -- the App ----------------------------------------------------------------------------

    def register_app(
        self,
        *,
        public_key_pem: str,
        owner: str,
        app_id: int | None = None,
        slug: str = "stackbot",
        name: str = "stackbot",
    ) -> App:
        state = self.state
        with state.lock:
            self.ensure_account(owner)
            chosen = app_id if app_id is not None else state.new_id()
            app = App(chosen, slug, name, owner, public_key_pem, created_at=state.now())
            state.apps[chosen] = app
            self.ensure_user(app.bot_login)
            return app

    def set_app_key(self, app_id: int, public_key_pem: str) -> None:
        with self.state.lock:
            self.state.apps[app_id].public_key_pem = public_key_pem

    def install_app(
        self,
        app_id: int,
        account: str,
        *,
        repos: set[str] | None = None,
        permissions: dict[str, str] | None = None,
        sender: str | None = None,
    ) -> Installation:
        """Install the App on an account (all its repos, or ``repos``); sends ``installation``."""
        state = self.state
        with state.lock:
            app = state.apps[app_id]
            self.ensure_account(account)
            installation = Installation(state.new_id(), account, repos, created_at=state.now())
            if permissions is not None:
                installation.permissions = dict(permissions)
            app.installations[installation.id] = installation
            event = payloads.installation_event(
                state, app, installation, "created", sender or account
            )
        deliveries.deliver(state, "installation", event, repo=None)
        return installation

    def set_installation_permissions(
        self, installation_id: int, permissions: dict[str, str]
    ) -> None:
        with self.state.lock:
            app = self.state.app_of_installation(installation_id)
            if app is None:
                raise ValueError(f"no installation {installation_id}")
            app.installations[installation_id].permissions = dict(permissions)

    def set_token_lifetime(self, seconds: float) -> None:
        """How long new installation tokens live (GitHub: one hour)."""
        self.state.installation_token_lifetime_s = seconds

    def installation_token_requests(self) -> int:
        with self.state.lock:
            return sum(
                1
                for r in self.state.requests
                if r.method == "POST" and r.path.endswith("/access_tokens") and r.status == 201
            )

    # -- the webhook ------------------------------------------------------------------------

    def configure_webhook(
        self, url: str | None, secret: str, *, mode: str = "send", timeout_s: float = 10.0
    ) -> None:
        if mode not in ("send", "queue"):
            raise ValueError(f"webhook mode is send or queue, not {mode!r}")
        with self.state.lock:
            hook = self.state.webhook
            hook.url, hook.secret, hook.timeout_s = url, secret, timeout_s
            hook.mode = "send" if mode == "send" else "queue"

    def ping(self) -> Delivery:
        app = next(iter(self.state.apps.values()), None)
        return deliveries.deliver(
            self.state, "ping", payloads.ping_event(self.state, app), repo=None
        )

    def describe(self) -> dict[str, Any]:
        """A summary for humans (the demo prints it)."""
        with self.state.lock:
            return {
                "url": self.state.base_url,
                "repos": {r.full_name: r.clone_url for r in self.state.repos.values()},
                "apps": [a.id for a in self.state.apps.values()],
                "webhook": self.state.webhook.url,
            }
