"""The stand-in's world, in memory: users, orgs, the App, repositories and what happens on them.

Everything GitHub would keep on its servers lives here (git objects live in bare repositories
on disk, see :mod:`stackbot.standin.hosting`). One re-entrant lock guards it all: HTTP routes
run in threads, and tests drive it through :mod:`stackbot.standin.control` at the same time.
The clock is injectable so tests can expire tokens and rate-limit windows without sleeping.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

Clock = Callable[[], float]  # epoch seconds

PERMISSION_ORDER = ("none", "read", "triage", "write", "maintain", "admin")
TOKEN_LIFETIME_S = 3600.0  # GitHub's installation tokens live one hour
RATE_LIMIT_PER_HOUR = 5000


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def permission_at_least(actual: str, needed: str) -> bool:
    return PERMISSION_ORDER.index(actual) >= PERMISSION_ORDER.index(needed)


@dataclass
class User:
    login: str
    id: int
    type: Literal["User", "Organization", "Bot"] = "User"
    name: str | None = None
    email: str | None = None


@dataclass
class Org:
    login: str
    id: int
    members: dict[str, str] = field(default_factory=dict)  # login -> "admin" | "member"
    public_members: set[str] = field(default_factory=set)  # who shows their membership


@dataclass
class Installation:
    id: int
    account: str  # the org or user login it is installed on
    repos: set[str] | None = None  # full names; None means all of the account's repos
    permissions: dict[str, str] = field(
        default_factory=lambda: {
            "checks": "write",
            "contents": "write",  # merging a PR (landing) writes its base branch
            "issues": "write",
            "pull_requests": "write",
            "statuses": "write",
            "metadata": "read",
            "members": "read",
        }
    )
    created_at: float = 0.0

    def covers(self, full_name: str) -> bool:
        owner = full_name.split("/", 1)[0]
        return owner == self.account and (self.repos is None or full_name in self.repos)


@dataclass
class App:
    id: int
    slug: str
    name: str
    owner: str  # login of the account owning the App
    public_key_pem: str | None = None
    installations: dict[int, Installation] = field(default_factory=dict)
    created_at: float = 0.0

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


@dataclass
class AccessToken:
    token: str
    kind: Literal["user", "installation"]
    login: str  # the user, or the App's bot user for installation tokens
    installation_id: int | None = None
    expires_at: float | None = None


@dataclass
class Pull:
    number: int
    id: int
    title: str
    body: str | None
    author: str
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    created_at: float
    updated_at: float
    state: Literal["open", "closed"] = "open"
    draft: bool = False
    merged: bool = False
    merged_at: float | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    closed_at: float | None = None
    stack_number: int | None = None


@dataclass
class Issue:
    number: int
    id: int
    title: str
    body: str | None
    author: str
    created_at: float
    updated_at: float
    state: Literal["open", "closed"] = "open"


@dataclass
class IssueComment:
    id: int
    issue_number: int
    author: str
    body: str
    created_at: float
    updated_at: float
    via_app: bool = False


@dataclass
class CheckRun:
    id: int
    head_sha: str
    name: str
    status: str
    conclusion: str | None
    started_at: float | None
    completed_at: float | None
    title: str | None
    summary: str | None
    text: str | None
    details_url: str | None
    external_id: str | None
    suite_id: int
    app_id: int | None


@dataclass
class CommitStatus:
    id: int
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: str
    created_at: float


@dataclass
class Stack:
    id: int
    number: int
    base_ref: str
    pulls: list[int]
    created_at: float


@dataclass
class Review:
    """A pull request review (``APPROVED``, ``CHANGES_REQUESTED``, ``COMMENTED``, ``DISMISSED``)
    of the head ``commit_id`` it was given on."""

    id: int
    pull_number: int
    author: str
    state: str
    body: str
    commit_id: str
    submitted_at: float


@dataclass
class Protection:
    """A branch's classic protection, as far as merging reads it: the check or status contexts
    that must have succeeded on the PR's head (``strict``: the head must also contain the base),
    and the approving reviews needed (``None``: no review rule)."""

    required_contexts: list[str] | None = None  # None: no required_status_checks
    strict: bool = False
    required_approving_review_count: int | None = None
    dismiss_stale_reviews: bool = False
    require_code_owner_reviews: bool = False
    enforce_admins: bool = False
    required_linear_history: bool = False
    allow_force_pushes: bool = False
    allow_deletions: bool = False


@dataclass
class QueueEntry:
    """A pull request in a branch's merge queue (GraphQL ``MergeQueueEntry``) and its merge
    group: the commit ``group_sha`` on ``gh-readonly-queue/<base>/pr-<N>-<head>`` that holds
    the base, the groups ahead of it and this PR (``group_sha`` None: not built, it conflicts)."""

    id: int
    pull_number: int
    base_ref: str
    head_sha: str  # the PR's head when it was queued
    enqueuer: str
    enqueued_at: float
    jump: bool = False
    group_ref: str | None = None
    group_sha: str | None = None
    group_base_sha: str | None = None  # the parent commit of the group (base or the one ahead)


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    bare_path: Path
    default_branch: str
    created_at: float
    pushed_at: float
    permissions: dict[str, str] = field(default_factory=dict)  # login -> role
    pulls: dict[int, Pull] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    comments: dict[int, IssueComment] = field(default_factory=dict)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    statuses: list[CommitStatus] = field(default_factory=list)
    stacks: dict[int, Stack] = field(default_factory=dict)
    reviews: dict[int, Review] = field(default_factory=dict)
    protections: dict[str, Protection] = field(default_factory=dict)  # branch -> its protection
    # The repository's merge settings (repos/update): which methods the merge button offers and
    # whether a merged PR's head branch is deleted (which closes the PRs based on it).
    allow_merge_commit: bool = True
    allow_squash_merge: bool = True
    allow_rebase_merge: bool = True
    delete_branch_on_merge: bool = False
    # Branches that require GitHub's merge queue (a ruleset's ``merge_queue`` rule) -> the
    # queue's merge method (MERGE, SQUASH or REBASE); each branch's queue, front first.
    merge_queues: dict[str, str] = field(default_factory=dict)
    queue: list[QueueEntry] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def clone_url(self) -> str:
        return self.bare_path.resolve().as_uri()

    def next_number(self) -> int:
        used = list(self.pulls) + list(self.issues)
        return max(used, default=0) + 1


FaultKind = Literal[
    "secondary_rate_limit",  # 403 with Retry-After
    "primary_rate_limit",  # 403 with x-ratelimit-remaining: 0 and x-ratelimit-reset
    "too_many_requests",  # 429 with Retry-After
    "server_error",  # 500 / 502 / 503 (status chosen by the fault)
    "checks_forbidden",  # 403 "Resource not accessible by integration"
]


@dataclass
class Fault:
    """The next ``count`` requests matching ``method`` and ``path`` get this answer instead."""

    kind: FaultKind
    method: str = ".*"  # regex, matched against the upper-case method
    path: str = ".*"  # regex, searched in the request path (no query string)
    count: int = 1
    retry_after: float | None = None  # seconds, sent as Retry-After
    reset_in: float | None = None  # seconds until x-ratelimit-reset, for primary limits
    status: int = 503  # for server_error

    def matches(self, method: str, path: str) -> bool:
        return (
            self.count > 0
            and re.fullmatch(self.method, method) is not None
            and re.search(self.path, path) is not None
        )


@dataclass
class RequestRecord:
    method: str
    path: str
    status: int
    auth: str  # "none" | "user:<login>" | "installation:<id>" | "app-jwt"
    at: float


@dataclass
class WebhookConfig:
    url: str | None = None
    secret: str = ""
    hook_id: int = 1
    # "send": POST each delivery as it happens; "queue": keep them until flushed.
    mode: Literal["send", "queue"] = "send"
    timeout_s: float = 10.0


@dataclass
class Delivery:
    guid: str
    event: str
    action: str | None
    body: bytes
    headers: dict[str, str]
    repo: str | None
    created_at: float
    url: str | None = None
    status_code: int | None = None
    error: str | None = None
    duration_s: float | None = None


class StandinState:
    """All of the stand-in's data. Mutate it only while holding :attr:`lock`."""

    def __init__(self, root: Path, *, clock: Clock = time.time) -> None:
        self.root = root
        self.clock = clock
        self.lock = threading.RLock()
        self.base_url = "http://127.0.0.1"  # set by the server once it knows its port
        self.users: dict[str, User] = {}
        self.orgs: dict[str, Org] = {}
        self.repos: dict[str, Repo] = {}
        self.apps: dict[int, App] = {}
        self.tokens: dict[str, AccessToken] = {}
        self.faults: list[Fault] = []
        self.requests: list[RequestRecord] = []
        self.deliveries: list[Delivery] = []
        self.pending_deliveries: list[Delivery] = []
        self.webhook = WebhookConfig()
        self.outbox: object | None = None  # the delivery sender thread (deliveries.py), once used
        self.installation_token_lifetime_s = TOKEN_LIFETIME_S
        self.rate_limit_per_hour = RATE_LIMIT_PER_HOUR
        self.rate_usage: dict[str, tuple[float, int]] = {}  # identity -> (window start, used)
        self._next_id = 1000

    def new_id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    def now(self) -> float:
        return self.clock()

    # -- lookups that routes and control share ---------------------------------------------

    def repo(self, full_name: str) -> Repo | None:
        return self.repos.get(full_name.lower())

    def issue_token(
        self,
        login: str,
        *,
        kind: Literal["user", "installation"] = "user",
        installation_id: int | None = None,
        lifetime_s: float | None = None,
    ) -> AccessToken:
        prefix = "ghs_" if kind == "installation" else "ghp_"
        expires = self.now() + lifetime_s if lifetime_s is not None else None
        token = AccessToken(
            prefix + secrets.token_urlsafe(27), kind, login, installation_id, expires
        )
        with self.lock:
            self.tokens[token.token] = token
        return token

    def app_of_installation(self, installation_id: int) -> App | None:
        for app in self.apps.values():
            if installation_id in app.installations:
                return app
        return None

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None
