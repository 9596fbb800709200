"""Webhook intake under load: signed deliveries against a real ``stackbot serve`` process.

For each database (SQLite file, then a fresh PostgreSQL database) this starts ``stackbot serve``
as its own process and, from this process, sends N signed ``pull_request`` deliveries (GitHub's
real example body, a distinct PR number and delivery id each) over C keep-alive connections
with a raw asyncio HTTP/1.1 client:

1. baseline: N ``GET /healthz`` at the same rate and concurrency (a trivial endpoint with one
   ``SELECT 1``), so the load generator and the HTTP stack have a measured floor;
2. paced: N deliveries at ``--rate`` per second (open loop: latency counts from each request's
   scheduled time, so a stalled server cannot hide its queueing);
3. flat out: N more deliveries as fast as C connections allow (throughput).

It reports p50/p99 acknowledgement latency, deliveries per second, the ratio to the baseline,
the load generator's own CPU use, and counts proving nothing was lost (sent, 202s, delivery rows
in the database, process_delivery tasks queued).

    python benchmarks/bench_webhooks.py                 # both databases, N=2000, C=8, 200/s
    python benchmarks/bench_webhooks.py --db sqlite --n 500
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import text  # noqa: E402

from stackbot.db import migrate  # noqa: E402
from stackbot.db.engine import make_engine  # noqa: E402
from tests.support.github_contract import github_dir  # noqa: E402

EXAMPLE = github_dir() / "examples" / "pull_request" / "synchronize.json"
SECRET = "bench-webhook-secret-0123456789abcdef"
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"


@dataclass
class Phase:
    name: str
    sent: int
    statuses: dict[str, int]
    seconds: float
    per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    generator_cpu: float  # the load generator's CPU seconds per wall second (1.0 = one core)
    server_cpu_ms: float  # the server process's CPU time per request


# -- requests -----------------------------------------------------------------------------------


def deliveries(n: int, port: int, first_number: int) -> list[bytes]:
    """N signed pull_request deliveries, each a distinct PR and delivery id, ready to send."""
    if not EXAMPLE.is_file():
        raise SystemExit(f"the example delivery is missing: {EXAMPLE}")
    payload = json.loads(EXAMPLE.read_bytes())
    requests = []
    for i in range(n):
        payload["number"] = payload["pull_request"]["number"] = first_number + i
        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        head = (
            f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"User-Agent: GitHub-Hookshot/bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-GitHub-Event: pull_request\r\n"
            f"X-GitHub-Delivery: {uuid.uuid4()}\r\nX-Hub-Signature-256: {signature}\r\n\r\n"
        )
        requests.append(head.encode() + body)
    return requests


def health_checks(n: int, port: int) -> list[bytes]:
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    return [request] * n


# -- the load generator -------------------------------------------------------------------------


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> str:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _drive(
    port: int, requests: list[bytes], concurrency: int, rate: float
) -> tuple[list[float], dict[str, int], float]:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    next_index = 0
    started = time.perf_counter()

    async def connection() -> None:
        nonlocal next_index
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while next_index < len(requests):
                index = next_index
                next_index += 1
                scheduled = started + index / rate if rate > 0 else time.perf_counter()
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                status = await _exchange(reader, writer, requests[index])
                latencies.append(time.perf_counter() - scheduled)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return latencies, statuses, time.perf_counter() - started


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phase(
    name: str, server: tuple[int, int], requests: list[bytes], concurrency: int, rate: float
) -> Phase:
    port, pid = server
    cpu_before, server_before = time.process_time(), process_cpu_s(pid)
    latencies, statuses, seconds = asyncio.run(_drive(port, requests, concurrency, rate))
    cpu = time.process_time() - cpu_before
    server_cpu = process_cpu_s(pid) - server_before
    ordered = sorted(latencies)

    def percentile(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000

    return Phase(
        name=name,
        sent=len(requests),
        statuses=statuses,
        seconds=round(seconds, 3),
        per_second=round(len(requests) / seconds, 1),
        p50_ms=round(percentile(0.50), 2),
        p99_ms=round(percentile(0.99), 2),
        max_ms=round(ordered[-1] * 1000, 2),
        generator_cpu=round(cpu / seconds, 2),
        server_cpu_ms=round(server_cpu / len(requests) * 1000, 2),
    )


# -- the server ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(database_url: str, data_dir: Path) -> Iterator[tuple[int, int]]:
    port = _free_port()
    env = dict(
        os.environ,
        STACKBOT_DATABASE_URL=database_url,
        STACKBOT_WEBHOOK_SECRET=SECRET,
        STACKBOT_DATA_DIR=str(data_dir),
        STACKBOT_DEV="0",
    )
    log = (data_dir / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "stackbot", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=data_dir,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"stackbot serve did not start:\n{(data_dir / 'serve.log').read_text()}"
                    ) from None
                time.sleep(0.1)
        yield port, server.pid
    finally:
        server.terminate()
        server.wait(30)
        log.close()


@contextmanager
def database(kind: str, data_dir: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{data_dir / 'bench.db'}"
        return
    from tests.support import postgres

    with postgres.fresh_database("stackbot_bench") as url:
        yield url


def count_rows(database_url: str) -> dict[str, int]:
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            deliveries = conn.execute(text("SELECT count(*) FROM webhook_deliveries")).scalar_one()
            tasks = conn.execute(
                text("SELECT count(*) FROM tasks WHERE kind = 'process_delivery'")
            ).scalar_one()
    finally:
        engine.dispose()
    return {"delivery_rows": int(deliveries), "process_delivery_tasks": int(tasks)}


def bench_database(kind: str, n: int, concurrency: int, rate: float) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp,
        database(kind, Path(tmp)) as url,
    ):
        migrate.upgrade(url)
        with serving(url, Path(tmp)) as server:
            port = server[0]
            print(f"[{kind}] stackbot serve on port {port}; warming up", flush=True)
            run_phase("warm-up", server, health_checks(200, port), concurrency, 0)
            phases = []
            for name, requests, phase_rate in (
                ("baseline /healthz", health_checks(n, port), rate),
                ("deliveries paced", deliveries(n, port, 100_000), rate),
                ("deliveries flat out", deliveries(n, port, 200_000), 0),
            ):
                print(f"[{kind}] {name}: {n} requests, concurrency {concurrency}", flush=True)
                phases.append(run_phase(name, server, requests, concurrency, phase_rate))
            counts = count_rows(url)
    sent = 2 * n
    load = os.getloadavg()[0]
    accepted = sum(p.statuses.get("202", 0) for p in phases[1:])
    return {
        "database": kind,
        "phases": [asdict(p) for p in phases],
        "counts": {"sent": sent, "accepted_202": accepted, **counts},
        "none_lost": accepted
        == sent
        == counts["delivery_rows"]
        == counts["process_delivery_tasks"],
        "p99_ratio_to_baseline": round(phases[1].p99_ms / phases[0].p99_ms, 2),
        # Other work on the machine moves the tails: keep the 1-minute load average with them.
        "load_average_1m": round(load, 2),
        "cpus": os.cpu_count(),
    }


def report(result: dict[str, object], rate: float) -> None:
    print(
        f"\n== {result['database']} == (load average {result['load_average_1m']} on {result['cpus']} CPUs)"
    )
    print(
        f"{'phase':22} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'gen cpu':>8}  statuses"
    )
    for phase in result["phases"]:  # type: ignore[attr-defined]
        print(
            f"{phase['name']:22} {phase['per_second']:>8} {phase['p50_ms']:>8} {phase['p99_ms']:>8} "
            f"{phase['max_ms']:>8} {phase['generator_cpu']:>8} {phase['server_cpu_ms']:>10}  {phase['statuses']}"
        )
    print(f"counts: {result['counts']}; none lost: {result['none_lost']}")
    paced = result["phases"][1]  # type: ignore[index]
    goal = "MET" if paced["p99_ms"] < 25 and paced["per_second"] >= 0.95 * rate else "MISSED"
    print(
        f"goal p99 < 25 ms at {rate:.0f} deliveries/s: {goal} (p99 {paced['p99_ms']} ms at "
        f"{paced['per_second']}/s; {result['p99_ratio_to_baseline']}x the /healthz baseline's p99)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--n", type=int, default=2000, help="requests per phase")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=200.0, help="paced phases' requests/s")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "webhooks.json")
    args = parser.parse_args()
    kinds = ["sqlite", "postgresql"] if args.db == "both" else [args.db]
    results = [bench_database(kind, args.n, args.concurrency, args.rate) for kind in kinds]
    for result in results:
        report(result, args.rate)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"n": args.n, "concurrency": args.concurrency, "rate": args.rate, "results": results},
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")
    return 0 if all(r["none_lost"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
