"""The task contract (stackbot.domain.tasks): every kind has one payload class whose payload
survives a round trip through JSON, and a bad payload is refused naming the kind and field."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from stackbot.config import load_settings
from stackbot.domain import tasks
from stackbot.domain.tasks import PAYLOADS, FollowUp, TaskKind, decode
from stackbot.errors import BadInput
from stackbot.worker.handlers import service_registry

EXAMPLES: list[tasks.TaskPayload] = [
    tasks.ProcessDelivery(7),
    tasks.SyncPull("o/r", 8034, "opened"),
    tasks.SyncPull("o/r", 8034),
    tasks.PrCommand("o/r", 8035, 99, "vetter", "/ok to test abc1234", action="edited"),
    tasks.PrCommand("o/r", 12, 5, "someone", is_pull_request=False),
    tasks.Integrate("o/r", "#6307", 8034, "pushed"),
    tasks.Integrate("o/r", None, 8050, ""),
    tasks.Integrate("o/r", "#6307", None, "main moved"),
    tasks.Integrate("o/r", "#6307", None, "landing", gate=(8034, 8035, 8748)),
    tasks.PollJobs(),
    tasks.BaseMoved("o/r", "refs/heads/main", "main", "a" * 40),
    tasks.Retest("o/r", 8034, test_set="amax-group"),
    tasks.Retest("o/r", 8034, head_sha="b" * 40, check_run_id=3, name="n", external_id="1/x/1x4"),
    tasks.Report.of("o/r", [8035, 8034, 8035]),
    tasks.Reconcile(None),
    tasks.Reconcile("o/r"),
    tasks.ConflictMatrix("o/r", "#6307"),
    tasks.Maintenance(),
    tasks.RetargetChildren("o/r", 8034),
    tasks.CheckBase("o/r", 8035),
    tasks.RestackPr("o/r", 8035, "carol", push=True),
    tasks.PortPr("o/r", 7523, "dev", "dave"),
    tasks.TestAlone("o/r", 8034),
    tasks.Land("o/r", 3),
    tasks.AnswerMergeGroup(
        "o/r",
        "checks_requested",
        "a" * 40,
        "refs/heads/gh-readonly-queue/main/pr-8034-" + "b" * 40,
        "refs/heads/main",
    ),
]


def test_every_kind_has_one_payload_class() -> None:
    assert set(PAYLOADS) == set(TaskKind)
    assert {type(example).KIND for example in EXAMPLES} == set(TaskKind)


def test_every_kind_has_a_handler() -> None:
    registry = service_registry(load_settings(dev=True))
    assert set(TaskKind) <= set(registry.kinds)


@pytest.mark.parametrize("task", EXAMPLES, ids=lambda t: type(t).__name__)
def test_payloads_survive_json(task: tasks.TaskPayload) -> None:
    stored = json.loads(json.dumps(task.to_payload()))
    again = decode(task.KIND.value, stored)
    # updated_at only shapes a comment's dedupe key; it is not stored in the payload.
    expected = replace(task, updated_at="") if isinstance(task, tasks.PrCommand) else task
    assert again == expected
    assert again.to_payload() == task.to_payload()


def test_follow_ups_carry_the_payloads_key() -> None:
    follow_up = FollowUp.of(tasks.Report.of("o/r", [3, 1, 3]))
    assert follow_up == FollowUp("report", {"repo": "o/r", "numbers": [1, 3]}, "report:o/r:1,3")
    assert FollowUp.of(tasks.PollJobs(), dedupe_key="mine").dedupe_key == "mine"


@pytest.mark.parametrize(
    ("kind", "payload", "message"),
    [
        ("sync_pull", {"repo": "o/r", "number": "12"}, r"sync_pull task needs .* in 'number'"),
        ("sync_pull", {"repo": "o/r", "number": True}, r"'number', got True"),
        ("sync_pull", {"repo": "nobody", "number": 1}, r"'owner/name' in 'repo'"),
        ("report", {"repo": "o/r", "numbers": [1, "2"]}, r"report task needs .* in 'numbers'"),
        ("integrate", {"repo": "o/r"}, r"needs 'series_key' or 'number'"),
        ("pr_command", {"repo": "o/r", "number": 1, "author": "x"}, r"in 'comment_id'"),
        ("process_delivery", {}, r"process_delivery task needs a whole number in 'delivery'"),
        ("retest", ["o/r"], r"payload must be a JSON object"),
        ("nonsense", {}, r"'nonsense' is not a task kind"),
    ],
)
def test_bad_payloads_name_the_field(kind: str, payload: Any, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        decode(kind, payload)
