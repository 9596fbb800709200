"""The stand-in's HTTP face: GitHub's REST endpoints that stackbot uses, plus ``/_standin`` control.

Every API request goes through one gate, in GitHub's order: injected faults, authentication,
the hourly rate-limit budget (``x-ratelimit-*`` headers on every answer), then the route.
Errors are GitHub-shaped (``{"message", "documentation_url"}``), never FastAPI's ``detail``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from stackbot.standin import (
    pull_bases,
    routes_app_hooks,
    routes_checks,
    routes_control,
    routes_graphql,
    routes_issues,
    routes_merge,
    routes_pulls,
    routes_repos,
)
from stackbot.standin.auth import Caller, StandinHTTPError, authenticate
from stackbot.standin.http import (
    charge,
    error_response,
    fault_response,
    rate_limited_response,
)
from stackbot.standin.state import RequestRecord, StandinState

UNGATED_PREFIXES = ("/_standin", "/_web")
UNCOUNTED_PATHS = ("/rate_limit",)
GRAPHQL_PATH = "/graphql"


def create_standin_app(state: StandinState) -> FastAPI:
    app = FastAPI(
        title="GitHub stand-in", docs_url="/_standin/docs", openapi_url="/_standin/openapi.json"
    )
    _install_error_handlers(app)

    @app.middleware("http")
    async def github_gate(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        if path.startswith(UNGATED_PREFIXES):
            return await call_next(request)
        caller = Caller("anonymous")
        try:
            caller = authenticate(state, request.headers.get("authorization"))
            response = await _answer(state, request, caller, call_next)
        except StandinHTTPError as error:
            response = error_response(error)
        _record(state, request, caller, response.status_code)
        return response

    for module in (
        routes_pulls,
        routes_merge,
        pull_bases,
        routes_issues,
        routes_checks,
        routes_repos,
        routes_app_hooks,
        routes_graphql,
        routes_control,
    ):
        module.register(app, state)
    return app


def github_routes(app: FastAPI) -> list[tuple[str, str]]:
    """``(METHOD, path)`` of every GitHub REST route ``app`` serves (FastAPI's path syntax:
    ``{name}``, ``{name:path}``), its ``/_standin`` control and docs pages and ``POST /graphql``
    (checked against GitHub's GraphQL schema instead) left out: what the
    stand-in claims to answer as GitHub does, for the contract tests and the vendored copy of
    GitHub's description to cover."""
    found = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, APIRoute)
        and not route.path.startswith(UNGATED_PREFIXES)
        and route.path != GRAPHQL_PATH
        for method in route.methods or ()
        if method != "HEAD"
    }
    return sorted(found)


async def _answer(
    state: StandinState,
    request: Request,
    caller: Caller,
    call_next: Callable[[Request], Awaitable[Response]],
) -> Response:
    path = request.url.path
    fault = state.take_fault(request.method, path)
    headers, exceeded = charge(state, caller, count=path not in UNCOUNTED_PATHS)
    if fault is not None:
        return fault_response(state, fault, headers)
    if exceeded:
        return rate_limited_response(state, caller, headers)
    request.state.caller = caller
    response = await call_next(request)
    for key, value in headers.items():
        response.headers.setdefault(key, value)
    return response


def _record(state: StandinState, request: Request, caller: Caller, status: int) -> None:
    record = RequestRecord(request.method, request.url.path, status, caller.identity, state.now())
    with state.lock:
        state.requests.append(record)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StandinHTTPError)
    async def standin_error(request: Request, error: StandinHTTPError) -> JSONResponse:
        return error_response(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = "Not Found" if error.status_code == 404 else str(error.detail)
        return error_response(StandinHTTPError(error.status_code, message))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            return error_response(StandinHTTPError(400, "Problems parsing JSON"))
        if any(p.get("loc", ("",))[0] == "path" for p in problems):
            return error_response(StandinHTTPError(404, "Not Found"))
        details = [
            {
                "code": "invalid",
                "field": ".".join(str(x) for x in p.get("loc", ())[1:]),
                "message": str(p.get("msg")),
            }
            for p in problems
        ]
        return error_response(StandinHTTPError(422, "Invalid request.", errors=details))
