"""``GitHubClient``: everything stackbot asks of GitHub, returning plain domain records.

It speaks through PyGithub's ``Requester`` with explicit paths, one request per call (plus one
per page of a listing, 100 items a page). PyGithub's object layer is not used for reading:
its list items are "incomplete" and ``raw_data`` re-fetches each one, which would multiply the
requests counted against the hourly budget; and it lacks native stacks and ``role_name``.
PyGithub still provides the transport, the auth header (token, App JWT, installation token) and
the typed exceptions that :mod:`stackbot.adapters.github.retry` translates.

Writes (comments, check runs, statuses) take a slot from the shared :class:`WritePacer` first,
and every string they send has the server's paths replaced by placeholders
(:class:`stackbot.path_redaction.PathRedactor`, from the settings): this is the one place where
text goes to GitHub.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from github import Auth, Github, GithubException
from github.Requester import Requester

from stackbot.adapters.github import convert
from stackbot.adapters.github.auth import (
    DEFAULT_REFRESH_MARGIN_S,
    InstallationAuth,
    InstallationTokens,
    read_private_key,
)
from stackbot.adapters.github.pacing import WritePacer, shared_write_pacer
from stackbot.adapters.github.retry import RetryPolicy, call_with_retries
from stackbot.adapters.github_errors import GitHubConfigError, GitHubNotFound, GitHubRejected
from stackbot.config import Settings
from stackbot.domain.records import (
    CommentRecord,
    CommitRecord,
    MergeRules,
    PrRecord,
    ReviewRecord,
    StackRecord,
)
from stackbot.domain.types import PrNumber
from stackbot.logging_redaction import register_secret
from stackbot.path_redaction import PathRedactor

PER_PAGE = 100
TIMEOUT_S = 30
USER_AGENT = "stackbot"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
# The merge queue has no REST API: GitHub's GraphQL mutations (graphql/schema.graphql).
ENQUEUE_PULL_REQUEST = """
mutation Enqueue($pr: ID!, $head: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pr, expectedHeadOid: $head}) {
    mergeQueueEntry { id position }
  }
}
"""
DEQUEUE_PULL_REQUEST = """
mutation Dequeue($pr: ID!) {
  dequeuePullRequest(input: {id: $pr}) { mergeQueueEntry { id } }
}
"""


def _repo_path(repo: str) -> str:
    if not _REPO.match(repo):
        raise GitHubConfigError(f"{repo!r} is not a repository name of the form owner/name")
    return f"/repos/{repo}"


def _q(value: str) -> str:
    return quote(value, safe="")


class GitHubClient:
    def __init__(
        self,
        requester: Requester,
        *,
        api_url: str,
        policy: RetryPolicy | None = None,
        pacer: WritePacer | None = None,
        tokens: InstallationTokens | None = None,
        paths: PathRedactor | None = None,
    ) -> None:
        """``paths``: what replaces server paths in what is written (none replaced without)."""
        self._requester = requester
        self.paths = paths
        self.api_url = api_url
        self.policy = policy or RetryPolicy()
        self.pacer = pacer or shared_write_pacer()
        self.tokens = tokens

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        installation_id: int | None = None,
        policy: RetryPolicy | None = None,
        pacer: WritePacer | None = None,
        clock: Callable[[], float] = time.time,
        refresh_margin_s: float | None = None,
    ) -> GitHubClient:
        """Token auth from ``STACKBOT_GITHUB_TOKEN``, or App auth from ``STACKBOT_GITHUB_APP_ID``
        + ``STACKBOT_GITHUB_PRIVATE_KEY_PATH`` (the installation found from ``STACKBOT_REPO``
        unless given). App auth wins when both are set."""
        policy = policy or RetryPolicy()
        api_url = str(settings.github_api_url).rstrip("/")
        tokens: InstallationTokens | None = None
        auth: Auth.Auth
        if settings.github_app_id is not None and settings.github_private_key_path is not None:
            if installation_id is None and not settings.repo:
                raise GitHubConfigError(
                    "GitHub App auth needs the installation: set STACKBOT_REPO (owner/name) so it "
                    "can be looked up, or pass installation_id"
                )
            tokens = InstallationTokens(
                app_id=int(settings.github_app_id),
                private_key=read_private_key(settings.github_private_key_path),
                base_url=api_url,
                policy=policy,
                installation_id=installation_id,
                repo=settings.repo,
                clock=clock,
                refresh_margin_s=(
                    DEFAULT_REFRESH_MARGIN_S if refresh_margin_s is None else refresh_margin_s
                ),
            )
            auth = InstallationAuth(tokens)
        elif settings.github_token is not None and settings.github_token.get_secret_value():
            token = settings.github_token.get_secret_value()
            register_secret(token)
            auth = Auth.Token(token)
        else:
            raise GitHubConfigError(
                "no GitHub credentials: set STACKBOT_GITHUB_TOKEN, or STACKBOT_GITHUB_APP_ID and "
                "STACKBOT_GITHUB_PRIVATE_KEY_PATH"
            )
        github = Github(
            auth=auth,
            base_url=api_url,
            timeout=TIMEOUT_S,
            user_agent=USER_AGENT,
            per_page=PER_PAGE,
            retry=None,  # our own retries: see retry.py
            seconds_between_requests=None,
            seconds_between_writes=None,  # the WritePacer paces writes
        )
        pacer = pacer or shared_write_pacer(
            settings.github_writes_per_minute, settings.github_writes_per_hour
        )
        return cls(
            github.requester,
            api_url=api_url,
            policy=policy,
            pacer=pacer,
            tokens=tokens,
            paths=PathRedactor.from_settings(settings),
        )

    # -- transport ------------------------------------------------------------------------------

    def _run(
        self, operation: str, call: Callable[[], Any], *, idempotent: bool, checks: bool = False
    ) -> Any:
        refresh = self.tokens.invalidate if self.tokens is not None else None
        return call_with_retries(
            self.policy,
            operation,
            call,
            idempotent=idempotent,
            checks_write=checks,
            on_unauthorized=refresh,
        )

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        call = lambda: self._requester.requestJsonAndCheck("GET", path, parameters=params)[1]  # noqa: E731
        return self._run(f"GET {path}", call, idempotent=True)

    def _list(
        self, path: str, params: dict[str, Any] | None = None, *, key: str | None = None
    ) -> list[Any]:
        """Every item of a paginated listing, following ``Link: rel="next"``."""

        def fetch_all() -> list[Any]:
            items: list[Any] = []
            url: str | None = path
            query: dict[str, Any] | None = {**(params or {}), "per_page": PER_PAGE}
            while url is not None:
                headers, data = self._requester.requestJsonAndCheck("GET", url, parameters=query)
                items.extend(data[key] if key is not None else data)
                found = _NEXT.search(str(_header(headers, "link") or ""))
                url, query = (found.group(1), None) if found else (None, None)
            return items

        return list(self._run(f"GET {path}", fetch_all, idempotent=True))

    def _write(self, verb: str, path: str, body: dict[str, Any], *, checks: bool = False) -> Any:
        operation = f"{verb} {path}"
        if self.paths is not None:
            body = self.paths.redact_value(body)
        self.pacer.acquire(operation)
        call = lambda: self._requester.requestJsonAndCheck(verb, path, input=body)[1]  # noqa: E731
        # A repeated POST could write twice; PATCH sets the same state again.
        return self._run(operation, call, idempotent=verb != "POST", checks=checks)

    def _probe(self, path: str) -> int:
        """The status of a yes/no endpoint (204 yes, 404 no, 302 "ask the public list")."""

        def call() -> int:
            status, headers, output = self._requester.requestJson("GET", path)
            if status in (204, 302, 404):
                return status
            raise Requester.createException(status, headers, _json_or_empty(output))

        return int(self._run(f"GET {path}", call, idempotent=True))

    # -- pull requests --------------------------------------------------------------------------

    def get_pull(self, repo: str, number: int) -> PrRecord:
        """The PR with its native ``stack`` object (read from the raw JSON)."""
        return convert.pr_record(self._get(f"{_repo_path(repo)}/pulls/{int(number)}"))

    def list_open_pulls(self, repo: str) -> list[PrRecord]:
        items = self._list(
            f"{_repo_path(repo)}/pulls", {"state": "open", "sort": "created", "direction": "asc"}
        )
        return [convert.pr_record(item) for item in items]

    def list_pull_commits(self, repo: str, number: int) -> list[CommitRecord]:
        items = self._list(f"{_repo_path(repo)}/pulls/{int(number)}/commits")
        return [convert.commit_record(item) for item in items]

    def pulls_for_commit(self, repo: str, sha: str) -> list[int]:
        items = self._list(f"{_repo_path(repo)}/commits/{_q(sha)}/pulls")
        return [int(item["number"]) for item in items]

    def list_stacks(self, repo: str, *, pull_request: int | None = None) -> list[StackRecord]:
        params = {"pull_request": int(pull_request)} if pull_request is not None else None
        return [convert.stack_record(s) for s in self._list(f"{_repo_path(repo)}/stacks", params)]

    def get_stack(self, repo: str, stack_number: int) -> StackRecord:
        return convert.stack_record(self._get(f"{_repo_path(repo)}/stacks/{int(stack_number)}"))

    def create_pull(
        self, repo: str, *, head: str, base: str, title: str, body: str, draft: bool = False
    ) -> PrNumber:
        """Open a pull request from branch ``head`` into ``base`` (``pulls/create``); returns
        its number."""
        data = self._write(
            "POST",
            f"{_repo_path(repo)}/pulls",
            {"head": head, "base": base, "title": title, "body": body, "draft": draft},
        )
        return PrNumber(int(data["number"]))

    def update_pull_base(self, repo: str, number: int, base: str) -> None:
        """Change PR ``number``'s base branch (``pulls/update``)."""
        self._write("PATCH", f"{_repo_path(repo)}/pulls/{int(number)}", {"base": base})

    def clone_url(self, repo: str) -> str:
        """Where git fetches the repository from (a ``file://`` path on the stand-in)."""
        return str(self._get(_repo_path(repo))["clone_url"])

    # -- comments -------------------------------------------------------------------------------

    def list_issue_comments(
        self, repo: str, number: int, *, since: str | None = None
    ) -> list[CommentRecord]:
        params = None if since is None else {"since": since}
        items = self._list(f"{_repo_path(repo)}/issues/{int(number)}/comments", params)
        return [convert.comment_record(item) for item in items]

    def get_comment(self, repo: str, comment_id: int) -> CommentRecord:
        return convert.comment_record(
            self._get(f"{_repo_path(repo)}/issues/comments/{int(comment_id)}")
        )

    def create_comment(self, repo: str, number: int, body: str) -> int:
        data = self._write(
            "POST", f"{_repo_path(repo)}/issues/{int(number)}/comments", {"body": body}
        )
        return int(data["id"])

    def edit_comment(self, repo: str, comment_id: int, body: str) -> None:
        self._write(
            "PATCH", f"{_repo_path(repo)}/issues/comments/{int(comment_id)}", {"body": body}
        )

    # -- people ---------------------------------------------------------------------------------

    def collaborator_permission(self, repo: str, user: str) -> str:
        """``admin|maintain|write|triage|read|none``; an unknown user is ``none``."""
        try:
            data = self._get(f"{_repo_path(repo)}/collaborators/{_q(user)}/permission")
        except GitHubNotFound:
            return "none"
        return convert.permission_of(data)

    def is_org_member(self, org: str, user: str) -> bool:
        status = self._probe(f"/orgs/{_q(org)}/members/{_q(user)}")
        if status == 302:  # we are not a member: GitHub points at the public list
            status = self._probe(f"/orgs/{_q(org)}/public_members/{_q(user)}")
        return status == 204

    # -- check runs and statuses ------------------------------------------------------------------

    def create_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        *,
        status: str,
        conclusion: str | None = None,
        title: str,
        summary: str,
        text: str | None = None,
        details_url: str | None = None,
        external_id: str | None = None,
    ) -> int:
        body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
        body.update(_check_fields(conclusion, title, summary, text))
        if details_url is not None:
            body["details_url"] = details_url
        if external_id is not None:
            body["external_id"] = external_id
        data = self._write("POST", f"{_repo_path(repo)}/check-runs", body, checks=True)
        return int(data["id"])

    def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: str,
        conclusion: str | None = None,
        title: str,
        summary: str,
        text: str | None = None,
        details_url: str | None = None,
    ) -> None:
        body: dict[str, Any] = {"status": status, **_check_fields(conclusion, title, summary, text)}
        if details_url is not None:
            body["details_url"] = details_url
        self._write(
            "PATCH", f"{_repo_path(repo)}/check-runs/{int(check_run_id)}", body, checks=True
        )

    def create_commit_status(
        self,
        repo: str,
        sha: str,
        *,
        state: str,
        context: str,
        description: str,
        target_url: str | None = None,
    ) -> None:
        body: dict[str, Any] = {"state": state, "context": context, "description": description}
        if target_url is not None:
            body["target_url"] = target_url
        self._write("POST", f"{_repo_path(repo)}/statuses/{_q(sha)}", body)

    # -- landing ----------------------------------------------------------------------------------

    def merge_pull(self, repo: str, number: int, *, sha: str, method: str) -> str:
        """Merge PR ``number`` only if its head is still ``sha`` (``pulls/merge``; GitHub answers
        409 for a moved head, 405 when it cannot merge: both raise ``GitHubRejected`` with the
        status and GitHub's message); returns the base branch's new tip."""
        data = self._write(
            "PUT",
            f"{_repo_path(repo)}/pulls/{int(number)}/merge",
            {"sha": sha, "merge_method": method},
        )
        return str(data["sha"])

    def enqueue_pull(self, repo: str, number: int, *, expected_head: str) -> int:
        """Put PR ``number`` into its base branch's merge queue only if its head is still
        ``expected_head`` (GraphQL ``enqueuePullRequest`` with ``expectedHeadOid``; the PR's node
        id is the REST ``node_id``); its position in the queue. GitHub's refusal (a moved head,
        protection not met, no queue) raises ``GitHubRejected`` with its message."""
        node = str(self._get(f"{_repo_path(repo)}/pulls/{int(number)}")["node_id"])
        data = self._graphql(
            "enqueuePullRequest",
            ENQUEUE_PULL_REQUEST,
            {"pr": node, "head": expected_head},
        )
        entry = (data.get("enqueuePullRequest") or {}).get("mergeQueueEntry") or {}
        return int(entry.get("position") or 0)

    def dequeue_pull(self, repo: str, number: int) -> None:
        """Take PR ``number`` out of the merge queue (GraphQL ``dequeuePullRequest``)."""
        node = str(self._get(f"{_repo_path(repo)}/pulls/{int(number)}")["node_id"])
        self._graphql("dequeuePullRequest", DEQUEUE_PULL_REQUEST, {"pr": node})

    def _graphql(self, name: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """One GraphQL mutation through PyGithub's requester (``graphql_query``: same token,
        retries and pacing as the REST calls). GitHub answers 200 with ``errors`` for a
        refused mutation; PyGithub raises that as a 400, turned here into ``GitHubRejected``
        with GitHub's first message."""
        operation = f"POST /graphql {name}"
        self.pacer.acquire(operation)

        def call() -> dict[str, Any]:
            try:
                return dict(self._requester.graphql_query(query, variables)[1].get("data") or {})
            except GithubException as error:
                errors = error.data.get("errors") if isinstance(error.data, dict) else None
                if error.status == 400 and errors:
                    detail = "; ".join(str(e.get("message", "")) for e in errors)
                    raise GitHubRejected(operation, 422, detail) from None
                raise

        # A repeated enqueue of a queued PR answers its entry again: safe to retry.
        return dict(self._run(operation, call, idempotent=True))

    def branch_sha(self, repo: str, branch: str) -> str:
        """The commit ``branch`` points at now (``git/get-ref``)."""
        data = self._get(f"{_repo_path(repo)}/git/ref/heads/{_q(branch)}")
        return str(data["object"]["sha"])

    def commit_tree(self, repo: str, sha: str) -> str:
        """The tree of commit ``sha`` (``git/get-commit``)."""
        return str(self._get(f"{_repo_path(repo)}/git/commits/{_q(sha)}")["tree"]["sha"])

    def merge_rules(self, repo: str, branch: str) -> MergeRules:
        """``branch``'s required checks and reviews (``repos/get-branch-protection``; an
        unprotected branch asks for nothing)."""
        try:
            data = self._get(f"{_repo_path(repo)}/branches/{_q(branch)}/protection")
        except GitHubNotFound:
            return MergeRules()
        checks = data.get("required_status_checks") or {}
        reviews = data.get("required_pull_request_reviews") or {}
        names = {str(c) for c in checks.get("contexts") or []}
        names |= {str(c["context"]) for c in checks.get("checks") or [] if "context" in c}
        return MergeRules(
            required_checks=tuple(sorted(names)),
            approvals=int(reviews.get("required_approving_review_count") or 0),
            dismiss_stale_reviews=bool(reviews.get("dismiss_stale_reviews")),
        )

    def list_reviews(self, repo: str, number: int) -> list[ReviewRecord]:
        items = self._list(f"{_repo_path(repo)}/pulls/{int(number)}/reviews")
        return [
            ReviewRecord(str((r.get("user") or {}).get("login", "")), r["state"], r["commit_id"])
            for r in items
        ]

    def check_outcomes(self, repo: str, sha: str) -> dict[str, str]:
        """Each check run's and commit status's outcome on ``sha`` by name: the conclusion of a
        completed run, ``pending`` otherwise; a status's state."""
        found = {
            str(s["context"]): str(s["state"])
            for s in self._get(f"{_repo_path(repo)}/commits/{_q(sha)}/status")["statuses"]
        }
        runs = self._list(f"{_repo_path(repo)}/commits/{_q(sha)}/check-runs", key="check_runs")
        for run in sorted(runs, key=lambda r: int(r["id"])):
            done = run["status"] == "completed" and run.get("conclusion")
            found[str(run["name"])] = str(run["conclusion"]) if done else "pending"
        return found


def _check_fields(
    conclusion: str | None, title: str, summary: str, text: str | None
) -> dict[str, Any]:
    output: dict[str, Any] = {"title": title, "summary": summary}
    if text is not None:
        output["text"] = text
    fields: dict[str, Any] = {"output": output}
    if conclusion is not None:
        fields["conclusion"] = conclusion
    return fields


def _header(headers: dict[str, Any], name: str) -> Any:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _json_or_empty(output: str) -> dict[str, Any]:
    try:
        data = json.loads(output) if output else {}
    except ValueError:
        return {"message": output[:200]}
    return data if isinstance(data, dict) else {}
