"""``POST /webhooks/github``: verify, record, enqueue, answer.

In order, each step cheaper than the next and each refusal leaving nothing behind:
413 when ``Content-Length`` (or, for a chunked body, the bytes read so far) passes the limit;
401 unless ``X-Hub-Signature-256`` is the HMAC-SHA256 of the raw body (compared in constant
time; a SHA-1 ``X-Hub-Signature`` alone is refused as the wrong algorithm); 400 for missing
GitHub headers, a body that is not a JSON object, an event lacking a field it needs, or an
``action`` or ``repository.full_name`` no database column can hold (:func:`storable_text`),
each refusal logged with its reason; then
one transaction records the delivery and queues its processing: 202, or 200 for a delivery id
already recorded. A signed delivery whose fields are all there but one holds a value GitHub
never sends (an id out of range, a NUL in a login: :class:`UnusableValue`) is recorded as
ignored with that reason and answered 202, like any delivery stackbot does not act on: the
sender did nothing wrong that a redelivery would mend. Nothing else happens on the request
path.

The route is ``async`` (the body is streamed and checked on the event loop) and hands the one
database write to the threadpool. Measured with benchmarks/bench_webhooks.py against running
that write on the event loop: within noise on SQLite (paced p99 20 vs 14 ms), while on
PostgreSQL, whose commit is a wait, the threadpool took 681 deliveries/s flat out against 563.
The event loop also stays free for /healthz and the dashboard during an SQLite checkpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from stackbot.domain.events import Event, UnknownEvent, ignore_reason, parse_event, storable
from stackbot.errors import BadInput, RetryLater, UnusableValue
from stackbot.taskqueue import inbox
from stackbot.web.exposure import RETRY_AFTER_S
from stackbot.web.health import Metrics

log = logging.getLogger(__name__)

router = APIRouter(tags=["webhooks"])
SIGNATURE_PREFIX = "sha256="
MAX_DELIVERY_ID_CHARS = 100
MAX_EVENT_CHARS = 60
# The widths of webhook_deliveries.action and .repo_full_name.
MAX_ACTION_CHARS = 60
MAX_REPO_CHARS = 200


class Refusal(Exception):
    """Answer the request with ``status`` and ``message``; nothing is recorded."""

    def __init__(self, status: int, outcome: str, message: str) -> None:
        super().__init__(message)
        self.status, self.outcome, self.message = status, outcome, message


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refusing anything over ``limit`` bytes before or while reading it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refusal(413, "too_large", f"the body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise Refusal(413, "too_large", f"the body is over the limit of {limit} bytes")
    return bytes(body)


def check_signature(secret: bytes | None, body: bytes, headers: Any) -> None:
    """Raise a 401 :class:`Refusal` unless the body carries a valid SHA-256 signature."""
    if secret is None:  # development mode without a secret (create_app warned about it)
        return
    signature = headers.get("x-hub-signature-256")
    if signature is None:
        if headers.get("x-hub-signature") is not None:
            raise Refusal(
                401,
                "unauthorized",
                "wrong algorithm: only X-Hub-Signature-256 (HMAC-SHA256) is accepted, "
                "not the SHA-1 X-Hub-Signature",
            )
        raise Refusal(401, "unauthorized", "missing X-Hub-Signature-256 header")
    if not signature.startswith(SIGNATURE_PREFIX):
        raise Refusal(401, "unauthorized", "wrong algorithm: the signature must start with sha256=")
    expected = SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(
        expected.encode(), signature.strip().lower().encode("utf-8", "replace")
    ):
        raise Refusal(401, "unauthorized", "X-Hub-Signature-256 does not match the body")


def decode_payload(body: bytes, content_type: str) -> object:
    """The JSON document, from a JSON body or GitHub's form encoding (``payload=...``)."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        try:
            fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        except ValueError as error:
            raise Refusal(
                400, "bad_request", f"the form body cannot be decoded: {error}"
            ) from error
        if len(fields.get("payload", [])) != 1:
            raise Refusal(
                400,
                "bad_request",
                "the body is form-encoded but has no single 'payload' field; send the JSON "
                "document with Content-Type: application/json",
            )
        body = fields["payload"][0].encode()
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:
        raise Refusal(400, "bad_request", f"the body is not valid JSON: {error}") from error


def storable_text(field: str, value: str | None, max_chars: int) -> None:
    """Refuse (400, naming ``field``) a payload string the intake stores in a text column but no
    database can hold as it is: a lone surrogate (a ``\\ud800`` escape, not UTF-8), a NUL
    (PostgreSQL's text refuses it), any other control character, or more than ``max_chars``.
    GitHub never sends such a value, so refusing it loses no real delivery."""
    if value is None:
        return
    if len(value) > max_chars:
        raise Refusal(400, "bad_request", f"{field} is over {max_chars} characters")
    if not value.isprintable():
        bad = next(char for char in value if not char.isprintable())
        raise Refusal(
            400,
            "bad_request",
            f"{field} holds the character U+{ord(bad):04X}, which cannot be stored "
            "(lone surrogates, NUL and other control characters are refused)",
        )


def github_header(request: Request, name: str, max_chars: int) -> str:
    value = request.headers.get(name, "").strip()
    if not value:
        raise Refusal(400, "bad_request", f"the {name} header is missing")
    if len(value) > max_chars or not value.isprintable():
        raise Refusal(400, "bad_request", f"the {name} header is not a valid value")
    return value


@router.post(
    "/webhooks/github",
    status_code=202,
    summary="Receive a GitHub webhook delivery",
    responses={
        200: {"description": "a delivery already recorded (processed once)"},
        400: {
            "description": "missing GitHub headers, not JSON, a required field missing, or an "
            "action or repository.full_name that cannot be stored"
        },
        401: {"description": "missing or wrong signature"},
        413: {"description": "body over 25 MB"},
    },
)
async def receive_github_webhook(request: Request) -> JSONResponse:
    state = request.app.state
    metrics: Metrics = state.metrics
    event_name = request.headers.get("x-github-event", "")
    try:
        body = await read_body(request, state.settings.max_webhook_bytes)
        check_signature(state.webhook_secret, body, request.headers)
        event_name = github_header(request, "x-github-event", MAX_EVENT_CHARS)
        delivery_id = github_header(request, "x-github-delivery", MAX_DELIVERY_ID_CHARS)
        payload = decode_payload(body, request.headers.get("content-type", "application/json"))
        unusable: str | None = None
        try:
            event: Event | UnknownEvent | None = parse_event(event_name, payload)
        except UnusableValue as error:
            event, unusable = None, storable(f"{event_name}: {error}")
        except BadInput as error:
            raise Refusal(400, "bad_request", f"{event_name}: {error}") from error
        action = payload.get("action") if isinstance(payload, dict) else None
        action = action if isinstance(action, str) else None
        repo = getattr(event, "repo", None) if event is not None else _raw_repo(payload)
        storable_text("action", action, MAX_ACTION_CHARS)
        storable_text("repository.full_name", repo, MAX_REPO_CHARS)
    except Refusal as refusal:
        metrics.count_delivery(event_name, refusal.outcome)
        if refusal.status == 401:
            log.warning("refused webhook from %s: %s", _client(request), refusal.message)
        else:  # malformed or out of range (a signed body GitHub would never send): say what
            log.info(
                "refused webhook %s from %s (%d): %s",
                request.headers.get("x-github-delivery", "?")[:MAX_DELIVERY_ID_CHARS],
                _client(request),
                refusal.status,
                refusal.message,
            )
        return JSONResponse({"error": refusal.message}, status_code=refusal.status)
    if event is None:
        log.info("webhook %s recorded, not acted on: %s", delivery_id, unusable)
        reason = unusable
    else:
        reason = ignore_reason(event)
    try:
        recorded = await run_in_threadpool(
            inbox.record_delivery,
            state.intake_engine,
            delivery_id=delivery_id,
            event=event_name,
            action=action,
            repo=repo,
            body=body,
            ignored_because=reason,
        )
    except RetryLater as error:
        metrics.count_delivery(event_name, "unavailable")
        log.error("delivery %s not recorded: %s", delivery_id, error)
        return JSONResponse(
            {"error": f"{error}; redeliver it later"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return _answer(state, metrics, event_name, delivery_id, recorded, reason, event)


def _raw_repo(payload: Any) -> str | None:
    """``repository.full_name`` as sent, for a delivery whose event could not be used."""
    repository = payload.get("repository") if isinstance(payload, dict) else None
    name = repository.get("full_name") if isinstance(repository, dict) else None
    return name if isinstance(name, str) else None


def _answer(
    state: Any,
    metrics: Metrics,
    event_name: str,
    delivery_id: str,
    recorded: inbox.RecordedDelivery,
    reason: str | None,
    event: object,
) -> JSONResponse:
    if recorded.duplicate:
        metrics.count_delivery(event_name, "duplicate")
        return JSONResponse({"status": "duplicate", "delivery": delivery_id}, status_code=200)
    if reason is not None:
        outcome = "unknown_event" if isinstance(event, UnknownEvent) else "ignored"
        metrics.count_delivery(event_name, outcome)
        return JSONResponse(
            {"status": "ignored", "delivery": delivery_id, "reason": reason}, status_code=202
        )
    metrics.count_delivery(event_name, "accepted")
    wake = getattr(state, "wake_worker", None)
    if wake is not None:
        wake()
    return JSONResponse(
        {"status": "recorded", "delivery": delivery_id, "task": recorded.task_id}, status_code=202
    )


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown client"
