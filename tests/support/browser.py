"""A real headless Chromium (Debian's package) driven by Playwright.

Playwright's own browser download cannot work here, so the tests use ``/usr/bin/chromium``;
if it is missing and we are root, it is installed with apt-get, else the test fails saying how
to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True)
        result = subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
            check=False,
            env=env,
            capture_output=True,
            text=True,
        )
        found = shutil.which("chromium")
        if found:
            return found
        pytest.fail(f"installing Debian's chromium failed: {result.stderr[-2000:]}")
    pytest.fail(
        "the browser tests need Chromium: `apt-get install chromium` (as root), "
        "or put a chromium binary on PATH"
    )


def artifacts_dir() -> Path:
    """Where screenshots go: $STACKBOT_TEST_ARTIFACTS, else test-artifacts/ in the checkout."""
    explicit = os.environ.get("STACKBOT_TEST_ARTIFACTS")
    path = Path(explicit) if explicit else Path(__file__).resolve().parents[2] / "test-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            yield instance
        finally:
            instance.close()
