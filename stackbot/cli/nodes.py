"""``stackbot nodes [list] [--json]``, ``stackbot nodes check NODE``, ``stackbot nodes readmit
NODE [--by NAME]``: the nodes excluded from job submissions for repeated infra failures
(issue 26 point 4).

``list`` prints each excluded node with the infra jobs that excluded it and its node checks,
then the re-admitted ones. ``check`` makes the node's check due now (the ``poll_jobs`` task
submits it and re-admits the node when it passes); ``readmit`` puts it back in the submissions
at once, without a check (a maintainer's call: say who in ``--by``). Exit 0, or 2 with one line
for bad input (a node that is not excluded: the line lists those that are).
"""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.cli.integrate import one_line
from stackbot.cli.serve import load_serving_settings
from stackbot.config import Settings
from stackbot.db.engine import make_engine, session_scope
from stackbot.domain.tasks import FollowUp, PollJobs
from stackbot.errors import BadInput, StackbotError
from stackbot.services import broken_nodes
from stackbot.taskqueue import queue
from stackbot.web.readmodel.nodes import nodes_view


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "nodes", help="nodes excluded for repeated infra failures: list, check, re-admit"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="excluded and re-admitted nodes, with evidence")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.set_defaults(handler=_list)
    check = actions.add_parser("check", help="submit a node check to an excluded node now")
    check.add_argument("node")
    check.set_defaults(handler=_check)
    readmit = actions.add_parser("readmit", help="re-admit an excluded node without a check")
    readmit.add_argument("node")
    readmit.add_argument("--by", default=None, help="who re-admits it (default: this user)")
    readmit.set_defaults(handler=_readmit)
    parser.add_argument("--json", action="store_true", help="print them as JSON")
    parser.set_defaults(handler=_list)


def _engine() -> tuple[Settings, Engine]:
    try:
        settings = load_serving_settings(webhooks=False)
    except StackbotError as error:
        raise BadInput(one_line(str(error))) from None
    except ValueError as error:  # pydantic's ValidationError: a setting out of range
        raise BadInput(one_line(f"the settings are invalid: {error}")) from None
    return settings, make_engine(settings.effective_database_url)


def _list(args: argparse.Namespace) -> int:
    settings, engine = _engine()
    try:
        with Session(engine) as session:
            view = nodes_view(session, settings=settings)
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps(view.to_json(), indent=2, sort_keys=True))
        return 0
    if not view.excluded:
        print("no node is excluded")
    for row in view.excluded:
        print(f"{row.node}: excluded since {row.excluded_at:%Y-%m-%d %H:%M} UTC")
        for e in row.evidence:
            signature = f" [{e['signature']}]" if e.get("signature") else ""
            print(f"  job {e['job']} {e['at'][:16]} infra{signature}: {e['line']}")
        for c in row.checks:
            print(f"  node check {c['at'][:16]}: {c['status']} {c['message']}".rstrip())
        if row.check_running:
            print("  a node check is running")
    for row in view.readmitted:
        when = f"{row.ended_at:%Y-%m-%d %H:%M}" if row.ended_at else ""
        print(f"{row.node}: re-admitted {when} ({row.end_note or ''})")
    return 0


def _check(args: argparse.Namespace) -> int:
    _settings, engine = _engine()
    try:
        with session_scope(engine) as session:
            broken_nodes.ask_check(session, args.node)
            again = FollowUp.of(PollJobs())
            queue.enqueue(session, again.kind, again.payload, dedupe_key=again.dedupe_key)
    except broken_nodes.NotExcluded as error:
        raise BadInput(str(error)) from None
    finally:
        engine.dispose()
    print(f"{args.node}: a node check is due now; it is re-admitted when the check passes")
    return 0


def _readmit(args: argparse.Namespace) -> int:
    _settings, engine = _engine()
    who = args.by or getpass.getuser()
    try:
        with session_scope(engine) as session:
            broken_nodes.readmit_by_maintainer(session, args.node, login=who)
    except broken_nodes.NotExcluded as error:
        raise BadInput(str(error)) from None
    finally:
        engine.dispose()
    print(f"{args.node}: re-admitted by {who}")
    return 0
