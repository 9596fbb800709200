"""Soak: the production path under steady webhook load, worker crashes and a database restart.

Starts a PostgreSQL server of its own (``initdb`` in a temporary directory, run as user
``postgres``: restarting it disturbs nobody else's database), the GitHub stand-in, ``stackbot
serve`` and two ``stackbot worker`` processes (local executor: the GPU jobs are real torchrun
runs, CPU ranks with gloo on a machine without GPUs). Then, for ``--minutes``:

- a load generator (its own process, loopback only) sends signed ``push`` deliveries at a
  bounded ``--rate`` (open loop: each request's latency counts from its scheduled time), each a
  distinct delivery id, to branches no pull request targets (each is recorded, queued, claimed
  by a worker and processed to the end: "a push no pull request targets"); when the server
  answers slower than the rate allows (``--connections`` requests in flight), fewer are sent
  and the achieved rate is reported;
- the demo's scenario (``stackbot.demo.scenario``: a Megatron-like repository, the stacked
  series #8034 → #8035 → #8748, a conflicting PR, a vetter's approval) is played on the
  stand-in, so a series is integrated and its GPU jobs run while the load goes on;
- every ``--kill-every`` seconds one worker (alternately) is SIGKILLed and started again;
- once, half-way, PostgreSQL is restarted (``pg_ctl restart -m fast``).

Afterwards it waits until the queue has drained and every report is posted, then checks and
prints: every delivery answered 202 (the generator's and the stand-in's) was recorded once and
processed once (one ``process_delivery`` task, done); no GPU job started twice (one ``job-N``
out_dir per started job, no ``.rN``, one ``launch.json`` each); no comment posted twice and no
check run created twice; no dead task. It reports p50/p99 latency of the accepted deliveries,
the answers other than 202 while PostgreSQL was restarting (and whether each 503 carried a
Retry-After), and the drain time. Then (``--commands N``, 20 by default; with its own PostgreSQL
only) the commands phase of ``soak_commands.py``: PostgreSQL stopped while a vetter posts N
commands (each delivery answered 503), started again, one reconcile round; every command must be
acted on exactly once. Exit status 0 when every check passed.

    python benchmarks/soak.py                      # 10 minutes at 200/s
    python benchmarks/soak.py --minutes 2          # a short run
    python benchmarks/soak.py --pg-admin-url postgresql://postgres@127.0.0.1:5432/postgres \\
        --pg-restart 'pg_ctlcluster 15 main restart'   # an existing server instead

Results are also written as JSON to ``benchmarks/results/soak-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import psycopg  # noqa: E402
import soak_commands  # noqa: E402  (benchmarks/, beside this script)
from sqlalchemy import text  # noqa: E402

from stackbot.db.engine import make_engine  # noqa: E402
from stackbot.demo import scenario  # noqa: E402
from stackbot.demo.runner import DemoStack, wait_until_reported  # noqa: E402
from tests.support.github_contract import github_dir  # noqa: E402

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
PUSH_EXAMPLE = github_dir() / "examples" / "push" / "event.json"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
FINISHED_JOBS = ("passed", "failed", "error", "timeout", "infra", "cancelled")

_started = time.monotonic()


def say(message: str) -> None:
    print(f"[soak {time.monotonic() - _started:6.1f}s] {message}", flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- PostgreSQL ---------------------------------------------------------------------------------


class PrivatePostgres:
    """A PostgreSQL server in a temporary directory, on its own port."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="stackbot-soak-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c max_connections=200 -c fsync=on"
        )
        self._ctl = ["-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options]

    def _run(self, tool: str, *argv: str) -> None:
        command = [str(self.bin_dir / tool), *argv]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(argv)} failed: {done.stderr or done.stdout}")

    def start(self) -> None:
        if not (self.bin_dir / "initdb").exists():
            raise SystemExit(f"no initdb in {self.bin_dir}: pass --pg-bin or --pg-admin-url")
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", *self._ctl, "-w", "start")

    def halt(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        self._run("pg_ctl", *self._ctl, "-w", "start")

    def restart(self) -> None:
        self._run("pg_ctl", *self._ctl, "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def create_database(admin_url: str) -> str:
    name = f"stackbot_soak_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin_url.rpartition('/')[0]}/{name}"


# -- the load generator (its own process) -------------------------------------------------------


def _push_body(template: dict[str, Any], n: int) -> bytes:
    template["ref"] = f"refs/heads/soak/load-{n}"
    template["after"] = hashlib.sha1(str(n).encode()).hexdigest()
    return json.dumps(template).encode()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length, retry_after = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "retry-after":
            retry_after = True
    await reader.readexactly(length)
    return status, retry_after


async def _generate(
    port: int,
    secret: str,
    rate: float,
    seconds: float,
    connections: int,
    out: Path,
    counters: Any,
    t0: float,
) -> None:
    template = json.loads(PUSH_EXAMPLE.read_bytes())
    template.update(created=True, deleted=False, forced=False, base_ref=None)
    template["repository"]["full_name"] = scenario.REPO
    template["repository"]["name"] = scenario.REPO.split("/")[1]
    template["repository"]["owner"]["login"] = scenario.REPO.split("/")[0]
    total = int(rate * seconds)
    next_index = 0
    records: list[tuple[float, str, int, float, bool]] = []
    started = time.time()

    async def connection() -> None:
        nonlocal next_index
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while next_index < total and time.time() < started + seconds:
            index = next_index
            next_index += 1
            scheduled = started + index / rate
            delay = scheduled - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            body = _push_body(template, index)
            guid = str(uuid.uuid4())
            signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            request = (
                f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"User-Agent: GitHub-Hookshot/soak\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-GitHub-Event: push\r\n"
                f"X-GitHub-Delivery: {guid}\r\nX-Hub-Signature-256: {signature}\r\n\r\n"
            ).encode() + body
            retry_after = False
            try:
                if streams is None:
                    streams = await asyncio.open_connection("127.0.0.1", port)
                streams[1].write(request)
                status, retry_after = await asyncio.wait_for(_read_answer(streams[0]), 60)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
                status = 0  # no answer: connection refused, reset or timed out
                if streams is not None:
                    streams[1].close()
                streams = None
            latency = time.time() - scheduled
            records.append((scheduled - t0, guid, status, latency, retry_after))
            with counters.get_lock():
                counters[0] += 1
                counters[1 if status == 202 else 2 if status == 503 else 3] += 1
        if streams is not None:
            streams[1].close()

    await asyncio.gather(*(connection() for _ in range(connections)))
    out.write_text("\n".join(json.dumps(r) for r in records))


def generate(*args: Any) -> None:
    asyncio.run(_generate(*args))


# -- the run ------------------------------------------------------------------------------------


@dataclass
class Chaos:
    kills: list[tuple[float, int]] = field(default_factory=list)  # (time, worker)
    pg_restart: tuple[float, float] | None = None  # (began, ended), seconds since the start


def _queue_line(engine: Any) -> str:
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("select status, count(*) from tasks group by status")
            ).fetchall()
            jobs = conn.execute(text("select status from jobs")).fetchall()
    except Exception as error:  # the database is restarting
        return f"database unavailable ({type(error).__name__})"
    tasks = dict(rows)
    done = sum(1 for (status,) in jobs if status in FINISHED_JOBS)
    return (
        f"tasks pending {tasks.get('pending', 0)}, running {tasks.get('running', 0)}, "
        f"done {tasks.get('done', 0)}, dead {tasks.get('dead', 0)} | jobs {done}/{len(jobs)} "
        "finished"
    )


def _play(stack: DemoStack, problems: list[str], played: threading.Event) -> None:
    try:
        play = scenario.DemoScenario(stack.github.control, lambda message: None)
        play.setup()
        play.branch_before_main_moves()
        play.merge_superseding_change()
        heads = play.open_series()
        play.vet(heads)
        say("scenario played: the series is opened and vetted")
    except Exception:
        problems.append("the scenario failed:\n" + traceback.format_exc())
    finally:
        played.set()


def run(args: argparse.Namespace) -> int:
    seconds = args.minutes * 60
    restart_at = seconds / 2 + 20
    result: dict[str, Any] = {
        "minutes": args.minutes,
        "rate": args.rate,
        "connections": args.connections,
        "kill_every_s": args.kill_every,
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
    }
    with ExitStack() as cleanup:
        if args.pg_admin_url:
            admin_url = args.pg_admin_url
            restart_pg: Callable[[], None] = lambda: subprocess.run(  # noqa: E731
                args.pg_restart, shell=True, check=True
            )
        else:
            server = PrivatePostgres(Path(args.pg_bin))
            server.start()
            cleanup.callback(server.stop)
            admin_url, restart_pg = server.admin_url, server.restart
            say(f"PostgreSQL of its own on port {server.port} ({server.root})")
        database_url = create_database(admin_url)
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="stackbot-soak-"))
        if workdir.exists():
            shutil.rmtree(workdir)
        workdir.mkdir(parents=True)
        stack = DemoStack(
            workdir / "stack",
            _free_port(),
            say,
            {"database_url": database_url},
            workers=2,
            serve_process=True,
        )
        settings = stack.start()
        cleanup.callback(stack.stop)
        assert settings.webhook_secret is not None
        secret = settings.webhook_secret.get_secret_value()
        engine = make_engine(database_url)
        cleanup.callback(engine.dispose)

        counters = mp.Array("l", 4)  # sent, 202, 503, other (0: no answer)
        records_path = workdir / "load.jsonl"
        t0 = time.time()
        generator = mp.Process(
            target=generate,
            args=(
                stack.port,
                secret,
                args.rate,
                seconds,
                args.connections,
                records_path,
                counters,
                t0,
            ),
            name="soak-load",
            daemon=True,
        )
        generator.start()
        say(f"load: {args.rate:g} signed deliveries/s for {args.minutes:g} min → {stack.url}")
        problems: list[str] = []
        played = threading.Event()
        threading.Thread(target=_play, args=(stack, problems, played), daemon=True).start()

        chaos = Chaos()
        next_kill, next_progress, victim = float(args.kill_every), 10.0, 0
        while generator.is_alive():
            now = time.time() - t0
            if now >= next_kill and now < seconds:
                process = stack.worker_processes[victim]
                process.send_signal(signal.SIGKILL)
                process.wait()
                stack.worker_processes[victim] = stack.start_worker(victim)
                chaos.kills.append((round(now, 1), victim))
                say(f"SIGKILLed worker-{victim} (pid {process.pid}) and started it again")
                victim, next_kill = 1 - victim, next_kill + args.kill_every
            if chaos.pg_restart is None and now >= restart_at and played.is_set():
                say("restarting PostgreSQL")
                began = time.time() - t0
                restart_pg()
                chaos.pg_restart = (round(began, 2), round(time.time() - t0, 2))
                say(f"PostgreSQL restarted ({chaos.pg_restart[1] - began:.1f} s)")
            if now >= next_progress:
                sent, ok, unavailable, other = counters[:]
                say(
                    f"sent {sent} (202 {ok}, 503 {unavailable}, other {other}) | "
                    f"{_queue_line(engine)}"
                )
                next_progress += 10
            time.sleep(0.2)
        generator.join()
        if chaos.pg_restart is None:
            problems.append("PostgreSQL was never restarted (the scenario did not finish)")
        load_s = time.time() - t0

        say("load finished; waiting until the queue drains and every report is posted")
        drained_at = time.monotonic()
        reported = wait_until_reported(stack, settings, timeout_s=args.drain_timeout, say=say)
        drain_s = time.monotonic() - drained_at
        if not reported.ok:
            problems.append(f"the pipeline did not finish: {reported.reason}")
        records = [json.loads(line) for line in records_path.read_text().splitlines() if line]
        result.update(
            load_s=round(load_s, 1),
            drain_s=round(drain_s, 1),
            chaos={"kills": chaos.kills, "pg_restart": chaos.pg_restart},
        )
        result.update(figures(records, chaos))
        result["checks"] = check(stack, engine, settings.jobs_dir, records, problems)
        if args.commands and not args.pg_admin_url:
            outage = soak_commands.commands_outage(
                stack.github.control,
                engine,
                stop_db=server.halt,
                start_db=server.resume,
                count=args.commands,
                say=say,
            )
            result["commands_outage"] = outage
            problems.extend(soak_commands.problems_of(outage))
        stack.stop()
    result["problems"] = problems
    report(result)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"soak-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    say(f"results in {path}")
    return 0 if not problems else 1


def figures(records: list[list[Any]], chaos: Chaos) -> dict[str, Any]:
    accepted = sorted(r[3] for r in records if r[2] == 202)

    def percentile(p: float) -> float:
        return round(accepted[min(len(accepted) - 1, int(p * len(accepted)))] * 1000, 1)

    statuses = Counter(str(r[2]) for r in records)
    during: Counter[str] = Counter()
    retry_after = 0
    if chaos.pg_restart is not None:
        began, ended = chaos.pg_restart
        for at, _guid, status, _latency, has_retry in records:
            if began - 1 <= at <= ended + 10 and status != 202:  # and the reconnects after
                during[str(status)] += 1
                retry_after += status == 503 and has_retry
    return {
        "sent": len(records),
        "achieved_rate": round(len(records) / max(1.0, max((r[0] for r in records), default=1)), 1),
        "statuses": dict(statuses),
        "p50_ms": percentile(0.50) if accepted else None,
        "p99_ms": percentile(0.99) if accepted else None,
        "max_ms": round(accepted[-1] * 1000, 1) if accepted else None,
        "non_202_during_pg_restart": dict(during),
        "503_with_retry_after_during_pg_restart": retry_after,
    }


def check(
    stack: DemoStack, engine: Any, jobs_dir: Path, records: list[list[Any]], problems: list[str]
) -> dict[str, Any]:
    with engine.connect() as conn:
        rows = conn.execute(text("select id, delivery_id, status from webhook_deliveries")).all()
        tasks = conn.execute(
            text("select payload, status, attempts from tasks where kind = 'process_delivery'")
        ).all()
        jobs = conn.execute(text("select id, status, reused_from_job_id from jobs")).all()
        dead = conn.execute(text("select kind, last_error from tasks where status = 'dead'")).all()
    by_guid = {guid: (row_id, status) for row_id, guid, status in rows}
    per_row = Counter(
        json.loads(p)["delivery"] if isinstance(p, str) else p["delivery"] for p, *_ in tasks
    )
    task_status = Counter(status for _p, status, _a in tasks)
    accepted = [r[1] for r in records if r[2] == 202]
    accepted += [d.guid for d in stack.github.control.deliveries() if d.status_code == 202]
    lost = [g for g in accepted if g not in by_guid]
    unprocessed = [g for g in accepted if g in by_guid and by_guid[g][1] in ("recorded", "failed")]
    twice = [row for row, n in per_row.items() if n > 1]
    if lost:
        problems.append(f"{len(lost)} deliveries answered 202 were not recorded")
    if unprocessed:
        problems.append(f"{len(unprocessed)} deliveries answered 202 were not processed")
    if twice:
        problems.append(f"{len(twice)} deliveries were given more than one task")
    if task_status.keys() - {"done"}:
        problems.append(f"process_delivery tasks not done: {dict(task_status)}")
    if dead:
        problems.append(f"{len(dead)} dead task(s): {[kind for kind, _ in dead]}")

    started = {f"job-{job_id}" for job_id, _s, reused in jobs if reused is None}
    out_dirs = sorted(p.name for p in jobs_dir.iterdir() if p.is_dir()) if jobs_dir.is_dir() else []
    restarts = [d for d in out_dirs if re.search(r"\.r\d+$", d)]
    launches = {d: len(list((jobs_dir / d).glob("launch.json"))) for d in out_dirs}
    if restarts or set(out_dirs) != started or any(n != 1 for n in launches.values()):
        problems.append(f"GPU jobs started twice or not once: {out_dirs} vs {sorted(started)}")

    control = stack.github.control
    duplicated: list[str] = []
    for number in sorted(control.repo(scenario.REPO).pulls):
        bodies = [
            c.body for c in control.comments(scenario.REPO, number) if c.author.endswith("[bot]")
        ]
        if len(bodies) != len(set(bodies)) or sum("stackbot:report" in b for b in bodies) > 1:
            duplicated.append(f"#{number} comments")
        head = control.pull(scenario.REPO, number).head_sha
        names = Counter(r.name for r in control.check_runs(scenario.REPO, head))
        if any(n > 1 for n in names.values()):
            duplicated.append(f"#{number} check runs")
    if duplicated:
        problems.append(f"written twice: {duplicated}")
    return {
        "deliveries_accepted": len(accepted),
        "deliveries_recorded": len(rows),
        "accepted_but_lost": len(lost),
        "accepted_but_unprocessed": len(unprocessed),
        "deliveries_with_two_tasks": len(twice),
        "process_delivery_tasks": dict(task_status),
        "process_delivery_reclaimed": sum(1 for _p, _s, attempts in tasks if attempts > 1),
        "jobs": len(jobs),
        "jobs_started": len(started),
        "job_out_dirs": len(out_dirs),
        "job_restarts": restarts,
        "dead_tasks": len(dead),
        "written_twice": duplicated,
    }


def report(result: dict[str, Any]) -> None:
    checks = result.get("checks", {})
    print("\n==== soak", flush=True)
    print(
        f"{result['minutes']:g} min at {result['rate']:g}/s on {result['cpus']} CPUs "
        f"(load average at start {result['load_average_at_start'][0]:.1f})"
    )
    print(
        f"sent {result.get('sent')} (achieved {result.get('achieved_rate')}/s), "
        f"answers {result.get('statuses')}"
    )
    print(
        f"accepted deliveries: p50 {result.get('p50_ms')} ms, p99 {result.get('p99_ms')} ms, "
        f"max {result.get('max_ms')} ms"
    )
    chaos = result.get("chaos", {})
    print(
        f"workers SIGKILLed: {len(chaos.get('kills', []))}; PG restart: {chaos.get('pg_restart')}"
    )
    print(
        f"answers other than 202 during the PG restart: {result.get('non_202_during_pg_restart')}"
        f" (503s with Retry-After: {result.get('503_with_retry_after_during_pg_restart')})"
    )
    print(f"drain after the load: {result.get('drain_s')} s")
    for name, value in checks.items():
        print(f"  {name}: {value}")
    problems = result.get("problems", [])
    print("ALL CHECKS PASSED" if not problems else "PROBLEMS:\n- " + "\n- ".join(problems))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills")
    parser.add_argument("--drain-timeout", type=float, default=1800.0)
    parser.add_argument(
        "--commands",
        type=int,
        default=20,
        help="commands posted while PostgreSQL is down, after the load (0: no such phase)",
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--pg-bin", default=str(PG_BIN), help="PostgreSQL's initdb and pg_ctl")
    parser.add_argument("--pg-admin-url", default=None, help="use this server instead")
    parser.add_argument("--pg-restart", default=None, help="shell command restarting it")
    args = parser.parse_args()
    if bool(args.pg_admin_url) != bool(args.pg_restart):
        parser.error("--pg-admin-url and --pg-restart go together")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
