"""What a branch-protection rule requiring status checks would still wait for on a commit,
read as GitHub's merge box does: every required name needs a completed check run with a passing
conclusion (success, neutral or skipped) on the PR's head SHA, listed by ``checks/list-for-ref``
(``GET /repos/{owner}/{repo}/commits/{ref}/check-runs``).

The stand-in does not serve the branch-protection API yet; when it does, :func:`missing` is the
one place to read the required names from ``GET /repos/{owner}/{repo}/branches/{branch}/protection``
instead of taking them as an argument.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

PASSING = ("success", "neutral", "skipped")


def check_runs_for_ref(api_url: str, token: str, repo: str, sha: str) -> list[dict[str, Any]]:
    """Every check run on ``sha``, following the pages."""
    url: str | None = f"{api_url}/repos/{repo}/commits/{sha}/check-runs"
    headers = {"Authorization": f"token {token}"}
    found: list[dict[str, Any]] = []
    while url:
        response = httpx.get(url, params={"per_page": 100}, headers=headers, timeout=10)
        response.raise_for_status()
        found.extend(response.json()["check_runs"])
        url = response.links.get("next", {}).get("url")
    return found


def missing(runs: Iterable[dict[str, Any]], required: Iterable[str]) -> list[str]:
    """The required names without a completed, passing check run among ``runs``."""
    passing = {
        run["name"] for run in runs if run["status"] == "completed" and run["conclusion"] in PASSING
    }
    return [name for name in required if name not in passing]
