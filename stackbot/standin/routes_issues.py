"""Issue comments (on PRs and issues): create, update, get, delete, list per issue and per repo.

Comments written through the API trigger ``issue_comment`` deliveries just as on GitHub, so a
bot sees its own comments come back and must ignore them.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from stackbot.standin import deliveries, payloads
from stackbot.standin.auth import Caller, StandinHTTPError, not_found, role_of
from stackbot.standin.http import (
    JsonBody,
    body_field,
    caller_of,
    json_response,
    lookup_repo,
    paginate,
)
from stackbot.standin.shapes_pulls import comment_json
from stackbot.standin.state import IssueComment, Repo, StandinState, iso, permission_at_least

MAX_BODY_CHARS = 65536


def _check_body(body: dict[str, Any] | None) -> str:
    text: str = body_field(body, "body", str, required=True)
    if len(text) > MAX_BODY_CHARS:
        raise StandinHTTPError(
            422,
            "Validation Failed",
            errors=[
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": f"body is too long (maximum is {MAX_BODY_CHARS} characters)",
                }
            ],
        )
    return text


def _may_write_comments(state: StandinState, caller: Caller, repo: Repo) -> None:
    rights = (caller.permissions.get("issues"), caller.permissions.get("pull_requests"))
    if caller.kind == "installation" and "write" not in rights:
        raise StandinHTTPError(403, "Resource not accessible by integration")


def _may_change(state: StandinState, caller: Caller, repo: Repo, comment: IssueComment) -> None:
    _may_write_comments(state, caller, repo)
    if caller.kind == "user" and caller.login != comment.author:
        assert caller.login is not None
        if not permission_at_least(role_of(state, repo, caller.login), "write"):
            raise StandinHTTPError(403, "Must have push access to edit another user's comment")


def _comment(repo: Repo, comment_id: int) -> IssueComment:
    comment = repo.comments.get(comment_id)
    if comment is None:
        raise not_found()
    return comment


def _since(request: Request) -> str | None:
    return request.query_params.get("since")


def register(app: FastAPI, state: StandinState) -> None:
    @app.post("/repos/{owner}/{name}/issues/{number}/comments")
    def create_comment(
        owner: str,
        name: str,
        number: int,
        request: Request,
        body: JsonBody = None,
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            if number not in repo.pulls and number not in repo.issues:
                raise not_found()
            caller = caller_of(request)
            _may_write_comments(state, caller, repo)
            text = _check_body(body)
            assert caller.login is not None
            comment = add_comment(
                state, repo, number, caller.login, text, via_app=caller.kind == "installation"
            )
            answer = comment_json(state, repo, comment)
            event = payloads.issue_comment_event(state, repo, comment, "created", caller.login)
        deliveries.deliver(state, "issue_comment", event, repo=repo.full_name)
        headers = {"Location": answer["url"]}
        return json_response(answer, status=201, headers=headers)

    @app.patch("/repos/{owner}/{name}/issues/comments/{comment_id}")
    def update_comment(
        owner: str,
        name: str,
        comment_id: int,
        request: Request,
        body: JsonBody = None,
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            comment = _comment(repo, comment_id)
            caller = caller_of(request)
            _may_change(state, caller, repo, comment)
            text = _check_body(body)
            assert caller.login is not None
            event = edit_comment(state, repo, comment, text, caller.login)
            answer = comment_json(state, repo, comment)
        if event is not None:
            deliveries.deliver(state, "issue_comment", event, repo=repo.full_name)
        return json_response(answer)

    @app.get("/repos/{owner}/{name}/issues/comments/{comment_id}")
    def get_comment(owner: str, name: str, comment_id: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            return json_response(comment_json(state, repo, _comment(repo, comment_id)))

    @app.delete("/repos/{owner}/{name}/issues/comments/{comment_id}")
    def delete_comment(owner: str, name: str, comment_id: int, request: Request) -> Response:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            comment = _comment(repo, comment_id)
            caller = caller_of(request)
            _may_change(state, caller, repo, comment)
            assert caller.login is not None
            event = payloads.issue_comment_event(state, repo, comment, "deleted", caller.login)
            del repo.comments[comment_id]
        deliveries.deliver(state, "issue_comment", event, repo=repo.full_name)
        return Response(status_code=204)

    @app.get("/repos/{owner}/{name}/issues/{number}/comments")
    def list_comments(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            if number not in repo.pulls and number not in repo.issues:
                raise not_found()
            since = _since(request)
            found = [
                c
                for c in sorted(repo.comments.values(), key=lambda c: c.id)
                if c.issue_number == number and (since is None or iso(c.updated_at) >= since)
            ]
            page, links = paginate(state, request, found)
            answer = [comment_json(state, repo, c) for c in page]
        return json_response(answer, headers=links)

    @app.get("/repos/{owner}/{name}/issues/comments")
    def list_repo_comments(owner: str, name: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            since = _since(request)
            sort = request.query_params.get("sort", "created")
            descending = request.query_params.get("direction", "asc") == "desc"
            found = [
                c for c in repo.comments.values() if since is None or iso(c.updated_at) >= since
            ]
            key = (
                (lambda c: (c.updated_at, c.id))
                if sort == "updated"
                else (lambda c: (c.created_at, c.id))
            )
            page, links = paginate(state, request, sorted(found, key=key, reverse=descending))
            answer = [comment_json(state, repo, c) for c in page]
        return json_response(answer, headers=links)


def add_comment(
    state: StandinState, repo: Repo, number: int, author: str, body: str, *, via_app: bool = False
) -> IssueComment:
    now = state.now()
    comment = IssueComment(state.new_id(), number, author, body, now, now, via_app=via_app)
    repo.comments[comment.id] = comment
    return comment


def edit_comment(
    state: StandinState, repo: Repo, comment: IssueComment, body: str, editor: str
) -> dict[str, Any] | None:
    """Change a comment's body; the ``edited`` payload, or None when nothing changed."""
    if body == comment.body:
        return None
    old = comment.body
    comment.body = body
    comment.updated_at = state.now()
    changes = {"body": {"from": old}}
    return payloads.issue_comment_event(state, repo, comment, "edited", editor, changes=changes)
