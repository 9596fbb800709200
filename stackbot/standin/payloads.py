"""Webhook payloads shaped like GitHub's (validated against ../shared/github/webhook-schemas).

Payloads reuse the REST shapes where the webhook schemas accept them; the PR object leaves out
``stack``, which the webhook schemas do not (yet) allow — consumers read it through the REST API.
"""

from __future__ import annotations

from typing import Any

from stackbot.standin import hosting
from stackbot.standin.shapes import (
    app_json,
    installation_json,
    node_id,
    organization_json,
    repo_json,
    repo_url,
    user_json,
    web,
)
from stackbot.standin.shapes_pulls import comment_json, issue_json, pull_json
from stackbot.standin.state import (
    App,
    CheckRun,
    Installation,
    IssueComment,
    Pull,
    Repo,
    StandinState,
    iso,
)

ZEN = "Design for failure."
SUITE_CONCLUSIONS = (
    "success",
    "failure",
    "neutral",
    "cancelled",
    "timed_out",
    "action_required",
    "stale",
)


def _context(state: StandinState, repo: Repo, sender: str) -> dict[str, Any]:
    """What every repository event carries: repository, sender, installation, organization."""
    data: dict[str, Any] = {
        "repository": repo_json(state, repo),
        "sender": user_json(state, sender),
    }
    for app in state.apps.values():
        for installation in app.installations.values():
            if installation.covers(repo.full_name):
                data["installation"] = {
                    "id": installation.id,
                    "node_id": node_id("Installation", installation.id),
                }
    if repo.owner in state.orgs:
        data["organization"] = organization_json(state, repo.owner)
    return data


def repository_context(state: StandinState, repo: Repo, sender: str) -> dict[str, Any]:
    """:func:`_context` for deliveries built elsewhere (reviews)."""
    return _context(state, repo, sender)


def pull_request_event(
    state: StandinState, repo: Repo, pull: Pull, action: str, sender: str, **extra: Any
) -> dict[str, Any]:
    """``extra``: ``changes`` for edited, ``before``/``after`` for synchronize."""
    return {
        "action": action,
        "number": pull.number,
        **extra,
        "pull_request": pull_json(state, repo, pull, detail="webhook"),
        **_context(state, repo, sender),
    }


def issue_comment_event(
    state: StandinState,
    repo: Repo,
    comment: IssueComment,
    action: str,
    sender: str,
    *,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {"action": action}
    if changes is not None:
        data["changes"] = changes
    data["issue"] = issue_json(state, repo, comment.issue_number)
    data["comment"] = comment_json(state, repo, comment)
    data.update(_context(state, repo, sender))
    return data


def push_event(
    state: StandinState, repo: Repo, ref: str, before: str | None, after: str | None, pusher: str
) -> dict[str, Any]:
    """A push of ``ref`` from ``before`` to ``after`` (None: created / deleted)."""
    zero = "0" * 40
    bare = repo.bare_path
    forced = bool(before and after and not hosting.is_ancestor(bare, before, after))
    commits = hosting.commits_between(bare, before, after)[-20:] if after else []
    head = hosting.commit_info(bare, after) if after else None
    compare = (
        f"{web(state)}/{repo.full_name}/compare/{(before or zero)[:12]}...{(after or zero)[:12]}"
    )
    pusher_user = user_json(state, pusher)
    return {
        "ref": ref,
        "before": before or zero,
        "after": after or zero,
        "created": before is None,
        "deleted": after is None,
        "forced": forced,
        "base_ref": None,
        "compare": compare,
        "commits": [_push_commit(state, repo, c, bare) for c in commits],
        "head_commit": _push_commit(state, repo, head, bare) if head else None,
        "pusher": {
            "name": pusher,
            "email": pusher_user.get("email") or f"{pusher}@users.noreply.github.com",
        },
        **_context(state, repo, pusher),
    }


def _push_commit(
    state: StandinState, repo: Repo, info: hosting.CommitInfo, bare: Any
) -> dict[str, Any]:
    parent = info.parents[0] if info.parents else hosting.EMPTY_TREE
    changes = hosting.changed_files(bare, parent, info.sha)
    return {
        "id": info.sha,
        "tree_id": info.tree,
        "distinct": True,
        "message": info.message,
        "timestamp": info.committer.date,
        "url": f"{web(state)}/{repo.full_name}/commit/{info.sha}",
        "author": {"name": info.author.name, "email": info.author.email},
        "committer": {"name": info.committer.name, "email": info.committer.email},
        "added": [c.filename for c in changes if c.status == "added"],
        "removed": [c.filename for c in changes if c.status == "removed"],
        "modified": [c.filename for c in changes if c.status not in ("added", "removed")],
    }


def check_run_event(
    state: StandinState, repo: Repo, run: CheckRun, action: str, sender: str
) -> dict[str, Any]:
    app = state.apps.get(run.app_id or 0)
    if app is None:
        raise ValueError(f"check run {run.id} has no App; GitHub only has App check runs")
    url = f"{repo_url(state, repo)}/check-runs/{run.id}"
    pulls = [
        _check_pull(state, repo, p)
        for p in repo.pulls.values()
        if p.head_sha == run.head_sha and p.state == "open"
    ]
    started = run.started_at if run.started_at is not None else state.now()
    completed = run.completed_at
    if completed is None and action == "rerequested":
        completed = state.now()
    check_run: dict[str, Any] = {
        "id": run.id,
        "node_id": node_id("CheckRun", run.id),
        "head_sha": run.head_sha,
        "external_id": run.external_id or "",
        "url": url,
        "html_url": f"{web(state)}/{repo.full_name}/runs/{run.id}",
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": iso(started),
        "completed_at": iso(completed) if completed is not None else None,
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": 0,
            "annotations_url": f"{url}/annotations",
        },
        "name": run.name,
        "check_suite": _suite(state, repo, run, app, pulls, settled=action == "rerequested"),
        "app": app_json(state, app),
        "pull_requests": pulls,
    }
    if run.details_url:
        check_run["details_url"] = run.details_url
    return {"action": action, "check_run": check_run, **_context(state, repo, sender)}


def _check_pull(state: StandinState, repo: Repo, pull: Pull) -> dict[str, Any]:
    ref = {"id": repo.id, "url": repo_url(state, repo), "name": repo.name}
    base_sha = hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}") or pull.base_sha
    return {
        "url": f"{repo_url(state, repo)}/pulls/{pull.number}",
        "id": pull.id,
        "number": pull.number,
        "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": ref},
        "base": {"ref": pull.base_ref, "sha": base_sha, "repo": ref},
    }


def _suite(
    state: StandinState,
    repo: Repo,
    run: CheckRun,
    app: App,
    pulls: list[dict[str, Any]],
    *,
    settled: bool,
) -> dict[str, Any]:
    """The run's check suite; ``settled`` (a re-run request) reports it completed, as GitHub
    only offers re-runs on a finished suite."""
    runs = [r for r in repo.check_runs.values() if r.suite_id == run.suite_id] or [run]
    statuses = {r.status for r in runs}
    status = (
        "completed"
        if settled or statuses == {"completed"}
        else "queued"
        if statuses == {"queued"}
        else "in_progress"
    )
    conclusions = {r.conclusion for r in runs}
    conclusion: str | None = next(
        (c for c in ("failure", "timed_out", "cancelled", "action_required") if c in conclusions),
        None,
    )
    if conclusion is None:
        conclusion = "success" if conclusions <= {"success", "neutral", "skipped"} else "neutral"
    head_branch = next((p["head"]["ref"] for p in pulls), None)
    return {
        "id": run.suite_id,
        "node_id": node_id("CheckSuite", run.suite_id),
        "head_branch": head_branch,
        "head_sha": run.head_sha,
        "status": status,
        "conclusion": (conclusion if conclusion in SUITE_CONCLUSIONS else "neutral")
        if status == "completed"
        else None,
        "url": f"{repo_url(state, repo)}/check-suites/{run.suite_id}",
        "before": None,
        "after": run.head_sha,
        "pull_requests": pulls,
        "app": app_json(state, app),
        "created_at": iso(min(r.started_at or state.now() for r in runs)),
        "updated_at": iso(state.now()),
    }


def installation_event(
    state: StandinState, app: App, installation: Installation, action: str, sender: str
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "action": action,
        "installation": installation_json(state, app, installation),
    }
    covered = [r for r in state.repos.values() if installation.covers(r.full_name)]
    data["repositories"] = [
        {
            "id": r.id,
            "node_id": node_id("Repository", r.id),
            "name": r.name,
            "full_name": r.full_name,
            "private": False,
        }
        for r in covered
    ]
    data["sender"] = user_json(state, sender)
    return data


def ping_event(state: StandinState, app: App | None) -> dict[str, Any]:
    hook_id = state.webhook.hook_id
    now = iso(state.now())
    hook: dict[str, Any] = {
        "type": "App" if app is not None else "Repository",
        "id": hook_id,
        "name": "web",
        "active": True,
        "events": ["*"],
        "config": {
            "content_type": "json",
            "url": state.webhook.url or f"{state.base_url}/_unset",
            "insecure_ssl": "0",
        },
        "updated_at": now,
        "created_at": now,
        "url": f"{state.base_url}/app/hook/{hook_id}",
        "ping_url": f"{state.base_url}/app/hook/{hook_id}/pings",
        "deliveries_url": f"{state.base_url}/app/hook/deliveries",
    }
    if app is not None:
        hook["app_id"] = app.id
    return {"zen": ZEN, "hook_id": hook_id, "hook": hook}
