"""``stackbot demo [--once]``: the whole pipeline offline on this machine."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stackbot.cli.demo_act import register_actions
from stackbot.cli.serve import _port


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the whole pipeline offline: GitHub stand-in, a stacked series, real jobs",
        description=(
            "Starts a local GitHub stand-in and stackbot (SQLite, embedded worker, local "
            "executor), creates a Megatron-like repository with the stacked series "
            "#8034 → #8035 → #8748 of tracking issue #6307, a conflicting PR and a superseded "
            "one, vets it, runs the GPU test sets with torchrun (CPU ranks with gloo when there "
            "is no GPU), and posts the results back; then a maintainer lands the tested series "
            "with `/stackbot land`. Tells what happens, then each PR's verdict, its sticky "
            "comment, the landing's account, the GPU jobs it cost and the dashboard URL. While it "
            "serves, `stackbot demo comment` "
            "and `stackbot demo push` act on it as its people would (its GitHub stand-in listens "
            "on --port + 1)."
        ),
    )
    parser.add_argument(
        "--once", action="store_true", help="exit once every report is posted and the series landed"
    )
    parser.add_argument("--port", type=_port, default=8000, help="dashboard port (default 8000)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help=(
            "where the demo keeps its repositories, database and log (default: demo/ in "
            "STACKBOT_DATA_DIR when it is set, else a new temporary directory); emptied first"
        ),
    )
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="give up after this many seconds"
    )
    parser.add_argument(
        "--workers",
        type=_count,
        default=0,
        help="run N `stackbot worker` processes instead of one worker inside the server "
        "(default 0: the embedded worker)",
    )
    parser.set_defaults(handler=_demo)
    register_actions(parser)


def _default_workdir() -> Path:
    data_dir = os.environ.get("STACKBOT_DATA_DIR")
    if data_dir:
        return Path(data_dir).expanduser() / "demo"
    return Path(tempfile.mkdtemp(prefix="stackbot-demo-"))


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of worker processes")
    return int(text)


def _demo(args: argparse.Namespace) -> int:
    from stackbot.demo.runner import run_demo

    workdir = args.workdir or _default_workdir()
    started = time.monotonic()

    def say(message: str) -> None:
        print(f"[demo {time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    result = run_demo(
        workdir=workdir,
        port=args.port,
        once=args.once,
        timeout_s=args.timeout,
        say=say,
        workers=args.workers,
    )
    return 0 if result.ok else 1
