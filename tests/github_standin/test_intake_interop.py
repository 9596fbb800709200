"""The stand-in's signed deliveries are accepted by stackbot's real webhook intake (202, and
200 for a redelivery), over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlmodel import col, select

from stackbot.config import load_settings
from stackbot.db.models import WebhookDelivery
from stackbot.standin import deliveries
from stackbot.web.app import create_app
from tests.github_standin.scene import build_scene
from tests.support.standin import WEBHOOK_SECRET, StandinWorld


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "stackbot's web app did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_stackbots_intake_accepts_the_standins_deliveries(
    standin: StandinWorld, engine: Engine, tmp_path: Path
) -> None:
    settings = load_settings(dev=False, webhook_secret=WEBHOOK_SECRET, data_dir=tmp_path / "data")
    with serving(create_app(settings, engine=engine)) as url:
        standin.control.configure_webhook(f"{url}/webhooks/github", WEBHOOK_SECRET, mode="queue")
        build_scene(standin).close()
        standin.control.comment(standin.repo, 8035, "bob", "/ok to test")
        sent = standin.control.flush_deliveries()
        assert sent and {d.status_code for d in sent} == {202}, [
            (d.event, d.status_code, d.error) for d in sent
        ]
        again = deliveries.redeliver(standin.server.state, sent[-1].guid)
        assert again.status_code == 200  # a duplicate X-GitHub-Delivery
        standin.control.configure_webhook(
            f"{url}/webhooks/github", "not-the-secret-at-all", mode="send"
        )
        standin.control.comment(standin.repo, 8035, "carol", "forged")
        standin.control.wait_for_deliveries()
    (refused,) = [d for d in standin.control.deliveries("issue_comment") if b'"forged"' in d.body]
    assert refused.status_code == 401
    with engine.connect() as conn:
        recorded = set(conn.execute(select(col(WebhookDelivery.delivery_id))).scalars())
    assert {d.guid for d in sent} == recorded
