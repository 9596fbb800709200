"""``stackbot maintenance run [--dry-run] [--json]``: one maintenance round now, by hand.

The same round the periodic ``maintenance`` task runs (:mod:`stackbot.services.maintenance`):
run refs and job output past their retention, each mirror repacked, the runner cache pruned,
disk use measured. ``--dry-run`` removes nothing and prints what would go, and each area's disk
use now and what it would be after. A round run by hand
is recorded (unless dry) and shown on the dashboard like the scheduled ones. Exit 0 when every
area was maintained, 1 when one failed (the line says which), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from stackbot.cli.integrate import one_line, unwritable
from stackbot.cli.serve import load_serving_settings
from stackbot.db.engine import make_engine
from stackbot.domain.retention import human_bytes
from stackbot.errors import BadInput, StackbotError
from stackbot.services.maintenance import AREAS, describe, run_by_hand

EXIT_FAILED = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "maintenance", help="expire old run refs and job output, repack mirrors, prune caches"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    run = actions.add_parser("run", help="one maintenance round now")
    run.add_argument("--dry-run", action="store_true", help="remove nothing; say what would go")
    run.add_argument("--json", action="store_true", help="print the round as JSON")
    run.set_defaults(handler=_run)
    parser.set_defaults(handler=_no_action)


def _no_action(args: argparse.Namespace) -> int:
    raise BadInput("say what to do: `stackbot maintenance run [--dry-run]`")


def _run(args: argparse.Namespace) -> int:
    try:
        settings = load_serving_settings(webhooks=False)
        engine = make_engine(settings.effective_database_url)
        try:
            report = run_by_hand(engine, settings, dry_run=args.dry_run, say=_say)
        finally:
            engine.dispose()
    except BadInput:
        raise
    except StackbotError as error:
        raise BadInput(one_line(str(error))) from None
    except OSError as error:
        raise BadInput(unwritable(error)) from None
    except ValueError as error:  # pydantic's ValidationError: a setting out of range
        raise BadInput(one_line(f"the settings are invalid: {error}")) from None
    if args.json:
        print(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        print(describe(report))
        for area in AREAS:
            use = report.usage.get(area)
            if use is None:
                continue
            if report.dry_run:  # nothing was removed: what it is now, and what it would be
                now = report.usage_before.get(area, use)
                print(f"  {area:<13} now {_use(now)}; after: {_use(use)}")
            else:
                print(f"  {area:<13} {_use(use)}")
    return EXIT_FAILED if report.errors else 0


def _use(use: dict[str, int | None]) -> str:
    n = use.get("count")
    count = "" if n is None else f", {n} {'entry' if n == 1 else 'entries'}"
    return f"{human_bytes(use.get('bytes'))}{count}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
