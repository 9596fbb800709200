"""`STACKBOT_DATABASE_URL=postgresql://…/<empty database> stackbot demo --once --workers 2`: the
demo creates the schema in an empty PostgreSQL database and passes with two worker processes,
each GPU job started once."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from stackbot.db.engine import make_engine
from tests.demo.conftest import DEMO_TIMEOUT_S, _free_port
from tests.support import postgres

# The whole demo runs inside the test: allow it the demo fixture's time, not pytest's default.
pytestmark = [pytest.mark.postgres, pytest.mark.torchrun, pytest.mark.timeout(DEMO_TIMEOUT_S + 120)]


def test_the_demo_passes_on_an_empty_postgresql_database_with_two_workers(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "work"
    with postgres.fresh_database() as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STACKBOT_")}
        env["STACKBOT_DATABASE_URL"] = url
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "stackbot", "demo", "--once", "--workers", "2"),
                *("--port", str(_free_port()), "--workdir", str(workdir)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
            start_new_session=True,  # its worker processes too: killed together below
        )
        try:
            stdout, stderr = process.communicate(timeout=DEMO_TIMEOUT_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        assert done.returncode == 0, done.stderr[-4000:]
        assert "every report is posted" in done.stderr
        assert "2 worker processes" in done.stderr and url.rpartition("/")[2] in done.stderr
        for number in (8034, 8035, 8748, 8050):
            assert f"sticky comment on #{number}" in done.stdout
        conflict = done.stdout[done.stdout.index("sticky comment on #8050") :]
        assert "sibling conflict" in conflict and "`/stackbot depends-on #8035`" in conflict
        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("select version_num from alembic_version")).scalar()
                jobs = conn.execute(text("select id, status, reused_from_job_id from jobs")).all()
                dead = conn.execute(text("select count(*) from tasks where status='dead'")).scalar()
                landings = conn.execute(text("select state, created_at from landings")).all()
                ran_since = conn.execute(
                    text(
                        "select count(*) from jobs, landings where jobs.reused_from_job_id is "
                        "null and jobs.created_at >= landings.created_at"
                    )
                ).scalar()
                twice = conn.execute(
                    text(
                        "select count(*) from (select payload::text from tasks where kind = "
                        "'process_delivery' group by payload::text having count(*) > 1) t"
                    )
                ).scalar()
        finally:
            engine.dispose()
    assert dead == 0 and twice == 0
    # the demo ended by landing the series (issue 25), with no GPU job since (issue 24)
    assert [state for state, _at in landings] == ["landed"]
    assert "every report is posted and the series landed" in done.stderr
    assert "✅ **Landed** on `main`: #8034 → #8035 → #8748." in done.stdout
    assert "GPU jobs since `/stackbot land`: 0" in done.stdout
    assert ran_since == 0
    assert jobs and all(status in ("passed", "failed") for _id, status, _r in jobs), jobs
    jobs_dir = workdir / "stackbot" / "jobs"
    out_dirs = sorted(p.name for p in jobs_dir.iterdir())
    assert not [d for d in out_dirs if re.search(r"\.r\d+$", d)], out_dirs
    assert set(out_dirs) == {f"job-{i}" for i, _s, reused in jobs if reused is None}
    assert all((jobs_dir / d / "result.json").is_file() for d in out_dirs)
