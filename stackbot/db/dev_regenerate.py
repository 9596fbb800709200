"""Development tool: rewrite the initial migration from the models.

Allowed only while no release has shipped (the project's first migration is still being
shaped). After a release, add a new revision with ``alembic revision --autogenerate`` instead.

    python -m stackbot.db.dev_regenerate
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from alembic import command

from stackbot.db.migrate import alembic_config, migrations_dir

INITIAL = "0001"


def main() -> None:
    versions = migrations_dir() / "versions"
    for path in versions.glob(f"{INITIAL}_*.py"):
        path.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'empty.db'}"
        command.revision(
            alembic_config(url), message="initial schema", autogenerate=True, rev_id=INITIAL
        )
    print(f"rewrote {next(versions.glob(f'{INITIAL}_*.py'))}")


if __name__ == "__main__":
    main()
