"""JSON shapes of pull requests, issues, issue comments and native stacks."""

from __future__ import annotations

from typing import Any

from stackbot.standin import hosting
from stackbot.standin.shapes import (
    api,
    app_json,
    author_association,
    node_id,
    repo_json,
    repo_url,
    user_json,
    web,
)
from stackbot.standin.state import Issue, IssueComment, Pull, Repo, Stack, StandinState, iso


def current_base_sha(repo: Repo, pull: Pull) -> str:
    """An open PR's base moves with its branch; a closed one keeps what it had."""
    if pull.state == "open":
        tip = hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}")
        if tip is not None:
            return tip
    return pull.base_sha


def _ref_json(state: StandinState, repo: Repo, ref: str, sha: str) -> dict[str, Any]:
    return {
        "label": f"{repo.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user_json(state, repo.owner),
        "repo": repo_json(state, repo),
    }


def _links(pr_url: str, html: str, issue_url: str, statuses: str) -> dict[str, Any]:
    return {
        "self": {"href": pr_url},
        "html": {"href": html},
        "issue": {"href": issue_url},
        "comments": {"href": f"{issue_url}/comments"},
        "review_comments": {"href": f"{pr_url}/comments"},
        "review_comment": {"href": pr_url.rsplit("/", 1)[0] + "/comments{/number}"},
        "commits": {"href": f"{pr_url}/commits"},
        "statuses": {"href": statuses},
    }


def pull_json(
    state: StandinState, repo: Repo, pull: Pull, *, detail: str = "full"
) -> dict[str, Any]:
    """``detail``: "full" (pulls/get), "simple" (pulls/list) or "webhook" (payloads)."""
    base = repo_url(state, repo)
    pr_url = f"{base}/pulls/{pull.number}"
    issue_url = f"{base}/issues/{pull.number}"
    html = f"{web(state)}/{repo.full_name}/pull/{pull.number}"
    statuses = f"{base}/statuses/{pull.head_sha}"
    base_sha = current_base_sha(repo, pull)
    data: dict[str, Any] = {
        "url": pr_url,
        "id": pull.id,
        "node_id": node_id("PullRequest", pull.id),
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": issue_url,
        "commits_url": f"{pr_url}/commits",
        "review_comments_url": f"{pr_url}/comments",
        "review_comment_url": f"{base}/pulls/comments{{/number}}",
        "comments_url": f"{issue_url}/comments",
        "statuses_url": statuses,
        "number": pull.number,
        "state": pull.state,
        "locked": False,
        "title": pull.title,
        "user": user_json(state, pull.author),
        "body": pull.body,
        "labels": [],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": iso(pull.created_at),
        "updated_at": iso(pull.updated_at),
        "closed_at": iso(pull.closed_at) if pull.closed_at is not None else None,
        "merged_at": iso(pull.merged_at) if pull.merged_at is not None else None,
        "merge_commit_sha": pull.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": _ref_json(state, repo, pull.head_ref, pull.head_sha),
        "base": _ref_json(state, repo, pull.base_ref, base_sha),
        "_links": _links(pr_url, html, issue_url, statuses),
        "author_association": author_association(state, repo, pull.author),
        "auto_merge": None,
        "draft": pull.draft,
    }
    if detail == "simple":
        data["stack"] = stack_of_pull_json(repo, pull)
        return data
    commits = hosting.commits_between(repo.bare_path, base_sha, pull.head_sha)
    files = hosting.changed_files(repo.bare_path, pull_diff_base(repo, pull), pull.head_sha)
    data.update(
        {
            "merged": pull.merged,
            "mergeable": None,
            "rebaseable": None,
            "mergeable_state": "unknown",
            "merged_by": user_json(state, pull.merged_by) if pull.merged_by else None,
            "comments": sum(1 for c in repo.comments.values() if c.issue_number == pull.number),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": len(commits),
            "additions": sum(f.additions for f in files),
            "deletions": sum(f.deletions for f in files),
            "changed_files": len(files),
        }
    )
    if detail == "full":
        data["stack"] = stack_of_pull_json(repo, pull)
    return data


def pull_diff_base(repo: Repo, pull: Pull) -> str:
    """What a PR's files are compared with: the merge base of its head and base."""
    base_sha = current_base_sha(repo, pull)
    return hosting.merge_base(repo.bare_path, base_sha, pull.head_sha) or base_sha


def pull_minimal_json(state: StandinState, repo: Repo, pull: Pull) -> dict[str, Any]:
    short_repo = {"id": repo.id, "url": repo_url(state, repo), "name": repo.name}
    return {
        "id": pull.id,
        "number": pull.number,
        "url": f"{repo_url(state, repo)}/pulls/{pull.number}",
        "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": short_repo},
        "base": {"ref": pull.base_ref, "sha": current_base_sha(repo, pull), "repo": short_repo},
    }


def stack_of_pull_json(repo: Repo, pull: Pull) -> dict[str, Any] | None:
    if pull.stack_number is None or pull.stack_number not in repo.stacks:
        return None
    stack = repo.stacks[pull.stack_number]
    base_sha = hosting.resolve(repo.bare_path, f"refs/heads/{stack.base_ref}") or ""
    return {
        "id": stack.id,
        "number": stack.number,
        "size": len(stack.pulls),
        "position": stack.pulls.index(pull.number) + 1,
        "base": {"ref": stack.base_ref, "sha": base_sha},
    }


def stack_json(state: StandinState, repo: Repo, stack: Stack, *, detail: str) -> dict[str, Any]:
    """``detail``: "minimal" (stacks/list) or "full" (stacks/get and create)."""
    members = [repo.pulls[n] for n in stack.pulls]
    if detail == "minimal":
        pulls: list[dict[str, Any]] = [
            {
                "number": p.number,
                "state": p.state,
                "draft": p.draft,
                "merged_at": iso(p.merged_at) if p.merged_at is not None else None,
                "head": {"ref": p.head_ref, "sha": p.head_sha},
            }
            for p in members
        ]
    else:
        pulls = [
            {
                **pull_minimal_json(state, repo, p),
                "node_id": node_id("PullRequest", p.id),
                "title": p.title,
                "state": p.state,
                "merged_at": iso(p.merged_at) if p.merged_at is not None else None,
                "draft": p.draft,
                "html_url": f"{web(state)}/{repo.full_name}/pull/{p.number}",
                "user": user_json(state, p.author),
            }
            for p in members
        ]
    return {
        "id": stack.id,
        "number": stack.number,
        "node_id": node_id("Stack", stack.id),
        "url": f"{repo_url(state, repo)}/stacks/{stack.number}",
        "base": {"ref": stack.base_ref},
        "open": any(p.state == "open" for p in members),
        "created_at": iso(stack.created_at),
        "pull_requests": pulls,
    }


def reactions_json(url: str) -> dict[str, Any]:
    counts = dict.fromkeys(
        ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"), 0
    )
    return {"url": f"{url}/reactions", "total_count": 0, **counts}


def issue_json(state: StandinState, repo: Repo, number: int) -> dict[str, Any]:
    """The issue side of an issue or PR, as issue_comment payloads carry it."""
    base = repo_url(state, repo)
    url = f"{base}/issues/{number}"
    pull = repo.pulls.get(number)
    item: Pull | Issue = pull if pull is not None else repo.issues[number]
    closed_at = item.closed_at if isinstance(item, Pull) else None
    data: dict[str, Any] = {
        "url": url,
        "repository_url": base,
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": f"{web(state)}/{repo.full_name}/{'pull' if pull else 'issues'}/{number}",
        "id": item.id,
        "node_id": node_id("Issue", item.id),
        "number": number,
        "title": item.title,
        "user": user_json(state, item.author),
        "labels": [],
        "state": item.state,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": sum(1 for c in repo.comments.values() if c.issue_number == number),
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "closed_at": iso(closed_at) if closed_at is not None else None,
        "author_association": author_association(state, repo, item.author),
        "active_lock_reason": None,
        "body": item.body,
        "reactions": reactions_json(url),
    }
    if pull is not None:
        html = f"{web(state)}/{repo.full_name}/pull/{number}"
        data["draft"] = pull.draft
        data["pull_request"] = {
            "url": f"{base}/pulls/{number}",
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": iso(pull.merged_at) if pull.merged_at is not None else None,
        }
    return data


def comment_json(state: StandinState, repo: Repo, comment: IssueComment) -> dict[str, Any]:
    base = repo_url(state, repo)
    url = f"{base}/issues/comments/{comment.id}"
    kind = "pull" if comment.issue_number in repo.pulls else "issues"
    app = next(iter(state.apps.values()), None) if comment.via_app else None
    return {
        "url": url,
        "html_url": f"{web(state)}/{repo.full_name}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
        "issue_url": f"{base}/issues/{comment.issue_number}",
        "id": comment.id,
        "node_id": node_id("IssueComment", comment.id),
        "user": user_json(state, comment.author),
        "created_at": iso(comment.created_at),
        "updated_at": iso(comment.updated_at),
        "author_association": author_association(state, repo, comment.author),
        "body": comment.body,
        "reactions": reactions_json(url),
        "performed_via_github_app": app_json(state, app) if app is not None else None,
    }


def pulls_url(state: StandinState, repo: Repo) -> str:
    return f"{api(state)}/repos/{repo.full_name}/pulls"
