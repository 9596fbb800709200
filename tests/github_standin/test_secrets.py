"""Secrets (the token, installation tokens, the App key and its JWTs, the webhook secret) never
appear in logs or error messages, even with PyGithub logging every request body at DEBUG."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

import pytest

from stackbot.adapters.github import GitHubClient, RetryPolicy, install_redaction
from stackbot.config import Settings
from stackbot.logging_redaction import MASK, redact
from tests.support.standin import WEBHOOK_SECRET, StandinWorld


def _secrets(world: StandinWorld, settings: Settings) -> list[str]:
    found = [WEBHOOK_SECRET, world.bob_token]
    found += [t.token for t in world.server.state.tokens.values() if t.kind == "installation"]
    found += [line for line in world.key.private_pem.splitlines() if "-----" not in line]
    if settings.github_token is not None:
        found.append(settings.github_token.get_secret_value())
    return found


def _failures(client: GitHubClient, world: StandinWorld, number: int) -> list[Callable[[], object]]:
    sha = world.control.pull(world.repo, number).head_sha
    return [
        lambda: client.get_pull(world.repo, 99999),  # 404
        lambda: client.create_check_run(
            world.repo, "f" * 40, "x", status="queued", title="t", summary="s"
        ),
        lambda: client.create_commit_status(
            world.repo, sha, state="bogus", context="c", description="d"
        ),
        lambda: client.get_pull(world.repo, number),  # rate limited (injected)
    ]


def _exercise(world: StandinWorld, settings: Settings) -> list[str]:
    number = world.control.open_pull(
        world.repo, author="alice", head="f", title="f", files={"f": "1\n"}
    ).number
    client = GitHubClient.from_settings(
        settings, policy=RetryPolicy(sleep=lambda s: None, max_attempts=2)
    )
    client.get_pull(world.repo, number)
    client.create_comment(world.repo, number, "hello")
    world.control.inject_fault(
        "secondary_rate_limit", path=f"/pulls/{number}$", retry_after=1, count=5
    )
    texts = []
    for failure in _failures(client, world, number):
        with pytest.raises(Exception) as raised:
            failure()
        texts.append("".join(traceback.format_exception(raised.value)))
        texts.append(repr(raised.value))
        logging.getLogger("stackbot.adapters.github").exception(
            "GitHub call failed: %s", raised.value
        )
    return texts


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("github", "github.Requester", "urllib3", "stackbot"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    return caplog


def test_token_auth_leaks_nothing(
    standin: StandinWorld, token_settings: Settings, debug_logs: pytest.LogCaptureFixture
) -> None:
    install_redaction(token_settings)
    texts = _exercise(standin, token_settings)
    logged = debug_logs.text
    assert "GET" in logged and "/pulls/" in logged, "PyGithub's request log was captured"
    for secret in _secrets(standin, token_settings):
        assert secret not in logged
        for text in texts:
            assert secret not in text


def test_app_auth_leaks_nothing(
    standin: StandinWorld, app_settings: Settings, debug_logs: pytest.LogCaptureFixture
) -> None:
    install_redaction(app_settings)
    texts = _exercise(standin, app_settings)
    minted = [t.token for t in standin.server.state.tokens.values() if t.kind == "installation"]
    assert minted, "an installation token was minted"
    assert "access_tokens" in debug_logs.text, "the token response was logged (and must be masked)"
    for secret in _secrets(standin, app_settings):
        assert secret not in debug_logs.text
        for text in texts:
            assert secret not in text
    assert MASK in debug_logs.text


def test_the_webhook_secret_is_masked_in_any_logger_after_install(
    token_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    install_redaction(token_settings)
    log = logging.getLogger("stackbot.web.somewhere")
    log.info("configured with %s", WEBHOOK_SECRET)
    try:
        raise ValueError(f"bad signature for secret {WEBHOOK_SECRET}")
    except ValueError:
        log.exception("delivery rejected")
    assert WEBHOOK_SECRET not in caplog.text
    assert caplog.text.count(MASK) >= 2


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: token ghp_" + "a" * 36,
        "got ghs_" + "B" * 36 + " from GitHub",
        "key -----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- done",
        "jwt eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiI0MjQyIn0.c2lnbmF0dXJlc2lnbmF0dXJl",
        "{'Authorization': 'Bearer abc.def.ghi'}",
        "X-Hub-Signature-256: sha256=" + "0f" * 32,
    ],
)
def test_credential_shapes_are_masked_even_unregistered(text: str) -> None:
    masked = redact(text)
    assert MASK in masked
    for fragment in ("a" * 36, "B" * 36, "MIIEow", "c2lnbmF0dXJl", "abc.def.ghi", "0f" * 32):
        assert fragment not in masked
