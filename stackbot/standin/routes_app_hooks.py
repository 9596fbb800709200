"""The App's webhook deliveries (App JWT): list them, newest first, and ask for a redelivery.

``GET /app/hook/deliveries`` lists every recorded delivery as GitHub's ``hook-delivery-item``
(``id`` is its place in the log, ``status_code`` 0 when it never reached the receiver);
``POST /app/hook/deliveries/{delivery_id}/attempts`` sends it again with the same GUID (202).
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from stackbot.standin import deliveries
from stackbot.standin.auth import require_app
from stackbot.standin.http import caller_of, json_response, paginate
from stackbot.standin.state import Delivery, StandinState, iso

OK = range(200, 300)


def item_json(state: StandinState, index: int, delivery: Delivery) -> dict[str, Any]:
    code = delivery.status_code or 0
    repo = state.repo(delivery.repo) if delivery.repo else None
    return {
        "id": index + 1,
        "guid": delivery.guid,
        "delivered_at": iso(delivery.created_at),
        "redelivery": False,
        "duration": round(delivery.duration_s or 0.0, 3),
        "status": "OK" if code in OK else (delivery.error or f"Invalid HTTP Response: {code}"),
        "status_code": code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": None,
        "repository_id": None if repo is None else repo.id,
    }


def register(app: FastAPI, state: StandinState) -> None:
    @app.get("/app/hook/deliveries")
    def list_deliveries(request: Request) -> JSONResponse:
        with state.lock:
            require_app(caller_of(request))
            attempted = [
                (i, d) for i, d in enumerate(state.deliveries) if d.url or d.error is not None
            ]  # a delivery still queued (mode "queue") was not attempted yet
            items = [item_json(state, i, d) for i, d in attempted]
            page, headers = paginate(state, request, items[::-1])
        return json_response(page, headers=headers)

    @app.post("/app/hook/deliveries/{delivery_id}/attempts")
    def redeliver(delivery_id: int, request: Request) -> JSONResponse:
        with state.lock:
            require_app(caller_of(request))
            if not 1 <= delivery_id <= len(state.deliveries):
                return json_response({"message": "Not Found", "status": "404"}, status=404)
            guid = state.deliveries[delivery_id - 1].guid
        # Sent after answering, as GitHub queues it (the receiver may call the API back).
        threading.Thread(target=deliveries.redeliver, args=(state, guid), daemon=True).start()
        return json_response({}, status=202)
