"""uvicorn's adapter: an ASGI app under uvicorn in a background thread, on a socket bound up front.

Binding first gives the URL before the app exists (the GitHub stand-in puts it into every URL
it answers with) and lets port 0 pick a free port. Used by ``stackbot demo``, the stand-in and
the tests that need a real HTTP server. It lives among the adapters, not in ``stackbot.web``, so
that the stand-in serves itself without depending on stackbot's web app.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class BackgroundServer:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, name: str = "uvicorn") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as error:
            self._socket.close()
            raise RuntimeError(f"cannot listen on {host}:{port}: {error.strerror}") from None
        bound_host, self.port = self._socket.getsockname()[:2]
        self.url = f"http://{bound_host}:{self.port}"
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, app: Any, *, timeout_s: float = 30.0, **config: Any) -> None:
        options = {"log_level": "warning", "access_log": False, **config}
        self._server = uvicorn.Server(uvicorn.Config(app, **options))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name=self._name,
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self._name} did not start on {self.url}")
            time.sleep(0.01)

    def stop(self, *, timeout_s: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._socket.close()
        self._server = self._thread = None

    @contextmanager
    def serving(self, app: Any, **config: Any) -> Iterator[BackgroundServer]:
        self.start(app, **config)
        try:
            yield self
        finally:
            self.stop()


def serve_forever(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` in the foreground until SIGINT or SIGTERM (``stackbot serve``): uvicorn
    shuts down gracefully, letting requests and the app's lifespan finish."""
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="warning")
