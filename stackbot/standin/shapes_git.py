"""JSON shapes of commits, comparisons, refs, check runs and commit statuses."""

from __future__ import annotations

from typing import Any

from stackbot.standin import hosting
from stackbot.standin.shapes import app_json, node_id, repo_json, repo_url, user_json, web
from stackbot.standin.shapes_pulls import pull_minimal_json
from stackbot.standin.state import CheckRun, CommitStatus, Repo, StandinState, iso

NOREPLY_DOMAIN = "users.noreply.github.com"


def login_for_email(state: StandinState, email: str) -> str | None:
    """GitHub links a commit to the account owning its email; the stand-in does the same."""
    for user in state.users.values():
        if user.email == email:
            return user.login
    local, _, domain = email.partition("@")
    if domain == NOREPLY_DOMAIN and local in state.users:
        return local
    return None


def _git_person(person: hosting.Person) -> dict[str, Any]:
    return {"name": person.name, "email": person.email, "date": person.date}


def _account(state: StandinState, email: str) -> dict[str, Any] | None:
    login = login_for_email(state, email)
    return user_json(state, login) if login is not None else None


def commit_json(
    state: StandinState,
    repo: Repo,
    info: hosting.CommitInfo,
    files: list[hosting.FileChange] | None = None,
) -> dict[str, Any]:
    base = repo_url(state, repo)
    data: dict[str, Any] = {
        "url": f"{base}/commits/{info.sha}",
        "sha": info.sha,
        "node_id": node_id("Commit", int(info.sha[:8], 16)),
        "html_url": f"{web(state)}/{repo.full_name}/commit/{info.sha}",
        "comments_url": f"{base}/commits/{info.sha}/comments",
        "commit": {
            "url": f"{base}/git/commits/{info.sha}",
            "author": _git_person(info.author),
            "committer": _git_person(info.committer),
            "message": info.message,
            "comment_count": 0,
            "tree": {"sha": info.tree, "url": f"{base}/git/trees/{info.tree}"},
            "verification": _unsigned(),
        },
        "author": _account(state, info.author.email),
        "committer": _account(state, info.committer.email),
        "parents": [
            {
                "sha": parent,
                "url": f"{base}/commits/{parent}",
                "html_url": f"{web(state)}/{repo.full_name}/commit/{parent}",
            }
            for parent in info.parents
        ],
    }
    if files is not None:
        added = sum(f.additions for f in files)
        deleted = sum(f.deletions for f in files)
        data["stats"] = {"additions": added, "deletions": deleted, "total": added + deleted}
        data["files"] = [diff_entry_json(state, repo, info.sha, f) for f in files]
    return data


def _unsigned() -> dict[str, Any]:
    return {
        "verified": False,
        "reason": "unsigned",
        "signature": None,
        "payload": None,
        "verified_at": None,
    }


def git_commit_json(state: StandinState, repo: Repo, info: hosting.CommitInfo) -> dict[str, Any]:
    base = repo_url(state, repo)
    return {
        "sha": info.sha,
        "node_id": node_id("Commit", int(info.sha[:8], 16)),
        "url": f"{base}/git/commits/{info.sha}",
        "html_url": f"{web(state)}/{repo.full_name}/commit/{info.sha}",
        "author": _git_person(info.author),
        "committer": _git_person(info.committer),
        "tree": {"sha": info.tree, "url": f"{base}/git/trees/{info.tree}"},
        "message": info.message,
        "parents": [
            {
                "sha": parent,
                "url": f"{base}/git/commits/{parent}",
                "html_url": f"{web(state)}/{repo.full_name}/commit/{parent}",
            }
            for parent in info.parents
        ],
        "verification": _unsigned(),
    }


def diff_entry_json(
    state: StandinState, repo: Repo, sha: str, change: hosting.FileChange
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "sha": change.blob_sha,
        "filename": change.filename,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": f"{web(state)}/{repo.full_name}/blob/{sha}/{change.filename}",
        "raw_url": f"{web(state)}/{repo.full_name}/raw/{sha}/{change.filename}",
        "contents_url": f"{repo_url(state, repo)}/contents/{change.filename}?ref={sha}",
    }
    if change.previous_filename is not None:
        data["previous_filename"] = change.previous_filename
    return data


def comparison_json(
    state: StandinState, repo: Repo, base_spec: str, head_spec: str, base: str, head: str
) -> dict[str, Any]:
    bare = repo.bare_path
    merge_base = hosting.merge_base(bare, base, head) or base
    ahead = hosting.count_between(bare, base, head)
    behind = hosting.count_between(bare, head, base)
    status = (
        "identical"
        if ahead == 0 and behind == 0
        else "ahead"
        if behind == 0
        else "behind"
        if ahead == 0
        else "diverged"
    )
    commits = hosting.commits_between(bare, base, head)
    files = hosting.changed_files(bare, merge_base, head)
    spec = f"{base_spec}...{head_spec}"
    html = f"{web(state)}/{repo.full_name}/compare/{spec}"
    return {
        "url": f"{repo_url(state, repo)}/compare/{spec}",
        "html_url": html,
        "permalink_url": f"{web(state)}/{repo.full_name}/compare/{base}...{head}",
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "base_commit": commit_json(state, repo, hosting.commit_info(bare, base)),
        "merge_base_commit": commit_json(state, repo, hosting.commit_info(bare, merge_base)),
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": len(commits),
        "commits": [commit_json(state, repo, c) for c in commits],
        "files": [diff_entry_json(state, repo, head, f) for f in files],
    }


def git_ref_json(state: StandinState, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
    base = repo_url(state, repo)
    return {
        "ref": ref,
        "node_id": node_id("Ref", abs(hash(ref)) % 10**9),
        "url": f"{base}/git/{ref}",
        "object": {"type": "commit", "sha": sha, "url": f"{base}/git/commits/{sha}"},
    }


def check_run_json(state: StandinState, repo: Repo, run: CheckRun) -> dict[str, Any]:
    url = f"{repo_url(state, repo)}/check-runs/{run.id}"
    app = state.apps.get(run.app_id) if run.app_id is not None else None
    pulls = [
        pull_minimal_json(state, repo, p)
        for p in repo.pulls.values()
        if p.state == "open" and p.head_sha == run.head_sha
    ]
    return {
        "id": run.id,
        "head_sha": run.head_sha,
        "node_id": node_id("CheckRun", run.id),
        "external_id": run.external_id,
        "url": url,
        "html_url": f"{web(state)}/{repo.full_name}/runs/{run.id}",
        "details_url": run.details_url,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": iso(run.started_at) if run.started_at is not None else None,
        "completed_at": iso(run.completed_at) if run.completed_at is not None else None,
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": 0,
            "annotations_url": f"{url}/annotations",
        },
        "name": run.name,
        "check_suite": {"id": run.suite_id},
        "app": app_json(state, app) if app is not None else None,
        "pull_requests": pulls,
    }


def status_json(state: StandinState, repo: Repo, status: CommitStatus) -> dict[str, Any]:
    creator = user_json(state, status.creator)
    return {
        "url": f"{repo_url(state, repo)}/statuses/{status.sha}",
        "avatar_url": creator["avatar_url"],
        "id": status.id,
        "node_id": node_id("StatusContext", status.id),
        "state": status.state,
        "description": status.description,
        "target_url": status.target_url,
        "context": status.context,
        "created_at": iso(status.created_at),
        "updated_at": iso(status.created_at),
        "creator": creator,
    }


def combined_state(latest: list[CommitStatus]) -> str:
    """GitHub's rule: failure if any is error/failure, pending if none or any pending."""
    states = {s.state for s in latest}
    if states & {"error", "failure"}:
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def latest_statuses(repo: Repo, sha: str) -> list[CommitStatus]:
    latest: dict[str, CommitStatus] = {}
    for status in repo.statuses:
        if status.sha == sha:
            latest[status.context] = status  # statuses are kept oldest first
    return list(latest.values())


def combined_status_json(
    state: StandinState, repo: Repo, ref: str, sha: str, page: list[CommitStatus], total: int
) -> dict[str, Any]:
    base = repo_url(state, repo)
    statuses = []
    for status in page:
        full = status_json(state, repo, status)
        statuses.append({key: full[key] for key in _SIMPLE_STATUS_KEYS})
    return {
        "state": combined_state(latest_statuses(repo, sha)),
        "statuses": statuses,
        "sha": sha,
        "total_count": total,
        "repository": repo_json(state, repo),
        "commit_url": f"{base}/commits/{sha}",
        "url": f"{base}/commits/{ref}/status",
    }


_SIMPLE_STATUS_KEYS = (
    "description",
    "id",
    "node_id",
    "state",
    "context",
    "target_url",
    "avatar_url",
    "url",
    "created_at",
    "updated_at",
)
