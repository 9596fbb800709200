"""Landing a pull request: pulls/merge, pulls/check-if-merged, pulls/list-reviews,
pulls/create-review, and the base branch's protection (repos/get-branch-protection,
repos/update-branch-protection, repos/delete-branch-protection). :mod:`.merging` holds the rules.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from stackbot.standin import deliveries, hosting, merging, payloads
from stackbot.standin.auth import (
    StandinHTTPError,
    not_found,
    require_write,
    unprocessable_simple,
)
from stackbot.standin.http import (
    JsonBody,
    body_field,
    caller_of,
    json_response,
    lookup_repo,
    paginate,
)
from stackbot.standin.pull_bases import send
from stackbot.standin.shapes import author_association, node_id, repo_url, user_json, web
from stackbot.standin.shapes_pulls import pull_json
from stackbot.standin.state import Protection, Pull, Repo, Review, StandinState, iso

REVIEW_EVENTS = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
}


def _pull(repo: Repo, number: int) -> Pull:
    pull = repo.pulls.get(number)
    if pull is None:
        raise not_found()
    return pull


def review_json(state: StandinState, repo: Repo, review: Review) -> dict[str, Any]:
    pr_url = f"{repo_url(state, repo)}/pulls/{review.pull_number}"
    html = f"{web(state)}/{repo.full_name}/pull/{review.pull_number}#pullrequestreview-{review.id}"
    return {
        "id": review.id,
        "node_id": node_id("PullRequestReview", review.id),
        "user": user_json(state, review.author),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": pr_url,
        "_links": {"html": {"href": html}, "pull_request": {"href": pr_url}},
        "submitted_at": iso(review.submitted_at),
        "commit_id": review.commit_id,
        "author_association": author_association(state, repo, review.author),
    }


def submit_review(
    state: StandinState, repo: Repo, pull: Pull, author: str, state_name: str, body: str
) -> tuple[Review, dict[str, Any]]:
    """Record a review on the PR's head and build its ``pull_request_review`` ``submitted``
    delivery; the caller holds the lock."""
    review = Review(
        state.new_id(), pull.number, author, state_name, body, pull.head_sha, state.now()
    )
    repo.reviews[review.id] = review
    payload = {
        "action": "submitted",
        "review": review_json(state, repo, review),
        "pull_request": pull_json(state, repo, pull, detail="simple"),
        **payloads.repository_context(state, repo, author),
    }
    return review, payload


def protection_json(
    state: StandinState, repo: Repo, branch: str, rule: Protection
) -> dict[str, Any]:
    url = f"{repo_url(state, repo)}/branches/{branch}/protection"
    data: dict[str, Any] = {
        "url": url,
        "enforce_admins": {"url": f"{url}/enforce_admins", "enabled": rule.enforce_admins},
        "required_linear_history": {"enabled": rule.required_linear_history},
        "allow_force_pushes": {"enabled": rule.allow_force_pushes},
        "allow_deletions": {"enabled": rule.allow_deletions},
        "required_signatures": {"url": f"{url}/required_signatures", "enabled": False},
    }
    if rule.required_contexts is not None:
        data["required_status_checks"] = {
            "url": f"{url}/required_status_checks",
            "strict": rule.strict,
            "contexts": list(rule.required_contexts),
            "checks": [{"context": c, "app_id": None} for c in rule.required_contexts],
            "contexts_url": f"{url}/required_status_checks/contexts",
        }
    if rule.required_approving_review_count is not None:
        data["required_pull_request_reviews"] = {
            "url": f"{url}/required_pull_request_reviews",
            "dismiss_stale_reviews": rule.dismiss_stale_reviews,
            "require_code_owner_reviews": rule.require_code_owner_reviews,
            "required_approving_review_count": rule.required_approving_review_count,
            "require_last_push_approval": False,
        }
    return data


def protection_from_body(body: dict[str, Any] | None) -> Protection:
    """A ``repos/update-branch-protection`` body (its four required keys, each may be null)."""
    for key in ("required_status_checks", "enforce_admins", "required_pull_request_reviews"):
        if body is None or key not in body:
            raise unprocessable_simple(f'"{key}" wasn\'t supplied.')
    if body is None or "restrictions" not in body:
        raise unprocessable_simple('"restrictions" wasn\'t supplied.')
    checks = body_field(body, "required_status_checks", dict)
    reviews = body_field(body, "required_pull_request_reviews", dict)
    rule = Protection(
        enforce_admins=bool(body_field(body, "enforce_admins", bool)),
        required_linear_history=bool(body_field(body, "required_linear_history", bool)),
        allow_force_pushes=bool(body_field(body, "allow_force_pushes", bool)),
        allow_deletions=bool(body_field(body, "allow_deletions", bool)),
    )
    if checks is not None:
        contexts = [
            c for c in body_field(checks, "contexts", list, required=True) if isinstance(c, str)
        ]
        for check in body_field(checks, "checks", list) or []:
            if isinstance(check, dict) and isinstance(check.get("context"), str):
                contexts.append(check["context"])
        rule.required_contexts = sorted(set(contexts))
        rule.strict = bool(body_field(checks, "strict", bool, required=True))
    if reviews is not None:
        count = body_field(reviews, "required_approving_review_count", int)
        if count is not None and not 0 <= count <= 6:
            raise unprocessable_simple("required_approving_review_count must be between 0 and 6")
        rule.required_approving_review_count = 1 if count is None else count
        rule.dismiss_stale_reviews = bool(body_field(reviews, "dismiss_stale_reviews", bool))
        rule.require_code_owner_reviews = bool(
            body_field(reviews, "require_code_owner_reviews", bool)
        )
    return rule


def _branch_exists(repo: Repo, branch: str) -> None:
    if hosting.resolve(repo.bare_path, f"refs/heads/{branch}") is None:
        raise StandinHTTPError(404, "Branch not found")


def register(app: FastAPI, state: StandinState) -> None:
    @app.put("/repos/{owner}/{name}/pulls/{number}/merge")
    def merge_route(
        owner: str, name: str, number: int, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            require_write(state, caller, repo, app_permission="contents")
            pull = _pull(repo, number)
            merged, events = merging.merge_pull(
                state,
                repo,
                pull,
                caller=caller,
                merger=caller.login or "ghost",
                method=body_field(body, "merge_method", str) or "merge",
                sha=body_field(body, "sha", str),
                title=body_field(body, "commit_title", str),
                message=body_field(body, "commit_message", str),
            )
        send(state, events)
        return json_response(
            {"sha": merged, "merged": True, "message": "Pull Request successfully merged"}
        )

    @app.get("/repos/{owner}/{name}/pulls/{number}/merge")
    def check_if_merged(owner: str, name: str, number: int, request: Request) -> Response:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            merged = _pull(repo, number).merged
        # The description documents no body for "not merged"; an unknown PR is the usual 404.
        return Response(status_code=204 if merged else 404)

    @app.get("/repos/{owner}/{name}/pulls/{number}/reviews")
    def list_reviews(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            _pull(repo, number)
            reviews = sorted(
                (r for r in repo.reviews.values() if r.pull_number == number), key=lambda r: r.id
            )
            page, links = paginate(state, request, reviews)
            answer = [review_json(state, repo, r) for r in page]
        return json_response(answer, headers=links)

    @app.post("/repos/{owner}/{name}/pulls/{number}/reviews")
    def create_review(
        owner: str, name: str, number: int, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            require_write(state, caller, repo, app_permission="pull_requests", role="read")
            pull = _pull(repo, number)
            event = body_field(body, "event", str)
            text = body_field(body, "body", str) or ""
            if event not in REVIEW_EVENTS:
                raise unprocessable_simple("event must be APPROVE, REQUEST_CHANGES or COMMENT")
            login = caller.login or "ghost"
            if login == pull.author and event != "COMMENT":
                raise unprocessable_simple(
                    "Can not approve your own pull request"
                    if event == "APPROVE"
                    else "Can not request changes on your own pull request"
                )
            if event != "APPROVE" and not text:
                raise unprocessable_simple(f"{event} needs a body")
            review, payload = submit_review(state, repo, pull, login, REVIEW_EVENTS[event], text)
            answer = review_json(state, repo, review)
        deliveries.deliver(state, "pull_request_review", payload, repo=repo.full_name)
        return json_response(answer)

    @app.get("/repos/{owner}/{name}/branches/{branch}/protection")
    def get_protection(owner: str, name: str, branch: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            _branch_exists(repo, branch)
            rule = repo.protections.get(branch)
            if rule is None:
                raise StandinHTTPError(404, "Branch not protected")
            return json_response(protection_json(state, repo, branch, rule))

    @app.put("/repos/{owner}/{name}/branches/{branch}/protection")
    def put_protection(
        owner: str, name: str, branch: str, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(
                state, caller_of(request), repo, app_permission="administration", role="admin"
            )
            _branch_exists(repo, branch)
            rule = protection_from_body(body)
            repo.protections[branch] = rule
            return json_response(protection_json(state, repo, branch, rule))

    @app.delete("/repos/{owner}/{name}/branches/{branch}/protection")
    def delete_protection(owner: str, name: str, branch: str, request: Request) -> Response:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(
                state, caller_of(request), repo, app_permission="administration", role="admin"
            )
            if repo.protections.pop(branch, None) is None:
                raise StandinHTTPError(404, "Branch not protected")
        return Response(status_code=204)
