"""``/_standin/...``: the control API over HTTP, for driving the stand-in from another process.

Each route calls the same :class:`~stackbot.standin.control.StandinControl` method the tests
use. Bad input answers 400 with a message naming the problem.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import hosting
from stackbot.standin.http import JsonBody
from stackbot.standin.state import StandinState


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if hasattr(value, "__fspath__"):
        return str(value)
    return value


def _ok(value: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(_plain(value), status_code=status)


def register(app: FastAPI, state: StandinState) -> None:
    from stackbot.standin.control import StandinControl, StandinError

    control = StandinControl(state)

    @app.exception_handler(StandinError)
    async def control_error(request: Request, error: StandinError) -> JSONResponse:
        return JSONResponse({"message": str(error)}, status_code=400)

    @app.exception_handler(hosting.HostingError)
    async def hosting_error(request: Request, error: hosting.HostingError) -> JSONResponse:
        return JSONResponse({"message": str(error)}, status_code=400)

    def need(body: JsonBody | None, *names: str) -> list[Any]:
        missing = [n for n in names if (body or {}).get(n) is None]
        if missing:
            raise StandinError(f"missing field(s): {', '.join(missing)}")
        return [(body or {})[n] for n in names]

    @app.post("/_standin/users")
    def add_user(body: JsonBody = None) -> JSONResponse:
        (login,) = need(body, "login")
        user = control.add_user(
            login, name=(body or {}).get("name"), email=(body or {}).get("email")
        )
        return _ok(user, 201)

    @app.post("/_standin/tokens")
    def create_token(body: JsonBody = None) -> JSONResponse:
        (login,) = need(body, "login")
        return _ok({"token": control.create_token(login)}, 201)

    @app.post("/_standin/orgs/{org}/members")
    def add_member(org: str, body: JsonBody = None) -> JSONResponse:
        (login,) = need(body, "login")
        control.add_org_member(org, login, role=(body or {}).get("role", "member"))
        return _ok({"org": org, "login": login}, 201)

    @app.post("/_standin/repos")
    def create_repo(body: JsonBody = None) -> JSONResponse:
        (full_name,) = need(body, "full_name")
        data = body or {}
        repo = control.create_repo(
            full_name,
            source=data.get("source"),
            files=data.get("files"),
            default_branch=data.get("default_branch", "main"),
            author=data.get("author"),
        )
        return _ok({"full_name": repo.full_name, "clone_url": repo.clone_url}, 201)

    @app.put("/_standin/repos/{owner}/{name}/permissions/{login}")
    def set_permission(owner: str, name: str, login: str, body: JsonBody = None) -> JSONResponse:
        (role,) = need(body, "role")
        control.set_permission(f"{owner}/{name}", login, role)
        return _ok({"login": login, "role": role})

    @app.post("/_standin/repos/{owner}/{name}/commits")
    def commit(owner: str, name: str, body: JsonBody = None) -> JSONResponse:
        branch, files, message, author = need(body, "branch", "files", "message", "author")
        sha = control.commit(f"{owner}/{name}", branch, files, message=message, author=author)
        return _ok({"sha": sha}, 201)

    @app.post("/_standin/repos/{owner}/{name}/pulls")
    def open_pull(owner: str, name: str, body: JsonBody = None) -> JSONResponse:
        author, head, title = need(body, "author", "head", "title")
        data = body or {}
        pull = control.open_pull(
            f"{owner}/{name}",
            author=author,
            head=head,
            title=title,
            base=data.get("base"),
            body=data.get("body", ""),
            draft=bool(data.get("draft", False)),
            number=data.get("number"),
            files=data.get("files"),
            message=data.get("message"),
        )
        return _ok(pull, 201)

    @app.patch("/_standin/repos/{owner}/{name}/pulls/{number}")
    def edit_pull(owner: str, name: str, number: int, body: JsonBody = None) -> JSONResponse:
        data = body or {}
        pull = control.edit_pull(
            f"{owner}/{name}",
            number,
            title=data.get("title"),
            body=data.get("body"),
            base=data.get("base"),
            editor=data.get("editor"),
        )
        return _ok(pull)

    @app.post("/_standin/repos/{owner}/{name}/pulls/{number}/{action}")
    def change_pull(
        owner: str, name: str, number: int, action: str, body: JsonBody = None
    ) -> JSONResponse:
        repo, sender = f"{owner}/{name}", (body or {}).get("sender")
        if action == "merge":
            (merger,) = need(body, "sender")
            squash = (body or {}).get("merge_method") == "squash"
            merged = control.merge_pull(repo, number, merger=merger, squash=squash)
            return _ok({"merge_commit_sha": merged})
        actions = {
            "close": lambda: control.close_pull(repo, number, sender=sender),
            "reopen": lambda: control.reopen_pull(repo, number, sender=sender),
            "draft": lambda: control.set_draft(repo, number, True, sender=sender),
            "ready": lambda: control.set_draft(repo, number, False, sender=sender),
        }
        if action not in actions:
            raise StandinError(
                f"unknown action {action!r}; use merge, close, reopen, draft or ready"
            )
        return _ok(actions[action]())

    @app.post("/_standin/repos/{owner}/{name}/issues/{number}/comments")
    def comment(owner: str, name: str, number: int, body: JsonBody = None) -> JSONResponse:
        author, text = need(body, "author", "body")
        return _ok(control.comment(f"{owner}/{name}", number, author, text), 201)

    @app.patch("/_standin/repos/{owner}/{name}/comments/{comment_id}")
    def edit_comment(owner: str, name: str, comment_id: int, body: JsonBody = None) -> JSONResponse:
        (text,) = need(body, "body")
        return _ok(
            control.edit_comment(
                f"{owner}/{name}", comment_id, text, editor=(body or {}).get("editor")
            )
        )

    @app.post("/_standin/repos/{owner}/{name}/stacks")
    def stack(owner: str, name: str, body: JsonBody = None) -> JSONResponse:
        (numbers,) = need(body, "pull_requests")
        return _ok(control.create_stack(f"{owner}/{name}", numbers), 201)

    @app.get("/_standin/repos/{owner}/{name}/issues/{number}/comments")
    def read_comments(owner: str, name: str, number: int) -> JSONResponse:
        return _ok(control.comments(f"{owner}/{name}", number))

    @app.get("/_standin/repos/{owner}/{name}/check-runs")
    def read_check_runs(owner: str, name: str, request: Request) -> JSONResponse:
        return _ok(control.check_runs(f"{owner}/{name}", request.query_params.get("sha")))

    @app.get("/_standin/repos/{owner}/{name}/statuses")
    def read_statuses(owner: str, name: str, request: Request) -> JSONResponse:
        return _ok(control.statuses(f"{owner}/{name}", request.query_params.get("sha")))

    @app.post("/_standin/faults")
    def inject(body: JsonBody = None) -> JSONResponse:
        (kind,) = need(body, "kind")
        data = body or {}
        allowed = {"method", "path", "count", "retry_after", "reset_in", "status"}
        unknown = set(data) - allowed - {"kind"}
        if unknown:
            raise StandinError(f"unknown fault field(s): {', '.join(sorted(unknown))}")
        return _ok(
            control.inject_fault(kind, **{k: v for k, v in data.items() if k in allowed}), 201
        )

    @app.delete("/_standin/faults")
    def clear() -> JSONResponse:
        control.clear_faults()
        return _ok({"faults": 0})

    @app.put("/_standin/webhook")
    def webhook(body: JsonBody = None) -> JSONResponse:
        data = body or {}
        control.configure_webhook(
            data.get("url"), data.get("secret", ""), mode=data.get("mode", "send")
        )
        return _ok({"url": data.get("url"), "mode": data.get("mode", "send")})

    @app.post("/_standin/webhook/flush")
    def flush() -> JSONResponse:
        return _ok([_delivery_summary(d) for d in control.flush_deliveries()])

    @app.post("/_standin/webhook/wait")
    def wait() -> JSONResponse:
        control.wait_for_deliveries()
        return _ok({"pending": 0})

    @app.post("/_standin/webhook/ping")
    def ping() -> JSONResponse:
        return _ok(_delivery_summary(control.ping()), 201)

    @app.get("/_standin/deliveries")
    def read_deliveries(request: Request) -> JSONResponse:
        found = control.deliveries(
            request.query_params.get("event"), request.query_params.get("action")
        )
        return _ok([_delivery_summary(d) for d in found])

    @app.get("/_standin/requests")
    def read_requests() -> JSONResponse:
        return _ok(control.requests())

    @app.post("/_standin/apps")
    def register_app(body: JsonBody = None) -> JSONResponse:
        key, owner = need(body, "public_key_pem", "owner")
        data = body or {}
        registered = control.register_app(
            public_key_pem=key,
            owner=owner,
            app_id=data.get("app_id"),
            slug=data.get("slug", "stackbot"),
        )
        return _ok({"id": registered.id, "slug": registered.slug}, 201)

    @app.post("/_standin/apps/{app_id}/installations")
    def install(app_id: int, body: JsonBody = None) -> JSONResponse:
        (account,) = need(body, "account")
        data = body or {}
        repos = set(data["repos"]) if data.get("repos") is not None else None
        installation = control.install_app(
            app_id, account, repos=repos, permissions=data.get("permissions")
        )
        return _ok({"id": installation.id, "account": account}, 201)


def _delivery_summary(delivery: Any) -> dict[str, Any]:
    return {
        "guid": delivery.guid,
        "event": delivery.event,
        "action": delivery.action,
        "repo": delivery.repo,
        "url": delivery.url,
        "status_code": delivery.status_code,
        "error": delivery.error,
    }
