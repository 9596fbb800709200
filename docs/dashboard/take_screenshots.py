"""Screenshots of every dashboard page at 1400 and 390 px, for docs/dashboard.md.

Seeds a generated 50-PR series (the one tests/dashboard/test_series50_browser.py uses: five
conflicting pairs, a mix of verdicts) in a temporary SQLite database, serves the dashboard and
takes, with headless Chromium:

- series-1400.png and series-390.png: the series page's first screen (its summary);
- job-log-1400.png: a failed job's log opened at its failing line (/jobs/N#log);
- pages-1400.png and pages-390.png: every page's first screen side by side, with its path.

    python docs/dashboard/take_screenshots.py [--out docs/dashboard]
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi import FastAPI
from playwright.sync_api import sync_playwright
from sqlmodel import select

from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine, session_scope
from stackbot.db.models import QuarantineEntry, Series
from stackbot.web import dashboard, exposure
from tests.support.browser import CHROMIUM_FLAGS, chromium_path
from tests.support.dashboard_data import seed_series

PRS, FIRST = 50, 8034
LAYER = "megatron/core/transformer/transformer_layer.py"
PAGES = {
    "series": "/series/6307",
    "pull request": f"/pulls/{FIRST + 1}",
    "conflicting run": "/runs/2",
    "jobs": "/jobs",
    "job": "/jobs/1",
    "series list": "/",
    "GPU-hours": "/series/6307/gpu",
    "flaky tests": "/series/6307/flaky",
    "quarantined tests": "/quarantine",
    "tasks": "/tasks",
    "disk": "/maintenance",
}


def serve(tmp: Path) -> tuple[BackgroundServer, FastAPI]:
    url = f"sqlite:///{tmp / 'dashboard.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    seed_series(engine, prs=PRS, first=FIRST, log_dir=tmp / "jobs")
    pairs = [
        {"a": FIRST + i, "b": FIRST + i + 7, "conflicts": [{"path": LAYER, "type": "contents"}]}
        for i in range(3, 40, 9)
    ]
    with session_scope(engine) as session:
        series = session.exec(select(Series)).one()
        series.conflict_matrix = {
            "base": "0" * 40,
            "heads": {str(FIRST + i): "1" * 40 for i in range(PRS)},
            "pairs": pairs,
            "with_base": {},
        }
        session.add(series)
        session.add(quarantined(series.repo_id))
    settings = load_settings(data_dir=tmp / "data", public_url="http://bot.test")
    app = FastAPI(docs_url=None, redoc_url=None)
    app.state.engine = engine
    app.state.settings = settings
    exposure.install(app, settings)
    dashboard.install(app)
    return BackgroundServer(port=0, name="screenshots"), app


def quarantined(repo_id: int) -> QuarantineEntry:
    """A test quarantined on the evidence of three flaky runs (the jobs of the seeded series)."""
    started = datetime.now(UTC) - timedelta(days=2)
    return QuarantineEntry(
        repo_id=repo_id,
        nodeid="tests/unit_tests/transformer/test_attention.py::test_gpt2_bf16_allreduce[tp2-pp1]",
        state="active",
        reason="evidence",
        started_at=started,
        expires_at=started + timedelta(days=30),
        evidence=[
            {"test_set": "amax-group", "shape": "2x4", "failed_job": n, "passed_job": n + 1}
            for n in (4, 11, 25)
        ],
        owners=["alice", "bob"],
    )


def sheet(browser: object, shots: dict[str, bytes], width: int, columns: int, out: Path) -> None:
    """The shots side by side (each scaled to ``width`` px), each under its path."""
    cells = "".join(
        f'<figure><figcaption>{name}</figcaption><img src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}"></figure>'
        for name, png in shots.items()
    )
    html = (
        "<style>body{margin:0;background:#d1d9e0;font:600 15px sans-serif}"
        f".g{{display:grid;grid-template-columns:repeat({columns},{width}px);gap:12px;"
        "padding:12px}figure{margin:0;background:#fff}figcaption{padding:4px 8px}"
        f"img{{width:{width}px;display:block;border-top:1px solid #999}}</style>"
        f'<div class="g">{cells}</div>'
    )
    page = browser.new_page(viewport={"width": columns * (width + 12) + 12, "height": 600})  # type: ignore[attr-defined]
    page.set_content(html)
    page.screenshot(path=str(out), full_page=True)
    page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_dir:
        server, app = serve(Path(tmp_dir))
        with server.serving(app), sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_path(), args=CHROMIUM_FLAGS
            )
            for width, height, columns, scale in ((1400, 900, 3, 600), (390, 844, 5, 390)):
                context = browser.new_context(viewport={"width": width, "height": height})
                page = context.new_page()
                shots: dict[str, bytes] = {}
                for name, path in PAGES.items():
                    page.goto(server.url + path)
                    shots[f"{name} · {path}"] = page.screenshot()
                    if name == "series":
                        page.screenshot(path=str(args.out / f"series-{width}.png"))
                if width == 1400:
                    page.goto(server.url + "/jobs/1#log")
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(args.out / "job-log-1400.png"))
                context.close()
                sheet(browser, shots, scale, columns, args.out / f"pages-{width}.png")
            browser.close()
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
