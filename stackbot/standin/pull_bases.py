"""Where a PR points: ``pulls/create`` (``POST /repos/{owner}/{repo}/pulls``: head, base, title,
body, draft), ``pulls/update`` (``PATCH /repos/{owner}/{repo}/pulls/{pull_number}``:
title, body, state, base) and what GitHub does to PRs when a branch is deleted.

GitHub closes every open pull request whose *base* branch is deleted, and a PR closed this way
cannot be reopened while its base is gone (cli/cli#14223 and its many duplicates): the
``pull_request`` delivery is an ordinary ``closed`` with ``merged: false``, sent by whoever
deleted the branch. :func:`close_pulls_based_on` is that rule, used by both ways a branch goes
(the git refs API and a push that deletes it).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import deliveries, hosting, payloads
from stackbot.standin.auth import StandinHTTPError, not_found, require_write, unprocessable
from stackbot.standin.http import JsonBody, body_field, caller_of, json_response, lookup_repo
from stackbot.standin.shapes import ensure_user
from stackbot.standin.shapes_pulls import pull_json
from stackbot.standin.state import Pull, Repo, StandinState

Event = tuple[str, dict[str, Any], str | None]


def close_pulls_based_on(state: StandinState, repo: Repo, branch: str, sender: str) -> list[Event]:
    """Close the open PRs based on ``branch`` (just deleted); the caller holds the lock and
    sends the returned deliveries."""
    events: list[Event] = []
    now = state.now()
    for pull in sorted(repo.pulls.values(), key=lambda p: p.number):
        if pull.state == "open" and pull.base_ref == branch:
            pull.state, pull.closed_at, pull.updated_at = "closed", now, now
            payload = payloads.pull_request_event(state, repo, pull, "closed", sender)
            events.append(("pull_request", payload, repo.full_name))
    return events


def send(state: StandinState, events: list[Event]) -> None:
    for event, payload, repo in events:
        deliveries.deliver(state, event, payload, repo=repo)


def update_pull(
    state: StandinState, repo: Repo, pull: Pull, body: dict[str, Any] | None, sender: str
) -> list[Event]:
    """Apply a ``pulls/update`` body as GitHub does; the caller holds the lock."""
    title = body_field(body, "title", str)
    text = body_field(body, "body", str)
    wanted_state = body_field(body, "state", str)
    base = body_field(body, "base", str)
    if wanted_state is not None and wanted_state not in ("open", "closed"):
        raise unprocessable(
            f"state must be open or closed, not {wanted_state!r}", field_name="state"
        )
    changes: dict[str, Any] = {}
    if base is not None and base != pull.base_ref:
        if pull.state != "open" and wanted_state != "open":
            raise unprocessable(
                "Cannot change the base branch of a closed pull request.", field_name="base"
            )
        new_sha = hosting.resolve(repo.bare_path, f"refs/heads/{base}")
        if new_sha is None:
            raise unprocessable(f"Proposed base branch '{base}' was not found", field_name="base")
        if base == pull.head_ref:
            raise unprocessable("head and base cannot be the same branch", field_name="base")
        changes["base"] = {"ref": {"from": pull.base_ref}, "sha": {"from": pull.base_sha}}
        pull.base_ref, pull.base_sha = base, new_sha
    if title is not None and title != pull.title:
        changes["title"] = {"from": pull.title}
        pull.title = title
    if text is not None and text != (pull.body or ""):
        changes["body"] = {"from": pull.body or ""}
        pull.body = text
    events: list[Event] = []
    now = state.now()
    if changes:
        pull.updated_at = now
        payload = payloads.pull_request_event(state, repo, pull, "edited", sender, changes=changes)
        events.append(("pull_request", payload, repo.full_name))
    if wanted_state is not None and wanted_state != pull.state:
        if pull.merged:
            raise unprocessable("A merged pull request cannot be reopened", field_name="state")
        if (
            wanted_state == "open"
            and hosting.resolve(repo.bare_path, f"refs/heads/{pull.base_ref}") is None
        ):
            raise unprocessable(
                f"Cannot reopen: the base branch '{pull.base_ref}' no longer exists",
                field_name="state",
            )
        pull.state = wanted_state
        pull.closed_at = now if wanted_state == "closed" else None
        pull.updated_at = now
        action = "closed" if wanted_state == "closed" else "reopened"
        events.append(
            (
                "pull_request",
                payloads.pull_request_event(state, repo, pull, action, sender),
                repo.full_name,
            )
        )
    return events


def create_pull(
    state: StandinState, repo: Repo, body: dict[str, Any] | None, sender: str
) -> tuple[Pull, list[Event]]:
    """Open a PR from a ``pulls/create`` body as GitHub does (422 for a missing branch, a head
    with no commits over its base, or an open PR of the same head and base); the caller holds the
    lock."""
    head = body_field(body, "head", str, required=True)
    base = body_field(body, "base", str, required=True)
    title = body_field(body, "title", str, required=True)
    text = body_field(body, "body", str)
    draft = body_field(body, "draft", bool)
    head = head.split(":", 1)[-1]  # "owner:branch": only same-repository heads here
    base_sha = hosting.resolve(repo.bare_path, f"refs/heads/{base}")
    if base_sha is None:
        raise unprocessable(f"base branch '{base}' was not found", field_name="base")
    head_sha = hosting.resolve(repo.bare_path, f"refs/heads/{head}")
    if head_sha is None:
        raise unprocessable(f"head branch '{head}' was not found", field_name="head")
    if hosting.is_ancestor(repo.bare_path, head_sha, base_sha):
        raise unprocessable(f"No commits between {base} and {head}", code="custom")
    if any(
        p.state == "open" and p.head_ref == head and p.base_ref == base for p in repo.pulls.values()
    ):
        raise unprocessable(
            f"A pull request already exists for {repo.owner}:{head}.", code="custom"
        )
    ensure_user(state, sender)
    now = state.now()
    number = repo.next_number()
    pull = Pull(
        number,
        state.new_id(),
        title,
        text,
        sender,
        head,
        head_sha,
        base,
        base_sha,
        now,
        now,
        draft=bool(draft),
    )
    repo.pulls[number] = pull
    hosting.update_ref(repo.bare_path, f"refs/pull/{number}/head", head_sha)
    event = payloads.pull_request_event(state, repo, pull, "opened", sender)
    return pull, [("pull_request", event, repo.full_name)]


def register(app: FastAPI, state: StandinState) -> None:
    @app.post("/repos/{owner}/{name}/pulls")
    def create_pull_route(
        owner: str, name: str, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            require_write(state, caller, repo, app_permission="pull_requests")
            pull, events = create_pull(state, repo, body, caller.login or "ghost")
            answer = pull_json(state, repo, pull)
        send(state, events)
        return json_response(answer, 201)

    @app.patch("/repos/{owner}/{name}/pulls/{number}")
    def update_pull_route(
        owner: str, name: str, number: int, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            require_write(state, caller, repo, app_permission="pull_requests")
            pull = repo.pulls.get(number)
            if pull is None:
                raise not_found()
            events = update_pull(state, repo, pull, body, caller.login or "ghost")
            answer = pull_json(state, repo, pull)
        send(state, events)
        return json_response(answer)


__all__ = [
    "StandinHTTPError",
    "close_pulls_based_on",
    "create_pull",
    "register",
    "send",
    "update_pull",
]
