"""A real PostgreSQL for the tests: started if it is not running, one fresh database per test.

The server is the machine's own (Debian's postgresql, trust auth on 127.0.0.1:5432). Set
STACKBOT_TEST_PG_ADMIN_URL to use another server. Nothing is mocked: if the server cannot be
reached or started, the tests that need it fail with a message saying what to do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ADMIN_URL = os.environ.get(
    "STACKBOT_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _reachable() -> bool:
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def ensure_server() -> None:
    if _reachable():
        return
    if shutil.which("pg_ctlcluster") and os.path.isdir("/etc/postgresql"):
        for version in sorted(os.listdir("/etc/postgresql")):
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
                check=False,
                capture_output=True,
            )
        for _ in range(50):
            if _reachable():
                return
            time.sleep(0.2)
    raise RuntimeError(
        f"PostgreSQL is not reachable at {ADMIN_URL} and could not be started. Start it "
        "(`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`) or point "
        "STACKBOT_TEST_PG_ADMIN_URL at a server where this user may CREATE DATABASE."
    )


@contextmanager
def fresh_database(prefix: str = "stackbot_test") -> Iterator[str]:
    """Create an empty database, yield its URL, drop it afterwards."""
    ensure_server()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def empty_database(backend: str, tmp_path: Path, name: str) -> Iterator[str]:
    """An empty database's URL: a SQLite file ``name`` in ``tmp_path``, or (``postgresql``) a
    fresh PostgreSQL database, dropped afterwards. For a test that needs several databases of
    one backend (the ``database_url`` fixture gives one per test)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / f'{name}.db'}"
        return
    with fresh_database() as url:
        yield url
