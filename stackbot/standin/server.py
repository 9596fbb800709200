"""``StandinServer``: the stand-in served by uvicorn on a free port of 127.0.0.1, in a thread.

    with StandinServer(tmp_path) as github:
        github.control.create_repo("NVIDIA/Megatron-LM", files={...})
        settings = load_settings(github_api_url=github.url, ...)

The base URL is known only once the socket is bound, so the server binds first and then tells
the state, which puts it into every URL it answers with.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from stackbot.adapters.http_server import BackgroundServer
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
        self._background: BackgroundServer | None = None

    @property
    def url(self) -> str:
        return self.state.base_url

    def start(self) -> StandinServer:
        self._background = BackgroundServer(host=self._host, port=self._port, name="github-standin")
        self.state.base_url = self._background.url
        self._background.start(
            create_standin_app(self.state), timeout_s=STARTUP_TIMEOUT_S, lifespan="off"
        )
        return self

    def stop(self) -> None:
        deliveries.close(self.state)
        if self._background is not None:
            self._background.stop()
        self._background = None

    def __enter__(self) -> StandinServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
