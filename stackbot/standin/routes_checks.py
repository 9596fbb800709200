"""Check runs and commit statuses: checks/create, checks/update, checks/get, checks/list-for-ref,
checks/rerequest-run, repos/create-commit-status, repos/get-combined-status-for-ref,
repos/list-commit-statuses-for-ref.

Creating a run sends ``check_run.created`` (and ``completed`` when it is created finished);
an update that finishes it sends ``check_run.completed``, as GitHub does for the App's hook.
A check run or status on a merge group's head lets the merge queue move (:mod:`.merge_queue`).
Only an installation with ``checks: write`` may write check runs (a personal token gets 403,
as on GitHub); commit statuses need ``statuses: write`` or push access.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import deliveries, hosting, merge_queue, payloads
from stackbot.standin.auth import Caller, StandinHTTPError, not_found, require_write, unprocessable
from stackbot.standin.http import (
    JsonBody,
    body_field,
    caller_of,
    json_response,
    lookup_repo,
    paginate,
)
from stackbot.standin.pull_bases import send
from stackbot.standin.shapes_git import (
    check_run_json,
    combined_status_json,
    latest_statuses,
    status_json,
)
from stackbot.standin.state import CheckRun, CommitStatus, Repo, StandinState

RUN_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)
STATUS_STATES = ("error", "failure", "pending", "success")
MAX_OUTPUT_CHARS = 65535
MAX_STATUSES_PER_SHA_AND_CONTEXT = 1000


def _may_write_checks(caller: Caller) -> None:
    if caller.kind == "user":
        raise StandinHTTPError(403, "Resource not accessible by personal access token")
    if caller.permissions.get("checks") != "write":
        raise StandinHTTPError(403, "Resource not accessible by integration")


def _resolve_ref(repo: Repo, ref: str) -> str:
    for candidate in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        sha = hosting.resolve(repo.bare_path, candidate)
        if sha is not None:
            return sha
    raise StandinHTTPError(422, f"No commit found for SHA: {ref}")


def _apply_run_fields(state: StandinState, run: CheckRun, body: dict[str, Any]) -> None:
    status = body_field(body, "status", str)
    conclusion = body_field(body, "conclusion", str)
    if status is not None and status not in RUN_STATUSES:
        raise unprocessable(f"status must be one of {', '.join(RUN_STATUSES)}", field_name="status")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise unprocessable(
            f"conclusion must be one of {', '.join(CONCLUSIONS)}", field_name="conclusion"
        )
    if status == "completed" and conclusion is None and run.conclusion is None:
        raise unprocessable(
            "conclusion is required when status is completed", field_name="conclusion"
        )
    if conclusion is not None:  # GitHub: giving a conclusion completes the run
        status = "completed"
    if status is not None:
        run.status = status
    if conclusion is not None:
        run.conclusion = conclusion
    if run.status == "in_progress" and run.started_at is None:
        run.started_at = state.now()
    if run.status == "completed" and run.completed_at is None:
        run.completed_at = state.now()
    for key in ("name", "details_url", "external_id"):
        value = body_field(body, key, str)
        if value is not None:
            setattr(run, key, value)
    _apply_output(run, body_field(body, "output", dict))


def _apply_output(run: CheckRun, output: dict[str, Any] | None) -> None:
    if output is None:
        return
    title = body_field(output, "title", str, required=True)
    summary = body_field(output, "summary", str, required=True)
    text = body_field(output, "text", str)
    for field_name, value in (("summary", summary), ("text", text)):
        if value is not None and len(value) > MAX_OUTPUT_CHARS:
            raise unprocessable(
                f"output.{field_name} is longer than {MAX_OUTPUT_CHARS} characters",
                field_name=f"output.{field_name}",
            )
    run.title, run.summary, run.text = title, summary, text


def _run(repo: Repo, run_id: int) -> CheckRun:
    run = repo.check_runs.get(run_id)
    if run is None:
        raise not_found()
    return run


def register(app: FastAPI, state: StandinState) -> None:
    @app.post("/repos/{owner}/{name}/check-runs")
    def create_check_run(
        owner: str, name: str, request: Request, body: JsonBody = None
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            _may_write_checks(caller)
            run_name = body_field(body, "name", str, required=True)
            head_sha = _resolve_ref(repo, body_field(body, "head_sha", str, required=True))
            run = CheckRun(
                state.new_id(),
                head_sha,
                run_name,
                "queued",
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                suite_id=_suite_id(state, repo, head_sha, caller),
                app_id=caller.app_id,
            )
            _apply_run_fields(state, run, body or {})
            repo.check_runs[run.id] = run
            answer = check_run_json(state, repo, run)
            assert caller.login is not None
            events = [payloads.check_run_event(state, repo, run, "created", caller.login)]
            if run.status == "completed":
                events.append(payloads.check_run_event(state, repo, run, "completed", caller.login))
            queue_events = merge_queue.advance(state, repo)
        for event in events:
            deliveries.deliver(state, "check_run", event, repo=repo.full_name)
        send(state, queue_events)
        return json_response(answer, status=201)

    @app.patch("/repos/{owner}/{name}/check-runs/{run_id}")
    def update_check_run(
        owner: str,
        name: str,
        run_id: int,
        request: Request,
        body: JsonBody = None,
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            _may_write_checks(caller)
            run = _run(repo, run_id)
            if run.app_id != caller.app_id:
                raise StandinHTTPError(403, "Invalid app_id: the check run belongs to another App")
            was_completed = run.status == "completed"
            _apply_run_fields(state, run, body or {})
            answer = check_run_json(state, repo, run)
            assert caller.login is not None
            completed = run.status == "completed" and not was_completed
            event = (
                payloads.check_run_event(state, repo, run, "completed", caller.login)
                if completed
                else None
            )
            queue_events = merge_queue.advance(state, repo)
        if event is not None:
            deliveries.deliver(state, "check_run", event, repo=repo.full_name)
        send(state, queue_events)
        return json_response(answer)

    @app.get("/repos/{owner}/{name}/check-runs/{run_id}")
    def get_check_run(owner: str, name: str, run_id: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            return json_response(check_run_json(state, repo, _run(repo, run_id)))

    @app.get("/repos/{owner}/{name}/commits/{ref}/check-runs")
    def list_check_runs(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            sha = _resolve_ref(repo, ref)
            runs = select_runs(repo, sha, request.query_params)
            page, links = paginate(state, request, runs)
            body = {
                "total_count": len(runs),
                "check_runs": [check_run_json(state, repo, r) for r in page],
            }
        return json_response(body, headers=links)

    @app.post("/repos/{owner}/{name}/check-runs/{run_id}/rerequest")
    def rerequest_check_run(owner: str, name: str, run_id: int, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            _may_write_checks(caller)
            run = _run(repo, run_id)
            assert caller.login is not None
            event = payloads.check_run_event(state, repo, run, "rerequested", caller.login)
        deliveries.deliver(state, "check_run", event, repo=repo.full_name)
        return json_response({}, status=201)

    @app.post("/repos/{owner}/{name}/statuses/{sha}")
    def create_status(
        owner: str,
        name: str,
        sha: str,
        request: Request,
        body: JsonBody = None,
    ) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            caller = caller_of(request)
            require_write(state, caller, repo, app_permission="statuses")
            full_sha = _resolve_ref(repo, sha)
            status_state = body_field(body, "state", str, required=True)
            if status_state not in STATUS_STATES:
                raise unprocessable(
                    f"state must be one of {', '.join(STATUS_STATES)}", field_name="state"
                )
            context = body_field(body, "context", str) or "default"
            same = [s for s in repo.statuses if s.sha == full_sha and s.context == context]
            if len(same) >= MAX_STATUSES_PER_SHA_AND_CONTEXT:
                raise unprocessable(
                    "This SHA and context has reached the maximum number of statuses."
                )
            assert caller.login is not None
            status = CommitStatus(
                state.new_id(),
                full_sha,
                status_state,
                context,
                body_field(body, "description", str),
                body_field(body, "target_url", str),
                caller.login,
                state.now(),
            )
            repo.statuses.append(status)
            answer = status_json(state, repo, status)
            queue_events = merge_queue.advance(state, repo)
        send(state, queue_events)
        return json_response(answer, status=201)

    @app.get("/repos/{owner}/{name}/commits/{ref}/status")
    def combined_status(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            sha = _resolve_ref(repo, ref)
            latest = sorted(latest_statuses(repo, sha), key=lambda s: s.id, reverse=True)
            page, links = paginate(state, request, latest)
            body = combined_status_json(state, repo, ref, sha, page, len(latest))
        return json_response(body, headers=links)

    @app.get("/repos/{owner}/{name}/commits/{ref}/statuses")
    def list_statuses(owner: str, name: str, ref: str, request: Request) -> JSONResponse:
        with state.lock:
            repo = lookup_repo(state, request, owner, name)
            sha = _resolve_ref(repo, ref)
            found = [s for s in reversed(repo.statuses) if s.sha == sha]
            page, links = paginate(state, request, found)
            body = [status_json(state, repo, s) for s in page]
        return json_response(body, headers=links)


def _suite_id(state: StandinState, repo: Repo, head_sha: str, caller: Caller) -> int:
    """One check suite per App and commit, as GitHub groups runs."""
    for run in repo.check_runs.values():
        if run.head_sha == head_sha and run.app_id == caller.app_id:
            return run.suite_id
    return state.new_id()


def select_runs(repo: Repo, sha: str, query: Any) -> list[CheckRun]:
    runs = [r for r in repo.check_runs.values() if r.head_sha == sha]
    if query.get("check_name"):
        runs = [r for r in runs if r.name == query["check_name"]]
    if query.get("status"):
        runs = [r for r in runs if r.status == query["status"]]
    if query.get("app_id"):
        runs = [r for r in runs if str(r.app_id) == query["app_id"]]
    runs.sort(key=lambda r: r.id, reverse=True)
    if query.get("filter", "latest") == "latest":
        newest: dict[str, CheckRun] = {}
        for run in runs:
            newest.setdefault(run.name, run)
        runs = list(newest.values())
    return runs
