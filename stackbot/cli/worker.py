"""``stackbot worker``: task workers claiming from the database until told to stop.

``--concurrency N`` runs N worker threads in this process. Several processes, on one machine or
many, may run against one PostgreSQL (and against one SQLite file on one machine). SIGTERM or
SIGINT lets every thread finish the task in hand and exits 0; a second signal exits at once,
and the tasks in hand are redone by another worker once their leases expire.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from stackbot.cli.serve import load_serving_settings
from stackbot.db.engine import make_engine
from stackbot.services.resources import WorkerResources
from stackbot.worker.handlers import service_registry
from stackbot.worker.runner import Worker, new_worker_id

log = logging.getLogger(__name__)
EXIT_NOW = 130


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("worker", help="run task workers against the database")
    parser.add_argument(
        "--concurrency", type=_positive, default=1, help="worker threads in this process"
    )
    parser.add_argument(
        "--lease", type=_seconds, default=None, help="lease length in seconds (default: settings)"
    )
    parser.add_argument("--once", action="store_true", help="run the tasks that are due, then exit")
    parser.set_defaults(handler=_work)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _work(args: argparse.Namespace) -> int:
    settings = load_serving_settings(webhooks=False)
    registry = service_registry(settings)
    resources = WorkerResources(settings)  # one GitHub client, executor and caches for all
    engine = make_engine(settings.effective_database_url, pool_size=2 * args.concurrency + 2)
    base_id = new_worker_id()
    workers = [
        Worker(
            engine,
            settings,
            registry,
            worker_id=f"{base_id}-{n}",
            lease_s=args.lease,
            resources=resources,
        )
        for n in range(args.concurrency)
    ]
    print(
        f"stackbot worker {base_id}: {args.concurrency} thread(s), tasks: "
        f"{', '.join(registry.kinds)}",
        flush=True,
    )
    try:
        if args.once:
            done = sum(worker.run_until_idle() for worker in workers)
            print(f"ran {done} task(s); none left due", flush=True)
            return 0
        from stackbot.worker.handlers import seed_tasks

        seed_tasks(engine)
        return _run_until_signalled(workers)
    finally:
        engine.dispose()


def _run_until_signalled(workers: list[Worker]) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            print("second signal: exiting now; leases will expire", file=sys.stderr, flush=True)
            os._exit(EXIT_NOW)
        print(
            f"{signal.Signals(signum).name}: finishing the tasks in hand, then exiting "
            "(signal again to exit now)",
            file=sys.stderr,
            flush=True,
        )
        stop.set()
        for worker in workers:
            worker.wake()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    threads = [
        threading.Thread(target=w.run_forever, args=(stop,), name=w.worker_id, daemon=True)
        for w in workers
    ]
    for thread in threads:
        thread.start()
    # Joined with a timeout so the main thread keeps running the signal handlers.
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(0.2)
    print(f"stopped after {sum(w.processed for w in workers)} task(s)", flush=True)
    return 0
