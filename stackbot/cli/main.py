"""Entry point of the ``stackbot`` console script.

Each command module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function taking the parsed namespace and returning an exit status). A command is
listed here only once it works.
"""

from __future__ import annotations

import argparse
import importlib
import logging
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
)

EXIT_BAD_INPUT = 2


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
        return int(handler(args))
    except BadInput as error:
        print(f"stackbot {args.command}: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
