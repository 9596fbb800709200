"""``stackbot serve`` as a real process: refusals with exit 2, and a delivery processed by the
embedded worker before a graceful SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import Engine

from stackbot.taskqueue import queue
from tests.support import signing
from tests.webhooks.conftest import count_rows


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackbot", *args],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_without_a_secret_is_exit_2() -> None:
    result = _run({}, "serve", "--port", str(_free_port()))
    assert result.returncode == 2
    assert "STACKBOT_WEBHOOK_SECRET" in result.stderr and "Traceback" not in result.stderr


def test_serve_on_an_unmigrated_database_is_exit_2(tmp_path: Path) -> None:
    env = {
        "STACKBOT_WEBHOOK_SECRET": signing.TEST_SECRET,
        "STACKBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}",
    }
    result = _run(env, "serve", "--port", str(_free_port()))
    assert result.returncode == 2
    assert "run `stackbot db upgrade` first" in result.stderr


def test_bad_port_is_exit_2() -> None:
    result = _run({}, "serve", "--port", "http")
    assert result.returncode == 2 and "not a TCP port" in result.stderr


def test_serve_with_worker_records_processes_and_stops_gracefully(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    port = _free_port()
    env = dict(
        os.environ,
        STACKBOT_DATABASE_URL=database_url,
        STACKBOT_WEBHOOK_SECRET=signing.TEST_SECRET,
    )
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "stackbot", "serve", "--port", str(port), "--worker"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
        assert (
            f"stackbot serving on http://127.0.0.1:{port}" in (tmp_path / "serve.log").read_text()
        )
        body = signing.example("pull_request", "opened").body
        response = httpx.post(
            url + "/webhooks/github", content=body, headers=signing.headers("pull_request", body)
        )
        assert response.status_code == 202, response.text
        # The embedded worker processes the delivery; sync_pull has no handler in this checkout's
        # registry unless another module registered one, so it is either done or dead-lettered.
        deadline = time.monotonic() + 30
        while queue.stats(engine)["done"] < 1:
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    assert count_rows(engine)[0] == 1
    [process] = [t for t in queue.list_tasks(engine) if t.kind == "process_delivery"]
    assert process.status == "done"
