"""Repositories, people, git data and the App: collaborators, org membership, commits,
comparisons, refs, the App's installation and its access tokens, and the rate-limit status."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from stackbot.standin import hosting, payloads, pull_bases
from stackbot.standin.auth import (
    StandinHTTPError,
    not_found,
    require_app,
    require_token,
    require_write,
    role_of,
    unprocessable,
)
from stackbot.standin.http import (
    JsonBody,
    body_field,
    caller_of,
    charge,
    json_response,
    lookup_repo,
    paginate,
)
from stackbot.standin.shapes import installation_json, organization_json, repo_json, user_json
from stackbot.standin.shapes_git import commit_json, comparison_json, git_commit_json, git_ref_json
from stackbot.standin.shapes_pulls import pull_json
from stackbot.standin.state import Repo, StandinState, iso

_LEGACY_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
}


def _commit_sha(repo: Repo, ref: str) -> str:
    for candidate in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        sha = hosting.resolve(repo.bare_path, candidate)
        if sha is not None:
            return sha
    raise StandinHTTPError(422, f"No commit found for SHA: {ref}")


def permission_json(state: StandinState, repo: Repo, login: str) -> dict[str, Any]:
    role = role_of(state, repo, login)
    legacy = _LEGACY_PERMISSION.get(role, "none")
    user = user_json(state, login)
    rank = ("none", "read", "triage", "write", "maintain", "admin").index(role)
    user["permissions"] = {
        "pull": rank >= 1,
        "triage": rank >= 2,
        "push": rank >= 3,
        "maintain": rank >= 4,
        "admin": rank >= 5,
    }
    user["role_name"] = role
    return {"permission": legacy, "role_name": role, "user": user}


def register(app: FastAPI, state: StandinState) -> None:
    _register_people(app, state)
    _register_git(app, state)
    _register_app(app, state)


def _register_people(app: FastAPI, state: StandinState) -> None:
    @app.get("/repos/{owner}/{name}/collaborators/{login}/permission")
    def collaborator_permission(
        owner: str, name: str, login: str, request: Request
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            if login not in state.users:
                raise StandinHTTPError(404, f"{login} is not a user")
            return json_response(permission_json(state, repo, login))

    @app.get("/repos/{owner}/{name}/collaborators/{login}")
    def check_collaborator(owner: str, name: str, login: str, request: Request) -> Response:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            member = login in state.users and role_of(state, repo, login) != "none"
        return Response(status_code=204 if member else 404)

    @app.get("/orgs/{org}/memberships/{login}")
    def org_membership(org: str, login: str, request: Request) -> JSONResponse:
        with state.lock:
            require_token(caller_of(request))
            found = state.orgs.get(org)
            if found is None or login not in found.members:
                raise not_found()
            return json_response(
                {
                    "url": f"{state.base_url}/orgs/{org}/memberships/{login}",
                    "state": "active",
                    "role": found.members[login],
                    "organization_url": f"{state.base_url}/orgs/{org}",
                    "organization": organization_json(state, org),
                    "user": user_json(state, login),
                }
            )

    @app.get("/orgs/{org}/members/{login}")
    def check_org_member(org: str, login: str, request: Request) -> Response:
        with state.lock:
            caller = caller_of(request)
            require_token(caller)
            found = state.orgs.get(org)
            if found is not None and caller.kind == "user" and caller.login not in found.members:
                # GitHub: someone outside the org is sent to the public member list.
                public = f"{state.base_url}/orgs/{org}/public_members/{login}"
                return Response(status_code=302, headers={"Location": public})
            member = found is not None and login in found.members
        return Response(status_code=204 if member else 404)

    @app.get("/orgs/{org}/public_members/{login}")
    def check_public_member(org: str, login: str, request: Request) -> Response:
        with state.lock:
            require_token(caller_of(request))
            found = state.orgs.get(org)
            public = found is not None and login in found.public_members
        return Response(status_code=204 if public else 404)


def _register_git(app: FastAPI, state: StandinState) -> None:
    @app.get("/repos/{owner}/{name}")
    def get_repo(owner: str, name: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            body = repo_json(state, repo)
        body.update({"has_discussions": False, "network_count": 0, "subscribers_count": 0})
        return json_response(body)

    @app.get("/repos/{owner}/{name}/commits/{ref}/pulls")
    def pulls_for_commit(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            sha = _commit_sha(repo, ref)
            found = pulls_containing(repo, sha)
            page, links = paginate(state, request, found)
            body = [pull_json(state, repo, p, detail="simple") for p in page]
        return json_response(body, headers=links)

    @app.get("/repos/{owner}/{name}/commits/{ref}")
    def get_commit(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        repo = lookup_repo(state, request, owner, name)
        sha = _commit_sha(repo, ref)
        info = hosting.commit_info(repo.bare_path, sha)
        parent = info.parents[0] if info.parents else hosting.EMPTY_TREE
        files = hosting.changed_files(repo.bare_path, parent, sha)
        page, links = paginate(state, request, files)
        return json_response(commit_json(state, repo, info, page), headers=links)

    @app.get("/repos/{owner}/{name}/git/commits/{sha}")
    def get_git_commit(owner: str, name: str, sha: str, request: Request) -> JSONResponse:
        repo = lookup_repo(state, request, owner, name)
        full = hosting.resolve(repo.bare_path, sha)
        if full is None:
            raise not_found()
        return json_response(
            git_commit_json(state, repo, hosting.commit_info(repo.bare_path, full))
        )

    @app.get("/repos/{owner}/{name}/compare/{basehead:path}")
    def compare(owner: str, name: str, basehead: str, request: Request) -> JSONResponse:
        repo = lookup_repo(state, request, owner, name)
        base_spec, sep, head_spec = basehead.partition("...")
        if not sep:
            raise not_found()
        base = hosting.resolve(repo.bare_path, base_spec.split(":")[-1])
        head = hosting.resolve(repo.bare_path, head_spec.split(":")[-1])
        if base is None or head is None:
            raise not_found()
        return json_response(comparison_json(state, repo, base_spec, head_spec, base, head))

    @app.get("/repos/{owner}/{name}/git/ref/{ref:path}")
    def get_ref(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        repo = lookup_repo(state, request, owner, name)
        sha = hosting.list_refs(repo.bare_path, f"refs/{ref}").get(f"refs/{ref}")
        if sha is None:
            raise not_found()
        return json_response(git_ref_json(state, repo, f"refs/{ref}", sha))

    @app.post("/repos/{owner}/{name}/git/refs")
    def create_ref(owner: str, name: str, request: Request, body: JsonBody = None) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(state, caller_of(request), repo, app_permission="contents")
            ref: str = body_field(body, "ref", str, required=True)
            sha: str = body_field(body, "sha", str, required=True)
            if not ref.startswith("refs/") or ref.count("/") < 2:
                raise unprocessable(
                    "Reference name must start with 'refs/' and have at least two slashes"
                )
            if f"{ref}" in hosting.list_refs(repo.bare_path, ref):
                raise unprocessable("Reference already exists")
            if hosting.resolve(repo.bare_path, sha) is None:
                raise unprocessable("Object does not exist")
            hosting.update_ref(repo.bare_path, ref, sha)
            answer = git_ref_json(state, repo, ref, sha)
        return json_response(answer, status=201, headers={"Location": answer["url"]})

    @app.patch("/repos/{owner}/{name}/git/refs/{ref:path}")
    def update_ref(
        owner: str,
        name: str,
        ref: str,
        request: Request,
        body: JsonBody = None,
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(state, caller_of(request), repo, app_permission="contents")
            full_ref = f"refs/{ref}"
            current = hosting.list_refs(repo.bare_path, full_ref).get(full_ref)
            if current is None:
                raise unprocessable("Reference does not exist")
            sha: str = body_field(body, "sha", str, required=True)
            if hosting.resolve(repo.bare_path, sha) is None:
                raise unprocessable("Object does not exist")
            force = bool(body_field(body, "force", bool))
            if not force and not hosting.is_ancestor(repo.bare_path, current, sha):
                raise unprocessable("Update is not a fast forward")
            hosting.update_ref(repo.bare_path, full_ref, sha)
            return json_response(git_ref_json(state, repo, full_ref, sha))

    @app.delete("/repos/{owner}/{name}/git/refs/{ref:path}")
    def delete_ref(owner: str, name: str, ref: str, request: Request) -> Response:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(state, caller_of(request), repo, app_permission="contents")
            full_ref = f"refs/{ref}"
            if full_ref == f"refs/heads/{repo.default_branch}":
                return Response(status_code=422)
            before = hosting.list_refs(repo.bare_path, full_ref).get(full_ref)
            if before is None:
                raise unprocessable("Reference does not exist")
            hosting.delete_ref(repo.bare_path, full_ref)
            events: list[pull_bases.Event] = []
            if full_ref.startswith("refs/heads/"):
                sender = caller_of(request).login or "ghost"
                push = payloads.push_event(state, repo, full_ref, before, None, sender)
                events.append(("push", push, repo.full_name))
                branch = full_ref.removeprefix("refs/heads/")
                events += pull_bases.close_pulls_based_on(state, repo, branch, sender)
        pull_bases.send(state, events)
        return Response(status_code=204)


def _register_app(app: FastAPI, state: StandinState) -> None:
    @app.get("/repos/{owner}/{name}/installation")
    def repo_installation(owner: str, name: str, request: Request) -> JSONResponse:
        with state.lock:
            app_id = require_app(caller_of(request))
            github_app = state.apps[app_id]
            repo = state.repo(f"{owner}/{name}")
            for installation in github_app.installations.values():
                if repo is not None and installation.covers(repo.full_name):
                    return json_response(installation_json(state, github_app, installation))
        raise not_found()

    @app.post("/app/installations/{installation_id}/access_tokens")
    def access_token(installation_id: int, request: Request, body: JsonBody = None) -> JSONResponse:
        with state.lock:
            app_id = require_app(caller_of(request))
            github_app = state.apps[app_id]
            installation = github_app.installations.get(installation_id)
            if installation is None:
                raise not_found()
            token = state.issue_token(
                github_app.bot_login,
                kind="installation",
                installation_id=installation_id,
                lifetime_s=state.installation_token_lifetime_s,
            )
            assert token.expires_at is not None
            answer: dict[str, Any] = {
                "token": token.token,
                "expires_at": iso(token.expires_at),
                "permissions": dict(installation.permissions),
                "repository_selection": "all" if installation.repos is None else "selected",
            }
            if installation.repos is not None:
                answer["repositories"] = [
                    repo_json(state, state.repos[n.lower()])
                    for n in sorted(installation.repos)
                    if n.lower() in state.repos
                ]
        return json_response(answer, status=201)

    @app.get("/rate_limit")
    def rate_limit(request: Request) -> JSONResponse:
        headers, _ = charge(state, caller_of(request), count=False)
        core = {
            "limit": int(headers["x-ratelimit-limit"]),
            "remaining": int(headers["x-ratelimit-remaining"]),
            "reset": int(headers["x-ratelimit-reset"]),
            "used": int(headers["x-ratelimit-used"]),
        }
        search = {"limit": 30, "remaining": 30, "reset": core["reset"], "used": 0}
        return json_response({"resources": {"core": core, "search": search}, "rate": core})


def pulls_containing(repo: Repo, sha: str) -> list[Any]:
    """PRs whose commits include ``sha``, or that were merged as ``sha`` (open ones first)."""
    found = []
    for pull in sorted(repo.pulls.values(), key=lambda p: (p.state != "open", -p.number)):
        if pull.merge_commit_sha == sha or pull.head_sha == sha:
            found.append(pull)
            continue
        base = (
            pull.base_sha
            if pull.state != "open"
            else hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}")
        )
        if hosting.is_ancestor(repo.bare_path, sha, pull.head_sha) and not (
            base and hosting.is_ancestor(repo.bare_path, sha, base)
        ):
            found.append(pull)
    return found
