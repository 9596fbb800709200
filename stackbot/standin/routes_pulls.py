"""Pull requests and native stacks: pulls/get, pulls/list, pulls/list-commits, pulls/list-files,
pull-request-stacks/list, pull-request-stacks/get, pull-request-stacks/create."""

from __future__ import annotations

import itertools
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import hosting
from stackbot.standin.auth import StandinHTTPError, not_found, require_write, unprocessable
from stackbot.standin.http import (
    JsonBody,
    body_field,
    caller_of,
    int_param,
    json_response,
    lookup_repo,
    paginate,
)
from stackbot.standin.shapes_git import commit_json, diff_entry_json
from stackbot.standin.shapes_pulls import (
    current_base_sha,
    pull_diff_base,
    pull_json,
    stack_json,
)
from stackbot.standin.state import Pull, Repo, Stack, StandinState

MAX_PR_COMMITS = 250  # GitHub lists at most 250 commits of a PR
MAX_PR_FILES = 3000


def _pull(repo: Repo, number: int) -> Pull:
    pull = repo.pulls.get(number)
    if pull is None:
        raise not_found()
    return pull


def _filter_pulls(repo: Repo, request: Request) -> list[Pull]:
    wanted = request.query_params.get("state", "open")
    if wanted not in ("open", "closed", "all"):
        raise unprocessable(
            f"state must be open, closed or all, not {wanted!r}", field_name="state"
        )
    head = request.query_params.get("head")
    base = request.query_params.get("base")
    pulls = [
        p
        for p in repo.pulls.values()
        if (wanted == "all" or p.state == wanted)
        and (head is None or head in (p.head_ref, f"{repo.owner}:{p.head_ref}"))
        and (base is None or p.base_ref == base)
    ]
    sort = request.query_params.get("sort", "created")
    direction = request.query_params.get("direction", "desc")
    if sort not in ("created", "updated", "popularity", "long-running"):
        raise unprocessable(f"unknown sort {sort!r}", field_name="sort")
    if direction not in ("asc", "desc"):
        raise unprocessable(
            f"direction must be asc or desc, not {direction!r}", field_name="direction"
        )
    key = (
        (lambda p: (p.updated_at, p.number))
        if sort == "updated"
        else (lambda p: (p.created_at, p.number))
    )
    return sorted(pulls, key=key, reverse=direction == "desc")


def register(app: FastAPI, state: StandinState) -> None:
    @app.get("/repos/{owner}/{name}/pulls/{number}")
    def get_pull(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            return json_response(pull_json(state, repo, _pull(repo, number)))

    @app.get("/repos/{owner}/{name}/pulls")
    def list_pulls(owner: str, name: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            page, links = paginate(state, request, _filter_pulls(repo, request))
            body = [pull_json(state, repo, p, detail="simple") for p in page]
        return json_response(body, headers=links)

    @app.get("/repos/{owner}/{name}/pulls/{number}/commits")
    def list_pull_commits(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            pull = _pull(repo, number)
            base = current_base_sha(repo, pull)
        commits = hosting.commits_between(repo.bare_path, base, pull.head_sha)[:MAX_PR_COMMITS]
        page, links = paginate(state, request, commits)
        return json_response([commit_json(state, repo, c) for c in page], headers=links)

    @app.get("/repos/{owner}/{name}/pulls/{number}/files")
    def list_pull_files(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            pull = _pull(repo, number)
            base = pull_diff_base(repo, pull)
        files = hosting.changed_files(repo.bare_path, base, pull.head_sha)[:MAX_PR_FILES]
        page, links = paginate(state, request, files)
        body = [diff_entry_json(state, repo, pull.head_sha, f) for f in page]
        return json_response(body, headers=links)

    @app.get("/repos/{owner}/{name}/stacks")
    def list_stacks(owner: str, name: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            member = int_param(request, "pull_request", 0)
            stacks = [
                s
                for s in sorted(repo.stacks.values(), key=lambda s: s.number)
                if not member or member in s.pulls
            ]
            page, links = paginate(state, request, stacks)
            body = [stack_json(state, repo, s, detail="minimal") for s in page]
        return json_response(body, headers=links)

    @app.get("/repos/{owner}/{name}/stacks/{number}")
    def get_stack(owner: str, name: str, number: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            stack = repo.stacks.get(number)
            if stack is None:
                raise not_found()
            return json_response(stack_json(state, repo, stack, detail="full"))

    @app.post("/repos/{owner}/{name}/stacks")
    def create_stack_route(
        owner: str, name: str, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            require_write(state, caller_of(request), repo, app_permission="pull_requests")
            numbers = body_field(body, "pull_requests", list, required=True)
            stack = create_stack(state, repo, numbers)
            return json_response(stack_json(state, repo, stack, detail="full"), status=201)


def create_stack(state: StandinState, repo: Repo, numbers: list[Any]) -> Stack:
    """GitHub's rules: 2-100 open PRs, bottom first, each based on the previous one's head."""
    if not 2 <= len(numbers) <= 100 or not all(isinstance(n, int) for n in numbers):
        raise unprocessable(
            "a stack needs 2 to 100 pull request numbers", field_name="pull_requests"
        )
    pulls = [_pull(repo, n) for n in numbers]
    for below, above in itertools.pairwise(pulls):
        if above.base_ref != below.head_ref:
            raise unprocessable(
                f"#{above.number} is based on {above.base_ref!r}, not on #{below.number}'s head "
                f"{below.head_ref!r}",
                field_name="pull_requests",
            )
    for pull in pulls:
        if pull.state != "open":
            raise unprocessable(f"#{pull.number} is not open", field_name="pull_requests")
        if pull.stack_number is not None:
            raise StandinHTTPError(
                422,
                "Validation Failed",
                errors=[
                    {"code": "already_exists", "message": f"#{pull.number} is already in a stack"}
                ],
            )
    number = max(repo.stacks, default=0) + 1
    stack = Stack(state.new_id(), number, pulls[0].base_ref, [p.number for p in pulls], state.now())
    repo.stacks[number] = stack
    for pull in pulls:
        pull.stack_number = number
    return stack
