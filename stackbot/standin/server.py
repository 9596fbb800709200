"""``StandinServer``: the stand-in served by uvicorn on a free port of 127.0.0.1, in a thread.

    with StandinServer(tmp_path) as github:
        github.control.create_repo("NVIDIA/Megatron-LM", files={...})
        settings = load_settings(github_api_url=github.url, ...)

The base URL is known only once the socket is bound, so the server binds first and then tells
the state, which puts it into every URL it answers with.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import TracebackType

import uvicorn

from stackbot.standin import deliveries
from stackbot.standin.app import create_standin_app
from stackbot.standin.control import StandinControl
from stackbot.standin.state import Clock, StandinState

STARTUP_TIMEOUT_S = 20.0


class StandinServer:
    def __init__(
        self,
        root: Path,
        *,
        state: StandinState | None = None,
        clock: Clock | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if state is None:
            state = StandinState(root, clock=clock) if clock is not None else StandinState(root)
        self.state = state
        self.control = StandinControl(state)
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        return self.state.base_url

    def start(self) -> StandinServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        host, port = sock.getsockname()[:2]
        self._socket = sock
        self.state.base_url = f"http://{host}:{port}"
        config = uvicorn.Config(
            create_standin_app(self.state), log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="github-standin", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the GitHub stand-in did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        deliveries.close(self.state)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
