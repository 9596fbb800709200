"""Webhook deliveries: shaped like GitHub's (validated against the webhook schemas), signed,
sent to the configured URL, logged, queued on request, and redeliverable."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from typing import Any

from stackbot.standin import deliveries
from tests.github_standin.receiver import Receiver
from tests.github_standin.scene import build_scene
from tests.support import github_contract
from tests.support.standin import WEBHOOK_SECRET, StandinWorld

# What the stand-in sends (check_run created/completed go beyond the brief: GitHub sends them).
EXPECTED = {
    ("pull_request", "opened"),
    ("pull_request", "edited"),
    ("pull_request", "synchronize"),
    ("pull_request", "closed"),
    ("pull_request", "reopened"),
    ("pull_request", "ready_for_review"),
    ("pull_request", "converted_to_draft"),
    ("issue_comment", "created"),
    ("issue_comment", "edited"),
    ("push", None),
    ("check_run", "created"),
    ("check_run", "completed"),
    ("check_run", "rerequested"),
    ("installation", "created"),
    ("ping", None),
}


def _life_of_a_series(world: StandinWorld) -> None:
    """Everything that happens to PRs in a series, from GitHub's side."""
    c, repo = world.control, world.repo
    scene = build_scene(world)  # opens two stacked PRs, comments, a check run, a status
    c.edit_pull(
        repo,
        scene.bottom,
        title="Amax over tp_dp_cp (v2)",
        body="Part of #6307\nv2",
        editor="alice",
    )
    c.commit(
        repo,
        "amax-group",
        {"megatron/core/fp8.py": "AMAX = 'tp_cp'\n"},
        message="review fixes",
        author="alice",
    )
    c.set_draft(repo, scene.top, True, sender="alice")
    c.set_draft(repo, scene.top, False, sender="alice")
    comment = c.comment(repo, scene.top, "carol", "/ok to test abc1234")
    c.edit_comment(repo, comment.id, "/ok to test abc12345", editor="carol")
    scene.bot.patch(
        f"{scene.repo_path}/check-runs/{scene.check_run_id}",
        json={"conclusion": "failure", "output": {"title": "1 failed", "summary": "see log"}},
    ).raise_for_status()
    c.rerequest_check_run(repo, scene.check_run_id, sender="bob")
    c.close_pull(repo, scene.top, sender="alice")
    c.reopen_pull(repo, scene.top, sender="alice")
    c.edit_pull(repo, scene.top, base="main", editor="alice")
    c.merge_pull(repo, scene.bottom, merger="bob")
    c.set_branch(repo, "amax-group", None, pusher="bob")
    bot_comment = scene.bot.post(
        f"{scene.repo_path}/issues/{scene.top}/comments", json={"body": "report"}
    ).json()
    scene.bot.patch(
        f"{scene.repo_path}/issues/comments/{bot_comment['id']}", json={"body": "report v2"}
    )
    c.ping()
    scene.close()


def test_every_delivery_matches_githubs_webhook_schemas(standin: StandinWorld) -> None:
    _life_of_a_series(standin)
    sent = standin.control.deliveries()
    for delivery in sent:
        github_contract.validate_delivery(delivery.event, deliveries.payload_of(delivery))
    kinds = {(d.event, d.action) for d in sent}
    assert kinds >= EXPECTED, f"not sent: {EXPECTED - kinds}"


def test_deliveries_carry_what_happened(standin: StandinWorld) -> None:
    _life_of_a_series(standin)
    c = standin.control

    def payloads(event: str, action: str | None = None) -> list[dict[str, Any]]:
        return [deliveries.payload_of(d) for d in c.deliveries(event, action)]

    sync = payloads("pull_request", "synchronize")[0]
    assert sync["number"] == 8034 and sync["before"] != sync["after"]
    assert sync["pull_request"]["head"]["sha"] == sync["after"]
    merged = next(p for p in payloads("pull_request", "closed") if p["pull_request"]["merged"])
    assert merged["number"] == 8034 and merged["pull_request"]["merge_commit_sha"]
    edited_base = next(p for p in payloads("pull_request", "edited") if "base" in p["changes"])
    assert edited_base["changes"]["base"]["ref"]["from"] == "amax-group"
    created = next(
        p for p in payloads("issue_comment", "created") if p["sender"]["login"] == "carol"
    )
    assert created["comment"]["body"] == "/ok to test abc1234"
    assert created["issue"]["pull_request"]["url"].endswith("/pulls/8035")
    bot = [
        p for p in payloads("issue_comment", "created") if p["sender"]["login"] == "stackbot[bot]"
    ]
    assert bot and bot[0]["comment"]["performed_via_github_app"]["id"] == standin.app_id
    created_run = payloads("check_run", "created")[0]["check_run"]
    assert (created_run["status"], created_run["completed_at"]) == ("in_progress", None)
    assert (created_run["check_suite"]["status"], created_run["check_suite"]["conclusion"]) == (
        "in_progress",
        None,
    )
    finished = [
        p["check_run"]
        for p in payloads("check_run", "completed")
        if p["check_run"]["name"].endswith("1x4")
    ]
    assert [(r["conclusion"], r["check_suite"]["conclusion"]) for r in finished] == [
        ("failure", "failure")
    ]
    deleted = [p for p in payloads("push") if p["deleted"]]
    assert deleted[0]["ref"] == "refs/heads/amax-group" and deleted[0]["after"] == "0" * 40
    assert all(p["installation"]["id"] == standin.installation_id for p in payloads("pull_request"))
    assert all(p["organization"]["login"] == "NVIDIA" for p in payloads("issue_comment"))


def test_deliveries_are_signed_and_posted_with_githubs_headers(standin: StandinWorld) -> None:
    _pr(standin)
    with Receiver() as receiver:
        standin.control.configure_webhook(receiver.url, WEBHOOK_SECRET, mode="send")
        comment = standin.control.comment(standin.repo, 8034, "carol", "hello")
        standin.control.wait_for_deliveries()
    (got,) = [r for r in receiver.received if r.headers["X-GitHub-Event"] == "issue_comment"]
    expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Hub-Signature-256"] == expected
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["User-Agent"].startswith("GitHub-Hookshot/")
    assert uuid.UUID(got.headers["X-GitHub-Delivery"])
    assert got.headers["X-GitHub-Hook-ID"] == "1"
    assert json.loads(got.body)["comment"]["id"] == comment.id
    (logged,) = standin.control.deliveries("issue_comment", "created")
    assert logged.status_code == 202 and logged.error is None and logged.url == receiver.url


def _pr(world: StandinWorld) -> bool:
    world.control.open_pull(
        world.repo, author="alice", head="f", title="t", files={"f": "1\n"}, number=8034
    )
    return True


def test_sending_is_asynchronous_and_ordered(standin: StandinWorld) -> None:
    _pr(standin)
    hold = threading.Event()
    with Receiver(hold=hold) as receiver:
        standin.control.configure_webhook(receiver.url, WEBHOOK_SECRET, mode="send")
        # The receiver answers nothing until released, yet the calls return: like GitHub, the
        # stand-in delivers after the fact, one delivery at a time, in order.
        for text in ("first", "second", "third"):
            standin.control.comment(standin.repo, 8034, "carol", text)
        sent = standin.control.deliveries("issue_comment")
        assert [d.status_code for d in sent] == [None, None, None]
        hold.set()
        standin.control.wait_for_deliveries()
    assert [d.status_code for d in sent] == [202, 202, 202]
    bodies = [json.loads(r.body)["comment"]["body"] for r in receiver.received]
    assert bodies == ["first", "second", "third"]


def test_queued_deliveries_wait_for_flush_and_keep_their_order(standin: StandinWorld) -> None:
    _pr(standin)
    for text in ("one", "two", "three"):
        standin.control.comment(standin.repo, 8034, "carol", text)
    with Receiver() as receiver:
        standin.control.configure_webhook(receiver.url, WEBHOOK_SECRET, mode="queue")
        assert receiver.received == []
        flushed = standin.control.flush_deliveries()
        assert [d.status_code for d in flushed] == [202] * len(flushed)
        bodies = [
            json.loads(r.body)
            for r in receiver.received
            if r.headers["X-GitHub-Event"] == "issue_comment"
        ]
        assert [b["comment"]["body"] for b in bodies] == ["one", "two", "three"]
        again = deliveries.redeliver(standin.server.state, flushed[-1].guid)
        assert receiver.received[-1].headers["X-GitHub-Delivery"] == again.guid == flushed[-1].guid
        assert receiver.received[-1].body == receiver.received[-2].body


def test_an_unreachable_receiver_is_recorded_not_raised(standin: StandinWorld) -> None:
    with Receiver() as receiver:
        url = receiver.url
    standin.control.configure_webhook(url, WEBHOOK_SECRET, mode="send", timeout_s=2)
    _pr(standin)
    standin.control.wait_for_deliveries()
    (delivery,) = standin.control.deliveries("pull_request", "opened")
    assert delivery.status_code is None and delivery.error and "Connect" in delivery.error


def test_an_unsigned_webhook_has_no_signature_header(standin: StandinWorld) -> None:
    standin.control.configure_webhook(None, "", mode="queue")
    delivery = standin.control.ping()
    assert "X-Hub-Signature-256" not in delivery.headers
    github_contract.validate_delivery("ping", deliveries.payload_of(delivery))
