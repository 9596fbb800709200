"""Small pytest files written into a test's tmp dir, to make the runner see passes, failures,
crashed ranks and hangs on purpose. They import no torch, so their ranks start quickly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from gpu_jobs.spec import JobResult

SUITES = {
    "passing": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    "failing": (
        "import os\n\n\ndef test_ok():\n    pass\n\n\n"
        "def test_rank_one_fails():\n"
        "    assert os.environ['RANK'] != '1', 'rank 1 fails on purpose'\n"
    ),
    "crash": (
        "import os\n\n\ndef test_crash():\n    if os.environ['RANK'] == '2':\n        os._exit(3)\n"
    ),
    # Rank 2 is killed from outside (as the OOM killer would) once every rank reported a passed
    # test; the others are still in their next test then (torchrun stops them).
    "lost": (
        "import os, signal, time\nfrom pathlib import Path\n\n\n"
        "def test_before():\n    pass\n\n\n"
        "def test_rank_two_is_killed():\n"
        "    if os.environ['RANK'] == '2':\n"
        "        progress = Path(os.environ['GPU_JOBS_PHASE_DIR']) / 'progress'\n"
        "        world = int(os.environ['WORLD_SIZE'])\n"
        "        deadline = time.time() + 120\n"
        "        while len(list(progress.glob('rank-*.jsonl'))) < world:\n"
        "            assert time.time() < deadline\n"
        "            time.sleep(0.1)\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    time.sleep(60)\n\n\n"
        "def test_after():\n    pass\n"
    ),
    # Rank 2's interpreter crashes in the tree's code (faulthandler reports it).
    "segfault": (
        "import os, signal\n\n\ndef test_before():\n    pass\n\n\n"
        "def test_rank_two_crashes():\n    if os.environ['RANK'] == '2':\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
    ),
    "hang_all": "import time\n\n\ndef test_hang():\n    time.sleep(900)\n",
    "hang_one": (
        "import os, time\n\n\ndef test_hang_on_rank_one():\n"
        "    if os.environ['RANK'] == '1':\n        time.sleep(900)\n"
    ),
}


def write_suites(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in SUITES.items():
        (root / f"test_{name}.py").write_text(text)
    return root


def marked_env() -> dict[str, str]:
    """An env entry every rank inherits, so a test can look for leftover processes."""
    return {"STACKBOT_TEST_TREE_MARK": uuid.uuid4().hex}


def processes_with(env: dict[str, str]) -> list[int]:
    needles = [f"{k}={v}".encode() for k, v in env.items()]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(needle in environ for needle in needles):
            found.append(int(name))
    return found


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # The tests run in tmp_path: put this checkout first, or ``-m gpu_jobs`` would import the
    # installed (editable) copy, which may be another worktree's.
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "gpu_jobs", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def spec_file(path: Path, **fields: object) -> Path:
    body: dict[str, object] = {"schema_version": "1.0", "test_set": "throwaway", "shape": "1x4"}
    body.update(fields)
    path.write_text(json.dumps(body))
    return path


def result_of(out_dir: Path) -> JobResult:
    return JobResult.from_json((out_dir / "result.json").read_text())
