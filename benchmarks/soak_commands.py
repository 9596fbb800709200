"""Soak phase (issue 29 point 2): the database goes down while commands are posted, and every
command is acted on once after it comes back.

With PostgreSQL stopped, a vetter posts ``count`` commands (``/stackbot status``, and one
``/ok to test <head>``) on the demo's open PRs; the stand-in delivers each to ``stackbot
serve``, which answers 503 (GitHub records the failure and does not redeliver). PostgreSQL is
started again and one reconcile round queued; the phase waits until every comment has been
acted on and checks each was acted on exactly once: one ``acted_commands`` row per comment, and
as many replies on the PRs as were reserved (one per command comment, ``command_replies``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, bindparam, text

from stackbot.db.engine import session_scope
from stackbot.demo import scenario
from stackbot.domain import report
from stackbot.domain.tasks import FollowUp, Reconcile
from stackbot.taskqueue import queue

PRS = (8034, 8035, 8748)


def commands_outage(
    control: Any,
    engine: Engine,
    *,
    stop_db: Callable[[], None],
    start_db: Callable[[], None],
    count: int,
    say: Callable[[str], None],
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    repo = scenario.REPO
    say(f"commands phase: stopping PostgreSQL, posting {count} commands")
    before = max((c.id for n in PRS for c in control.comments(repo, n)), default=0)
    stop_db()
    down_at = time.monotonic()
    first = len(control.state.deliveries)
    ids: list[int] = []
    for n in range(count):
        number = PRS[n % len(PRS)]
        if n == 0:
            head = control.pull(repo, number).head_sha
            body = f"/ok to test {head[:8]}"
        else:
            body = f"/stackbot status ({n})"
        ids.append(int(control.comment(repo, number, scenario.VETTER, body).id))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the sender thread posts them, answered 503
        with control.state.lock:
            sent = control.state.deliveries[first:]
            if all(d.status_code is not None or d.error for d in sent):
                break
        time.sleep(0.2)
    answers = Counter(str(d.status_code or d.error) for d in control.state.deliveries[first:])
    start_db()
    down_s = time.monotonic() - down_at
    say(f"commands phase: PostgreSQL back after {down_s:.1f} s; answers {dict(answers)}")
    with session_scope(engine) as session:
        queue.enqueue_follow_up(session, FollowUp.of(Reconcile(repo)))
    queued_at = time.monotonic()
    acted: dict[int, int] = {}
    while time.monotonic() - queued_at < timeout_s:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT comment_id, count(*) FROM acted_commands GROUP BY comment_id")
            ).all()
        acted = {int(c): int(k) for c, k in rows if int(c) in set(ids)}
        if len(acted) == len(ids):
            break
        time.sleep(1.0)
    caught_up_s = time.monotonic() - queued_at
    time.sleep(5.0)  # any late second action would show now
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT comment_id, count(*) FROM acted_commands GROUP BY comment_id")
        ).all()
    acted = {int(c): int(k) for c, k in rows if int(c) in set(ids)}
    # What the vetter sees: each reply stackbot posted is reserved once per command comment
    # (command_replies, unique per comment); a command acted on twice would post a second
    # reply under the same reservation.
    with engine.connect() as conn:
        reserved = conn.execute(
            text("SELECT count(*) FROM command_replies WHERE comment_id IN :ids").bindparams(
                bindparam("ids", expanding=True)
            ),
            {"ids": ids},
        ).scalar_one()
    posted = [
        c
        for n in PRS
        for c in control.comments(repo, n)
        if c.id > before and c.via_app and report.MARKER not in c.body
    ]
    result = {
        "commands": len(ids),
        "answers_while_down": dict(answers),
        "database_down_s": round(down_s, 1),
        "acted_on": len(acted),
        "acted_more_than_once": sum(1 for k in acted.values() if k > 1),
        "never_acted_on": len(ids) - len(acted),
        "catch_up_s": round(caught_up_s, 1),
        "replies_posted": len(posted),
        "replies_reserved": int(reserved),
    }
    say(f"commands phase: {result}")
    return result


def problems_of(result: dict[str, Any]) -> list[str]:
    found = []
    if result["never_acted_on"]:
        found.append(f"{result['never_acted_on']} commands never acted on after the outage")
    if result["acted_more_than_once"]:
        found.append(f"{result['acted_more_than_once']} commands acted on more than once")
    if result["replies_posted"] != result["replies_reserved"]:
        found.append(
            f"{result['replies_posted']} replies posted for {result['replies_reserved']} "
            "reserved: a command was answered twice (or a reply went missing)"
        )
    if result["replies_posted"] > result["commands"]:
        found.append(f"{result['replies_posted']} replies to {result['commands']} commands")
    return found
