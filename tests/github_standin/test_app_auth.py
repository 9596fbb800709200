"""GitHub App auth end to end against the stand-in: JWT → installation → token → calls, the
token refreshed before it expires, a 401 recovered by minting again, and the stand-in's own
checks of JWTs and tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stackbot.adapters.github import (
    ChecksNotPermitted,
    GitHubClient,
    GitHubConfigError,
    GitHubNotFound,
    RetryPolicy,
)
from stackbot.config import Settings, load_settings
from stackbot.errors import BadInput, Permanent
from stackbot.standin import StandinServer
from tests.github_standin.scene import app_jwt
from tests.support.standin import AppKey, StandinWorld, build_world, make_rsa_key


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _token_mints(world: StandinWorld) -> int:
    return world.control.installation_token_requests()


def _open(world: StandinWorld) -> int:
    return world.control.open_pull(
        world.repo, author="alice", head="f", title="f", files={"f": "1\n"}
    ).number


def test_app_auth_finds_the_installation_and_mints_one_token(
    standin: StandinWorld, app_settings: Settings
) -> None:
    number = _open(standin)
    client = GitHubClient.from_settings(app_settings)
    assert client.get_pull(standin.repo, number).author == "alice"
    assert client.list_pull_commits(standin.repo, number)
    comment_id = client.create_comment(standin.repo, number, "hello from the App")
    lookups = standin.control.requests("GET", "/installation")
    assert [r.auth for r in lookups] == [f"app:{standin.app_id}"]
    assert _token_mints(standin) == 1
    calls = [r for r in standin.control.requests() if "/pulls/" in r.path or "/comments" in r.path]
    assert {r.auth for r in calls} == {f"installation:{standin.installation_id}"}
    (comment,) = standin.control.comments(standin.repo, number)
    assert (comment.id, comment.author) == (comment_id, "stackbot[bot]")


def test_a_given_installation_id_skips_the_lookup(
    standin: StandinWorld, app_settings: Settings
) -> None:
    number = _open(standin)
    client = GitHubClient.from_settings(app_settings, installation_id=standin.installation_id)
    client.get_pull(standin.repo, number)
    assert standin.control.requests("GET", "/installation") == []
    assert _token_mints(standin) == 1


@pytest.fixture
def clocked(tmp_path: Path, app_key: AppKey) -> Iterator[tuple[StandinWorld, FakeClock]]:
    clock = FakeClock()
    with StandinServer(tmp_path / "standin", clock=clock) as server:
        yield build_world(tmp_path, app_key, server), clock


def _settings(world: StandinWorld, tmp_path: Path) -> Settings:
    return load_settings(
        dev=True,
        data_dir=tmp_path / "data",
        github_api_url=world.url,
        github_app_id=world.app_id,
        github_private_key_path=world.key.path,
        repo=world.repo,
    )


def test_the_token_is_refreshed_before_it_expires(
    clocked: tuple[StandinWorld, FakeClock], tmp_path: Path
) -> None:
    world, clock = clocked
    number = _open(world)
    client = GitHubClient.from_settings(
        _settings(world, tmp_path), clock=clock, refresh_margin_s=300
    )
    client.get_pull(world.repo, number)
    first_token = client.tokens._token if client.tokens else None
    clock.advance(3000)  # 10 minutes left of the hour: still used
    client.get_pull(world.repo, number)
    assert _token_mints(world) == 1
    clock.advance(301)  # inside the refresh margin: a new token first, then the call
    client.get_pull(world.repo, number)
    assert _token_mints(world) == 2
    log = [(r.method, r.path.rsplit("/", 1)[-1], r.status) for r in world.control.requests()]
    assert log[-2:] == [("POST", "access_tokens", 201), ("GET", str(number), 200)]
    assert all(status != 401 for _, _, status in log), (
        "no request ever went out with a lapsed token"
    )
    clock.advance(300)  # the first token is now past its expiry: the stand-in refuses it
    stale = httpx.get(
        f"{world.url}/repos/{world.repo}/pulls/{number}",
        headers={"Authorization": f"token {first_token}"},
    )
    assert stale.status_code == 401


def test_short_lived_tokens_are_refreshed_inside_the_margin(
    clocked: tuple[StandinWorld, FakeClock], tmp_path: Path
) -> None:
    world, clock = clocked
    number = _open(world)
    world.control.set_token_lifetime(3)
    client = GitHubClient.from_settings(_settings(world, tmp_path), clock=clock, refresh_margin_s=2)
    client.get_pull(world.repo, number)
    client.get_pull(world.repo, number)
    assert _token_mints(world) == 1
    clock.advance(1.2)  # now under 2 s of the 3 s left
    client.get_pull(world.repo, number)
    assert _token_mints(world) == 2


def test_a_401_mints_a_new_token_and_retries_once(
    clocked: tuple[StandinWorld, FakeClock], tmp_path: Path
) -> None:
    world, clock = clocked
    number = _open(world)
    world.control.set_token_lifetime(1)
    # A clock 30 s slow (skew between hosts): the client believes its token still has time.
    client = GitHubClient.from_settings(
        _settings(world, tmp_path), refresh_margin_s=0, clock=lambda: clock() - 30
    )
    client.get_pull(world.repo, number)
    clock.advance(1.2)  # past the token's 1 s on the stand-in's clock
    assert client.get_pull(world.repo, number).number == number
    statuses = [r.status for r in world.control.requests("GET", f"/pulls/{number}")]
    assert statuses == [200, 401, 200]
    assert _token_mints(world) == 2


def test_check_runs_need_the_apps_checks_permission(
    standin: StandinWorld, app_settings: Settings
) -> None:
    number = _open(standin)
    sha = standin.control.pull(standin.repo, number).head_sha
    client = GitHubClient.from_settings(app_settings, policy=RetryPolicy(sleep=lambda s: None))
    run_id = client.create_check_run(
        standin.repo,
        sha,
        "stackbot / amax-group 1x4",
        status="in_progress",
        title="running",
        summary="4 ranks",
        details_url="http://127.0.0.1:8000/jobs/1",
        external_id="8034/amax-group/1x4",
    )
    client.update_check_run(
        standin.repo,
        run_id,
        status="completed",
        conclusion="success",
        title="14 passed",
        summary="14 vs 5 on main",
        text="ok",
    )
    (run,) = standin.control.check_runs(standin.repo, sha)
    assert (run.status, run.conclusion, run.title, run.text, run.app_id) == (
        "completed",
        "success",
        "14 passed",
        "ok",
        standin.app_id,
    )
    permissions = {"metadata": "read", "statuses": "write", "issues": "write"}
    standin.control.set_installation_permissions(standin.installation_id, permissions)
    with pytest.raises(ChecksNotPermitted, match="Resource not accessible by integration"):
        client.create_check_run(standin.repo, sha, "x", status="queued", title="t", summary="s")
    client.create_commit_status(
        standin.repo,
        sha,
        state="success",
        context="stackbot/amax-group 1x4",
        description="14 passed",
    )
    assert [s.creator for s in standin.control.statuses(standin.repo, sha)] == ["stackbot[bot]"]


def test_an_app_not_installed_on_the_repo_is_named(standin: StandinWorld, tmp_path: Path) -> None:
    standin.control.create_repo("elsewhere/repo", files={"a": "1\n"})
    settings = _settings(standin, tmp_path).model_copy(update={"repo": "elsewhere/repo"})
    client = GitHubClient.from_settings(settings)
    with pytest.raises(GitHubNotFound, match="/repos/elsewhere/repo/installation") as raised:
        client.get_pull("elsewhere/repo", 1)
    assert isinstance(raised.value, Permanent)


def test_bad_app_settings_say_what_to_set(standin: StandinWorld, tmp_path: Path) -> None:
    base = _settings(standin, tmp_path)
    with pytest.raises(GitHubConfigError, match="STACKBOT_REPO") as raised:
        GitHubClient.from_settings(base.model_copy(update={"repo": None}))
    assert isinstance(raised.value, BadInput)
    missing = base.model_copy(update={"github_private_key_path": tmp_path / "nope.pem"})
    with pytest.raises(GitHubConfigError, match="STACKBOT_GITHUB_PRIVATE_KEY_PATH"):
        GitHubClient.from_settings(missing)
    (tmp_path / "not-a-key.pem").write_text("hello")
    garbage = base.model_copy(update={"github_private_key_path": tmp_path / "not-a-key.pem"})
    with pytest.raises(GitHubConfigError, match="not a PEM private key"):
        GitHubClient.from_settings(garbage)
    nothing = load_settings(dev=True, data_dir=tmp_path / "d", github_api_url=standin.url)
    with pytest.raises(GitHubConfigError, match="STACKBOT_GITHUB_TOKEN"):
        GitHubClient.from_settings(nothing)


def test_a_key_the_app_did_not_register_is_refused(standin: StandinWorld, tmp_path: Path) -> None:
    other = make_rsa_key(tmp_path)
    settings = _settings(standin, tmp_path).model_copy(
        update={"github_private_key_path": other.path}
    )
    client = GitHubClient.from_settings(settings)
    with pytest.raises(Permanent, match=r"401.*signature does not match"):
        client.get_pull(standin.repo, 1)


# -- the stand-in's own checks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "status", "message"),
    [
        (None, 401, "Requires authentication"),
        ("token ghp_not-a-real-token", 401, "Bad credentials"),
        ("Basic dXNlcjpwYXNz", 401, "Bad credentials"),
    ],
)
def test_the_standin_requires_valid_credentials(
    standin: StandinWorld, authorization: str | None, status: int, message: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.get(f"{standin.url}/repos/{standin.repo}/pulls", headers=headers)
    assert (response.status_code, response.json()["message"]) == (status, message)


@pytest.mark.parametrize(
    ("iat_offset", "lifetime", "message"),
    [
        (-60, -1, "'Expiration time' claim"),
        (0, 1200, "too far in the future"),
        (300, 500, "'Issued at' claim"),
    ],
)
def test_the_standin_checks_app_jwt_times(
    standin: StandinWorld, iat_offset: int, lifetime: int, message: str
) -> None:
    token = app_jwt(standin, iat_offset=iat_offset, lifetime=lifetime)
    response = httpx.post(
        f"{standin.url}/app/installations/{standin.installation_id}/access_tokens",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 401 and message in response.json()["message"]


def test_an_app_jwt_is_not_a_repository_credential(standin: StandinWorld) -> None:
    response = httpx.get(
        f"{standin.url}/repos/{standin.repo}/pulls",
        headers={"Authorization": f"Bearer {app_jwt(standin)}"},
    )
    assert response.status_code == 403


def test_an_installation_sees_only_its_repositories(standin: StandinWorld) -> None:
    standin.control.create_repo("someone/private-stuff", files={"a": "1\n"})
    minted = httpx.post(
        f"{standin.url}/app/installations/{standin.installation_id}/access_tokens",
        headers={"Authorization": f"Bearer {app_jwt(standin)}"},
    ).json()
    headers = {"Authorization": f"token {minted['token']}"}
    assert (
        httpx.get(f"{standin.url}/repos/{standin.repo}/pulls", headers=headers).status_code == 200
    )
    assert (
        httpx.get(f"{standin.url}/repos/someone/private-stuff/pulls", headers=headers).status_code
        == 404
    )
