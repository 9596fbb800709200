"""JSON shapes of the objects GitHub nests everywhere: users, repositories, Apps, installations.

The same dicts serve REST answers (checked against the OpenAPI description) and webhook
payloads (checked against the webhook schemas, which forbid unknown keys), so each carries the
union of what both require and nothing either forbids.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from stackbot.standin.state import App, Installation, Repo, StandinState, User, iso


def node_id(kind: str, number: int) -> str:
    return base64.b64encode(f"0{kind}{number}".encode()).decode()


def api(state: StandinState) -> str:
    return state.base_url


def web(state: StandinState) -> str:
    """Where GitHub's web pages would be; the stand-in has none, the URLs are only shapes."""
    return f"{state.base_url}/_web"


def ensure_user(state: StandinState, login: str) -> User:
    with state.lock:
        user = state.users.get(login)
        if user is None:
            kind: Literal["User", "Bot"] = "Bot" if login.endswith("[bot]") else "User"
            user = User(login=login, id=state.new_id(), type=kind)
            state.users[login] = user
        return user


def user_json(state: StandinState, login: str) -> dict[str, Any]:
    user = ensure_user(state, login)
    url = f"{api(state)}/users/{login}"
    data: dict[str, Any] = {
        "login": user.login,
        "id": user.id,
        "node_id": node_id("User", user.id),
        "avatar_url": f"{web(state)}/avatars/{user.id}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{web(state)}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": user.type,
        "site_admin": False,
    }
    if user.name is not None:
        data["name"] = user.name
    if user.email is not None:
        data["email"] = user.email
    return data


_REPO_TEMPLATES = {
    "forks_url": "/forks",
    "keys_url": "/keys{/key_id}",
    "collaborators_url": "/collaborators{/collaborator}",
    "teams_url": "/teams",
    "hooks_url": "/hooks",
    "issue_events_url": "/issues/events{/number}",
    "events_url": "/events",
    "assignees_url": "/assignees{/user}",
    "branches_url": "/branches{/branch}",
    "tags_url": "/tags",
    "blobs_url": "/git/blobs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "trees_url": "/git/trees{/sha}",
    "statuses_url": "/statuses/{sha}",
    "languages_url": "/languages",
    "stargazers_url": "/stargazers",
    "contributors_url": "/contributors",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "commits_url": "/commits{/sha}",
    "git_commits_url": "/git/commits{/sha}",
    "comments_url": "/comments{/number}",
    "issue_comment_url": "/issues/comments{/number}",
    "contents_url": "/contents/{+path}",
    "compare_url": "/compare/{base}...{head}",
    "merges_url": "/merges",
    "archive_url": "/{archive_format}{/ref}",
    "downloads_url": "/downloads",
    "issues_url": "/issues{/number}",
    "pulls_url": "/pulls{/number}",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "labels_url": "/labels{/name}",
    "releases_url": "/releases{/id}",
    "deployments_url": "/deployments",
}


def repo_url(state: StandinState, repo: Repo) -> str:
    return f"{api(state)}/repos/{repo.full_name}"


def repo_json(state: StandinState, repo: Repo) -> dict[str, Any]:
    url = repo_url(state, repo)
    open_count = sum(1 for p in repo.pulls.values() if p.state == "open") + sum(
        1 for i in repo.issues.values() if i.state == "open"
    )
    data: dict[str, Any] = {
        "id": repo.id,
        "node_id": node_id("Repository", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": False,
        "owner": user_json(state, repo.owner),
        "html_url": f"{web(state)}/{repo.full_name}",
        "description": None,
        "fork": False,
        "url": url,
    }
    data.update({key: url + suffix for key, suffix in _REPO_TEMPLATES.items()})
    data.update(
        {
            "created_at": iso(repo.created_at),
            "updated_at": iso(repo.pushed_at),
            "pushed_at": iso(repo.pushed_at),
            "git_url": repo.clone_url,
            "ssh_url": repo.clone_url,
            "clone_url": repo.clone_url,
            "svn_url": f"{web(state)}/{repo.full_name}",
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": "Python",
            "has_issues": True,
            "has_projects": False,
            "has_downloads": True,
            "has_wiki": False,
            "has_pages": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_count,
            "license": None,
            "forks": 0,
            "open_issues": open_count,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "public",
            "custom_properties": {},
        }
    )
    return data


def app_json(state: StandinState, app: App) -> dict[str, Any]:
    return {
        "id": app.id,
        "slug": app.slug,
        "node_id": node_id("Integration", app.id),
        "owner": user_json(state, app.owner),
        "name": app.name,
        "description": "stackbot stand-in App",
        "external_url": f"{web(state)}/apps/{app.slug}",
        "html_url": f"{web(state)}/apps/{app.slug}",
        "created_at": iso(app.created_at),
        "updated_at": iso(app.created_at),
        "permissions": dict(_first_installation_permissions(app)),
        "events": ["check_run", "issue_comment", "pull_request", "push"],
    }


def _first_installation_permissions(app: App) -> dict[str, str]:
    for installation in app.installations.values():
        return installation.permissions
    return {"metadata": "read"}


def installation_json(state: StandinState, app: App, installation: Installation) -> dict[str, Any]:
    account = state.orgs.get(installation.account)
    return {
        "id": installation.id,
        "account": user_json(state, installation.account),
        "repository_selection": "all" if installation.repos is None else "selected",
        "access_tokens_url": f"{api(state)}/app/installations/{installation.id}/access_tokens",
        "repositories_url": f"{api(state)}/installation/repositories",
        "html_url": f"{web(state)}/settings/installations/{installation.id}",
        "app_id": app.id,
        "app_slug": app.slug,
        "target_id": account.id if account else ensure_user(state, installation.account).id,
        "target_type": "Organization" if account else "User",
        "permissions": dict(installation.permissions),
        "events": ["check_run", "issue_comment", "pull_request", "push"],
        "created_at": iso(installation.created_at),
        "updated_at": iso(installation.created_at),
        "single_file_name": None,
        "suspended_by": None,
        "suspended_at": None,
    }


def organization_json(state: StandinState, login: str) -> dict[str, Any]:
    org = state.orgs[login]
    url = f"{api(state)}/orgs/{login}"
    return {
        "login": login,
        "id": org.id,
        "node_id": node_id("Organization", org.id),
        "url": url,
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events",
        "hooks_url": f"{url}/hooks",
        "issues_url": f"{url}/issues",
        "members_url": f"{url}/members{{/member}}",
        "public_members_url": f"{url}/public_members{{/member}}",
        "avatar_url": f"{web(state)}/avatars/{org.id}",
        "description": None,
    }


def author_association(state: StandinState, repo: Repo, login: str) -> str:
    if login == repo.owner:
        return "OWNER"
    org = state.orgs.get(repo.owner)
    if org is not None and login in org.members:
        return "MEMBER"
    if login in repo.permissions:
        return "COLLABORATOR"
    if any(p.merged and p.author == login for p in repo.pulls.values()):
        return "CONTRIBUTOR"
    return "NONE"


def basic_error(
    message: str, status: int, docs: str = "https://docs.github.com/rest"
) -> dict[str, Any]:
    return {"message": message, "documentation_url": docs, "status": str(status)}
