"""A populated stand-in for contract tests: two stacked PRs, comments, a check run, a status,
and HTTP clients authenticated as a user, as the App (JWT) and as its installation."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from tests.support.standin import StandinWorld


def app_jwt(
    world: StandinWorld, *, iat_offset: int = -60, lifetime: int = 540, key: str | None = None
) -> str:
    now = int(world.server.state.now())
    claims = {"iat": now + iat_offset, "exp": now + lifetime, "iss": str(world.app_id)}
    return jwt.encode(claims, key or world.key.private_pem, algorithm="RS256")


@dataclass
class Scene:
    world: StandinWorld
    user: httpx.Client  # bob's personal token
    app: httpx.Client  # the App's JWT
    bot: httpx.Client  # an installation token
    bottom: int
    top: int
    bottom_sha: str
    comment_id: int
    check_run_id: int

    @property
    def repo_path(self) -> str:
        return f"/repos/{self.world.repo}"

    def close(self) -> None:
        for client in (self.user, self.app, self.bot):
            client.close()


def _client(world: StandinWorld, authorization: str) -> httpx.Client:
    return httpx.Client(base_url=world.url, headers={"Authorization": authorization}, timeout=30)


def build_scene(world: StandinWorld) -> Scene:
    control = world.control
    bottom = control.open_pull(
        world.repo,
        author="alice",
        head="amax-group",
        title="Amax reduction over tp_dp_cp",
        body="Part of #6307",
        files={"megatron/core/fp8.py": "AMAX = 'tp_dp_cp'\n"},
        number=8034,
    )
    top = control.open_pull(
        world.repo,
        author="alice",
        head="amax-tests",
        base="amax-group",
        title="Tests for #8034",
        body="Depends on #8034",
        files={"tests/test_amax.py": "def test_amax():\n    pass\n"},
        number=8035,
    )
    control.create_stack(world.repo, [8034, 8035])
    comment = control.comment(world.repo, 8034, "bob", f"/ok to test {bottom.head_sha[:7]}")
    app = _client(world, f"Bearer {app_jwt(world)}")
    minted = app.post(f"/app/installations/{world.installation_id}/access_tokens")
    minted.raise_for_status()
    bot = _client(world, f"token {minted.json()['token']}")
    run = bot.post(
        f"/repos/{world.repo}/check-runs",
        json={
            "name": "stackbot / amax-group 1x4",
            "head_sha": bottom.head_sha,
            "status": "in_progress",
        },
    )
    run.raise_for_status()
    bot.post(
        f"/repos/{world.repo}/statuses/{bottom.head_sha}",
        json={
            "state": "pending",
            "context": "stackbot/blockwise-recipe 1x4",
            "description": "queued",
        },
    ).raise_for_status()
    return Scene(
        world=world,
        user=_client(world, f"token {world.bob_token}"),
        app=app,
        bot=bot,
        bottom=bottom.number,
        top=top.number,
        bottom_sha=bottom.head_sha,
        comment_id=comment.id,
        check_run_id=int(run.json()["id"]),
    )


def body_of(response: httpx.Response) -> Any:
    return response.json() if response.content else None


def wait_until(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())
