"""Size limits over a real uvicorn (so chunked bodies really stream), and what the app refuses
to start with."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.config import UnsafeSettingsError, load_settings
from stackbot.db.engine import make_engine
from stackbot.web.app import create_app
from tests.support import signing
from tests.webhooks.conftest import LiveServer, count_rows

LIMIT = 25 * 1024 * 1024
URL = "/webhooks/github"


def _padded_ping(size: int) -> bytes:
    """A valid ping delivery of exactly ``size`` bytes."""
    head, tail = b'{"zen": "pad", "padding": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_body_at_the_limit_is_accepted(live_server: LiveServer, engine: Engine) -> None:
    body = _padded_ping(LIMIT)
    response = httpx.post(
        live_server.url + URL, content=body, headers=signing.headers("ping", body), timeout=60
    )
    assert response.status_code == 202, response.text
    assert count_rows(engine) == (1, 0)


def test_content_length_over_the_limit_is_413(live_server: LiveServer, engine: Engine) -> None:
    body = _padded_ping(LIMIT + 1)
    response = httpx.post(
        live_server.url + URL, content=body, headers=signing.headers("ping", body), timeout=60
    )
    assert response.status_code == 413
    assert str(LIMIT) in response.json()["error"]
    assert count_rows(engine) == (0, 0)


def test_chunked_body_over_the_limit_is_413(live_server: LiveServer, engine: Engine) -> None:
    chunk = b"x" * (1024 * 1024)
    sent = 0

    def stream() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"zen": "'
        for _ in range(30):
            sent += len(chunk)
            yield chunk
        yield b'"}'

    # The signature cannot be known in advance for a streamed body; any value will do, since
    # the size is refused before the signature is checked.
    headers = signing.headers("ping", b"")
    try:
        response = httpx.post(live_server.url + URL, content=stream(), headers=headers, timeout=60)
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pytest.fail("the server dropped the connection instead of answering 413")
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert response.status_code == 413
    assert count_rows(engine) == (0, 0)


def test_no_secret_outside_dev_mode_refuses_to_start(tmp_path: Path) -> None:
    settings = load_settings(dev=False, data_dir=tmp_path)
    with pytest.raises(UnsafeSettingsError, match="STACKBOT_WEBHOOK_SECRET"):
        create_app(settings, engine=make_engine(f"sqlite:///{tmp_path / 'x.db'}"))


def test_dev_mode_without_secret_accepts_unsigned_and_warns(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(dev=True, data_dir=tmp_path)
    with caplog.at_level(logging.WARNING):
        app = create_app(settings, engine=engine)
    assert sum("UNSIGNED" in r.message for r in caplog.records) == 1
    body = signing.example("pull_request", "opened").body
    with TestClient(app) as client:
        response = client.post(
            URL, content=body, headers=signing.headers("pull_request", body, secret=None)
        )
    assert response.status_code == 202, response.text
    assert count_rows(engine) == (1, 1)


def test_healthz_is_503_when_the_database_is_gone(tmp_path: Path) -> None:
    (tmp_path / "db-is-a-folder").mkdir()
    broken = make_engine(f"sqlite:///{tmp_path / 'db-is-a-folder'}")
    app = create_app(load_settings(dev=True, data_dir=tmp_path), engine=broken)
    with TestClient(app) as client:
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "unhealthy"
