"""Fixtures for the integration engine's tests: real repositories and their mirrors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stackbot.adapters.git import GitMirror
from tests.integration.repo_builder import RepoBuilder

MirrorOf = Callable[[RepoBuilder], GitMirror]


@pytest.fixture
def builder(tmp_path: Path) -> RepoBuilder:
    return RepoBuilder(tmp_path / "work")


@pytest.fixture
def mirror_of(tmp_path: Path) -> Iterator[MirrorOf]:
    """``mirror_of(builder)``: a fetched bare mirror of the builder's repository."""
    opened: list[GitMirror] = []

    def open_mirror(repo: RepoBuilder) -> GitMirror:
        mirror = GitMirror.open_or_clone(str(repo.path), tmp_path / "mirrors", timeout=60)
        mirror.fetch()
        opened.append(mirror)
        return mirror

    yield open_mirror
    for mirror in opened:
        mirror.close()
