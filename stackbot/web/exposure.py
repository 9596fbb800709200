"""What the dashboard shows whom, and how its answers protect the reader's browser.

- **Access** (``dashboard_access``): ``open``; ``proxy``, where an authenticating reverse proxy
  (oauth2-proxy, a corporate SSO gateway) sets ``dashboard_user_header`` on every request it
  lets through and stackbot answers 401 to any request without it (the proxy must strip the
  header from what clients send); or ``off`` (404). ``/webhooks/github`` (HMAC-signed) and
  ``/healthz`` (load balancers) are never restricted; ``/static`` is not secret.
- **Headers** on every answer: a Content-Security-Policy that allows only stackbot's own
  scripts, styles and images (the pages load nothing from elsewhere, and no inline script runs),
  no framing, no MIME sniffing, no referrer to other sites. ``/docs`` (Swagger UI, served from
  stackbot's own copy in ``static/swagger``) only adds inline styles, which Swagger UI sets.
- **Error pages**: a browser that asks for a page gets HTML for 401/404/422/500, not JSON.
- **Database unavailable** (PostgreSQL restarting, a connection pool exhausted): 503 with
  ``Retry-After``, not 500; the error itself goes to the log only.
- **What is not shown**: server paths (a job's output directory, the runner cache, mirrors: in
  every answer they are replaced by placeholders such as ``<data>/jobs/job-12/…``, see
  :mod:`stackbot.web.redaction`) and the text of a dead task's error (SQL, parameters, paths,
  git's stderr): the page names the error's kind and says where the details are, the worker's
  log, which the log redaction filters.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from stackbot.config import Settings
from stackbot.path_redaction import PathRedactor
from stackbot.web.redaction import RedactPaths

log = logging.getLogger(__name__)

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# Swagger UI (stackbot's own copy, nothing from elsewhere) sets inline styles.
DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
# Seconds a client is asked to wait when the database cannot be reached.
RETRY_AFTER_S = 5
UNAVAILABLE = "The database cannot be reached just now; try again in a few seconds."


def database_unavailable(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot be reached now (a transient state: the
    server restarting or refusing connections, a dropped connection, a full pool) rather than
    that a query is wrong."""
    if isinstance(error, PoolTimeout):
        return True
    return isinstance(error, DBAPIError) and (
        isinstance(error, OperationalError) or error.connection_invalidated
    )


# Never restricted: GitHub's deliveries carry their own proof, and health checks have none.
_ALWAYS_OPEN = ("/webhooks/", "/healthz", "/static/")


def public_error(last_error: str | None, task_id: int | None) -> str:
    """What the dashboard says about a dead task's error: its kind, and where the rest is."""
    if not last_error:
        return ""
    kind = re.match(r"([A-Za-z_][A-Za-z0-9_.]*): ", last_error)
    where = f"details in the worker's log (task {task_id})"
    if kind is not None:
        return f"{kind.group(1)}; {where}"
    return f"failed; {where}"


def install(app: FastAPI, settings: Settings) -> None:
    access, header = settings.dashboard_access, settings.dashboard_user_header
    app.add_middleware(RedactPaths, paths=PathRedactor.from_settings(settings))

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        refused = _refusal(access, header, request) if not path.startswith(_ALWAYS_OPEN) else None
        response = refused if refused is not None else await call_next(request)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        is_docs = path.startswith("/docs") or path.startswith("/redoc")
        response.headers.setdefault("Content-Security-Policy", DOCS_CSP if is_docs else CSP)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        if _wants_html(request):
            return _page(error.status_code, str(error.detail), getattr(error, "headers", None))
        return await http_exception_handler(request, error)

    @app.exception_handler(DBAPIError)
    @app.exception_handler(PoolTimeout)
    async def unavailable(request: Request, error: Exception) -> Response:
        if not database_unavailable(error):
            raise error
        log.error("%s %s: the database is unavailable: %s", request.method, request.url.path, error)
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if _wants_html(request):
            return _page(503, UNAVAILABLE, headers)
        return JSONResponse({"detail": UNAVAILABLE}, 503, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        if _wants_html(request):
            fields = ", ".join(".".join(str(p) for p in e.get("loc", ())) for e in error.errors())
            return _page(422, f"The address is not valid here ({fields}).")
        return await request_validation_exception_handler(request, error)


def _refusal(access: str, header: str, request: Request) -> Response | None:
    if access == "open":
        return None
    if access == "off":
        return _answer(request, 404, "The dashboard is turned off on this server.")
    if request.headers.get(header, "").strip():
        return None
    return _answer(request, 401, "Sign in through this server's proxy to see the dashboard.")


def _answer(request: Request, status: int, text: str) -> Response:
    if _wants_html(request):
        return _page(status, text)
    return JSONResponse({"detail": text}, status)


def _wants_html(request: Request) -> bool:
    path = request.url.path
    if path.startswith(("/api/", "/webhooks/", "/openapi.json", "/metrics")):
        return False
    return "text/html" in request.headers.get("accept", "")


def _page(status: int, text: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    titles = {
        401: "Not signed in",
        404: "Not found",
        422: "Not a valid address",
        503: "Try again shortly",
    }
    title = titles.get(status, "Something went wrong" if status >= 500 else "Refused")
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<title>stackbot · {status}</title><link rel="stylesheet" href="/static/style.css">'
        f"</head><body><main><h1>{status} · {html.escape(title)}</h1>"
        f'<p>{html.escape(text)}</p><p><a href="/">All series</a></p></main></body></html>'
    )
    return HTMLResponse(body, status, headers=headers)
