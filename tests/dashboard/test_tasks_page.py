"""The tasks page lists what the queue is doing (issue 12 point 10: it showed counts only),
SQLite and PostgreSQL: running tasks first, then pending ones by when they may run, each with
what it is about; finished tasks are not listed."""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import select

from stackbot.db.engine import session_scope
from stackbot.db.models import Task
from stackbot.db.models._columns import utcnow
from stackbot.taskqueue import queue


def test_the_tasks_page_lists_running_then_pending_tasks(
    client: TestClient, engine: Engine
) -> None:
    assert "Nothing is running or waiting." in client.get("/tasks").text
    now = utcnow()
    with session_scope(engine) as session:
        later = queue.enqueue(
            session, "report", {"repo": "o/r", "number": 8035}, run_after=now + timedelta(hours=1)
        )
        soon = queue.enqueue(session, "conflict_matrix", {"repo": "o/r", "series_key": "#6307"})
        running = queue.enqueue(session, "sync_pull", {"repo": "o/r", "number": 8034})
        done = queue.enqueue(session, "poll_jobs", {})
        ids = {t.id: t.kind for t in (later, soon, running, done)}
    with session_scope(engine) as session:
        for task in session.exec(select(Task)).all():
            if task.kind == "sync_pull":
                task.status, task.attempts = "running", 1
            elif task.kind == "poll_jobs":
                task.status = "done"
            session.add(task)
    html = client.get("/tasks").text
    table = html.split('id="active"')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td>(\d+)</td><td>([a-z_]+)</td><td>([^<]*)</td>", table)
    assert [(ids[int(i)], about) for i, _, about in rows] == [
        ("sync_pull", "o/r#8034"),
        ("conflict_matrix", "o/r series #6307"),
        ("report", "o/r#8035"),
    ]
    assert "poll_jobs" not in table
