"""``stackbot db upgrade`` / ``downgrade``: the only way the schema is created.

``downgrade`` needs the revision to go back to. Before it runs, it says what it would undo and
which tables it would drop, with their rows (worked out by :mod:`stackbot.db.downgrade_plan`,
however the revision is spelled: ``base``, ``-8``, ``0001-1``, ``0008@base``, an id); one that
drops a table holding rows, or every table, also needs ``--yes``. A database that cannot be opened, a corrupt SQLite file or an unwritable data
directory is exit 2 with one line naming what to fix, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from stackbot.cli.integrate import one_line, settings_or_bad_input, unwritable
from stackbot.config import Settings
from stackbot.errors import BadInput


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="database schema migrations (Alembic)")
    db_sub = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = db_sub.add_parser("upgrade", help="migrate the database to the newest schema")
    up.add_argument("--revision", default="head")
    up.set_defaults(handler=_upgrade)
    down = db_sub.add_parser(
        "downgrade",
        help="migrate the database back to a revision (dropping tables that hold rows needs --yes)",
    )
    down.add_argument("target", nargs="?", metavar="REVISION", help="the revision to go back to")
    down.add_argument("--revision", help="the same as REVISION")
    down.add_argument(
        "--yes", action="store_true", help="confirm dropping tables that hold rows (or every table)"
    )
    down.set_defaults(handler=_downgrade)


def _upgrade(args: argparse.Namespace) -> int:
    from stackbot.db import migrate  # alembic is slow to import: only when migrating

    settings = settings_or_bad_input()
    try:
        settings.ensure_dirs()
    except OSError as error:
        raise BadInput(unwritable(error)) from None
    _migrate(settings, lambda url: migrate.upgrade(url, args.revision))
    print(f"database at {_display(settings.effective_database_url)} is at {args.revision}")
    return 0


def _downgrade(args: argparse.Namespace) -> int:
    from stackbot.db import migrate
    from stackbot.db.downgrade_plan import DowngradePlan, describe, plan_downgrade

    revision = args.target or args.revision
    if not revision:
        raise BadInput(
            "give the revision to go back to (`stackbot db downgrade REVISION`); "
            "one that drops tables holding rows (`base`: every table) needs --yes"
        )
    settings = settings_or_bad_input()
    plans: list[DowngradePlan] = []
    _migrate(settings, lambda url: plans.append(plan_downgrade(url, revision)))
    [plan] = plans
    for line in describe(plan):
        print(line)
    if plan.needs_consent and not args.yes:
        what = (
            f"{len(plan.dropped)} table(s) holding {plan.rows_lost:,} row(s)"
            if plan.rows_lost
            else "every table"
        )
        raise BadInput(
            f"`downgrade {revision}` drops {what}: add --yes if that is what you want "
            "(back the database up first)"
        )
    _migrate(settings, lambda url: migrate.downgrade(url, revision))
    at = ", ".join(plan.after) or "base"
    print(f"database at {_display(settings.effective_database_url)} is at {at}")
    return 0


def _migrate(settings: Settings, step: Callable[[str], None]) -> None:
    """Run one Alembic step, turning what the operator must fix into :class:`BadInput`."""
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import DatabaseError, OperationalError

    url = settings.effective_database_url
    shown = _display(url)
    try:
        step(url)
    except CommandError as error:  # an unknown revision, say
        raise BadInput(one_line(f"{error}")) from None
    except OperationalError as error:  # cannot connect, cannot open or write the file
        raise BadInput(
            one_line(
                f"cannot open the database at {shown} ({error.orig}); check "
                "STACKBOT_DATABASE_URL, or that STACKBOT_DATA_DIR is a writable directory"
            )
        ) from None
    except DatabaseError as error:  # the file is not a database
        raise BadInput(
            one_line(
                f"the database at {shown} is unusable ({error.orig}); restore it from a backup "
                "or move it aside and run `stackbot db upgrade` again"
            )
        ) from None
    except OSError as error:
        raise BadInput(unwritable(error)) from None


def _display(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
