"""HTTP conventions GitHub's API follows: pagination with Link headers, error bodies, limits."""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import Body, Request
from fastapi.responses import JSONResponse

from stackbot.standin.auth import Caller, StandinHTTPError, can_see
from stackbot.standin.state import Fault, Repo, StandinState

T = TypeVar("T")

# A JSON object request body; absent or null reads as None (routes answer 422 for what is missing).
JsonBody = Annotated[dict[str, Any] | None, Body()]

DOCS = "https://docs.github.com/rest"
SECONDARY_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
PRIMARY_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
ANONYMOUS_LIMIT = 60
MAX_PER_PAGE = 100


def json_response(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def error_response(error: StandinHTTPError) -> JSONResponse:
    body: dict[str, Any] = {"message": error.message, "documentation_url": DOCS}
    if error.errors is not None:
        body["errors"] = error.errors
    else:
        body["status"] = str(error.status)
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise StandinHTTPError(
            422, "Validation Failed", errors=[{"code": "invalid", "field": name, "value": raw}]
        ) from None


def paginate(
    state: StandinState, request: Request, items: list[T]
) -> tuple[list[T], dict[str, str]]:
    """One page of ``items`` and its Link header, as GitHub paginates (per_page ≤ 100)."""
    per_page = max(1, min(int_param(request, "per_page", 30), MAX_PER_PAGE))
    page = max(1, int_param(request, "page", 1))
    last = max(1, math.ceil(len(items) / per_page))
    chosen = items[(page - 1) * per_page : page * per_page]
    query = {k: v for k, v in request.query_params.items() if k not in ("page", "per_page")}
    base = f"{state.base_url}{request.url.path}"

    def link(number: int, rel: str) -> str:
        params = urlencode({**query, "per_page": per_page, "page": number})
        return f'<{base}?{params}>; rel="{rel}"'

    links = []
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(min(page - 1, last), "prev")]
    return chosen, ({"Link": ", ".join(links)} if links else {})


# -- rate limits --------------------------------------------------------------------------------


def limit_of(state: StandinState, caller: Caller) -> int:
    return ANONYMOUS_LIMIT if caller.kind == "anonymous" else state.rate_limit_per_hour


def charge(state: StandinState, caller: Caller, *, count: bool) -> tuple[dict[str, str], bool]:
    """Count one request against the caller's hourly budget; True when it is spent."""
    now = state.now()
    limit = limit_of(state, caller)
    with state.lock:
        start, used = state.rate_usage.get(caller.identity, (now, 0))
        if now - start >= 3600:
            start, used = now, 0
        exceeded = count and used >= limit
        if count and not exceeded:
            used += 1
        state.rate_usage[caller.identity] = (start, used)
    headers = {
        "x-ratelimit-limit": str(limit),
        "x-ratelimit-remaining": str(max(0, limit - used)),
        "x-ratelimit-reset": str(int(start + 3600)),
        "x-ratelimit-used": str(used),
        "x-ratelimit-resource": "core",
    }
    return headers, exceeded


def rate_limited_response(
    state: StandinState, caller: Caller, headers: dict[str, str]
) -> JSONResponse:
    who = f"installation ID {caller.installation_id}" if caller.kind == "installation" else "user"
    body = {"message": f"API rate limit exceeded for {who}.", "documentation_url": PRIMARY_DOCS}
    return JSONResponse(body, status_code=403, headers=headers)


def fault_response(state: StandinState, fault: Fault, headers: dict[str, str]) -> JSONResponse:
    """The answer an injected fault gives instead of the real one."""
    extra = dict(headers)
    if fault.retry_after is not None:
        extra["Retry-After"] = str(math.ceil(fault.retry_after))
    if fault.kind == "secondary_rate_limit":
        body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
        return JSONResponse(body, status_code=403, headers=extra)
    if fault.kind == "too_many_requests":
        body = {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}
        return JSONResponse(body, status_code=429, headers=extra)
    if fault.kind == "primary_rate_limit":
        reset_in = fault.reset_in if fault.reset_in is not None else 60.0
        extra["x-ratelimit-remaining"] = "0"
        extra["x-ratelimit-used"] = extra.get("x-ratelimit-limit", "5000")
        extra["x-ratelimit-reset"] = str(math.ceil(state.now() + reset_in))
        body = {
            "message": "API rate limit exceeded for installation.",
            "documentation_url": PRIMARY_DOCS,
        }
        return JSONResponse(body, status_code=403, headers=extra)
    if fault.kind == "checks_forbidden":
        body = {
            "message": "Resource not accessible by integration",
            "documentation_url": DOCS,
            "status": "403",
        }
        return JSONResponse(body, status_code=403, headers=extra)
    messages = {500: "Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
    body = {"message": messages.get(fault.status, "Server Error"), "documentation_url": DOCS}
    return JSONResponse(body, status_code=fault.status, headers=extra)


def caller_of(request: Request) -> Caller:
    caller: Caller = request.state.caller
    return caller


def lookup_repo(state: StandinState, request: Request, owner: str, name: str) -> Repo:
    """The repository, if it exists and the caller may see it (404 otherwise, as GitHub hides)."""
    repo = state.repo(f"{owner}/{name}")
    if repo is None:
        raise StandinHTTPError(404, "Not Found")
    can_see(state, caller_of(request), repo)
    return repo


def body_field(
    body: dict[str, Any] | None, name: str, kind: type, *, required: bool = False
) -> Any:
    """One field of a JSON request body, type-checked the way GitHub answers (422)."""
    value = (body or {}).get(name)
    if value is None:
        if required:
            raise StandinHTTPError(
                422,
                "Invalid request.",
                errors=[
                    {
                        "code": "missing_field",
                        "field": name,
                        "message": f'"{name}" wasn\'t supplied.',
                    }
                ],
            )
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise StandinHTTPError(
            422,
            "Invalid request.",
            errors=[
                {
                    "code": "invalid",
                    "field": name,
                    "message": f"For '{name}', {value!r} is not a {kind.__name__}.",
                }
            ],
        )
    return value
