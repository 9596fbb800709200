"""Entry point of the ``stackbot`` console script.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function taking the parsed namespace and returning an exit status). A command is
listed here only once it works.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from stackbot import __version__
from stackbot.errors import BadInput

# Modules under stackbot.cli, in the order their commands appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "db",
    "integrate",
    "restack",
    "port",
    "allowlist",
    "series",
    "serve",
    "worker",
    "maintenance",
    "deliveries",
    "nodes",
)

EXIT_BAD_INPUT = 2
# The reader of stdout went away (``stackbot series graph | head``): exit quietly with the status
# a Unix tool killed by SIGPIPE has (128 + 13), as the shell reports ``yes | head``'s; so
# ``set -o pipefail`` treats stackbot like cat or grep, and output that was cut short is not
# reported as complete (0 would).
EXIT_CLOSED_PIPE = 141


def _closed_pipe() -> int:
    """Python's documented way: point stdout at devnull so that the flush at exit, which would
    raise again, writes nowhere; then exit with :data:`EXIT_CLOSED_PIPE`, printing nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (tests capturing it)
        pass
    finally:
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stackbot",
        description="Keeps a long series of dependent pull requests integrable and tested.",
    )
    parser.add_argument("--version", action="version", version=f"stackbot {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"stackbot.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        status = int(handler(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        return _closed_pipe()
    except BadInput as error:
        print(f"stackbot {args.command}: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
