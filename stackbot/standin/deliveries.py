"""Webhook deliveries: signed like GitHub's, POSTed to the configured URL, and logged.

Headers are GitHub's: ``X-GitHub-Event``, ``X-GitHub-Delivery`` (a UUID), ``X-GitHub-Hook-ID``,
``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the webhook secret>``,
``User-Agent: GitHub-Hookshot/...``, ``Content-Type: application/json``.

``state.webhook.mode``:

- ``"send"``: like GitHub, asynchronously — one sender thread per stand-in posts deliveries in
  the order they happened, after the API call or control call that caused them has returned
  (so a receiver that calls the API back never deadlocks with it). :func:`wait_until_sent`
  waits for the outbox to empty.
- ``"queue"``: deliveries wait in ``state.pending_deliveries`` until :func:`flush` sends them
  (in the caller's thread), so tests can hold them back, reorder or duplicate them.

Callers build payloads while holding the state lock and call :func:`deliver` after releasing it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
import uuid
from typing import Any

import httpx

from stackbot.standin.state import Delivery, StandinState

log = logging.getLogger(__name__)

HOOKSHOT_AGENT = "GitHub-Hookshot/standin"


def sign(secret: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def build(
    state: StandinState, event: str, payload: dict[str, Any], *, repo: str | None
) -> Delivery:
    body = json.dumps(payload, separators=(",", ":")).encode()
    guid = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": HOOKSHOT_AGENT,
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": guid,
        "X-GitHub-Hook-ID": str(state.webhook.hook_id),
        "X-GitHub-Hook-Installation-Target-Type": "integration" if state.apps else "repository",
    }
    if state.webhook.secret:
        headers["X-Hub-Signature-256"] = sign(state.webhook.secret, body)
    action = payload.get("action")
    return Delivery(
        guid=guid,
        event=event,
        action=action if isinstance(action, str) else None,
        body=body,
        headers=headers,
        repo=repo,
        created_at=state.now(),
    )


def deliver(
    state: StandinState, event: str, payload: dict[str, Any], *, repo: str | None
) -> Delivery:
    """Record one delivery and hand it to the sender thread, or queue it (``state.webhook.mode``)."""
    delivery = build(state, event, payload, repo=repo)
    with state.lock:
        state.deliveries.append(delivery)
        if state.webhook.mode == "queue" or state.webhook.url is None:
            state.pending_deliveries.append(delivery)
            return delivery
    _outbox(state).put(delivery)
    return delivery


class _Outbox:
    """A FIFO of deliveries and the one daemon thread that sends them."""

    def __init__(self, state: StandinState) -> None:
        self.queue: queue.Queue[Delivery | None] = queue.Queue()
        self._state = state
        threading.Thread(target=self._run, name="standin-hookshot", daemon=True).start()

    def put(self, delivery: Delivery | None) -> None:
        self.queue.put(delivery)

    def _run(self) -> None:
        while (delivery := self.queue.get()) is not None:
            try:
                send(self._state, delivery)
            except Exception as error:  # a dead sender thread would silently stop all hooks
                delivery.error = f"{type(error).__name__}: {error}"
                log.exception("webhook delivery %s failed", delivery.guid)
            finally:
                self.queue.task_done()
        self.queue.task_done()


def _outbox(state: StandinState) -> _Outbox:
    with state.lock:
        if not isinstance(state.outbox, _Outbox):
            state.outbox = _Outbox(state)
        return state.outbox


def wait_until_sent(state: StandinState, timeout_s: float = 30.0) -> None:
    """Block until every delivery handed to the sender thread was sent (or failed)."""
    box = state.outbox
    if not isinstance(box, _Outbox):
        return
    deadline = time.monotonic() + timeout_s
    while box.queue.unfinished_tasks:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{box.queue.unfinished_tasks} webhook deliveries still unsent after {timeout_s}s"
            )
        time.sleep(0.01)


def close(state: StandinState) -> None:
    """Stop the sender thread once what it holds is sent."""
    with state.lock:
        box, state.outbox = state.outbox, None
    if isinstance(box, _Outbox):
        box.put(None)


def send(state: StandinState, delivery: Delivery) -> Delivery:
    """POST one delivery to the configured URL; the outcome is written on the delivery."""
    url = state.webhook.url
    if url is None:
        delivery.error = "no webhook URL configured"
        return delivery
    delivery.url = url
    started = time.monotonic()
    try:
        response = httpx.post(
            url, content=delivery.body, headers=delivery.headers, timeout=state.webhook.timeout_s
        )
        delivery.status_code = response.status_code
        delivery.error = None
    except httpx.HTTPError as error:
        # Like GitHub, a failed delivery is recorded, not retried; redeliver() sends it again.
        delivery.error = f"{type(error).__name__}: {error}"
        log.warning(
            "webhook delivery %s (%s) to %s failed: %s",
            delivery.guid,
            delivery.event,
            url,
            delivery.error,
        )
    delivery.duration_s = time.monotonic() - started
    return delivery


def flush(state: StandinState) -> list[Delivery]:
    """Send every queued delivery, oldest first."""
    with state.lock:
        pending, state.pending_deliveries = state.pending_deliveries, []
    return [send(state, d) for d in pending]


def redeliver(state: StandinState, guid: str) -> Delivery:
    """Send a recorded delivery again with the same GUID (GitHub's "Redeliver" button)."""
    with state.lock:
        found = next((d for d in state.deliveries if d.guid == guid), None)
    if found is None:
        raise KeyError(f"no delivery {guid}")
    return send(state, found)


def payload_of(delivery: Delivery) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(delivery.body)
    return data
