"""The mirror lock, across processes: a repack never runs while an integration uses the mirror,
and an integration waits only briefly for a repack, then is retried later (exit 2 by hand)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine

from stackbot.adapters.git_maintenance import MirrorBusy, shared_use
from stackbot.config import Settings
from stackbot.services.maintenance import run_maintenance
from tests.maintenance.test_maintenance_round import NOW, World
from tests.support.signing import REPO_ROOT

HOLD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from stackbot.adapters.git_maintenance import exclusive_use, shared_use\n"
    "git_dir = Path(sys.argv[2])\n"
    "lock = shared_use(git_dir, wait_s=5) if sys.argv[1] == 'shared' else exclusive_use(git_dir)\n"
    "with lock as got:\n"
    "    assert got is not False\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


class Holder:
    """Another process holding the mirror's lock (an integration: shared; a repack: exclusive)
    until :meth:`release`."""

    def __init__(self, mode: str, git_dir: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD, mode, str(git_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "held"

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


def test_no_repack_while_an_integration_uses_the_mirror(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    world.run("pr-1", [1], days_ago=40, target=1)
    refs, loose = world.refs(), world.loose_objects()
    integration = Holder("shared", world.mirror.git_dir)
    try:
        lines: list[str] = []
        report = run_maintenance(engine, settings, now=NOW, say=lines.append)
        assert report.summary.get("mirrors_busy") == 1 and "mirrors_repacked" not in report.summary
        assert world.refs() == refs and world.loose_objects() == loose
        assert any("in use by an integration" in line for line in lines)
    finally:
        integration.release()
    report = run_maintenance(engine, settings, now=NOW)
    assert report.summary["mirrors_repacked"] == 1
    assert not world.refs()


def test_an_integration_waits_for_a_repack_then_goes_on(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    repack = Holder("exclusive", world.mirror.git_dir)
    try:
        with (
            pytest.raises(MirrorBusy, match="being repacked"),
            shared_use(world.mirror.git_dir, wait_s=0.2),
        ):
            pass
    finally:
        repack.release()
    with shared_use(world.mirror.git_dir, wait_s=0.2):
        pass


def test_stackbot_integrate_during_a_repack_exits_2_with_one_line(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    repack = Holder("exclusive", world.mirror.git_dir)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "STACKBOT_DATA_DIR": str(settings.data_dir),
        "STACKBOT_MAINTENANCE__LOCK_WAIT_S": "0.2",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "stackbot", "integrate", "--repo", str(world.work.path),
             "--base", "main", "--pr", "1=refs/pull/1/head"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
    finally:
        repack.release()
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "being repacked" in last and "Traceback" not in done.stderr
