"""The stand-in's signed deliveries are accepted by stackbot's real webhook intake (202, and
200 for a redelivery), over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import col, select

from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import load_settings
from stackbot.db.models import WebhookDelivery
from stackbot.standin import deliveries
from stackbot.web.app import create_app
from tests.github_standin.scene import build_scene
from tests.support.standin import WEBHOOK_SECRET, StandinWorld


def test_stackbots_intake_accepts_the_standins_deliveries(
    standin: StandinWorld, engine: Engine, tmp_path: Path
) -> None:
    settings = load_settings(dev=False, webhook_secret=WEBHOOK_SECRET, data_dir=tmp_path / "data")
    with BackgroundServer().serving(create_app(settings, engine=engine)) as server:
        url = server.url
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
