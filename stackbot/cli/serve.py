"""``stackbot serve``: the webhook receiver, health/metrics and the dashboard, over uvicorn."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import Any

from stackbot.config import Settings, UnsafeSettingsError, load_settings
from stackbot.db import migrate
from stackbot.errors import BadInput

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve the webhook receiver, the dashboard and the JSON API"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=_port, default=8000, help="port to listen on")
    parser.add_argument(
        "--worker", action="store_true", help="also run a task worker in this process"
    )
    parser.set_defaults(handler=_serve)


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return int(text)


def ensure_schema(settings: Settings) -> None:
    """Refuse a database that is not migrated to head; development mode migrates it."""
    url = settings.effective_database_url
    heads = migrate.current_heads()
    try:
        current = migrate.current_revision(url)
    except Exception as error:
        raise BadInput(
            f"cannot read the database at {_display(url)}: {error}. Check STACKBOT_DATABASE_URL."
        ) from error
    if current in heads:
        return
    if settings.dev:
        log.info("development mode: migrating %s from %s to head", _display(url), current)
        migrate.upgrade(url)
        return
    raise BadInput(
        f"the database at {_display(url)} is at schema revision {current or 'none'}, not "
        f"{', '.join(heads)}: run `stackbot db upgrade` first"
    )


def load_serving_settings(*, webhooks: bool = True) -> Settings:
    """Settings for a long-running process, its database checked (or, in dev mode, migrated);
    ``webhooks`` also refuses to run without a webhook secret outside development mode."""
    settings = load_settings()
    if webhooks:
        try:
            settings.check_safe_to_serve()
        except UnsafeSettingsError as error:
            raise BadInput(str(error)) from error
    settings.ensure_dirs()
    ensure_schema(settings)
    return settings


def _serve(args: argparse.Namespace) -> int:
    from stackbot.adapters.http_server import serve_forever
    from stackbot.web.app import create_app
    from stackbot.worker.handlers import service_registry

    settings = load_serving_settings()
    app = create_app(settings, worker=service_registry(settings) if args.worker else None)
    worker_note = "with an embedded worker" if args.worker else "no worker (run `stackbot worker`)"
    print(
        f"stackbot serving on http://{args.host}:{args.port} "
        f"(database {_display(settings.effective_database_url)}; {worker_note})",
        flush=True,
    )
    # uvicorn shuts down gracefully on SIGTERM (the embedded worker finishes its task), then
    # re-raises the signal to the handler found at start: make that one a quiet exit 0.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    serve_forever(app, host=args.host, port=args.port)
    print("stackbot serve stopped", flush=True)
    return 0


def _display(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
