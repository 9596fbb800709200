"""Everything passed to the services as GitHub has every ``GitHubPort`` method, by name.

mypy checks :class:`GitHubClient` against the port (``port._client_is_a_port``) but not the
tests, and it does not compare the names of positional parameters; this does both, at runtime,
for the client and for each test fake listed in ``IMPLEMENTATIONS``.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stackbot.adapters.github.client import GitHubClient
from stackbot.adapters.github.port import GitHubPort

ROOT = Path(__file__).resolve().parents[2]

# A fake GitHub client that a test passes to a service belongs here.
IMPLEMENTATIONS: list[type[Any]] = [GitHubClient]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def port_methods() -> list[str]:
    return sorted(
        name
        for name, value in vars(GitHubPort).items()
        if inspect.isfunction(value) and not name.startswith("_")
    )


def mismatches(implementation: type[Any]) -> list[str]:
    """What keeps ``implementation`` from standing in for the port (empty when it can)."""
    found: list[str] = []
    for name in port_methods():
        method = inspect.getattr_static(implementation, name, None)
        if not inspect.isfunction(method):
            found.append(f"{name}: missing")
            continue
        found += [
            f"{name}: {why}" for why in _signature_mismatches(getattr(GitHubPort, name), method)
        ]
    return found


def _signature_mismatches(wanted: Any, given: Any) -> list[str]:
    want = list(inspect.signature(wanted).parameters.values())
    have = list(inspect.signature(given).parameters.values())
    by_name = {p.name: p for p in have}
    why: list[str] = []
    want_positional = [p.name for p in want if p.kind in _POSITIONAL]
    have_positional = [p.name for p in have if p.kind in _POSITIONAL]
    if have_positional[: len(want_positional)] != want_positional:
        why.append(f"positional parameters {have_positional}, the port has {want_positional}")
    for param in want:
        other = by_name.get(param.name)
        if other is None:
            if param.kind not in _POSITIONAL:
                why.append(f"no parameter {param.name!r}")
            continue
        if param.kind is inspect.Parameter.KEYWORD_ONLY and other.kind not in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            why.append(f"{param.name!r} cannot be passed by keyword")
        if (
            param.default is not inspect.Parameter.empty
            and other.default is inspect.Parameter.empty
        ):
            why.append(f"{param.name!r} has no default; the port's is optional")
    wanted_names = {p.name for p in want}
    for extra in have:
        if extra.name in wanted_names or extra.kind in _VARIADIC:
            continue
        if extra.default is inspect.Parameter.empty:
            why.append(f"extra parameter {extra.name!r} without a default")
    return why


def test_the_port_lists_what_the_services_call() -> None:
    assert port_methods() == [
        "branch_sha",
        "check_outcomes",
        "clone_url",
        "collaborator_permission",
        "commit_tree",
        "create_check_run",
        "create_comment",
        "create_commit_status",
        "create_pull",
        "dequeue_pull",
        "edit_comment",
        "enqueue_pull",
        "get_pull",
        "is_org_member",
        "list_issue_comments",
        "list_open_pulls",
        "list_pull_commits",
        "list_reviews",
        "merge_pull",
        "merge_rules",
        "update_check_run",
        "update_pull_base",
    ]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def test_implementation_has_every_port_method(implementation: type[Any]) -> None:
    assert mismatches(implementation) == []


class _Incomplete:
    """A fake that would let a service fail mid-task: one method missing, one renamed."""

    def get_pull(self, repo: str, pr: int) -> Any:
        raise AssertionError("not used by this test")

    def create_check_run(
        self, repo: str, head_sha: str, name: str, *, status: str, title: str, summary: str
    ) -> int:
        raise AssertionError("not used by this test")


def test_a_fake_missing_a_method_is_caught() -> None:
    found = mismatches(_Incomplete)
    assert "edit_comment: missing" in found
    assert any(line.startswith("get_pull: positional parameters") for line in found)
    assert "create_check_run: no parameter 'conclusion'" in found


def test_the_port_imports_without_pygithub() -> None:
    # The worker imports the port at start; PyGithub is loaded when a handler builds a client.
    code = (
        "import sys, stackbot.adapters.github.port\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'github'))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
