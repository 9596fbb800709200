"""``stackbot demo comment`` / ``stackbot demo push`` (issue 27): acting on a running demo as its
people would, through its GitHub stand-in on the demo's port + 1; bad input exits 2 with one line."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from stackbot.cli.main import main
from stackbot.standin import StandinServer
from tests.demo.conftest import DemoRun

REPO = "NVIDIA/Megatron-LM"


def _free_pair() -> int:
    """A port P whose successor is free too (the stand-in's)."""
    for _ in range(50):
        with socket.socket() as low:
            low.bind(("127.0.0.1", 0))
            port = int(low.getsockname()[1])
            with socket.socket() as high:
                try:
                    high.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise RuntimeError("no two free ports in a row")


@pytest.fixture
def standin(tmp_path: Path):  # type: ignore[no-untyped-def]
    port = _free_pair()
    server = StandinServer(tmp_path / "github", port=port + 1).start()
    control = server.control
    for login in ("alice", "maintainer-p"):
        control.add_user(login)
    control.create_repo(REPO, files={"README.md": "hi\n"}, author="alice")
    control.open_pull(
        REPO, author="alice", head="alice/x", title="X", number=8748, files={"x.py": "x = 1\n"}
    )
    try:
        yield server, port
    finally:
        server.stop()


def test_comment_and_push_act_on_the_demos_standin(standin, capsys) -> None:  # type: ignore[no-untyped-def]
    server, port = standin
    control = server.control
    status = main(
        [
            "demo",
            "comment",
            "8748",
            "/ok to test abc1234",
            "--as",
            "maintainer-p",
            "--port",
            str(port),
        ]
    )
    assert status == 0
    [comment] = control.comments(REPO, 8748)
    assert (comment.author, comment.body) == ("maintainer-p", "/ok to test abc1234")
    assert f"http://127.0.0.1:{port}/pulls/8748" in capsys.readouterr().out
    auth = {"Authorization": f"token {control.create_token('maintainer-p')}"}
    url = f"{server.url}/repos/{REPO}/pulls/8748"
    head = httpx.get(url, headers=auth).json()["head"]
    assert main(["demo", "push", "#8748", "--port", str(port)]) == 0
    moved = httpx.get(url, headers=auth).json()["head"]
    assert moved["sha"] != head["sha"] and moved["ref"] == head["ref"]
    commits = httpx.get(f"{url}/commits", headers=auth).json()
    assert commits[-1]["sha"] == moved["sha"]
    assert commits[-1]["commit"]["message"] == "Update docs/notes/alice.md"  # its author's


def test_bad_input_exits_2_with_one_line(standin, capsys) -> None:  # type: ignore[no-untyped-def]
    _server, port = standin
    assert main(["demo", "push", "9999", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stackbot demo push: the stand-in refused it (404)" in err
    assert main(["demo", "comment", "8748", "hi", "--as", "x", "--port", str(port - 2)]) == 2
    err = capsys.readouterr().err.strip()
    assert "start `stackbot demo` first, or pass the --port it runs on" in err
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "comment", "pr-1", "hi", "--as", "x"])
    assert exit_.value.code == 2


def test_a_comment_from_the_cli_gets_stackbots_answer(demo: DemoRun) -> None:
    """On the running demo: `/stackbot status` posted with the CLI is answered on the PR (#8050,
    the PR still open once the demo's series landed)."""
    port = int(demo.url.rsplit(":", 1)[1])
    assert (
        main(
            [
                "demo",
                "comment",
                "8050",
                "/stackbot status",
                "--as",
                "maintainer-p",
                "--port",
                str(port),
            ]
        )
        == 0
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        comments = httpx.get(
            f"{demo.github_url}/_standin/repos/{REPO}/issues/8050/comments", timeout=10
        ).json()
        replies = [c for c in comments if "stackbot status · #8050" in c["body"]]
        if replies:
            break
        time.sleep(1)
    assert replies, comments
