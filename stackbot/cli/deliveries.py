"""``stackbot deliveries redeliver --since TIME [--dry-run]``: ask GitHub again for the webhook
deliveries that failed since TIME (after an outage: the intake answered 503 or was unreachable).

GitHub's documented way (the App's "redeliver failed deliveries"): list the App's deliveries
(App JWT) and ``POST /app/hook/deliveries/{id}/attempts`` for each failed one at or after TIME
whose GUID has no later successful attempt. One progress line per delivery on stderr. Exit 0
when every redelivery was asked for, 1 when one was refused, 2 for bad input (one line).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

import httpx

from stackbot.adapters.github.app_hooks import AppHooks, HookDelivery, parse_time
from stackbot.cli.integrate import one_line
from stackbot.config import load_settings
from stackbot.errors import BadInput, StackbotError

EXIT_FAILED = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "deliveries", help="webhook deliveries: ask GitHub to redeliver the failed ones"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    again = actions.add_parser("redeliver", help="redeliver the deliveries that failed since")
    again.add_argument(
        "--since", required=True, help="ISO 8601 time with its zone, e.g. 2026-12-04T15:00:00Z"
    )
    again.add_argument("--dry-run", action="store_true", help="list them, redeliver nothing")
    again.set_defaults(handler=_redeliver)
    parser.set_defaults(handler=_no_action)


def _no_action(args: argparse.Namespace) -> int:
    raise BadInput("say what to do: `stackbot deliveries redeliver --since TIME`")


def failed_since(deliveries: list[HookDelivery]) -> list[HookDelivery]:
    """The failed deliveries whose GUID was not delivered successfully later, once per GUID."""
    done = {d.guid for d in deliveries if not d.failed}
    chosen: dict[str, HookDelivery] = {}
    for delivery in deliveries:
        if delivery.failed and delivery.guid not in done:
            chosen.setdefault(delivery.guid, delivery)
    return list(chosen.values())


def _redeliver(args: argparse.Namespace) -> int:
    since: datetime = parse_time(args.since)
    try:
        hooks = AppHooks.from_settings(load_settings())
        listed = hooks.deliveries_since(since)
    except BadInput:
        raise
    except (StackbotError, httpx.HTTPError, OSError, ValueError) as error:
        raise BadInput(one_line(f"cannot list the App's deliveries: {error}")) from None
    todo = failed_since(listed)
    say(f"{len(listed)} deliveries since {args.since}, {len(todo)} failed")
    refused = 0
    for n, delivery in enumerate(todo, 1):
        what = f"{delivery.event}{'.' + delivery.action if delivery.action else ''}"
        head = f"[{n}/{len(todo)}] delivery {delivery.id} {delivery.guid} ({what}, "
        head += f"status {delivery.status_code or 'none'})"
        if args.dry_run:
            say(f"{head}: would redeliver")
            continue
        try:
            hooks.redeliver(delivery.id)
        except httpx.HTTPError as error:
            refused += 1
            say(f"{head}: failed: {one_line(str(error))}")
            continue
        say(f"{head}: redelivery asked")
    print(
        f"{len(todo) - refused} of {len(todo)} redeliveries asked"
        + (" (dry run)" if args.dry_run else "")
    )
    return EXIT_FAILED if refused else 0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
