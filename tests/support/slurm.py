"""A real Slurm for the tests: two node daemons (n1, n2) on this host, 8 fake GPUs each.

Follows ``shared/SLURM.md``: Debian's slurm-wlm with munge, gres devices that are symlinks to
/dev/null, jobcomp/filetxt so ``sacct -c`` works, sub-second scheduling. Everything lives under
``/tmp/stackbot-slurm`` (or ``STACKBOT_TEST_SLURM_DIR``); the config is also installed as
``/etc/slurm/slurm.conf`` when no other Slurm config is there, so plain ``sinfo`` works.

``ensure_cluster()`` installs Slurm if it is missing (apt-get, as root), starts munged,
slurmctld and the two slurmd daemons unless they already run, waits until both nodes are idle,
and says whether it started anything (so a test session stops only what it started). It fails
with a message naming what to fix. From a shell: ``python -m tests.support.slurm start|stop|status``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SLURM_DIR = Path(os.environ.get("STACKBOT_TEST_SLURM_DIR", "/tmp/stackbot-slurm"))
NODES = ("n1", "n2")
GPUS_PER_NODE = 8
CPUS_PER_NODE = 2
NODE_PORTS = {"n1": 17001, "n2": 17002}
MARKER = "# written by stackbot tests/support/slurm.py"
ETC_CONF = Path("/etc/slurm/slurm.conf")


class SlurmUnavailable(RuntimeError):
    """Slurm could not be installed or started; the message says what to do."""


def conf_path() -> Path:
    return SLURM_DIR / "etc" / "slurm.conf"


def slurm_conf() -> str:
    d = SLURM_DIR
    lines = [
        MARKER,
        "ClusterName=stackbot-ci",
        "SlurmctldHost=localhost",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "MpiDefault=none",
        "GresTypes=gpu",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={d}/log/jobcomp.log",
        "JobAcctGatherType=jobacct_gather/none",
        "ReturnToService=2",
        # Short waits between SIGTERM and SIGKILL keep cancel and time-limit tests quick.
        "KillWait=5",
        "MinJobAge=300",
        "InactiveLimit=0",
    ]
    for node in NODES:
        lines.append(
            f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={NODE_PORTS[node]} "
            f"CPUs={CPUS_PER_NODE} RealMemory=10000 Gres=gpu:{GPUS_PER_NODE}"
        )
    lines.append(
        f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP"
    )
    return "\n".join(lines) + "\n"


def gres_conf() -> str:
    last = GPUS_PER_NODE - 1
    return f"{MARKER}\nNodeName=n[1-{len(NODES)}] Name=gpu File={SLURM_DIR}/dev/nvidia[0-{last}]\n"


def ensure_installed() -> None:
    if shutil.which("slurmctld") and shutil.which("munged"):
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable(
            "Slurm is not installed; as root run `apt-get install -y slurm-wlm munge`"
        )
    steps = (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"],
    )
    for argv in steps:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
        if done.returncode != 0:
            raise SlurmUnavailable(f"`{' '.join(argv)}` failed: {done.stderr.strip()[-2000:]}")


def write_config() -> None:
    for sub in ("etc", "state", "run", "log", "dev", *(f"spool/{n}" for n in NODES)):
        (SLURM_DIR / sub).mkdir(parents=True, exist_ok=True)
    for index in range(GPUS_PER_NODE):
        device = SLURM_DIR / "dev" / f"nvidia{index}"
        if not device.is_symlink():
            device.symlink_to("/dev/null")
    conf_path().write_text(slurm_conf())
    (SLURM_DIR / "etc" / "gres.conf").write_text(gres_conf())
    os.environ["SLURM_CONF"] = str(conf_path())
    # Let plain `sinfo` and `sbatch` work too, unless the host has a Slurm config of its own.
    if not ETC_CONF.exists() or MARKER in ETC_CONF.read_text(errors="replace"):
        try:
            ETC_CONF.parent.mkdir(parents=True, exist_ok=True)
            ETC_CONF.write_text(slurm_conf())
            ETC_CONF.with_name("gres.conf").write_text(gres_conf())
        except OSError:
            pass  # not root: SLURM_CONF is enough for the tests


def _pid_alive(pid_file: Path) -> int | None:
    """The daemon's pid if it runs; a pid file left behind, or whose pid now belongs to
    another program, counts as not running."""
    try:
        pid = int(pid_file.read_text().split()[0])
        command = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError, IndexError):
        return None
    daemon = "munged" if pid_file.name.startswith("munged") else pid_file.name.split("-")[0]
    return pid if command == daemon.removesuffix(".pid") else None


def _munge_works() -> bool:
    if not shutil.which("munge"):
        return False
    encode = subprocess.run(["munge", "-n"], capture_output=True)
    if encode.returncode != 0:
        return False
    decode = subprocess.run(["unmunge"], input=encode.stdout, capture_output=True)
    return decode.returncode == 0


def _daemons() -> dict[str, Path]:
    run = SLURM_DIR / "run"
    return {
        "munged": Path("/run/munge/munged.pid"),
        "slurmctld": run / "slurmctld.pid",
        **{n: run / f"slurmd-{n}.pid" for n in NODES},
    }


def _start(argv: list[str], what: str) -> None:
    done = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, "SLURM_CONF": str(conf_path())}
    )
    if done.returncode != 0:
        raise SlurmUnavailable(
            f"{what} did not start: {done.stderr.strip() or done.stdout.strip()}"
        )


def start() -> list[str]:
    """Start what is not running; returns the names of the daemons this call started."""
    ensure_installed()
    write_config()
    started: list[str] = []
    if not _munge_works():
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        _start(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], "munged")
        started.append("munged")
    pids = _daemons()
    if _pid_alive(pids["slurmctld"]) is None:
        _forget_old_jobs()
        _start(["slurmctld", "-i", "-f", str(conf_path())], "slurmctld")
        started.append("slurmctld")
    for node in NODES:
        if _pid_alive(pids[node]) is None:
            _start(["slurmd", "-N", node, "-f", str(conf_path())], f"slurmd -N {node}")
            started.append(node)
    wait_idle()
    (SLURM_DIR / "run" / "started.txt").write_text("\n".join(started) + "\n")
    return started


def _forget_old_jobs() -> None:
    """A fresh controller starts with no jobs: an old run's jobs would otherwise be requeued,
    and job ids restart, so the old completion log (``sacct -c``) is moved aside."""
    for entry in (SLURM_DIR / "state").iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    jobcomp = SLURM_DIR / "log" / "jobcomp.log"
    if jobcomp.exists():
        jobcomp.rename(jobcomp.with_name(f"jobcomp.{int(time.time())}.log"))


def node_states() -> dict[str, str]:
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %t"],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(conf_path())},
    )
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_idle(timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = node_states()
        if all(states.get(n, "").rstrip("*") in ("idle", "mix", "alloc") for n in NODES):
            return
        for node, state in states.items():
            if state.startswith(("drain", "down")):
                _resume(node)
        time.sleep(0.3)
    log = SLURM_DIR / "log" / "slurmctld.log"
    tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
    raise SlurmUnavailable(
        f"Slurm nodes are not idle after {timeout_s:.0f}s (sinfo: {node_states()}); "
        f"see {SLURM_DIR}/log. slurmctld.log ends:\n" + "\n".join(tail)
    )


def _resume(node: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"NodeName={node}", "State=RESUME"],
        capture_output=True,
        env={**os.environ, "SLURM_CONF": str(conf_path())},
    )


def stop(names: list[str] | None = None) -> None:
    """Stop the named daemons (default: all of this cluster's, munged excepted)."""
    wanted = names if names is not None else ["slurmctld", *NODES]
    for name, pid_file in _daemons().items():
        pid = _pid_alive(pid_file)
        if name in wanted and pid is not None:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        _pid_alive(p) for n, p in _daemons().items() if n in wanted
    ):
        time.sleep(0.1)


def status() -> str:
    running = {name: _pid_alive(pid_file) for name, pid_file in _daemons().items()}
    return f"config {conf_path()}; daemons {running}; nodes {node_states()}"


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "status"
    try:
        if command == "start":
            started = start()
            print(f"Slurm is up ({', '.join(started) or 'already running'}); {status()}")
            print(f"export SLURM_CONF={conf_path()}")
        elif command == "stop":
            stop()
            print(f"stopped; {status()}")
        elif command == "status":
            print(status())
        else:
            print("usage: python -m tests.support.slurm start|stop|status", file=sys.stderr)
            return 2
    except SlurmUnavailable as exc:
        print(f"slurm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[None]:
    """A running cluster for the session; stops at the end only what this session started."""
    try:
        started = start()
    except SlurmUnavailable as exc:
        pytest.fail(f"a real Slurm is needed: {exc}", pytrace=False)
    try:
        yield
    finally:
        stop(started)
