"""``stackbot db upgrade`` / ``downgrade``: the only way the schema is created."""

from __future__ import annotations

import argparse
from typing import Any

from stackbot.config import load_settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="database schema migrations (Alembic)")
    db_sub = parser.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = db_sub.add_parser("upgrade", help="migrate the database to the newest schema")
    up.add_argument("--revision", default="head")
    up.set_defaults(handler=_upgrade)
    down = db_sub.add_parser("downgrade", help="migrate the database back to a revision")
    down.add_argument("--revision", default="base")
    down.set_defaults(handler=_downgrade)


def _upgrade(args: argparse.Namespace) -> int:
    from stackbot.db import migrate  # alembic is slow to import: only when migrating

    settings = load_settings()
    settings.ensure_dirs()
    migrate.upgrade(settings.effective_database_url, args.revision)
    print(f"database at {_display(settings.effective_database_url)} is at {args.revision}")
    return 0


def _downgrade(args: argparse.Namespace) -> int:
    from stackbot.db import migrate

    settings = load_settings()
    migrate.downgrade(settings.effective_database_url, args.revision)
    print(f"database at {_display(settings.effective_database_url)} is at {args.revision}")
    return 0


def _display(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
